// Random state: generator objects (torch.Generator), the global RNG state
// (torch.get_rng_state / set_rng_state) and fork-free save/restore for resumable runs.
//
// A generator value is a Foreign cell holding an at::Generator (an intrusive pointer to LibTorch's
// generator implementation). The default generators are LibTorch's own; `default-generator`
// hands out a cell sharing the same implementation, so seeding it is the same as manual-seed.
// Every access to a generator's state takes the generator's mutex, as LibTorch's kernels do.
#include "builtins/tensor/random.hpp"
#include <ATen/CPUGeneratorImpl.h>
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include "interp/language/numbers.hpp"
#include "interp/memory/tensor_value.hpp"
#include <mutex>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

struct GeneratorBox {
  at::Generator gen;
};

void destroyGenerator(void* p) { delete static_cast<GeneratorBox*>(p); }

Value generatorSymbol() {
  static Value s = intern("generator");
  return s;
}

at::Generator newGenerator(const at::Device& device, uint64_t seed) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed);
  // A fresh generator of another kind: a clone of that device's default, reseeded.
  at::Generator g = defaultGenerator(device).clone();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(seed);
  return g;
}

at::Device cpuDevice() { return at::Device(at::kCPU); }

// Seeds are unsigned 64-bit numbers; exact integers in Purple.
Value seedValue(uint64_t s) { return s <= uint64_t(INT64_MAX) ? makeInteger(int64_t(s)) : bignumFromUint64(s); }

}  // namespace

bool isGenerator(Value v) {
  return v.is(Kind::Foreign) && v.as<Foreign>()->typeName == generatorSymbol() && v.as<Foreign>()->ptr;
}

Value wrapGenerator(at::Generator g) { return makeForeign(new GeneratorBox{std::move(g)}, destroyGenerator, generatorSymbol()); }

at::Generator generatorArg(Value v, std::string_view who, int argIndex) {
  if (!isGenerator(v)) throwTypeError(who, argIndex, "a generator", v);
  return static_cast<GeneratorBox*>(v.as<Foreign>()->ptr)->gen;
}

at::Generator defaultGenerator(const at::Device& device) {
  if (device.is_cuda() && at::detail::getCUDAHooks().getNumGPUs() == 0)
    throwError("tensor-error", "no CUDA device is available (this LibTorch has no CUDA, or no GPU is present)");
  return at::globalContext().defaultGenerator(device);
}

int64_t drawSeedLike(const c10::optional<at::Generator>& gen) {
  at::Tensor t = at::empty({}, at::TensorOptions().dtype(at::kLong));
  t.random_(gen);
  return t.item<int64_t>();
}

namespace {
bool gForkedFromParent = false;   // set once in a worker, before anything else runs there
}

void markForkedFromParent() { gForkedFromParent = true; }

void seedDefaultGenerators(uint64_t seed) {
  if (!gForkedFromParent) {
    at::manual_seed(seed);
    return;
  }
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
}

void registerRandom(Registry& r) {
  r.def("generator", "(:key seed device)",
        [](std::optional<int64_t> seed, std::optional<at::Device> device) {
          uint64_t s = seed ? uint64_t(*seed) : c10::default_rng_seed_val;
          return wrapGenerator(newGenerator(device ? *device : cpuDevice(), s));
        },
        "A new random-number generator (torch.Generator) for DEVICE (default CPU), seeded with :seed "
        "(default 67280421310721, PyTorch's default). Pass it as :generator to random tensor "
        "builtins (tensor-rand, tensor-randn, tensor-randperm ...) and to data loaders and samplers, "
        "so that their draws do not depend on, or disturb, the global random state.");
  sandboxAllowed(r, "generator", "nothing outside: a private generator",
               "the script own generator, not the global one");
  r.def("generator?", "(x)", [](Value x) { return isGenerator(x); }, "True when X is a random-number generator.");
  r.def("default-generator", "(:optional device)",
        [](std::optional<at::Device> device) {
          requireProcessAccess("default-generator");   // the process's own, shared with the host
          return wrapGenerator(defaultGenerator(device ? *device : cpuDevice()));
        },
        "LibTorch's default generator for DEVICE (default CPU): the one random builtins use when no "
        ":generator is given and that manual-seed seeds (torch.default_generator).");
  sandbox(r, "default-generator", Needs::Process, "global settings: the global random generator (shared with the host)");
  r.def("generator-manual-seed!", "(g seed)",
        [](Value gv, int64_t seed) {
          at::Generator g = generatorArg(gv, "generator-manual-seed!", 1);
          std::lock_guard<std::mutex> lock(g.mutex());
          g.set_current_seed(uint64_t(seed));
          return gv;
        },
        "Seeds generator G with SEED (Generator.manual_seed) and returns G.");
  sandboxAllowed(r, "generator-manual-seed!", "a generator it is given",
               "a sandboxed script can only hold its own generators: default-generator, the way to the global one, is refused");
  r.def("generator-seed!", "(g)",
        [](Value gv) {
          at::Generator g = generatorArg(gv, "generator-seed!", 1);
          std::lock_guard<std::mutex> lock(g.mutex());
          return seedValue(g.seed());
        },
        "Seeds generator G from a non-deterministic source and returns the seed (Generator.seed).");
  r.def("generator-initial-seed", "(g)",
        [](Value gv) {
          at::Generator g = generatorArg(gv, "generator-initial-seed", 1);
          std::lock_guard<std::mutex> lock(g.mutex());
          return seedValue(g.current_seed());
        },
        "The seed generator G was last seeded with (Generator.initial_seed).");
  r.def("generator-device", "(g)", [](Value g) { return generatorArg(g, "generator-device", 1).device(); },
        "The device of generator G.");
  r.def("generator-get-state", "(g)",
        [](Value gv) {
          at::Generator g = generatorArg(gv, "generator-get-state", 1);
          std::lock_guard<std::mutex> lock(g.mutex());
          return g.get_state();
        },
        "The state of generator G as a uint8 tensor (Generator.get_state); restore it with "
        "generator-set-state!. The bytes are PyTorch's, so a state saved by Python restores in Purple "
        "and the other way round.");
  r.def("generator-set-state!", "(g state)",
        [](Value gv, const at::Tensor& state) {
          at::Generator g = generatorArg(gv, "generator-set-state!", 1);
          if (state.scalar_type() != at::kByte)
            throwError("type-error", "generator-set-state!: the state must be a uint8 tensor from generator-get-state");
          std::lock_guard<std::mutex> lock(g.mutex());
          g.set_state(state);
          return gv;
        },
        "Restores generator G to STATE (a uint8 tensor from generator-get-state) and returns G.");
  sandboxAllowed(r, "generator-set-state!", "a generator it is given",
               "as generator-manual-seed!");
  r.def("get-rng-state", "(:optional device)",
        [](std::optional<at::Device> device) {
          at::Generator g = defaultGenerator(device ? *device : cpuDevice());
          std::lock_guard<std::mutex> lock(g.mutex());
          return g.get_state();
        },
        "The state of the default generator of DEVICE (default CPU) as a uint8 tensor "
        "(torch.get_rng_state, torch.cuda.get_rng_state). Save it with a checkpoint and restore it "
        "with set-rng-state! so a resumed run draws the same random numbers.");
  sandboxAllowed(r, "get-rng-state", "global settings: the global random generator",
               "reads a copy of its state; changes nothing");
  r.def("set-rng-state!", "(state :optional device)",
        [](const at::Tensor& state, std::optional<at::Device> device) {
          requireProcessAccess("set-rng-state!");
          if (state.scalar_type() != at::kByte)
            throwError("type-error", "set-rng-state!: the state must be a uint8 tensor from get-rng-state");
          at::Generator g = defaultGenerator(device ? *device : cpuDevice());
          std::lock_guard<std::mutex> lock(g.mutex());
          g.set_state(state);
        },
        "Restores the default generator of DEVICE (default CPU) to STATE, a uint8 tensor from "
        "get-rng-state (torch.set_rng_state).");
  sandbox(r, "set-rng-state!", Needs::Process, "global settings: the global random generator");
  r.def("initial-seed", "()",
        []() {
          at::Generator g = defaultGenerator(cpuDevice());
          std::lock_guard<std::mutex> lock(g.mutex());
          return seedValue(g.current_seed());
        },
        "The seed of the default CPU generator (torch.initial_seed).");
  sandboxAllowed(r, "initial-seed", "global settings: the global random generator",
               "reads its seed; changes nothing");
}

}  // namespace purple
