// Adam and AdamW with torch.optim's multi-tensor ("foreach") step. LibTorch's C++ Adam and AdamW
// update one parameter tensor at a time: about ten kernels per tensor per step, each a launch on
// a GPU (char-GPT's gpt10m has 76 parameter tensors). torch.optim on CUDA updates all the
// tensors of a parameter group with LibTorch's _foreach_ kernels instead, a handful of launches.
// These classes are LibTorch's Adam and AdamW, with the same options, the same per-parameter
// state objects and keys (so state dicts and checkpoints do not change), and a step that does
// the same arithmetic in the same order with _foreach_ ops. On the CPU those ops run per tensor,
// so the results are bit-identical to LibTorch's step (tests/purple/nn.purple checks it).
#pragma once
#include <torch/optim.h>
#include <vector>

namespace purple {

// :foreach of adam and adamw, as torch.optim's foreach=None/True/False.
enum class ForeachMode { Auto, Always, Never };   // Auto: when every parameter is on a GPU

// LibTorch's Adam or AdamW (BASE), with its constructors, and the multi-tensor step.
template <class Base>
class MultiTensor : public Base {
 public:
  using Base::Base;
  void setForeach(ForeachMode m) { mode_ = m; }
  at::Tensor step(typename Base::LossClosure closure = nullptr) override;

 private:
  ForeachMode mode_ = ForeachMode::Auto;
};

using MultiTensorAdam = MultiTensor<torch::optim::Adam>;
using MultiTensorAdamW = MultiTensor<torch::optim::AdamW>;
template <>
at::Tensor MultiTensorAdam::step(torch::optim::Optimizer::LossClosure closure);
template <>
at::Tensor MultiTensorAdamW::step(torch::optim::Optimizer::LossClosure closure);

}  // namespace purple
