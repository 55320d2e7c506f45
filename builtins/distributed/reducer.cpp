// The bucketed gradient all-reduce of reducer.hpp.
//
// Ordering: every rank launches bucket 0, then 1, ... whatever order its gradients arrive in,
// because Gloo and NCCL match collectives by their order. A parameter that got no gradient in a
// pass (unused in this forward, on this rank) contributes its accumulated gradient, or zeros, when
// the pass ends, so all ranks still launch every bucket once per synchronised backward.
#include "builtins/distributed/reducer.hpp"
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/strides.h>
#include <stdexcept>

namespace purple::dist {

namespace {
using torch::autograd::variable_list;
}

GradReducer::GradReducer(GroupPtr group, std::vector<at::Tensor> params, int64_t firstBucketBytes, int64_t bucketBytes)
    : group_(std::move(group)), params_(std::move(params)), hooks_(params_.size()), where_(params_.size()),
      ready_(params_.size(), false) {
  // Reverse parameter order; a bucket holds one dtype and device; the first is capped at
  // firstBucketBytes, the others at bucketBytes.
  Bucket current;
  int64_t bytes = 0;
  at::ScalarType dtype = at::ScalarType::Undefined;
  at::Device device(at::kCPU);
  auto close = [&] {
    if (!current.params.empty()) buckets_.push_back(std::move(current));
    current = Bucket();
    bytes = 0;
  };
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& p = params_[k];
    if (!p.requires_grad()) continue;
    if (!current.params.empty() && (p.scalar_type() != dtype || p.device() != device)) close();
    dtype = p.scalar_type();
    device = p.device();
    current.offsets.push_back(current.numel);
    current.params.push_back(k);
    current.numel += p.numel();
    bytes += p.numel() * int64_t(p.element_size());
    int64_t cap = buckets_.empty() ? firstBucketBytes : bucketBytes;
    if (bytes >= cap) close();
  }
  close();
  for (size_t b = 0; b < buckets_.size(); b++)
    for (size_t s = 0; s < buckets_[b].params.size(); s++) where_[buckets_[b].params[s]] = {b, s};
}

GradReducer::~GradReducer() {
  for (auto& h : hooks_)
    if (h.accumulator) h.accumulator->del_post_hook(h.key);
}

std::vector<std::vector<size_t>> GradReducer::bucketParams() const {
  std::vector<std::vector<size_t>> out;
  for (auto& b : buckets_) out.push_back(b.params);
  return out;
}

void GradReducer::install() {
  for (auto& b : buckets_)
    for (size_t i : b.params) hookParameter(i);
}

void GradReducer::hookParameter(size_t i) {
  Hook& h = hooks_[i];
  if (h.accumulator) h.accumulator->del_post_hook(h.key);
  // The variable holds its accumulator weakly; keeping it here keeps the hook alive.
  h.accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
  std::weak_ptr<GradReducer> self = weak_from_this();
  h.key = h.accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [self, i](const variable_list& outputs, const variable_list&) {
        if (auto r = self.lock()) r->onGradient(i);
        return outputs;
      }));
}

void GradReducer::arm() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : buckets_)
    for (size_t i : b.params) {
      auto now = torch::autograd::impl::try_get_grad_accumulator(params_[i]);
      if (now != hooks_[i].accumulator) hookParameter(i);
    }
  // Also after a backward pass that failed before its end-of-pass callback: start afresh.
  armed_ = true;
  callbackQueued_ = false;
  nextToLaunch_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.launched = false;
    b.work.reset();
  }
}

void GradReducer::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!callbackQueued_) armed_ = false;
}

at::Tensor& GradReducer::flatOf(Bucket& b) {
  const at::Tensor& first = params_[b.params[0]];
  if (!b.flat.defined() || b.flat.scalar_type() != first.scalar_type() || b.flat.device() != first.device())
    b.flat = at::empty({b.numel}, first.options().requires_grad(false));
  return b.flat;
}

// The gradient of a parameter lives in its bucket: once copied in, the parameter's gradient is
// made an alias of its slice (PyTorch's gradient_as_bucket_view), so a rank holds each gradient
// once rather than twice (a fresh gradient and its bucket copy) from then until the next pass.
// The alias shares the bucket's storage without being an autograd view, so that zero-grad's
// detach_ and optimizers treat it as any gradient.
void GradReducer::copyIn(Bucket& b, size_t slot) {
  size_t i = b.params[slot];
  at::Tensor& p = params_[i];
  at::Tensor& flat = flatOf(b);
  at::NoGradGuard noGrad;
  at::Tensor alias = at::empty({0}, flat.options());
  alias.set_(flat.storage(), flat.storage_offset() + b.offsets[slot], p.sizes(), c10::contiguous_strides(p.sizes()));
  const at::Tensor& g = p.grad();
  if (g.defined()) {
    if (g.is_sparse())
      throw std::runtime_error("distributed-data-parallel: sparse gradients are not supported (an embedding made "
                               "with :sparse #t?)");
    // accumulated in place into last pass's alias: already there
    if (!(g.data_ptr() == alias.data_ptr() && g.strides() == alias.strides())) alias.copy_(g);
  } else {
    alias.zero_();
  }
  p.mutable_grad() = alias;
}

void GradReducer::onGradient(size_t i) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_ || ready_[i]) return;
  if (!callbackQueued_) {
    callbackQueued_ = true;
    std::weak_ptr<GradReducer> self = weak_from_this();
    torch::autograd::Engine::get_default_engine().queue_callback([self] {
      if (auto r = self.lock()) r->finalize();
    });
  }
  ready_[i] = true;
  auto [bi, slot] = where_[i];
  Bucket& b = buckets_[bi];
  copyIn(b, slot);
  b.pending--;
  launchReady();
}

void GradReducer::launch(Bucket& b) {
  at::Tensor& flat = flatOf(b);
  flat.div_(double(group_->size));
  std::vector<at::Tensor> v{flat};
  try {
    b.work = group_->comm->allreduce(v, c10d::AllreduceOptions());
  } catch (const std::exception& e) {
    throw std::runtime_error(describeCommFailure("distributed-data-parallel: gradient all-reduce", e));
  }
  b.launched = true;
}

void GradReducer::launchReady() {
  while (nextToLaunch_ < buckets_.size() && buckets_[nextToLaunch_].pending == 0) launch(buckets_[nextToLaunch_++]);
}

void GradReducer::finalize() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_) return;
  armed_ = false;
  callbackQueued_ = false;
  // Parameters without a gradient this pass: their accumulated gradient, or zeros.
  for (size_t bi = nextToLaunch_; bi < buckets_.size(); bi++) {
    Bucket& b = buckets_[bi];
    for (size_t s = 0; s < b.params.size(); s++)
      if (!ready_[b.params[s]]) {
        ready_[b.params[s]] = true;
        copyIn(b, s);
      }
    b.pending = 0;
  }
  launchReady();
  for (auto& b : buckets_) {
    try {
      b.work->wait();
    } catch (const std::exception& e) {
      throw std::runtime_error(describeCommFailure("distributed-data-parallel: gradient all-reduce", e));
    }
    b.work.reset();   // the all-reduce wrote the averages into the gradients (aliases of the bucket)
  }
}

}  // namespace purple::dist
