// Random-number generator objects (torch.Generator) as Purple values, for the builtins that take
// a :generator keyword (random tensor creation, data loaders, samplers).
#pragma once
#include <ATen/ATen.h>
#include "interp/language/bind.hpp"

namespace purple {

bool isGenerator(Value v);
Value wrapGenerator(at::Generator g);
// The generator inside V, or a type error naming WHO and the (1-based) argument position.
at::Generator generatorArg(Value v, std::string_view who, int argIndex);
// LibTorch's default generator for DEVICE (the one manual-seed seeds).
at::Generator defaultGenerator(const at::Device& device);
// One int64 drawn the way PyTorch draws seeds for samplers and data-loader iterators:
// torch.empty((), dtype=torch.int64).random_(generator=GEN), from the default CPU generator when
// GEN is undefined.
int64_t drawSeedLike(const c10::optional<at::Generator>& gen);

// manual-seed: every default generator, CPU and CUDA, as torch.manual_seed. In a process forked
// from one that had used CUDA (a data-loader worker), touching CUDA raises "cannot re-initialize
// CUDA in forked subprocess"; there, as torch.manual_seed does in a bad fork, the CPU generator
// alone is seeded. A worker calls markForkedFromParent() first thing.
void seedDefaultGenerators(uint64_t seed);
void markForkedFromParent();

// Argument type for Registry::def: `:generator g`.
struct GeneratorRef { at::Generator gen; };
template <> struct Convert<GeneratorRef> {
  static constexpr bool keepsValue = false;
  static GeneratorRef from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (!isGenerator(v)) throwConversionError(info, i, "a generator", v);
    return GeneratorRef{generatorArg(v, info->name, i + 1)};
  }
};
inline c10::optional<at::Generator> genOpt(const std::optional<GeneratorRef>& g) {
  return g ? c10::optional<at::Generator>(g->gen) : c10::optional<at::Generator>(c10::nullopt);
}

}  // namespace purple
