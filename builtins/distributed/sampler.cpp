// The index arithmetic of the distributed sampler (prelude/45-distributed.purple has the rest):
// torch.utils.data.DistributedSampler's, step by step, so that a Purple rank and a Python rank
// with the same seed and epoch read the same samples: a permutation drawn from a generator seeded
// with seed + epoch (the same LibTorch generator and randperm as Python's), padded by repeating
// its start to a multiple of the number of replicas (or cut down with drop-last), and every
// replicas-th index from the rank's own.
#include "builtins/builtins.hpp"
#include <ATen/CPUGeneratorImpl.h>

namespace purple {

void registerDistSampler(Registry& r) {
  r.def("%distributed-shard", "(n seed epoch shuffle drop-last replicas rank)",
        [](int64_t n, int64_t seed, int64_t epoch, bool shuffle, bool dropLast, int64_t replicas,
           int64_t rank) -> at::Tensor {
          if (n < 0) throwError("range-error", "distributed-sampler: the dataset length must not be negative");
          if (replicas < 1) throwError("range-error", "distributed-sampler: :num-replicas must be at least 1");
          if (rank < 0 || rank >= replicas)
            throwError("range-error", "distributed-sampler: :rank " + std::to_string(rank) + " is outside 0.." +
                                          std::to_string(replicas - 1));
          auto longs = at::TensorOptions().dtype(at::kLong);
          at::Tensor indices;
          if (shuffle) {
            at::Generator gen = at::detail::createCPUGenerator(uint64_t(seed + epoch));
            indices = at::randperm(n, gen, longs);
          } else {
            indices = at::arange(n, longs);
          }
          int64_t perRank = dropLast && n % replicas ? n / replicas : (n + replicas - 1) / replicas;
          int64_t total = perRank * replicas;
          if (total > n && n > 0) {
            int64_t padding = total - n;
            std::vector<at::Tensor> parts{indices};
            while (padding > 0) {
              int64_t take = std::min(padding, n);
              parts.push_back(indices.narrow(0, 0, take));
              padding -= take;
            }
            indices = at::cat(parts);
          } else {
            indices = indices.narrow(0, 0, total);
          }
          return indices.slice(0, rank, total, replicas).contiguous();
        },
        "Internal (distributed-sampler): the indices rank RANK of REPLICAS reads in epoch EPOCH of an N-sample "
        "dataset, as torch's DistributedSampler computes them.");
}

}  // namespace purple
