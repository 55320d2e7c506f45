// What the optimizer files share (optim.cpp: LibTorch's optimizers and the optimizer API;
// optimizers.cpp: the optimizers Purple implements itself; schedulers.cpp: learning-rate
// schedulers; averaged_model.cpp: EMA and SWA). Includes <torch/optim.h>: only for those files.
#pragma once
#include <torch/optim.h>
#include "builtins/nn/value.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace purple {

using OptPtr = std::shared_ptr<torch::optim::Optimizer>;

inline double toDoubleValue(Value v, const char* who) {
  if (!isRealNumber(v)) throwError("type-error", std::string(who) + ": expected a real number, got " + toWriteString(v));
  return toDouble(v);
}

// The tensors of V: a module's parameters, an optimizer's, a tensor, or a list/vector of those.
std::vector<at::Tensor> optimizerTensors(Value v, const char* who);
// The same, checked to be leaves that require grad.
std::vector<at::Tensor> trainableTensors(Value v, const char* who);
// A parameter group spec: (:params P :lr X ...).
bool isParamGroupSpec(Value g);
// :betas given as a list or vector of two numbers.
std::tuple<double, double> betasArg(Value v, const char* who);
// OPT, or the current optimizer when V is missing or #f.
OptimizerObj* resolveOptimizer(Interp& in, Value v, const char* who);

// Options of the optimizers Purple implements itself describe their hyper-parameters for
// optimizer-options, and say whether they have Adam's betas (for momentum-cycling schedulers).
class DescribedOptions {
 public:
  virtual ~DescribedOptions() = default;
  virtual void describe(std::vector<std::pair<const char*, Value>>& out) const = 0;
  virtual std::tuple<double, double>* betasField() { return nullptr; }
};

// Momentum, or beta1 for the Adam family: what one-cycle-lr and cyclic-lr cycle.
bool setMomentum(torch::optim::OptimizerOptions& o, double m);
std::optional<double> getMomentum(const torch::optim::OptimizerOptions& o);
bool usesBeta1(const torch::optim::OptimizerOptions& o);

// PARAMS: a module, tensors, or a list of groups (:params P :lr X :weight-decay Y ...).
template <class Options>
std::vector<torch::optim::OptimizerParamGroup> paramGroups(Value params, const Options& defaults, const char* who) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  bool grouped = isPair(params) && isParamGroupSpec(car(params));
  if (!grouped) {
    groups.emplace_back(trainableTensors(params, who));
    return groups;
  }
  for (Value p = params; isPair(p); p = cdr(p)) {
    Value g = car(p);
    if (!isParamGroupSpec(g))
      throwError("type-error", std::string(who) + ": each parameter group must be a list (:params P :lr X ...), got " +
                                   toWriteString(g));
    auto opts = std::make_unique<Options>(defaults);
    std::vector<at::Tensor> ts;
    for (Value q = g; isPair(q); q = cddr(q)) {
      if (!isKeyword(car(q)) || !isPair(cdr(q))) throwError("type-error", std::string(who) + ": bad parameter group " + toWriteString(g));
      std::string k(symbolName(car(q)));
      Value val = cadr(q);
      if (k == "params") ts = trainableTensors(val, who);
      else if (k == "lr") opts->lr(toDoubleValue(val, who));
      else if (k == "weight-decay") {
        if constexpr (std::is_same_v<Options, torch::optim::LBFGSOptions>)
          throwError("value-error", std::string(who) + ": lbfgs has no weight decay");
        else
          opts->weight_decay(toDoubleValue(val, who));
      } else
        throwError("value-error", std::string(who) + ": parameter groups take :params, :lr and :weight-decay, not :" + k);
    }
    groups.emplace_back(std::move(ts), std::move(opts));
  }
  return groups;
}

void setCurrentOptimizer(Interp& in, Value opt);

template <class Opt, class Options, class Configure = void (*)(Opt&)>
Value makeOptimizer(Interp& in, Value params, const Options& o, const char* kind, bool autoZero,
                    Configure configure = [](Opt&) {}) {
  auto opt = std::make_shared<Opt>(paramGroups(params, o, kind), o);
  configure(*opt);
  Value v = wrapOptimizer(opt, kind, autoZero);
  setCurrentOptimizer(in, v);
  return v;
}

}  // namespace purple
