// The multi-tensor step of Adam and AdamW (multi_tensor_adam.hpp).
#include "builtins/nn/multi_tensor_adam.hpp"
#include "interp/platform/torch_compat.hpp"
#include <ATen/ATen.h>
#include <cmath>
#include <memory>

namespace purple {

namespace {

using torch::optim::Optimizer;
using torch::optim::OptimizerParamGroup;

// Whether this step goes the multi-tensor way: never with amsgrad or a sparse gradient (LibTorch's
// own step handles those), always when asked, and by default when every parameter with a
// gradient is on a GPU, as torch.optim decides.
bool useForeach(ForeachMode mode, bool amsgrad, const std::vector<OptimizerParamGroup>& groups) {
  if (mode == ForeachMode::Never || amsgrad) return false;
  bool allOnDevice = true, any = false;
  for (const auto& group : groups)
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (p.grad().is_sparse()) return false;
      any = true;
      if (p.device().is_cpu()) allOnDevice = false;
    }
  return any && (mode == ForeachMode::Always || allOnDevice);
}

// One parameter group's update. DECOUPLED is AdamW (weight decay on the parameter), else Adam
// (weight decay added to the gradient). The order of operations is LibTorch's per-tensor one.
template <class ParamState, class Options, bool Decoupled, class StateMap>
void stepGroup(OptimizerParamGroup& group, StateMap& state) {
  auto& o = static_cast<Options&>(group.options());
  const double lr = o.lr(), wd = o.weight_decay(), eps = o.eps();
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
  std::vector<at::Tensor> params, grads, expAvgs, expAvgSqs;
  std::vector<at::Scalar> stepSizes, biasCorrection2Sqrts;
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto key = compat::optimizerStateKey<typename StateMap::key_type>(p);
    auto it = state.find(key);
    if (it == state.end()) {
      auto s = std::make_unique<ParamState>();
      s->step(0);
      s->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      s->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      it = state.emplace(key, std::move(s)).first;
    }
    auto& s = static_cast<ParamState&>(*it->second);
    s.step(s.step() + 1);
    double biasCorrection1 = 1 - std::pow(beta1, double(s.step()));
    double biasCorrection2 = 1 - std::pow(beta2, double(s.step()));
    params.push_back(p);
    grads.push_back(p.grad());
    expAvgs.push_back(s.exp_avg());
    expAvgSqs.push_back(s.exp_avg_sq());
    stepSizes.emplace_back(-(lr / biasCorrection1));
    biasCorrection2Sqrts.emplace_back(std::sqrt(biasCorrection2));
  }
  if (params.empty()) return;
  if (wd != 0) {
    if constexpr (Decoupled) at::_foreach_mul_(params, 1 - lr * wd);
    else grads = at::_foreach_add(grads, params, wd);
  }
  at::_foreach_mul_(expAvgs, beta1);
  at::_foreach_add_(expAvgs, grads, 1 - beta1);
  at::_foreach_mul_(expAvgSqs, beta2);
  at::_foreach_addcmul_(expAvgSqs, grads, grads, 1 - beta2);
  std::vector<at::Tensor> denoms = at::_foreach_sqrt(expAvgSqs);
  at::_foreach_div_(denoms, biasCorrection2Sqrts);
  at::_foreach_add_(denoms, eps);
  at::_foreach_addcdiv_(params, expAvgs, denoms, stepSizes);
}

template <class ParamState, class Options, bool Decoupled, class Opt>
at::Tensor multiTensorStep(Opt& opt, const Optimizer::LossClosure& closure) {
  at::NoGradGuard noGrad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable(true);
    loss = closure();
  }
  for (auto& group : opt.param_groups()) stepGroup<ParamState, Options, Decoupled>(group, opt.state());
  return loss;
}

bool anyAmsgrad(const std::vector<OptimizerParamGroup>& groups, bool decoupled) {
  for (const auto& g : groups)
    if (decoupled ? static_cast<const torch::optim::AdamWOptions&>(g.options()).amsgrad()
                  : static_cast<const torch::optim::AdamOptions&>(g.options()).amsgrad())
      return true;
  return false;
}

}  // namespace

template <>
at::Tensor MultiTensorAdam::step(LossClosure closure) {
  if (!useForeach(mode_, anyAmsgrad(param_groups(), false), param_groups())) return torch::optim::Adam::step(closure);
  return multiTensorStep<torch::optim::AdamParamState, torch::optim::AdamOptions, false>(*this, closure);
}

template <>
at::Tensor MultiTensorAdamW::step(LossClosure closure) {
  if (!useForeach(mode_, anyAmsgrad(param_groups(), true), param_groups())) return torch::optim::AdamW::step(closure);
  return multiTensorStep<torch::optim::AdamWParamState, torch::optim::AdamWOptions, true>(*this, closure);
}

}  // namespace purple
