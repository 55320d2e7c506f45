// The index arithmetic of samplers and of a data loader's pass, draw for draw as
// torch.utils.data does it, so that the same seeds give the same data order in Purple and in
// Python (prelude/35-data.purple builds the sampler values on these):
//   * each pass first draws a base seed: torch.empty((), dtype=torch.int64).random_(generator)
//     from the loader's generator, or the global one (it seeds the workers' transforms);
//   * RandomSampler without a generator draws a seed from the global generator and uses a fresh
//     generator seeded with it; with one, it draws from that generator;
//   * WeightedRandomSampler is one torch.multinomial over float64 weights;
//   * SubsetRandomSampler permutes its index list with randperm.
#include "builtins/builtins.hpp"
#include "builtins/tensor/random.hpp"
#include <ATen/CPUGeneratorImpl.h>

namespace purple {

namespace {

using OptGen = std::optional<GeneratorRef>;

at::TensorOptions longs() { return at::TensorOptions().dtype(at::kLong); }

// RandomSampler.__iter__ (PyTorch 1.13 and 2.x), as one int64 tensor.
at::Tensor randomOrder(int64_t n, int64_t numSamples, bool replacement, const OptGen& g) {
  at::Generator gen;
  if (g) {
    gen = g->gen;
  } else {
    gen = at::detail::createCPUGenerator(uint64_t(drawSeedLike(c10::nullopt)));
  }
  std::vector<at::Tensor> parts;
  if (n == 0) return at::empty({0}, longs());
  if (replacement) {
    for (int64_t i = 0; i < numSamples / 32; i++) parts.push_back(at::randint(n, {32}, gen, longs()));
    parts.push_back(at::randint(n, {numSamples % 32}, gen, longs()));
  } else {
    for (int64_t i = 0; i < numSamples / n; i++) parts.push_back(at::randperm(n, gen, longs()));
    parts.push_back(at::randperm(n, gen, longs()).narrow(0, 0, numSamples % n));
  }
  return at::cat(parts);
}

}  // namespace

void registerSamplers(Registry& r) {
  r.def("%draw-seed", "(:optional generator)",
        [](OptGen g) { return drawSeedLike(genOpt(g)); },
        "Draws a seed as PyTorch does at the start of each pass over a data loader: one int64 from "
        "GENERATOR, or from the global generator.");
  r.def("%random-order", "(n num-samples replacement :optional generator)",
        [](int64_t n, int64_t numSamples, bool replacement, OptGen g) {
          if (n < 0 || numSamples < 0) throwError("value-error", "random-sampler: the sizes must not be negative");
          if (!replacement && n == 0 && numSamples > 0)
            throwError("value-error", "random-sampler: cannot draw from an empty dataset");
          return randomOrder(n, numSamples, replacement, g);
        },
        "One pass of a random sampler over N samples: NUM-SAMPLES indices, a permutation (repeated as needed) "
        "without REPLACEMENT, uniform draws with it, exactly as torch's RandomSampler draws them.");
  r.def("%weighted-order", "(weights num-samples replacement :optional generator)",
        [](const at::Tensor& w, int64_t numSamples, bool replacement, OptGen g) {
          if (w.dim() != 1) throwError("value-error", "weighted-random-sampler: the weights must be a 1-d sequence");
          if (!replacement && numSamples > w.size(0))
            throwError("value-error", "weighted-random-sampler: cannot draw " + std::to_string(numSamples) +
                                          " samples without replacement from " + std::to_string(w.size(0)));
          return at::multinomial(w.to(at::kDouble), numSamples, replacement, genOpt(g));
        },
        "One pass of a weighted random sampler: NUM-SAMPLES indices drawn with probabilities proportional to "
        "WEIGHTS (torch.multinomial over float64 weights, as WeightedRandomSampler).");
  r.def("%pin-memory", "(x)", [](const at::Tensor& x) { return at::hasCUDA() && !x.is_pinned() ? x.pin_memory() : x; },
        "X in page-locked (pinned) memory, for fast asynchronous copies to CUDA. Without CUDA (a CPU-only "
        "LibTorch, or no GPU) pinned memory does not exist: X itself is returned, unchanged.");
  r.def("%subset-random-order", "(indices :optional generator)",
        [](const at::Tensor& indices, OptGen g) {
          at::Tensor ix = indices.to(at::kLong).reshape({-1});
          return ix.index_select(0, at::randperm(ix.size(0), genOpt(g), longs()));
        },
        "One pass of a subset random sampler: INDICES in a random order (SubsetRandomSampler).");
}

}  // namespace purple
