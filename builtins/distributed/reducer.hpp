// DDP's gradient averaging: parameters are packed into buckets (in reverse order, the order their
// gradients become ready in a backward pass; the first bucket small so communication starts
// early, as torch's 1 MiB first bucket). A post-hook on each parameter's gradient accumulator
// copies the fresh gradient into its bucket; when a bucket is full it is all-reduced at once,
// asynchronously, while backward goes on computing the earlier layers' gradients. A callback at
// the end of the backward pass fills in parameters that got no gradient and waits for the
// buckets. Each gradient is an alias of its bucket slice once copied in (gradient_as_bucket_view),
// so the all-reduce leaves the averages in the gradients and no rank holds a gradient twice.
//
// The hooks and the end-of-backward callback run on whichever thread LibTorch's autograd engine
// uses (the caller's for CPU tensors, a device thread for CUDA ones). They touch only C++ state
// (tensors, c10d work) under the reducer's mutex, never a Purple value, and report failures as
// C++ exceptions that the `backward` builtin turns into Purple errors on the interpreter's thread.
#pragma once
#include "builtins/distributed/comm.hpp"
#include <torch/csrc/autograd/function.h>
#include <mutex>

namespace purple::dist {

class GradReducer : public std::enable_shared_from_this<GradReducer> {
 public:
  GradReducer(GroupPtr group, std::vector<at::Tensor> params, int64_t firstBucketBytes, int64_t bucketBytes);
  ~GradReducer();
  // Registers the hooks (after construction: they hold a weak reference to this reducer).
  void install();
  // Called by forward when gradients must be synchronised in the next backward pass; re-hooks
  // parameters whose gradient accumulator LibTorch has replaced (after a dtype change).
  void arm();
  void disarm();
  size_t bucketCount() const { return buckets_.size(); }
  std::vector<std::vector<size_t>> bucketParams() const;   // indices into the parameter list

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;    // element offset of each parameter in `flat`
    int64_t numel = 0;
    at::Tensor flat;
    size_t pending = 0;              // parameters whose gradient has not arrived this pass
    bool launched = false;
    WorkPtr work;
  };
  struct Hook {
    std::shared_ptr<torch::autograd::Node> accumulator;
    uintptr_t key = 0;
  };

  void hookParameter(size_t i);
  void onGradient(size_t i);                   // from the accumulator's post-hook
  void finalize();                             // end of the backward pass
  void copyIn(Bucket& b, size_t slot);
  void launchReady();                          // launches full buckets, in bucket order
  void launch(Bucket& b);
  at::Tensor& flatOf(Bucket& b);

  GroupPtr group_;
  std::vector<at::Tensor> params_;
  std::vector<Hook> hooks_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;   // parameter -> (bucket, slot)
  std::vector<bool> ready_;
  size_t nextToLaunch_ = 0;
  bool armed_ = false;
  bool callbackQueued_ = false;
  std::mutex mutex_;
};

}  // namespace purple::dist
