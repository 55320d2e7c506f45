// distributed-data-parallel: torch's DistributedDataParallel for Purple models.
//
// The wrapper is a module whose parameters, buffers and children are the inner model's own,
// registered under the same names: `parameters`, optimizers, clipping, module-to, train/eval and
// state-dict see exactly the inner model (its state-dict keys, without torch's "module." prefix,
// so checkpoints load into the unwrapped model and back). Wrapping broadcasts rank 0's parameters
// and buffers; each forward under grad mode arms the reducer (reducer.hpp) so that the next
// backward pass averages the gradients across ranks while it runs, and broadcasts rank 0's
// buffers first (batch-norm statistics), as torch does with broadcast_buffers=True.
#include "builtins/distributed/reducer.hpp"
#include "builtins/nn/value.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include <torch/nn/module.h>
#include <ATen/core/grad_mode.h>
#include "interp/limits/sandbox.hpp"

namespace purple::dist {

// Broadcasts TENSORS from group rank ROOT, packed into one flat tensor per dtype and device.
void broadcastPacked(Group& g, const std::vector<at::Tensor>& tensors, int root, std::string_view who,
                     int64_t packBytes) {
  auto broadcast = [&](std::vector<at::Tensor> v) {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    WorkPtr w;
    try {
      w = g.comm->broadcast(v, o);
    } catch (...) {
      rethrowCommError(who);
    }
    waitWork(w, who);
  };
  std::vector<bool> done(tensors.size(), false);
  for (size_t k = 0; k < tensors.size(); k++) {
    if (done[k]) continue;
    // a tensor at least packBytes large goes on its own, in place, without a packed copy
    if (int64_t(tensors[k].nbytes()) >= packBytes && tensors[k].is_contiguous()) {
      done[k] = true;
      broadcast({tensors[k].detach()});
      continue;
    }
    std::vector<size_t> same;
    int64_t bytes = 0;
    for (size_t j = k; j < tensors.size(); j++)
      if (!done[j] && tensors[j].scalar_type() == tensors[k].scalar_type() && tensors[j].device() == tensors[k].device() &&
          !(int64_t(tensors[j].nbytes()) >= packBytes && tensors[j].is_contiguous())) {
        if (!same.empty() && bytes + int64_t(tensors[j].nbytes()) > packBytes) break;
        same.push_back(j);
        done[j] = true;
        bytes += int64_t(tensors[j].nbytes());
      }
    std::vector<at::Tensor> flat;
    for (size_t j : same) flat.push_back(tensors[j].detach().reshape({-1}));
    std::vector<at::Tensor> v{at::cat(flat)};
    broadcast(v);
    int64_t offset = 0;
    for (size_t j : same) {
      at::Tensor dst = tensors[j].detach();
      dst.copy_(v[0].narrow(0, offset, dst.numel()).view(dst.sizes()));
      offset += dst.numel();
    }
  }
}

namespace {

using torch::nn::Module;
using ModulePtr = std::shared_ptr<Module>;

struct DataParallelModule : Module, ModuleForward {
  DataParallelModule(ModulePtr m, GroupPtr g, bool buffers)
      : Module("DistributedDataParallel"), inner(std::move(m)), group(std::move(g)), broadcastBuffers(buffers) {
    for (auto& p : inner->named_parameters(false)) register_parameter(p.key(), p.value(), p.value().requires_grad());
    for (auto& b : inner->named_buffers(false)) register_buffer(b.key(), b.value());
    for (auto& c : inner->named_children()) register_module(c.key(), c.value());
    Module::train(inner->is_training());
  }

  ModulePtr inner;
  GroupPtr group;
  std::shared_ptr<GradReducer> reducer;
  bool broadcastBuffers;
  bool requireSync = true;

  std::string typeName() const override { return "DistributedDataParallel"; }
  void pretty_print(std::ostream& s) const override { s << "DistributedDataParallel"; }
  void train(bool on) override {
    inner->train(on);
    Module::train(on);
  }

  Value forward(Interp& in, const Value* argv, int argc) override {
    // Buffers change only in training mode (batch-norm statistics), so only a training forward
    // copies rank 0's; an evaluation through the wrapper communicates nothing, and ranks may
    // evaluate different numbers of batches (torch would broadcast here too).
    if (broadcastBuffers && group->size > 1 && is_training()) {
      auto bufs = inner->buffers(true);
      if (!bufs.empty()) broadcastPacked(*group, bufs, 0, "distributed-data-parallel");
    }
    if (at::GradMode::is_enabled()) {
      if (requireSync) reducer->arm();
      else reducer->disarm();
    }
    return callModule(in, inner, argv, argc);
  }
};

DataParallelModule* dataParallelArg(Value v, std::string_view who, int index) {
  if (isModule(v))
    if (auto* d = dynamic_cast<DataParallelModule*>(moduleArg(v, who, index).get())) return d;
  throwTypeError(who, index, "a module made by distributed-data-parallel", v);
}

}  // namespace

void checkSameModel(Group& g, const std::vector<at::Tensor>& params, std::string_view who) {
  // torch's _verify_param_shape_across_processes: the same model on every rank
  std::vector<int64_t> extra{int64_t(params.size())};
  uint64_t h = 0;   // unsigned: the hash wraps (a signed overflow is undefined behaviour)
  for (auto& p : params) {
    h = h * 31 + uint64_t(p.scalar_type());
    for (int64_t d : p.sizes()) h = h * 1000003 + uint64_t(d);
  }
  extra.push_back(int64_t(h));
  checkAgreement(g, {Op::DataParallel, -1, -1, nullptr, extra}, who);
}

bool isDataParallel(const torch::nn::Module& m) { return dynamic_cast<const DataParallelModule*>(&m) != nullptr; }

}  // namespace purple::dist

namespace purple {

using namespace dist;

void registerDistDataParallel(Registry& r) {
  r.def("distributed-data-parallel",
        "(model :key group (broadcast-buffers #t) (bucket-cap-mb 25.0) (first-bucket-mb 1.0))",
        [](Value model, Value group, bool broadcastBuffers, double bucketMb, double firstMb) -> Value {
          const char* who = "distributed-data-parallel";
          ModulePtr inner = moduleArg(model, who, 1);
          if (dynamic_cast<DataParallelModule*>(inner.get()))
            throwError("dist-error", std::string(who) + ": the model is already wrapped");
          GroupPtr g = groupArg(group, who);
          if (!(bucketMb > 0) || !(firstMb > 0))
            throwError("dist-error", std::string(who) + ": bucket sizes must be positive");
          std::vector<at::Tensor> params = inner->parameters(true);
          checkSameModel(*g, params, who);
          std::vector<at::Tensor> state = params;
          for (auto& b : inner->buffers(true)) state.push_back(b);
          if (g->size > 1 && !state.empty()) broadcastPacked(*g, state, 0, who);
          auto m = std::make_shared<DataParallelModule>(inner, g, broadcastBuffers);
          m->reducer = std::make_shared<GradReducer>(g, params, int64_t(firstMb * 1024 * 1024),
                                                     int64_t(bucketMb * 1024 * 1024));
          m->reducer->install();
          return wrapModule(m);
        },
        "Wraps MODEL for data-parallel training over :group (default: the world), as torch's "
        "DistributedDataParallel: rank 0's parameters and buffers are copied to every rank now; then every "
        "backward pass through the wrapper averages the gradients across ranks, in buckets (:bucket-cap-mb, "
        ":first-bucket-mb) all-reduced while backward is still running. Every rank must wrap the same model. The "
        "wrapper has the model's parameters, buffers and state-dict keys (no \"module.\" prefix), so optimizers, "
        "schedulers, clipping, fit, save-state-dict and load-state-dict! work on it as on the model. "
        ":broadcast-buffers #f stops the per-forward copy of rank 0's buffers. Parameters that get no gradient on a "
        "rank contribute zeros. Use (no-sync model thunk) to accumulate gradients locally.");
  sandbox(r, "distributed-data-parallel", Needs::Process, "network: all-reduces gradients on every backward");
  r.def("ddp-module", "(ddp)",
        [](Value v) { return wrapModule(dataParallelArg(v, "ddp-module", 1)->inner); },
        "The model that DDP (made by distributed-data-parallel) wraps (torch's ddp.module).");
  r.def("ddp?", "(x)",
        [](Value x) { return isModule(x) && dynamic_cast<DataParallelModule*>(moduleArg(x, "ddp?", 1).get()) != nullptr; },
        "True when X was made by distributed-data-parallel.");
  r.def("ddp-bucket-count", "(ddp)",
        [](Value v) { return int64_t(dataParallelArg(v, "ddp-bucket-count", 1)->reducer->bucketCount()); },
        "How many gradient buckets DDP all-reduces per backward pass.");
  r.def("no-sync", "(ddp thunk)",
        [](Interp& in, Value v, Procedure thunk) -> Value {
          DataParallelModule* d = dataParallelArg(v, "no-sync", 1);
          ModulePtr keep = moduleArg(v, "no-sync", 1);
          struct Restore {
            DataParallelModule* d;
            bool was;
            ~Restore() { d->requireSync = was; }
          } restore{d, d->requireSync};
          d->requireSync = false;
          return in.apply(thunk.value, nullptr, 0);
        },
        "Calls THUNK with DDP's gradient synchronisation off (torch's no_sync): backward passes of forwards run "
        "inside accumulate gradients locally; the first backward after a forward outside averages the accumulated "
        "gradients. (no-sync model (lambda () (backward (loss-of batch-1))))");
}

}  // namespace purple
