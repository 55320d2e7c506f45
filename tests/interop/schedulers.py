# Learning-rate schedulers over 100 steps, their state dicts, and resuming from a state dict;
# what schedulers.purple computes, in python3-torch.
import math
import warnings
import torch
import torch.optim.lr_scheduler as L
from interop_common import emit, fmt

warnings.simplefilter("ignore")
N = 100


def params():
    return [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))]


def sgd(lr=0.1, groups=False):
    p = params()
    if groups:
        return torch.optim.SGD([{"params": [p[0]]}, {"params": [p[1]], "lr": 0.05}], lr=lr, momentum=0.9)
    return torch.optim.SGD(p, lr=lr, momentum=0.9)


def run(opt, sched, n=N, metrics=None, key="lr"):
    out = []
    for i in range(n):
        for g in opt.param_groups:
            out.append(g["momentum"] if key == "momentum" else g["lr"])
        opt.step()
        if metrics is None:
            sched.step()
        else:
            sched.step(metrics[i])
    return out


def flat(v):
    if isinstance(v, dict):
        out = []
        for k, x in v.items():
            out.append(str(k))
            out.extend(flat(x))
        return out
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            out.extend(flat(x))
        return out
    if v is None:
        return ["None"]
    if isinstance(v, str):
        return [v]
    return [fmt(v)]


def emit_state(label, sd):
    sd = dict(sd)
    sd.pop("_scale_fn_ref", None)
    sd.pop("anneal_func", None)
    print(label + ":" + "".join(" " + t for t in flat(sd)))


metrics = [1.0 / (1 + i) if i < 20 else (0.05 if i % 7 else 0.049) for i in range(N)]
metrics_max = [min(i, 30) * 0.01 for i in range(N)]

makers = [
    ("step-lr", lambda o: L.StepLR(o, 7, gamma=0.5)),
    ("multi-step-lr", lambda o: L.MultiStepLR(o, [10, 30, 30, 60], gamma=0.5)),
    ("exponential-lr", lambda o: L.ExponentialLR(o, 0.97)),
    ("cosine-annealing-lr", lambda o: L.CosineAnnealingLR(o, 30, eta_min=0.001)),
    ("warm-restarts", lambda o: L.CosineAnnealingWarmRestarts(o, 10, T_mult=2, eta_min=0.001)),
    ("warm-restarts-1", lambda o: L.CosineAnnealingWarmRestarts(o, 7)),
    ("lambda-lr", lambda o: L.LambdaLR(o, lambda e: 0.95 ** e)),
    ("multiplicative-lr", lambda o: L.MultiplicativeLR(o, lambda e: 0.99)),
    ("linear-lr", lambda o: L.LinearLR(o, start_factor=0.1, total_iters=20)),
    ("constant-lr", lambda o: L.ConstantLR(o, factor=0.5, total_iters=10)),
    ("polynomial-lr", lambda o: L.PolynomialLR(o, total_iters=50, power=2.0)),
    ("cyclic-triangular", lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=10)),
    ("cyclic-triangular2", lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=8, step_size_down=12, mode="triangular2")),
    ("cyclic-exp-range", lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=10, mode="exp_range", gamma=0.98)),
    ("cyclic-scale-fn", lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=5, scale_fn=lambda x: 1 / (1 + 0.01 * x),
                                             scale_mode="iterations", cycle_momentum=False)),
    ("one-cycle-lr", lambda o: L.OneCycleLR(o, 0.2, total_steps=N)),
    ("chained", lambda o: L.ChainedScheduler([L.ConstantLR(o, factor=0.1, total_iters=5), L.ExponentialLR(o, 0.95)])),
    ("chained-warmup-cosine", lambda o: L.ChainedScheduler([L.LinearLR(o, start_factor=0.25, total_iters=10),
                                                            L.CosineAnnealingLR(o, 50, eta_min=0.0)])),
]
for name, mk in makers:
    o = sgd()
    emit(name, run(o, mk(o)))
for name, mk in makers:
    o = sgd(groups=True)
    emit(name + "-groups", run(o, mk(o), n=40))

o = sgd(); emit("cyclic-momentum", run(o, L.CyclicLR(o, 0.01, 0.1, step_size_up=10), key="momentum"))
o = sgd(groups=True)
emit("lambda-lr-per-group", run(o, L.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1.0 / (1 + e)]), n=30))

o = sgd(); emit("plateau", run(o, L.ReduceLROnPlateau(o, patience=3, cooldown=2, factor=0.5, min_lr=0.002), metrics=metrics))
o = sgd(); emit("plateau-max-abs", run(o, L.ReduceLROnPlateau(o, mode="max", threshold=0.05, threshold_mode="abs",
                                                           patience=2), metrics=metrics_max))
o = sgd(groups=True)
emit("plateau-groups", run(o, L.ReduceLROnPlateau(o, patience=1, factor=0.3, min_lr=[0.001, 0.004], eps=1e-3),
                           metrics=metrics))

# state dicts after 37 steps, and a fresh scheduler resumed from them
stateful = makers + [
    ("plateau", lambda o: L.ReduceLROnPlateau(o, patience=3, cooldown=2, factor=0.5, min_lr=0.002)),
]
for name, mk in stateful:
    if name in ("cyclic-scale-fn", "one-cycle-lr"):
        continue
    ms = metrics if name == "plateau" else None
    o = sgd()
    s = mk(o)
    run(o, s, n=37, metrics=ms)
    emit_state("state-" + name, s.state_dict())
    o2 = sgd()
    s2 = mk(o2)
    s2.load_state_dict(s.state_dict())
    if hasattr(s, "_schedulers"):
        pass
    for g, g1 in zip(o2.param_groups, o.param_groups):
        g["lr"] = g1["lr"]
        g["momentum"] = g1["momentum"]
    emit("resumed-" + name, run(o2, s2, n=N - 37, metrics=ms[37:] if ms else None))
