// fully-shard's deferred initialisation (fsdp.hpp, fully-shard-unit!): a layer's parameters keep
// only this rank's part from the moment it is built. The rest of fully-shard is fsdp.cpp.
#include "builtins/distributed/fsdp.hpp"
#include "interp/memory/tensor_value.hpp"
#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace purple::dist {

// ---- deferred initialisation ------------------------------------------------------------------

namespace {

struct EarlyEntry {
  c10::weak_intrusive_ptr<c10::TensorImpl> impl;   // an address reused by a later tensor does not match
  EarlyShard info;
};

std::mutex& earlyMutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<const void*, EarlyEntry>& earlyMap() {
  static auto* m = new std::unordered_map<const void*, EarlyEntry>;
  return *m;
}

}  // namespace

void forgetEarlyShard(const at::Tensor& p) {
  std::lock_guard<std::mutex> lock(earlyMutex());
  earlyMap().erase(p.unsafeGetTensorImpl());
}

std::optional<EarlyShard> earlyShardOf(const at::Tensor& p) {
  if (!p.defined()) return std::nullopt;
  std::lock_guard<std::mutex> lock(earlyMutex());
  auto& m = earlyMap();
  auto it = m.find(p.unsafeGetTensorImpl());
  if (it == m.end()) return std::nullopt;
  auto live = it->second.impl.lock();
  if (!live || live.get() != p.unsafeGetTensorImpl()) {
    m.erase(it);
    return std::nullopt;
  }
  return it->second.info;
}

void shardEarly(Group& g, const std::vector<at::Tensor>& params, std::string_view who) {
  int64_t W = g.size, rank = g.rank;
  // The ranks must hold the same values (built from the same seed), as no rank will ever see the
  // others' parts to broadcast them: a few elements of each parameter, compared bit for bit.
  if (W > 1 && !params.empty()) {
    std::vector<at::Tensor> samples;
    torch::NoGradGuard noGrad;
    for (auto& p : params) {
      at::Tensor flat = p.detach().reshape({-1});
      int64_t n = flat.numel();
      at::Tensor idx = n > 0 ? at::linspace(0, double(n - 1), 8, at::TensorOptions().dtype(at::kDouble)).to(at::kLong).to(flat.device())
                             : at::zeros({0}, at::TensorOptions().dtype(at::kLong).device(flat.device()));
      samples.push_back(at::cat({flat.index_select(0, idx).to(at::kDouble).view(at::kLong).cpu(),
                                 at::full({1}, n, at::TensorOptions().dtype(at::kLong))}));
    }
    at::Tensor mine = at::cat(samples);
    if (g.backend == "nccl") mine = mine.to(params[0].device());
    at::Tensor hi = mine.clone(), lo = mine.clone();
    try {
      c10d::AllreduceOptions o;
      o.reduceOp = c10d::ReduceOp::MAX;
      std::vector<at::Tensor> v{hi};
      waitWork(g.comm->allreduce(v, o), who);
      o.reduceOp = c10d::ReduceOp::MIN;
      std::vector<at::Tensor> w{lo};
      waitWork(g.comm->allreduce(w, o), who);
    } catch (const PurpleException&) {
      throw;
    } catch (const std::exception& e) {
      throwCommError(std::string(who) + ": comparing the ranks' parameters", e);
    }
    if (!hi.equal(lo))
      throwError("dist-error", std::string(who) + ": the ranks built different parameter values; each rank keeps only its "
                                                  "part, so every rank must build the same ones: give every rank the same "
                                                  "(manual-seed ...) before building the model");
  }
  for (auto& p : params) {
    EarlyShard e;
    e.shape = p.sizes().vec();
    e.numel = p.numel();
    e.groupSize = int(W);
    e.groupRank = int(rank);
    int64_t chunk = (e.numel + W - 1) / W;
    int64_t start = std::min(e.numel, rank * chunk);
    int64_t length = std::max<int64_t>(0, std::min(chunk, e.numel - start));
    {
      torch::NoGradGuard noGrad;
      at::Tensor part = p.detach().reshape({-1}).narrow(0, start, length).clone();
      at::Tensor handle = p;
      handle.mutable_grad() = at::Tensor();
      handle.set_data(part);   // the whole tensor's storage goes with its last holder, now
    }
    std::lock_guard<std::mutex> lock(earlyMutex());
    earlyMap().erase(p.unsafeGetTensorImpl());
    earlyMap().emplace(p.unsafeGetTensorImpl(), EarlyEntry{c10::weak_intrusive_ptr<c10::TensorImpl>(p.getIntrusivePtr()), e});
  }
}

}  // namespace purple::dist
