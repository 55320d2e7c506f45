// Optimizer state in PyTorch's layout: optimizer-state-dict gives exactly the structure of
// Python's opt.state_dict() -- a hash table {"state": {index: {"step": ..., "exp_avg": ...}},
// "param_groups": [{"lr": ..., "betas": #(0.9 0.999), ..., "params": (0 1 ...)}]} -- and
// load-optimizer-state-dict! restores moments and step counts from it, whoever wrote it.
//
// Each optimizer kind is one table entry, an OptimizerLayout: the Python names of its parameter
// group options and of its per-parameter state, each bound to the LibTorch field that holds it.
// A new optimizer (a torch::optim::Optimizer subclass with its own Options and ParamState) plugs
// in with one call, next to its definition:
//
//   registerOptimizerLayout({"nadam",
//       {option<NAdamOptions>("lr", [](auto& o) -> auto& { return o.lr(); }),
//        option<NAdamOptions>("betas", [](auto& o) -> auto& { return o.betas(); }), ...,
//        fixedOption("foreach", Value::unspecified())},
//       {stepCount<NAdamParamState>("step", [](auto& s) -> auto& { return s.step(); }, StepAs::Tensor),
//        buffer<NAdamParamState>("exp_avg", [](auto& s) -> auto& { return s.exp_avg(); }), ...},
//       [] { return std::make_unique<NAdamParamState>(); }});
//
// The field types understood: double, int64_t, bool, std::tuple<double, double>, optional
// int64_t/string, tensors, and deques/vectors/optional vectors of tensors (undefined = None).
#pragma once
#include <torch/optim.h>
#include "builtins/nn/value.hpp"
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace purple {

using torch::optim::OptimizerOptions;
using torch::optim::OptimizerParamState;

struct GroupField {
  std::string name;
  std::function<Value(const OptimizerOptions&)> get;
  std::function<void(OptimizerOptions&, Value, const std::string& who)> set;
};

struct StateField {
  std::string name;
  // Value::missing() leaves the key out (Python omits buffers it never made).
  std::function<Value(const OptimizerParamState&)> get;
  // PARAM is the parameter the state belongs to: tensors are copied to its dtype and device.
  std::function<void(OptimizerParamState&, Value, const at::Tensor& param, const std::string& who)> set;
};

struct OptimizerLayout {
  std::string kind;                       // optimizer-kind: "adam"
  std::vector<GroupField> group;          // in Python's key order ("params" is added last)
  std::vector<StateField> state;
  std::function<std::unique_ptr<OptimizerParamState>()> makeState;
  bool firstParamOnly = false;            // LBFGS keeps one state, under its first parameter
  // Where LibTorch's step keeps other state than Python's, these reshape it around each step
  // (SGD without momentum: Python records {"momentum_buffer": None} for every parameter it
  // stepped, LibTorch nothing). Either may be empty.
  std::function<void(torch::optim::Optimizer&)> beforeStep = nullptr, afterStep = nullptr;
  // An optimizer whose state lives elsewhere (zero-redundancy-optimizer: in another optimizer,
  // spread over the ranks) makes and loads its state dict itself; the fields above are then unused.
  std::function<Value(Interp&, OptimizerObj*)> stateDict = nullptr;
  std::function<void(Interp&, OptimizerObj*, Value)> loadStateDict = nullptr;
  // Such a state dict may be a collective, which every rank makes: then save-optimizer-state
  // writes the file on the ranks this says (rank 0 of the group) and only gathers on the others.
  std::function<bool(OptimizerObj*)> writesFile = nullptr;
};

void registerOptimizerLayout(OptimizerLayout layout);

// optimizer-step calls these around LibTorch's step.
void beforeOptimizerStep(OptimizerObj* o);
void afterOptimizerStep(OptimizerObj* o);

// O's state dict in Python's layout (optimizer-state-dict), and loading one into O
// (load-optimizer-state!; WHO names the caller in errors).
Value optimizerStateDict(Interp& in, OptimizerObj* o);
void loadOptimizerStateDict(Interp& in, OptimizerObj* o, Value sd, const std::string& who);

// ---- conversions between field types and Purple values --------------------------------------

Value fieldToValue(double x);
Value fieldToValue(int64_t x);
Value fieldToValue(bool x);
Value fieldToValue(const std::tuple<double, double>& x);
Value fieldToValue(const c10::optional<int64_t>& x);
Value fieldToValue(const c10::optional<std::string>& x);
Value fieldToValue(const at::Tensor& x);
Value fieldToValue(const std::deque<at::Tensor>& x);
Value fieldToValue(const std::vector<at::Tensor>& x);
Value fieldToValue(const c10::optional<std::vector<at::Tensor>>& x);

struct FieldContext {
  const std::string& who;
  const std::string& key;
  const at::Tensor* param;   // for tensors in state; null for options
};
void fieldFromValue(Value v, double& out, const FieldContext& c);
void fieldFromValue(Value v, int64_t& out, const FieldContext& c);
void fieldFromValue(Value v, bool& out, const FieldContext& c);
void fieldFromValue(Value v, std::tuple<double, double>& out, const FieldContext& c);
void fieldFromValue(Value v, c10::optional<int64_t>& out, const FieldContext& c);
void fieldFromValue(Value v, c10::optional<std::string>& out, const FieldContext& c);
void fieldFromValue(Value v, at::Tensor& out, const FieldContext& c);
void fieldFromValue(Value v, std::deque<at::Tensor>& out, const FieldContext& c);
void fieldFromValue(Value v, std::vector<at::Tensor>& out, const FieldContext& c);
void fieldFromValue(Value v, c10::optional<std::vector<at::Tensor>>& out, const FieldContext& c);

// ---- table entries ---------------------------------------------------------------------------

// An option of OPTIONS that REF (a lambda returning a reference to the field) reads and writes.
template <class Options, class Ref>
GroupField option(std::string name, Ref ref) {
  return {name,
          [ref](const OptimizerOptions& o) { return fieldToValue(ref(const_cast<Options&>(static_cast<const Options&>(o)))); },
          [ref, name](OptimizerOptions& o, Value v, const std::string& who) {
            fieldFromValue(v, ref(static_cast<Options&>(o)), FieldContext{who, name, nullptr});
          }};
}

// A key Python has and LibTorch does not (foreach, capturable ...): written as VALUE; when
// `mustMatch`, loading any other value is an error (maximize=True cannot be honoured).
GroupField fixedOption(std::string name, Value value, bool mustMatch = false);
// Python's flags that Purple's optimizers run with fixed, in the order given: "foreach" and
// "fused" None, "maximize" (which must match), "capturable" and "differentiable" #f.
std::vector<GroupField> pythonFlags(std::initializer_list<const char*> keys);
// Options, then flags: one group's fields.
std::vector<GroupField> withFlags(std::vector<GroupField> options, std::initializer_list<const char*> keys);

enum class StepAs { Tensor, Int };   // Adam's step is tensor(3.), RMSprop's the int 3

template <class State, class Ref>
StateField stepCount(std::string name, Ref ref, StepAs as) {
  return {name,
          [ref, as](const OptimizerParamState& s) {
            int64_t n = ref(const_cast<State&>(static_cast<const State&>(s)));
            return as == StepAs::Tensor ? fieldToValue(at::scalar_tensor(double(n), at::kFloat)) : fieldToValue(n);
          },
          [ref, name](OptimizerParamState& s, Value v, const at::Tensor&, const std::string& who) {
            double d;
            if (isTensor(v)) d = tensorOf(v).item<double>();
            else fieldFromValue(v, d, FieldContext{who, name, nullptr});
            ref(static_cast<State&>(s)) = int64_t(d);
          }};
}

// A per-parameter field that Python writes as None when it holds nothing (SGD's
// momentum_buffer), where buffer() leaves the key out.
StateField noneWhenAbsent(StateField f);

// Any other per-parameter field (tensors, lists of tensors, numbers).
template <class State, class Ref>
StateField buffer(std::string name, Ref ref) {
  return {name,
          [ref](const OptimizerParamState& s) -> Value {
            const auto& x = ref(const_cast<State&>(static_cast<const State&>(s)));
            if constexpr (std::is_same_v<std::decay_t<decltype(x)>, at::Tensor>)
              if (!x.defined()) return Value::missing();
            return fieldToValue(x);
          },
          [ref, name](OptimizerParamState& s, Value v, const at::Tensor& param, const std::string& who) {
            fieldFromValue(v, ref(static_cast<State&>(s)), FieldContext{who, name, &param});
          }};
}


}  // namespace purple
