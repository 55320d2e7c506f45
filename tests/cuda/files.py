"""Python's half of files.purple: torch.save files holding CUDA tensors, both ways.

gen:   Python saves tensors, a view, a mixed CPU/CUDA dict and a Linear's state dict on the device
       (py_cuda.pt, py_state.pt), and the same values on the CPU (expected.pt, py_state_expected.pt).
check: Python loads what Purple saved from the device: the tensors are on the GPU, with the right
       values, a view still shares its base's storage, the state dict loads into a Linear on the
       device, the Adam state is on the GPU and equals two Adam steps taken here, and the
       safetensors file (always CPU data) holds the values."""
import os
from collections import OrderedDict

from cuda_common import setup, Checks

torch, device, mode, d = setup()
P = lambda f: os.path.join(d, f)


def values():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * 0.25 - 2
    return OrderedDict([
        ("f32", base),
        ("f64", base.double() / 3),
        ("f16", (base / 7).half()),
        ("bf16", (base / 5).bfloat16()),
        ("i64", torch.arange(10) * 3 - 7),
        ("bool", torch.arange(6) % 2 == 0),
    ])


def linear_state():
    w = (torch.sin(torch.arange(18, dtype=torch.float32) * 0.37) * 0.3).reshape(3, 6)
    b = torch.cos(torch.arange(3, dtype=torch.float32)) * 0.1
    return OrderedDict([("weight", w), ("bias", b)])


def probe():
    return (torch.cos(torch.arange(30, dtype=torch.float32) * 0.53) * 1.5).reshape(5, 6)


def storage_ptr(t):
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()


if mode == "gen":
    vals = values()
    on_dev = OrderedDict((k, v.to(device)) for k, v in vals.items())
    f32 = on_dev["f32"]
    on_dev["view"] = f32[1:3, 2:5]                       # a view: same storage, offset 8
    on_dev["epoch"] = 7
    on_dev["nested"] = [f32[0], (on_dev["i64"][:3], 1.5)]
    on_dev["cpu"] = vals["f64"][:2].clone()              # a CPU tensor in the same file
    torch.save(on_dev, P("py_cuda.pt"))
    expected = OrderedDict(vals)
    expected["view"] = vals["f32"][1:3, 2:5].clone()
    torch.save(expected, P("expected.pt"))
    state = linear_state()
    torch.save(OrderedDict((k, v.to(device)) for k, v in state.items()), P("py_state.pt"))
    torch.save(state, P("py_state_expected.pt"))
    print("saved py_cuda.pt and py_state.pt on %s" % device)
else:
    c = Checks()
    vals = values()
    got = torch.load(P("purple_cuda.pt"))
    print("purple_cuda.pt holds: %s" % ", ".join("%s@%s" % (k, getattr(v, "device", "-")) for k, v in got.items()))
    for k, v in vals.items():
        c.device_type("Purple's %s" % k, got[k], device)
        c.ok("Purple's %s has dtype %s" % (k, v.dtype), got[k].dtype == v.dtype, str(got[k].dtype))
        c.close("Purple's %s values" % k, got[k], v)
    view = got["view"]
    c.device_type("Purple's view", view, device)
    c.close("Purple's view values (f32[:, 1:4] transposed)", view, vals["f32"][:, 1:4].t())
    c.ok("the view shares f32's storage after loading", storage_ptr(view) == storage_ptr(got["f32"]))
    c.ok("the view keeps its strides %s" % (view.stride(),), view.stride() == (1, 6))
    c.ok("the number survives", got["n"] == 3)
    c.ok("a CPU tensor in the same file stays on the CPU", got["cpu"].device.type == "cpu")
    c.close("the CPU tensor's values", got["cpu"], vals["f64"][:2])
    c.ok("the list of device tensors", len(got["list"]) == 2 and all(t.device.type == view.device.type for t in got["list"]))
    cpu = torch.load(P("purple_cuda.pt"), map_location="cpu")
    c.ok("map_location='cpu': everything on the CPU",
         all(t.device.type == "cpu" for t in cpu.values() if isinstance(t, torch.Tensor)))
    c.close("map_location='cpu': values", cpu["f32"], vals["f32"])

    # the state dict of a device module, as Purple saved it
    lin = torch.nn.Linear(6, 3).to(device)
    sd = torch.load(P("purple_state.pt"))
    c.ok("Purple's state dict keys", list(sd.keys()) == ["weight", "bias"], str(list(sd.keys())))
    c.device_type("Purple's state dict weight", sd["weight"], device)
    lin.load_state_dict(sd, strict=True)
    c.close("Purple's saved weight", lin.weight, linear_state()["weight"])

    # two Adam steps here, from the same weights, against Purple's
    ref = torch.nn.Linear(6, 3).to(device)
    ref.load_state_dict(OrderedDict((k, v.to(device)) for k, v in linear_state().items()))
    opt = torch.optim.Adam(ref.parameters(), lr=0.01)
    x = probe().to(device)
    for _ in range(2):
        opt.zero_grad()
        (ref(x) ** 2).sum().backward()
        opt.step()
    after = torch.load(P("purple_state_after.pt"))
    c.close("weights after 2 Adam steps on the device = Python's", after["weight"], ref.weight, 1e-5)
    c.close("bias after 2 Adam steps on the device = Python's", after["bias"], ref.bias, 1e-5)
    ostate = torch.load(P("purple_opt.pt"))
    moments = [(i, k, v) for i, s in ostate["state"].items() for k, v in s.items()
               if isinstance(v, torch.Tensor) and k != "step"]
    c.ok("Purple's Adam state has moments", len(moments) == 4, str([(i, k) for i, k, _ in moments]))
    for i, k, v in moments:
        c.device_type("Purple's Adam state %s of parameter %d" % (k, i), v, device)
    c.close("exp_avg of the weight = Python's", ostate["state"][0]["exp_avg"], opt.state[ref.weight]["exp_avg"], 1e-5)
    c.close("exp_avg_sq of the bias = Python's", ostate["state"][1]["exp_avg_sq"], opt.state[ref.bias]["exp_avg_sq"], 1e-5)
    opt2 = torch.optim.Adam(ref.parameters(), lr=0.01)
    opt2.load_state_dict(ostate)
    c.ok("Python's Adam loads Purple's device state", True)
    first = next(iter(opt2.state.values()))
    c.device_type("the loaded exp_avg", first["exp_avg"], device)

    try:
        from safetensors.torch import load_file
    except ImportError:
        print("   (safetensors is not installed for this Python: purple.safetensors not checked)")
    else:
        st = load_file(P("purple.safetensors"))
        c.close("safetensors written from device tensors: f32", st["f32"], vals["f32"])
        c.close("safetensors written from device tensors: i64", st["i64"], vals["i64"])
    c.finish()
