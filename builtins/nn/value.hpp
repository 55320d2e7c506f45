// The nn module and optimizer value kinds (Kind::Module, Kind::Optimizer) and what the nn
// families share: conversions for Registry::def, the forward protocol, and the current optimizer.
//
// A module value is a small GC cell holding a std::shared_ptr<torch::nn::Module>; its finalizer
// resets the pointer. Every module Purple makes is a torch::nn::Module that also implements
// `ModuleForward` (built-in layers are LibTorch's own Impl classes with ModuleForward mixed in;
// `sequential` and Purple-defined modules are Purple's own subclasses), so parameters, devices,
// train/eval and state dicts go through LibTorch for both kinds, and forward is found with one
// dynamic_cast. Two cells may hold the same module (children fetched from a parent get fresh
// cells); `eq?` on modules is therefore identity of cells, `module=?` identity of modules.
//
// This header is light on purpose: it forward-declares torch::nn::Module and
// torch::optim::Optimizer, so files that only pass modules around do not pay for <torch/nn.h>.
#pragma once
#include "interp/language/bind.hpp"
#include "interp/core/file_io.hpp"   // writeFileAtomically, for the state-dict and checkpoint writers
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch {
namespace nn { class Module; }
namespace optim { class Optimizer; }
}  // namespace torch

namespace purple {

struct ModuleObj : Object {
  std::shared_ptr<torch::nn::Module> module;   // placement-new'd; reset by the finalizer
};

// What an optimizer value holds besides LibTorch's optimizer.
struct OptimizerObj : Object {
  std::shared_ptr<torch::optim::Optimizer> opt;   // placement-new'd; reset by the finalizer
  std::string optKind;            // "sgd", "adam", ... (for printing and schedulers)
  bool autoZeroGrad;              // optimizer-step clears gradients after stepping
  // Each parameter group's learning rate before the first scheduler changed it (schedulers
  // share it, so a second scheduler on the same optimizer starts from the same base).
  std::shared_ptr<std::vector<double>> initialLrs;
};

struct ModuleHooks;   // hooks.cpp

// How a module runs. Built-in layers and Purple modules implement it; `callModule` finds it.
class ModuleForward {
 public:
  virtual ~ModuleForward() = default;
  // The general path: Purple values in, a Purple value out.
  virtual Value forward(Interp& in, const Value* argv, int argc) = 0;
  // A fast path for one-tensor-in, one-tensor-out layers, used by `sequential` to skip making a
  // cell per intermediate result; only called when hasTensorForward() is true.
  virtual bool hasTensorForward() const { return false; }
  virtual at::Tensor tensorForward(const at::Tensor& x);
  // A forward that keeps none of its argument cells, as a define-module forward (a Purple
  // procedure, whose parameters borrow them: interp/language/ownership.hpp) does: the evaluator
  // then lends it arguments read from variables, and takes its result as it comes, possibly a
  // cell in flight (forwardBorrowing). Layers with a tensor forward borrow too.
  virtual bool forwardBorrows() const { return returnsNewValues(); }
  // Its result is always new: a new tensor cell, or a new list of new cells (a recurrent layer's
  // (output h-n)), unless it is an argument passed through (dropout in eval mode).
  virtual bool returnsNewValues() const { return hasTensorForward(); }
  virtual Value forwardBorrowing(Interp& in, const Value* argv, int argc) { return forward(in, argv, argc); }
  // The short type name, PyTorch's: "Linear", "Sequential", the name given to define-module ...
  virtual std::string typeName() const = 0;
  // Methods besides forward (define-module's method clauses, a TorchScript module's methods):
  // their names, and a call of one (false when the module has no method NAME).
  virtual std::vector<std::string> methodNames() const { return {}; }
  virtual bool callMethod(Interp&, const std::string& /*name*/, const Value* /*argv*/, int /*argc*/, Value& /*result*/) {
    return false;
  }
  // Forward pre-hooks and forward hooks (hooks.cpp); null until one is registered.
  std::shared_ptr<ModuleHooks> hooks;
};

// ---- module values -------------------------------------------------------------------------------

Value wrapModule(std::shared_ptr<torch::nn::Module> m);
bool isModule(Value v);
// The module inside V, or a type error naming `who` and the (1-based) argument position.
const std::shared_ptr<torch::nn::Module>& moduleArg(Value v, std::string_view who, int argIndex);
// Runs the module's forward on Purple arguments, with its hooks. LibTorch errors become Purple
// errors naming the module's type, and an error inside a submodule's forward names the
// submodule's path from the outermost module called ("in module encoder.layers.0.linear1
// (Linear): ...").
Value callModule(Interp& in, const std::shared_ptr<torch::nn::Module>& m, const Value* argv, int argc);
// The same for a submodule called from a parent's C++ forward with one tensor (sequential,
// transformer layers): the tensor fast path when the module has one and no hooks.
at::Tensor callModuleTensor(const std::shared_ptr<torch::nn::Module>& m, const at::Tensor& x);
// Runs BODY as the forward of module M (a submodule a parent's C++ forward calls directly, when
// M has no hooks): an error inside it names M's path, as callModule does.
at::Tensor runModuleBody(torch::nn::Module& m, const std::function<at::Tensor()>& body);
// True when module M has forward hooks or pre-hooks registered (they must see every call).
bool moduleHasHooks(const torch::nn::Module& m);
// Runs F's forward with M's hooks around it (hooks.cpp); callModule calls it when M has hooks.
Value forwardWithHooks(Interp& in, const std::shared_ptr<torch::nn::Module>& m, ModuleForward& f,
                       const Value* argv, int argc);
// Native hooks (hooks.cpp) for C++ code that works around a module's forward (fully-shard): a
// pre-hook that runs first and may return new arguments (a list; #f keeps them), and a forward
// hook that runs last. Both throw a type error naming WHO when M cannot take hooks.
uint64_t addNativeForwardPreHook(const std::shared_ptr<torch::nn::Module>& m, std::function<Value(Value args)> fn,
                                 const char* who);
uint64_t addNativeForwardHookLast(const std::shared_ptr<torch::nn::Module>& m,
                                  std::function<void(Value args, Value output)> fn, const char* who);
void removeNativeHook(const std::shared_ptr<torch::nn::Module>& m, uint64_t id);
// The short type name of any module ("Linear", a define-module name, or LibTorch's name).
std::string moduleTypeName(const torch::nn::Module& m);

// Argument type for Registry::def: a module value (kept as its shared_ptr, not as a Value).
struct ModuleRef { std::shared_ptr<torch::nn::Module> ptr; };
template <> struct Convert<ModuleRef> {
  static constexpr bool keepsValue = false;
  static ModuleRef from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (!isModule(v)) throwConversionError(info, i, "a module", v);
    return ModuleRef{moduleArg(v, info->name, i + 1)};
  }
};
inline Value toValue(Interp&, const ModuleRef& m) { return wrapModule(m.ptr); }

// ---- optimizer values ----------------------------------------------------------------------------

Value wrapOptimizer(std::shared_ptr<torch::optim::Optimizer> opt, std::string kind, bool autoZeroGrad);
bool isOptimizer(Value v);
OptimizerObj* optimizerArg(Value v, std::string_view who, int argIndex);

struct OptimizerRef { OptimizerObj* obj; };
template <> struct Convert<OptimizerRef> {
  static constexpr bool keepsValue = true;   // the cell is used during the call
  static OptimizerRef from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (!isOptimizer(v)) throwConversionError(info, i, "an optimizer", v);
    return OptimizerRef{v.as<OptimizerObj>()};
  }
};

// The current optimizer of an interpreter (optimizer-step with no argument): kept in the hidden
// global `%current-optimizer`, so it is per interpreter and visible to the collector.
Value currentOptimizer(Interp& in);            // #f when none
void setCurrentOptimizer(Interp& in, Value opt);

// ---- shared helpers ------------------------------------------------------------------------------

// "mean" / "sum" / "none" (string, symbol or keyword) -> at::Reduction value.
int64_t reductionArg(const std::optional<std::string>& r, std::string_view who);
// Trailing keyword arguments of a forward call: (m x :key-padding-mask t ...). Positional
// arguments come first; keys are matched by name without the colon.
struct ForwardArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keys;
  Value key(std::string_view name) const;     // missing() when absent
};
ForwardArgs splitForwardArgs(const Value* argv, int argc, const std::string& who,
                             std::initializer_list<const char*> allowed);

// A module whose forward is a Purple procedure and which has no parameters (define.cpp):
// `sequential` wraps plain procedures it is given with this.
std::shared_ptr<torch::nn::Module> procedureModule(Value proc);
// Parameters sharded across a process group (fully-shard, builtins/distributed/fsdp.cpp) hold
// this rank's part of a larger tensor; state dicts deal in whole tensors. fully-shard registers
// this when it first runs.
class ShardedParameters {
 public:
  virtual ~ShardedParameters() = default;
  // The whole tensor's shape when P is a sharded parameter, else false.
  virtual bool fullShape(const at::Tensor& p, std::vector<int64_t>& shape) const = 0;
  // P's whole tensor, gathered from its group: a collective, which every rank of the group runs
  // for the same parameters in the same order.
  virtual at::Tensor gather(const at::Tensor& p) = 0;
  // Copies this rank's part of FULL (P's whole shape) into P.
  virtual void scatter(const at::Tensor& p, const at::Tensor& full) = 0;
  // Whether this process writes files of P's whole tensor: rank 0 of P's group.
  virtual bool writes(const at::Tensor& p) const = 0;
  // VALUE (a 0-dim float tensor) summed, or its maximum taken, over P's group: a collective
  // (clip-grad-norm! of sharded gradients).
  virtual at::Tensor reduceOverGroup(const at::Tensor& p, const at::Tensor& value, bool max) = 0;
};
void setShardedParameters(ShardedParameters* s);
ShardedParameters* shardedParameters();   // null until a model has been sharded

// The state dict in PyTorch's order (each module's parameters, then its buffers, then its
// children's, depth first); values are the module's own tensors (not copies), except that a
// sharded parameter's entry is its whole tensor, gathered (so every rank of a sharded model
// must ask for its state dict).
std::vector<std::pair<std::string, at::Tensor>> moduleStateDict(const torch::nn::Module& m);
// False when M has sharded parameters and this process is not rank 0 of their group: then
// save-state-dict gathers (a collective) but leaves the writing to rank 0.
bool moduleStateDictWriter(const torch::nn::Module& m);
// The same without gathering: a sharded parameter's entry is this rank's part.
std::vector<std::pair<std::string, at::Tensor>> moduleLocalStateDict(const torch::nn::Module& m);
// Every tensor of a module's state dict, matched by name, copied in place without recording
// gradients (into a sharded parameter, this rank's part). Errors list missing and unexpected keys
// when `strict`, and shape mismatches always.
void loadModuleStateDict(torch::nn::Module& m, const std::vector<std::pair<std::string, at::Tensor>>& entries,
                         bool strict);
// A state dict given as Purple data: an alist or a hash table of name -> tensor.
std::vector<std::pair<std::string, at::Tensor>> stateDictFromValue(Value v, std::string_view who);
Value stateDictToValue(const std::vector<std::pair<std::string, at::Tensor>>& entries);

}  // namespace purple
