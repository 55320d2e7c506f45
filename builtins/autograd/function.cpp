// Custom autograd functions written in Purple (`define-autograd-function`), and the plumbing every
// Purple callback that LibTorch's autograd engine runs goes through (custom backward, tensor hooks).
//
// The design follows PyTorch's PyNode / CppNode: calling a custom function makes a Node subclass
// (PurpleFunctionNode) before running the Purple `forward` under no-grad; the node's next edges
// point at the tensor arguments' gradient edges, and each tensor output gets the node as its
// grad_fn. Tensors given to `save-for-backward` become SavedVariables owned by the node, so a
// saved output refers back to its node weakly (no reference cycle) and in-place changes to a
// saved tensor are detected when `saved-tensors` unpacks it.
//
// Lifetime of Purple values inside the graph: the node holds the backward procedure and the
// context's user data through `Root`s, so the collector keeps them exactly as long as LibTorch
// keeps the node (the node dies with the last tensor whose grad_fn it is; its destructor frees
// the roots), and also drops them as soon as a backward pass frees the node's saved tensors,
// after which it can never run again. The context object that Purple code sees is a small
// Foreign cell holding a weak_ptr to the node, never an owning pointer, so storing a context
// anywhere cannot keep a graph alive.
//
// What a Root cannot do: the collector does not see the edges inside LibTorch, so a rooted
// closure whose environment leads back to one of the node's outputs (a closure made in the same
// procedure body that binds the output, a tensor stored with ctx-set!) keeps that output, and
// the graph, alive until a backward pass releases the node. Graphs that are built but never
// backpropagated (forward-only use of such closures) then stay until the roots are dropped. Saved
// tensors have no such problem: they are SavedVariables, and a saved output refers to its node
// weakly. (Holding closures weakly and keeping them alive from finalizers instead would let the
// collector free these cycles, but also run tensor finalizers on cells a live closure can still
// reach; Purple's tensor finalizer leaves such a cell dangling, so that would trade a leak for a
// crash.)
//
// Threads: LibTorch runs backward callbacks on the thread that called backward for CPU work, and
// on its per-device worker threads for CUDA work, possibly while the calling thread is busy with
// CPU nodes of the same graph. Every callback therefore (1) takes the process-wide callback lock,
// so at most one thread runs Purple code for a backward pass at a time, (2) registers its thread
// with the collector if it is not registered (and unregisters it afterwards: LibTorch's worker
// threads outlive the call, and a registered thread that later exits would be signalled by every
// collection), (3) installs the interpreter that created the function as Interp::current and
// computes the stack limit for that thread. The thread that called `backward` sits inside
// LibTorch's engine, releasing the callback lock it may hold (as Python releases the GIL), so
// the only Purple code running during a backward pass is callbacks, one at a time; no other lock
// on the interpreter is needed.
//
// Errors: a Purple error raised inside a callback cannot cross LibTorch's engine intact (it may
// be caught on a worker thread, wrapped or re-thrown elsewhere). The callback stores the exception
// for its interpreter and throws a plain std::runtime_error with a readable one-line message; the
// `backward` / `grad` builtin that started the engine re-throws the stored Purple exception, so
// `guard` sees the original error object.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/variable.h>
#include <gc/gc.h>
#include "builtins/builtins.hpp"
#include "interp/core/gc.hpp"
#include "interp/memory/tensor_value.hpp"
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace purple {

namespace ag = torch::autograd;

// ---- callbacks from the engine -----------------------------------------------------------------

namespace {

// Recursive: a callback may start a nested backward (checkpoint does), whose callbacks run on the
// same thread when the nested pass is CPU-only.
std::recursive_mutex& callbackMutex() {
  static auto* m = new std::recursive_mutex;   // never destroyed: worker threads may outlive main
  return *m;
}
thread_local int tCallbackHolds = 0;

// The first Purple exception raised by a callback of a pass run for each interpreter.
std::mutex gStashMutex;
std::unordered_map<Interp*, std::exception_ptr>& stash() {
  static auto* m = new std::unordered_map<Interp*, std::exception_ptr>;
  return *m;
}

void stashException(Interp* in, std::exception_ptr e) {
  std::lock_guard<std::mutex> g(gStashMutex);
  auto& slot = stash()[in];
  if (!slot) slot = e;
}

std::exception_ptr takeStashed(Interp* in) {
  std::lock_guard<std::mutex> g(gStashMutex);
  auto it = stash().find(in);
  if (it == stash().end()) return nullptr;
  std::exception_ptr e = it->second;
  stash().erase(it);
  return e;
}

std::string describeCurrentException() {
  try {
    throw;
  } catch (const PurpleException& e) {
    return e.what();
  } catch (const ContinuationInvoked&) {
    return "a continuation was invoked from inside a backward callback";
  } catch (const PurpleExit& e) {
    return "exit was called from inside a backward callback";
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

void runPurpleCallback(Interp* in, const std::string& who, const std::function<void()>& body) {
  std::lock_guard<std::recursive_mutex> lock(callbackMutex());
  ++tCallbackHolds;
  bool registeredHere = false;
  if (!GC_thread_is_registered()) {
    gcRegisterCurrentThread();
    registeredHere = true;
  }
  char* savedLimit = in->stackLimit;
  {
    InterpScope scope(in);
    in->ensureStackLimit();   // the limit of *this* thread's stack
    try {
      body();
    } catch (...) {
      std::string message = who + ": " + describeCurrentException();
      stashException(in, std::current_exception());
      in->stackLimit = savedLimit;
      --tCallbackHolds;
      if (registeredHere) gcUnregisterCurrentThread();
      throw std::runtime_error(message);
    }
  }
  in->stackLimit = savedLimit;
  --tCallbackHolds;
  if (registeredHere) gcUnregisterCurrentThread();
}

void runAutogradEngine(Interp& in, const std::function<void()>& body) {
  // Let callbacks on LibTorch's worker threads in while this thread waits inside the engine.
  int held = tCallbackHolds;
  for (int i = 0; i < held; i++) callbackMutex().unlock();
  tCallbackHolds = 0;
  struct Relock {
    int n;
    ~Relock() {
      for (int i = 0; i < n; i++) callbackMutex().lock();
      tCallbackHolds = n;
    }
  };
  takeStashed(&in);   // a stale error from an earlier, abandoned pass must not resurface
  try {
    Relock relock{held};
    body();
  } catch (...) {
    if (std::exception_ptr original = takeStashed(&in)) std::rethrow_exception(original);
    throw;
  }
}

// ---- the node ----------------------------------------------------------------------------------

namespace {

struct OutputSlot {
  bool isTensor = false;
  std::vector<int64_t> sizes;
  at::TensorOptions options;
};

enum class ResultShape { Single, List, Values };

struct PurpleFunctionNode : ag::Node {
  std::string name_;
  Interp* interp = nullptr;
  Root backwardProc;
  Root userData;                          // alist of ctx-set! entries, or unset
  std::vector<bool> argIsTensor;          // per forward argument (after ctx)
  std::vector<int> argEdge;               // per forward argument: next-edge index or -1
  std::vector<OutputSlot> outputs;        // per forward output position (= node input)
  ag::variable_list toSave;               // save-for-backward, before outputs are wrapped
  std::vector<ag::SavedVariable> saved;
  std::vector<bool> savedDefined;
  bool hasFreedBuffers = false;
  bool materializeGrads = true;
  bool inForward = true;
  std::unordered_set<at::TensorImpl*> nonDifferentiable;
  std::unordered_set<at::TensorImpl*> dirty;
  std::vector<at::Tensor> dirtyTensors;

  std::string name() const override { return name_; }

  // The engine calls this after a backward pass that did not retain the graph; a node with saved
  // tensors can never run again. Dropping the Purple roots here, not only when the node dies, breaks the cycles that
  // the collector cannot see through LibTorch (output -> node -> backward closure -> a frame that
  // holds the output), so the usual forward/backward loop frees its graphs even when the backward
  // closure or the context data happen to refer to the outputs.
  // A node that saved nothing may run again, as in PyTorch, so it keeps its procedure.
  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (saved.empty() && !hasFreedBuffers) return;
    saved.clear();
    hasFreedBuffers = true;
    backwardProc = Root();
    userData = Root();
  }

  ag::variable_list apply(ag::variable_list&& grads) override;
};

// The `ctx` argument of forward and backward: a weak reference to the node.
struct ContextRef {
  std::weak_ptr<PurpleFunctionNode> node;
};

void destroyContext(void* p) { delete static_cast<ContextRef*>(p); }

Value makeContext(const std::shared_ptr<PurpleFunctionNode>& node) {
  return makeForeign(new ContextRef{node}, destroyContext, intern("autograd-context"));
}

std::shared_ptr<PurpleFunctionNode> contextNode(Value ctx, const char* who) {
  if (!ctx.is(Kind::Foreign) || ctx.as<Foreign>()->destroy != destroyContext || !ctx.as<Foreign>()->ptr)
    throwTypeError(who, 1, "an autograd context (the first argument of forward or backward)", ctx);
  auto node = static_cast<ContextRef*>(ctx.as<Foreign>()->ptr)->node.lock();
  if (!node)
    throwError("autograd-error", std::string(who) + ": this context's autograd graph no longer exists "
                                 "(a context is valid inside its forward and backward only)");
  return node;
}

at::Tensor tensorOrUndefined(Value v, const char* who, int index) {
  if (v.isFalse()) return at::Tensor();
  if (!isTensor(v)) throwTypeError(who, index, "a tensor or #f", v);
  const at::Tensor& t = tensorOf(v);
  if (!t.defined()) throwError("tensor-error", std::string(who) + ": a tensor that was already freed");
  return t;
}

// Splits a forward or backward result into its items: a list gives its elements, `values` its
// values, anything else is one item.
ResultShape resultItems(Value r, std::vector<Value, traceable_allocator<Value>>& items) {
  if (r.is(Kind::MultipleValues)) {
    auto* mv = r.as<MultipleValues>();
    for (uint32_t i = 0; i < mv->extra; i++) items.push_back(mv->items[i]);
    return ResultShape::Values;
  }
  if (r.isNil() || isPair(r)) {
    if (!isList(r)) throwError("autograd-error", "autograd function: forward returned an improper list");
    for (Value p = r; isPair(p); p = cdr(p)) items.push_back(car(p));
    return ResultShape::List;
  }
  items.push_back(r);
  return ResultShape::Single;
}

ag::variable_list PurpleFunctionNode::apply(ag::variable_list&& grads) {
  at::OptionalDeviceGuard deviceGuard;
  // Serialises this node against release_variables (see Note [Thread Safety on Autograd Node]).
  std::lock_guard<std::mutex> lock(mutex_);
  ag::variable_list results;
  auto self = std::static_pointer_cast<PurpleFunctionNode>(shared_from_this());
  runPurpleCallback(interp, name_, [&] {
    if (!backwardProc)
      throwError("autograd-error", name_ + ": trying to backward through the graph a second time "
                 "(or to read saved tensors after they were freed); pass :retain-graph #t to the first backward");
    Interp& in = *interp;
    size_t n = outputs.size();
    Value* argv = static_cast<Value*>(gcAlloc((n + 1) * sizeof(Value)));
    argv[0] = makeContext(self);
    for (size_t i = 0; i < n; i++) {
      const at::Tensor& g = i < grads.size() ? grads[i] : at::Tensor();
      if (!outputs[i].isTensor) argv[i + 1] = Value::f();
      else if (g.defined()) argv[i + 1] = wrapTensor(g);
      else if (materializeGrads) argv[i + 1] = wrapTensor(at::zeros(outputs[i].sizes, outputs[i].options));
      else argv[i + 1] = Value::f();
    }
    Value r = in.apply(backwardProc.get(), argv, int(n + 1));

    std::vector<Value, traceable_allocator<Value>> items;
    resultItems(r, items);
    size_t nArgs = argIsTensor.size();
    size_t nTensorArgs = 0;
    for (bool b : argIsTensor) nTensorArgs += b;
    // One gradient per forward argument; when some arguments are not tensors, one per tensor
    // argument is accepted too. Extra trailing #f entries are ignored, as PyTorch does.
    bool perTensor = items.size() != nArgs && items.size() == nTensorArgs;
    while (!perTensor && items.size() > nArgs && items.back().isFalse()) items.pop_back();
    if (!perTensor && items.size() != nArgs)
      throwError("autograd-error", name_ + ": backward returned " + std::to_string(items.size()) +
                 " gradients, expected " + std::to_string(nArgs) + " (one per forward argument, #f for none)");
    size_t k = 0;
    for (size_t a = 0; a < nArgs; a++) {
      if (!argIsTensor[a]) {
        if (perTensor) continue;
        if (!items[a].isFalse())
          throwError("autograd-error", name_ + ": backward returned a gradient at position " +
                     std::to_string(a + 1) + ", but that forward argument is not a tensor (return #f there)");
        continue;
      }
      Value g = perTensor ? items[k] : items[a];
      k++;
      if (g.isFalse()) { results.emplace_back(); continue; }
      if (!isTensor(g) || !tensorOf(g).defined())
        throwError("autograd-error", name_ + ": backward must return tensors or #f, got " +
                   describeValueType(g) + " for argument " + std::to_string(a + 1));
      results.push_back(tensorOf(g));
    }
  });
  return results;
}

// ---- calling a custom function -----------------------------------------------------------------

// Mirrors torch::autograd::_wrap_outputs (whose signature differs between LibTorch versions):
// connects one forward output to the node and returns the tensor the caller should see.
at::Tensor wrapOutput(at::Tensor var, uint32_t outputNr, bool isInput, bool isDirty, bool differentiable,
                      const std::shared_ptr<PurpleFunctionNode>& node, size_t nOutputs, const std::string& who) {
  auto viewAsSelf = [](const at::Tensor& t) {
    at::AutoGradMode noGrad(false);
    return t.view_as(t);
  };
  if (!differentiable) {
    if (!var.requires_grad()) return isInput && !isDirty ? viewAsSelf(var) : var;
    // Detached aliases of inputs, rather than changing the inputs' requires-grad.
    if (isInput) return var.detach();
    if (!var.is_view()) var.detach_();
    return var;
  }
  if (isDirty) {
    if (var.is_leaf() && var.requires_grad())
      throwError("autograd-error", who + ": a leaf tensor that requires grad was modified in place (mark-dirty)");
    if (var.is_view() && nOutputs > 1)
      throwError("autograd-error", who + ": a view modified in place must be the only output of the function");
    var.mutable_grad().reset();
    ag::impl::clear_hooks(var);
    if (auto acc = ag::impl::try_get_grad_accumulator(var)) {
      if (auto* g = dynamic_cast<ag::AccumulateGrad*>(acc.get())) g->variable.reset();
    }
    ag::impl::rebase_history(var, {node, outputNr});
    return var;
  }
  if (isInput) var = viewAsSelf(var);
  ag::impl::set_gradient_edge(var, {node, outputNr});
  return var;
}

Value callAutogradFunction(Interp& in, Value name, Value forward, Value backward, Value args) {
  std::string fname = name.is(Kind::Symbol) ? std::string(symbolName(name))
                      : isString(name)      ? std::string(stringView(name))
                                            : std::string("autograd-function");
  std::string who = fname;
  if (!isList(args)) throwError("type-error", who + ": arguments must be a proper list");
  if (!isProcedure(forward)) throwTypeError(who, 2, "a forward procedure", forward);
  if (!isProcedure(backward)) throwTypeError(who, 3, "a backward procedure", backward);

  std::shared_ptr<PurpleFunctionNode> node(new PurpleFunctionNode(), ag::deleteNode);
  node->name_ = fname + "Backward";
  node->interp = &in;
  node->backwardProc = Root(backward);

  ag::variable_list inputs;
  size_t nArgs = listLength(args);
  for (Value p = args; isPair(p); p = cdr(p)) {
    Value a = car(p);
    bool t = isTensor(a) && tensorOf(a).defined();
    node->argIsTensor.push_back(t);
    node->argEdge.push_back(t ? int(inputs.size()) : -1);
    if (t) inputs.push_back(tensorOf(a));
  }
  bool executable = at::GradMode::is_enabled() && ag::any_variable_requires_grad(inputs);
  if (executable) node->set_next_edges(ag::collect_next_edges(inputs));

  Value* argv = static_cast<Value*>(gcAlloc((nArgs + 1) * sizeof(Value)));
  argv[0] = makeContext(node);
  size_t i = 1;
  for (Value p = args; isPair(p); p = cdr(p)) argv[i++] = car(p);

  Value result;
  {
    at::AutoGradMode noGrad(false);
    result = in.apply(forward, argv, int(nArgs + 1));
  }
  node->inForward = false;

  std::vector<Value, traceable_allocator<Value>> items;
  ResultShape shape = resultItems(result, items);
  if (shape == ResultShape::Single && !isTensor(items[0]))
    throwError("autograd-error", who + ": forward must return a tensor, a list or multiple values, got " +
                                     describeValueType(items[0]));

  std::unordered_set<at::TensorImpl*> inputImpls;
  for (const auto& t : inputs) inputImpls.insert(t.unsafeGetTensorImpl());
  for (const auto& t : node->dirtyTensors) t.unsafeGetTensorImpl()->bump_version();

  size_t nOut = items.size();
  size_t nDiff = 0;
  for (size_t k = 0; k < nOut; k++) {
    Value v = items[k];
    OutputSlot slot;
    if (!isTensor(v) || !tensorOf(v).defined()) {
      if (executable) node->add_input_metadata(ag::Node::undefined_input());
      node->outputs.push_back(slot);
      continue;
    }
    at::Tensor var = tensorOf(v);
    at::TensorImpl* impl = var.unsafeGetTensorImpl();
    bool isInput = inputImpls.count(impl) > 0;
    bool isDirty = node->dirty.count(impl) > 0;
    bool differentiable = executable && node->nonDifferentiable.count(impl) == 0 &&
                          ag::isDifferentiableType(var.scalar_type());
    slot.isTensor = true;
    slot.sizes = var.sizes().vec();
    slot.options = var.options().requires_grad(c10::nullopt);
    uint32_t nr = uint32_t(k);
    if (executable) {
      nr = differentiable ? node->add_input_metadata(var) : node->add_input_metadata(ag::Node::undefined_input());
      at::Tensor wrapped = wrapOutput(var, nr, isInput, isDirty, differentiable, node, nOut, who);
      if (differentiable) nDiff++;
      if (!wrapped.is_same(var) || wrapped.unsafeGetTensorImpl() != impl) items[k] = wrapTensor(wrapped);
    }
    node->outputs.push_back(std::move(slot));
  }
  if (executable) {
    // Views returned from a custom function must not be modified in place afterwards: the
    // function's backward could not account for it (NOTE [ View + Inplace detection ]).
    for (size_t k = 0; k < nOut; k++) {
      if (!isTensor(items[k])) continue;
      const at::Tensor& t = tensorOf(items[k]);
      if (t.defined() && t.is_view()) {
        if (auto* meta = ag::impl::get_view_autograd_meta(t)) {
          if (meta->has_bw_view() && t.grad_fn().get() == node.get())
            meta->set_creation_meta(nDiff > 1 ? ag::CreationMeta::MULTI_OUTPUT_NODE
                                              : ag::CreationMeta::IN_CUSTOM_FUNCTION);
        }
      }
    }
    // A saved output refers to this node weakly (SavedVariable's is_output), so saving an output
    // does not make a reference cycle node -> saved output -> node.
    for (const auto& t : node->toSave) {
      node->savedDefined.push_back(t.defined());
      if (t.defined()) node->saved.emplace_back(t, t.grad_fn().get() == node.get());
      else node->saved.emplace_back();
    }
  }
  node->toSave.clear();
  node->dirtyTensors.clear();

  switch (shape) {
    case ResultShape::Single: return items[0];
    case ResultShape::List: return listFromArray(items.data(), items.size());
    case ResultShape::Values: return makeValues(items.data(), items.size());
  }
  return Value::unspecified();
}

std::vector<at::Tensor> tensorRest(RestArgs rest, const char* who) {
  std::vector<at::Tensor> out;
  int i = 2;
  for (Value p = rest.list; isPair(p); p = cdr(p), i++) {
    Value v = car(p);
    // A single list argument is accepted as the list of tensors.
    if ((isPair(v) || v.isNil()) && cdr(p).isNil() && i == 2) {
      if (!isList(v)) throwTypeError(who, i, "a proper list of tensors", v);
      for (Value q = v; isPair(q); q = cdr(q)) out.push_back(tensorOrUndefined(car(q), who, i));
      break;
    }
    out.push_back(tensorOrUndefined(v, who, i));
  }
  return out;
}

Value alistLookup(Value alist, Value key) {
  for (Value p = alist; isPair(p); p = cdr(p))
    if (isPair(car(p)) && car(car(p)) == key) return car(p);
  return Value::f();
}

}  // namespace

void registerAutogradFunctions(Registry& r) {
  r.def("%autograd-function-apply", "(name forward backward args)",
        [](Interp& in, Value name, Value forward, Value backward, Value args) {
          return callAutogradFunction(in, name, forward, backward, args);
        },
        "Internal: calls the custom autograd function NAME with FORWARD and BACKWARD on the list ARGS "
        "(what define-autograd-function expands to).");

  r.def("autograd-context?", "(x)",
        [](Value x) { return x.is(Kind::Foreign) && x.as<Foreign>()->destroy == destroyContext; },
        "True when X is the context object given to a custom autograd function's forward and backward.");

  r.def("save-for-backward", "(ctx . tensors)",
        [](Value ctx, RestArgs rest) {
          auto node = contextNode(ctx, "save-for-backward");
          if (!node->inForward)
            throwError("autograd-error", "save-for-backward: only valid inside forward");
          for (auto& t : tensorRest(rest, "save-for-backward")) node->toSave.push_back(t);
        },
        "(save-for-backward ctx tensor ...): in a custom function's forward, keeps TENSORs (or #f) for "
        "backward, where (saved-tensors ctx) returns them. Inputs and outputs may be saved; saved "
        "tensors are checked for in-place modification when unpacked. May be called several times; "
        "a single list argument is also accepted.");

  r.def("saved-tensors", "(ctx)",
        [](Value ctx) {
          auto node = contextNode(ctx, "saved-tensors");
          if (node->inForward)
            throwError("autograd-error", "saved-tensors: only valid inside backward");
          if (node->hasFreedBuffers)
            throwError("autograd-error", "saved-tensors: the saved tensors were already freed; pass "
                                         ":retain-graph #t to backward to call it twice");
          Value out = Value::nil();
          for (size_t k = node->saved.size(); k-- > 0;) {
            Value v = Value::f();
            if (node->savedDefined[k]) v = wrapTensor(node->saved[k].unpack(node));
            out = cons(v, out);
          }
          return out;
        },
        "(saved-tensors ctx): in a custom function's backward, the list of tensors given to "
        "save-for-backward, in order (#f where #f was saved).");

  r.def("mark-non-differentiable", "(ctx . tensors)",
        [](Value ctx, RestArgs rest) {
          auto node = contextNode(ctx, "mark-non-differentiable");
          if (!node->inForward) throwError("autograd-error", "mark-non-differentiable: only valid inside forward");
          for (auto& t : tensorRest(rest, "mark-non-differentiable"))
            if (t.defined()) node->nonDifferentiable.insert(t.unsafeGetTensorImpl());
        },
        "(mark-non-differentiable ctx tensor ...): in forward, marks output TENSORs as not "
        "differentiable: they do not require grad, and backward receives zeros (or #f without "
        "materialized grads) for them.");

  r.def("mark-dirty", "(ctx . tensors)",
        [](Value ctx, RestArgs rest) {
          auto node = contextNode(ctx, "mark-dirty");
          if (!node->inForward) throwError("autograd-error", "mark-dirty: only valid inside forward");
          for (auto& t : tensorRest(rest, "mark-dirty")) {
            if (!t.defined()) continue;
            node->dirty.insert(t.unsafeGetTensorImpl());
            node->dirtyTensors.push_back(t);
          }
        },
        "(mark-dirty ctx tensor ...): in forward, declares that input TENSORs were modified in place "
        "and are returned as outputs; their history is rewritten to go through this function.");

  r.def("set-materialize-grads!", "(ctx flag)",
        [](Value ctx, bool flag) { contextNode(ctx, "set-materialize-grads!")->materializeGrads = flag; },
        "(set-materialize-grads! ctx flag): with FLAG #f, backward receives #f instead of a tensor of "
        "zeros for outputs whose gradient is not defined (default #t).");

  r.def("needs-input-grad", "(ctx :optional index)",
        [](Value ctx, Value index) -> Value {
          auto node = contextNode(ctx, "needs-input-grad");
          auto one = [&](size_t a) -> bool {
            int e = node->argEdge[a];
            if (e < 0) return false;
            if (node->inForward) return node->next_edge(size_t(e)).is_valid();
            return node->task_should_compute_output(size_t(e));
          };
          size_t n = node->argEdge.size();
          if (index.isMissing()) {
            Value out = Value::nil();
            for (size_t a = n; a-- > 0;) out = cons(Value::boolean(one(a)), out);
            return out;
          }
          if (!index.isFixnum() || index.fixnum() < 0 || size_t(index.fixnum()) >= n)
            throwError("range-error", "needs-input-grad: index out of range", listFromArray(&index, 1));
          return Value::boolean(one(size_t(index.fixnum())));
        },
        "(needs-input-grad ctx [index]): whether the gradient of forward argument INDEX (0-based, "
        "not counting ctx) is needed; without INDEX, a list of booleans, one per argument. Inside "
        "backward this is accurate for the pass being run (grad's inputs, allow-unused ...).");

  r.def("ctx-set!", "(ctx key value)",
        [](Value ctx, Value key, Value value) {
          auto node = contextNode(ctx, "ctx-set!");
          Value alist = node->userData ? node->userData.get() : Value::nil();
          Value entry = alistLookup(alist, key);
          if (isPair(entry)) entry.as<Pair>()->cdr = value;
          else node->userData.set(cons(cons(key, value), alist));
        },
        "(ctx-set! ctx key value): stores a non-tensor VALUE under KEY (compared with eq?) in a custom "
        "function's context, for backward to read with ctx-ref. It lives as long as the graph. Keep "
        "tensors in save-for-backward: a tensor stored here that leads back to this graph's outputs "
        "keeps the graph alive.");

  r.def("ctx-ref", "(ctx key :optional default)",
        [](Value ctx, Value key, Value dflt) -> Value {
          auto node = contextNode(ctx, "ctx-ref");
          Value entry = alistLookup(node->userData ? node->userData.get() : Value::nil(), key);
          if (isPair(entry)) return cdr(entry);
          if (!dflt.isMissing()) return dflt;
          throwError("autograd-error", "ctx-ref: no value stored under this key", listFromArray(&key, 1));
        },
        "(ctx-ref ctx key [default]): the value stored with ctx-set! under KEY, else DEFAULT "
        "(an error without one).");
}

}  // namespace purple
