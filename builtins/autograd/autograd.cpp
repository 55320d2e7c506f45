// Autograd from Purple: gradient tracking on tensors, backward and grad (higher order included),
// grad / inference / anomaly modes, tensor hooks written in Purple, and gradient checking.
// Custom autograd functions, and the machinery every Purple callback from LibTorch's engine uses
// (thread registration, the callback lock, carrying Purple errors across the engine), are in
// function.cpp; the derived forms (no-grad, with-grad, define-autograd-function,
// checkpoint ...) are in prelude/20-autograd.purple.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/variable.h>
#include "builtins/builtins.hpp"
#include "builtins/core/handle.hpp"
#include "interp/memory/tensor_value.hpp"
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>
#include "interp/limits/sandbox.hpp"

namespace purple {

// function.cpp
void runPurpleCallback(Interp* in, const std::string& who, const std::function<void()>& body);
void runAutogradEngine(Interp& in, const std::function<void()>& body);
void registerAutogradFunctions(Registry& r);

namespace ag = torch::autograd;

namespace {

const at::Tensor& liveTensor(Value v, const char* who, int index) {
  if (!isTensor(v)) throwTypeError(who, index, "a tensor", v);
  const at::Tensor& t = tensorOf(v);
  if (!t.defined())
    throwError("tensor-error", std::string(who) + ": argument " + std::to_string(index + 1) +
                                   " is a tensor that was already freed");
  return t;
}

// A tensor, or a list / vector of tensors (#f entries allowed where `allowFalse`: an undefined
// tensor, which LibTorch reads as "none").
ag::variable_list tensorsOf(Value v, const char* who, int index, bool allowFalse) {
  ag::variable_list out;
  auto one = [&](Value x) {
    if (allowFalse && x.isFalse()) out.emplace_back();
    else out.push_back(liveTensor(x, who, index));
  };
  if (isTensor(v)) {
    one(v);
  } else if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t i = 0; i < vec->extra; i++) one(vec->items[i]);
  } else if (isList(v)) {
    for (Value p = v; isPair(p); p = cdr(p)) one(car(p));
  } else {
    throwTypeError(who, index, "a tensor or a list of tensors", v);
  }
  return out;
}

c10::optional<bool> optionalFlag(Value v) {
  if (v.isMissing()) return c10::nullopt;
  return v.isTrue();
}

Value tensorListValue(const ag::variable_list& ts) {
  Value out = Value::nil();
  for (size_t k = ts.size(); k-- > 0;) out = cons(ts[k].defined() ? wrapTensor(ts[k]) : Value::f(), out);
  return out;
}

// ---- hooks -------------------------------------------------------------------------------------

struct HookHandle : RemovableHandle {
  HookHandle(c10::weak_intrusive_ptr<at::TensorImpl, c10::UndefinedTensorImpl> t, unsigned pos)
      : tensor(std::move(t)), position(pos) {}
  c10::weak_intrusive_ptr<at::TensorImpl, c10::UndefinedTensorImpl> tensor;
  unsigned position;
  bool removed = false;
  bool remove() override {
    if (removed) return false;
    removed = true;
    auto impl = tensor.lock();
    if (!impl) return false;   // the tensor, and the hook with it, is gone already
    at::Tensor t(std::move(impl));
    t.remove_hook(position);
    return true;
  }
};

// What the hook closure owns: the procedure stays alive exactly as long as LibTorch keeps the
// hook (the tensor's autograd metadata, until the tensor dies or the hook is removed).
struct HookProc {
  Interp* interp;
  Root proc;
};

// ---- gradcheck ---------------------------------------------------------------------------------

using TensorFn = std::function<ag::variable_list(const ag::variable_list&)>;

struct CheckOptions {
  double eps, atol, rtol;
};

ag::variable_list floatingOutputs(const ag::variable_list& outs) {
  ag::variable_list r;
  for (const auto& o : outs)
    if (o.defined() && at::isFloatingType(o.scalar_type())) r.push_back(o);
  return r;
}

// Compares the Jacobian of F at INPUTS computed by backward passes with central finite
// differences. Returns "" when they agree, else a description of the first disagreement.
std::string checkJacobians(Interp& in, const TensorFn& f, const ag::variable_list& inputs,
                           const CheckOptions& o) {
  std::vector<size_t> diff;
  for (size_t i = 0; i < inputs.size(); i++)
    if (inputs[i].defined() && inputs[i].requires_grad()) diff.push_back(i);
  if (diff.empty()) throwError("autograd-error", "gradcheck: no input requires grad");

  ag::variable_list base = floatingOutputs(f(inputs));
  size_t nOut = base.size();
  // numerical[j][d]: (numel of output j) x (numel of input diff[d])
  std::vector<std::vector<at::Tensor>> numerical(nOut), analytical(nOut);
  auto dbl = at::TensorOptions().dtype(at::kDouble).device(inputs[diff[0]].device());
  for (size_t j = 0; j < nOut; j++)
    for (size_t d : diff) {
      numerical[j].push_back(at::zeros({base[j].numel(), inputs[d].numel()}, dbl));
      analytical[j].push_back(at::zeros({base[j].numel(), inputs[d].numel()}, dbl));
    }

  for (size_t dd = 0; dd < diff.size(); dd++) {
    at::Tensor flat = inputs[diff[dd]].detach().view({-1});
    for (int64_t k = 0; k < flat.numel(); k++) {
      double orig;
      {
        at::NoGradGuard g;
        orig = flat[k].item<double>();
        flat[k].fill_(orig + o.eps);
      }
      ag::variable_list plus = floatingOutputs(f(inputs));
      {
        at::NoGradGuard g;
        flat[k].fill_(orig - o.eps);
      }
      ag::variable_list minus = floatingOutputs(f(inputs));
      {
        at::NoGradGuard g;
        flat[k].fill_(orig);
      }
      if (plus.size() != nOut || minus.size() != nOut)
        throwError("autograd-error", "gradcheck: the function returned a different number of outputs");
      for (size_t j = 0; j < nOut; j++) {
        at::NoGradGuard g;
        at::Tensor col = (plus[j].detach().to(at::kDouble).reshape({-1}) -
                          minus[j].detach().to(at::kDouble).reshape({-1})) / (2 * o.eps);
        numerical[j][dd].select(1, k).copy_(col);
      }
    }
  }

  ag::variable_list diffInputs;
  for (size_t d : diff) diffInputs.push_back(inputs[d]);
  ag::variable_list outs = floatingOutputs(f(inputs));
  for (size_t j = 0; j < nOut; j++) {
    if (!outs[j].requires_grad()) continue;   // a constant output: its Jacobian is zero
    for (int64_t m = 0; m < outs[j].numel(); m++) {
      at::Tensor seed = at::zeros_like(outs[j]);
      seed.view({-1})[m].fill_(1);
      ag::variable_list gs;
      runAutogradEngine(in, [&] { gs = ag::grad({outs[j]}, diffInputs, {seed}, true, false, true); });
      for (size_t dd = 0; dd < diff.size(); dd++)
        if (gs[dd].defined()) analytical[j][dd].select(0, m).copy_(gs[dd].detach().to(at::kDouble).reshape({-1}));
    }
  }

  for (size_t j = 0; j < nOut; j++)
    for (size_t dd = 0; dd < diff.size(); dd++) {
      const at::Tensor& a = analytical[j][dd];
      const at::Tensor& n = numerical[j][dd];
      if (!at::allclose(a, n, o.rtol, o.atol)) {
        at::Tensor err = (a - n).abs();
        int64_t pos = err.argmax().item<int64_t>();
        int64_t row = pos / a.size(1), col = pos % a.size(1);
        std::ostringstream s;
        s << "Jacobian mismatch for output " << j << " with respect to input " << diff[dd]
          << ": at output element " << row << ", input element " << col << ", analytical "
          << a[row][col].item<double>() << " but numerical " << n[row][col].item<double>()
          << " (max abs difference " << err.max().item<double>() << ")";
        return s.str();
      }
    }
  return "";
}

// The tensors among ARGS become float64 leaves (requiring grad when the original did); the rest
// are passed unchanged. `slots` records which positions are tensors.
struct PreparedArgs {
  Root args;                        // the Purple argument list with non-tensors
  std::vector<int> tensorIndex;     // per argument: index into `tensors`, or -1
  ag::variable_list tensors;
};

PreparedArgs prepareArgs(Value inputs) {
  PreparedArgs p;
  Value list = isTensor(inputs) ? cons(inputs, Value::nil()) : inputs;
  if (list.is(Kind::Vector)) list = listFromArray(list.as<Vector>()->items, list.as<Vector>()->extra);
  if (!isList(list)) throwTypeError("gradcheck", 1, "a tensor or a list of arguments", inputs);
  for (Value q = list; isPair(q); q = cdr(q)) {
    Value a = car(q);
    if (isTensor(a) && tensorOf(a).defined()) {
      const at::Tensor& t = tensorOf(a);
      at::Tensor c = t.detach();
      if (at::isComplexType(t.scalar_type()))
        throwError("autograd-error", "gradcheck: complex inputs are not supported");
      if (at::isFloatingType(t.scalar_type())) c = c.to(at::kDouble).contiguous().clone();
      if (t.requires_grad()) c.requires_grad_(true);
      p.tensorIndex.push_back(int(p.tensors.size()));
      p.tensors.push_back(c);
    } else {
      p.tensorIndex.push_back(-1);
    }
  }
  p.args = Root(list);
  return p;
}

// F applied to the prepared arguments with the given tensors in the tensor positions.
TensorFn purpleTensorFn(Interp& in, Value f, const PreparedArgs& p) {
  Root proc(f);
  Root args = p.args;
  std::vector<int> index = p.tensorIndex;
  return [&in, proc, args, index](const ag::variable_list& ts) {
    size_t n = index.size();
    Value* argv = static_cast<Value*>(gcAlloc((n + 1) * sizeof(Value)));
    size_t i = 0;
    for (Value q = args.get(); isPair(q); q = cdr(q), i++)
      argv[i] = index[i] >= 0 ? wrapTensor(ts[size_t(index[i])]) : car(q);
    Value r = in.apply(proc.get(), argv, int(n));
    ag::variable_list out;
    if (isTensor(r)) out.push_back(tensorOf(r));
    else if (isList(r))
      for (Value q = r; isPair(q); q = cdr(q))
        if (isTensor(car(q))) out.push_back(tensorOf(car(q)));
    return out;
  };
}

Value gradcheckResult(const std::string& failure, bool raise, const char* who) {
  if (failure.empty()) return Value::t();
  if (raise) throwError("autograd-error", std::string(who) + ": " + failure);
  return Value::f();
}

}  // namespace

void registerAutograd(Registry& r) {
  // ---- tracking ----
  r.def("tensor-requires-grad!", "(x :optional (flag #t))",
        [](Value x, bool flag) {
          liveTensor(x, "tensor-requires-grad!", 0).requires_grad_(flag);
          return x;
        },
        "(tensor-requires-grad! x [flag]): makes X record operations for automatic "
        "differentiation (FLAG #f stops it; only leaves can be changed). Returns X itself.");
  r.def("tensor-requires-grad?", "(x)", [](const at::Tensor& x) { return x.requires_grad(); },
        "True when gradients will be computed for X (it requires grad, or was computed from a tensor that does).");
  r.def("tensor-grad", "(x)",
        [](const at::Tensor& x) -> Value {
          const at::Tensor& g = x.grad();
          return g.defined() ? wrapTensor(g) : Value::f();
        },
        "The gradient accumulated in X by backward, or #f. Only leaves (and tensors given to "
        "tensor-retain-grad!) accumulate gradients. The result shares memory with the stored gradient.");
  r.def("tensor-set-grad!", "(x grad)",
        [](Value x, Value g) {
          const at::Tensor& t = liveTensor(x, "tensor-set-grad!", 0);
          if (g.isFalse()) {
            t.mutable_grad().reset();
            return;
          }
          const at::Tensor& gt = liveTensor(g, "tensor-set-grad!", 1);
          if (gt.sizes() != t.sizes() || gt.scalar_type() != t.scalar_type() || gt.device() != t.device())
            throwError("autograd-error", "tensor-set-grad!: the gradient must have the tensor's shape, dtype and device");
          t.mutable_grad() = gt;
        },
        "(tensor-set-grad! x grad): stores GRAD (a tensor of X's shape, dtype and device, or #f to "
        "clear it) as X's gradient.");
  r.def("tensor-zero-grad!", "(x :key set-to-none)",
        [](Value x, bool setToNone) {
          const at::Tensor& t = liveTensor(x, "tensor-zero-grad!", 0);
          at::Tensor& g = t.mutable_grad();
          if (!g.defined()) return;
          if (setToNone) {
            g.reset();
            return;
          }
          // Like optimizer.zero_grad(set_to_none=False): cut the gradient's own history first.
          if (g.grad_fn()) g = g.detach();
          else g.requires_grad_(false);
          g.zero_();
        },
        "(tensor-zero-grad! x [:set-to-none #t]): sets X's gradient to zeros in place (or removes "
        "it with :set-to-none), so the next backward starts afresh. Does nothing without a gradient.");
  r.def("tensor-detach", "(x)", [](const at::Tensor& x) { return x.detach(); },
        "A tensor sharing X's data but cut from the autograd graph: it does not require grad.");
  r.def("tensor-detach!", "(x)",
        [](Value x) {
          liveTensor(x, "tensor-detach!", 0).detach_();
          return x;
        },
        "Cuts X itself from the autograd graph (in place) and returns it.");
  r.def("tensor-leaf?", "(x)", [](const at::Tensor& x) { return x.is_leaf(); },
        "True when X is a leaf of the autograd graph: made by the user (not computed from tensors "
        "requiring grad). Tensors that do not require grad are leaves.");
  r.def("tensor-grad-fn", "(x)",
        [](const at::Tensor& x) -> Value {
          const auto& fn = x.grad_fn();
          return fn ? makeString(fn->name()) : Value::f();
        },
        "The name of the autograd function that computed X, e.g. \"MulBackward0\", or #f for leaves.");
  r.def("tensor-retain-grad!", "(x)",
        [](Value x) {
          liveTensor(x, "tensor-retain-grad!", 0).retain_grad();
          return x;
        },
        "Makes the non-leaf X keep its gradient after backward, for tensor-grad. Returns X.");
  r.def("tensor-retains-grad?", "(x)", [](const at::Tensor& x) { return x.retains_grad(); },
        "True when X is a non-leaf that keeps its gradient (tensor-retain-grad!).");

  // ---- backward and grad ----
  r.def("backward", "(tensors :optional gradient :key retain-graph create-graph inputs)",
        [](Interp& in, Value tensors, Value gradient, Value retainGraph, bool createGraph, Value inputs) {
          // A training loop makes few closure calls per step (the evaluator's safe points): an
          // interrupt (Ctrl-C, the notebook's Interrupt) is noticed here, within one step.
          if (in.interruptRequested_.load(std::memory_order_relaxed)) in.checkInterrupt();
          ag::variable_list ts = tensorsOf(tensors, "backward", 0, false);
          ag::variable_list gs;
          if (!gradient.isMissing() && !gradient.isFalse()) gs = tensorsOf(gradient, "backward", 1, true);
          ag::variable_list only;
          if (!inputs.isMissing() && !inputs.isFalse()) only = tensorsOf(inputs, "backward", 4, false);
          runAutogradEngine(in, [&] { ag::backward(ts, gs, optionalFlag(retainGraph), createGraph, only); });
        },
        "(backward tensors [gradient] :retain-graph :create-graph :inputs): accumulates into the "
        "leaves' gradients (tensor-grad) the gradient of TENSORS (one tensor or a list). A scalar "
        "needs no GRADIENT; otherwise GRADIENT gives d(result)/d(tensor), one per tensor. "
        ":retain-graph #t keeps the graph for another backward (default: :create-graph). "
        ":create-graph #t records the backward pass itself, for higher derivatives. :inputs limits "
        "accumulation to the given tensors.", kPrimBorrowsArgs);
  r.def("grad", "(outputs inputs :key grad-outputs retain-graph create-graph allow-unused)",
        [](Interp& in, Value outputs, Value inputs, Value gradOutputs, Value retainGraph, bool createGraph,
           bool allowUnused) {
          ag::variable_list os = tensorsOf(outputs, "grad", 0, false);
          ag::variable_list is = tensorsOf(inputs, "grad", 1, false);
          ag::variable_list gs;
          if (!gradOutputs.isMissing() && !gradOutputs.isFalse()) gs = tensorsOf(gradOutputs, "grad", 2, true);
          ag::variable_list result;
          runAutogradEngine(in, [&] {
            result = ag::grad(os, is, gs, optionalFlag(retainGraph), createGraph, allowUnused);
          });
          return tensorListValue(result);
        },
        "(grad outputs inputs :grad-outputs :retain-graph :create-graph :allow-unused): the "
        "gradients of OUTPUTS with respect to INPUTS (each one tensor or a list), as a list with one "
        "tensor per input, without touching tensor-grad. :grad-outputs weighs non-scalar outputs. "
        ":create-graph #t makes the result differentiable again (higher-order derivatives). With "
        ":allow-unused #t an input the outputs do not depend on gives #f instead of an error.", kPrimBorrowsArgs | kPrimReturnsFreshList);

  // ---- modes ----
  r.def("call-with-grad-enabled", "(flag thunk)",
        [](Interp& in, bool flag, Procedure thunk) {
          at::AutoGradMode mode(flag);
          return in.apply(thunk.value, nullptr, 0);
        },
        "(call-with-grad-enabled flag thunk): calls THUNK with gradient recording on (FLAG true) or "
        "off, restoring the previous mode afterwards, also on errors. no-grad, enable-grad and "
        "with-grad are the syntax for it.");
  sandboxAllowed(r, "call-with-grad-enabled", "thread state: grad mode",
               "LibTorch keeps it per thread and the builtin restores it");
  r.def("set-grad-enabled!", "(flag)", [](bool flag) { at::GradMode::set_enabled(flag); },
        "Turns gradient recording on or off for this thread until changed again.");
  sandboxAllowed(r, "set-grad-enabled!", "thread state: grad mode",
               "per thread (the interpreter's own)");
  r.def("grad-enabled?", "()", []() { return at::GradMode::is_enabled(); },
        "True when operations on tensors that require grad are being recorded.");
  r.def("call-with-inference-mode", "(flag thunk)",
        [](Interp& in, bool flag, Procedure thunk) {
          c10::InferenceMode mode(flag);
          return in.apply(thunk.value, nullptr, 0);
        },
        "(call-with-inference-mode flag thunk): calls THUNK in inference mode (FLAG true): no "
        "recording and no version counting, faster than no-grad; tensors made inside can never be "
        "used in autograd later. The inference-mode syntax uses it.");
  sandboxAllowed(r, "call-with-inference-mode", "thread state: inference mode",
               "per thread, restored on exit");
  r.def("inference-mode?", "()", []() { return c10::InferenceMode::is_enabled(); },
        "True inside inference-mode.");
  r.def("set-detect-anomaly!", "(flag :key (check-nan #t))",
        [](bool flag, bool checkNan) {
          requireProcessAccess("set-detect-anomaly!");
          ag::AnomalyMode::set_enabled(flag, checkNan);
        },
        "Turns autograd anomaly detection on or off: when on, a backward function that produces NaN "
        "raises an error naming it (unless :check-nan #f). Slows backward down.");
  sandbox(r, "set-detect-anomaly!", Needs::Process, "global settings: autograd anomaly mode");
  r.def("detect-anomaly?", "()", []() { return ag::AnomalyMode::is_enabled(); },
        "True when autograd anomaly detection is on.");
  sandboxAllowed(r, "detect-anomaly?", "global settings: autograd anomaly mode",
               "reads it; changes nothing");
  r.def("call-with-detect-anomaly", "(flag thunk :key (check-nan #t))",
        [](Interp& in, bool flag, Procedure thunk, bool checkNan) {
          struct Restore {
            bool enabled, checkNan;
            ~Restore() { ag::AnomalyMode::set_enabled(enabled, checkNan); }
          } restore{ag::AnomalyMode::is_enabled(), ag::AnomalyMode::should_check_nan()};
          ag::AnomalyMode::set_enabled(flag, checkNan);
          return in.apply(thunk.value, nullptr, 0);
        },
        "(call-with-detect-anomaly flag thunk): calls THUNK with anomaly detection on (FLAG true) or "
        "off, then restores the previous setting. The with-detect-anomaly syntax uses it.");
  sandbox(r, "call-with-detect-anomaly", Needs::Process, "global settings: autograd anomaly mode, process-wide while the thunk runs");

  // ---- hooks ----
  r.def("tensor-register-hook", "(x proc)",
        [](Interp& in, const at::Tensor& x, Procedure proc) {
          auto state = std::make_shared<HookProc>(HookProc{&in, Root(proc.value)});
          unsigned pos = x.register_hook([state](const at::Tensor& grad) -> at::Tensor {
            at::Tensor replacement;
            runPurpleCallback(state->interp, "tensor hook", [&] {
              Value r = state->interp->apply(state->proc.get(), {wrapTensor(grad)});
              if (isTensor(r) && tensorOf(r).defined()) replacement = tensorOf(r);
            });
            return replacement;   // undefined: keep the gradient as it is
          });
          return makeRemovableHandle(new HookHandle(
              c10::weak_intrusive_ptr<at::TensorImpl, c10::UndefinedTensorImpl>(x.getIntrusivePtr()), pos));
        },
        "(tensor-register-hook x proc): calls PROC with the gradient of X each time one is computed "
        "in backward. When PROC returns a tensor, it replaces the gradient; any other result keeps "
        "it. Returns a handle for tensor-remove-hook!. The hook lives as long as X (a hook that "
        "refers to X itself keeps X alive).");
  r.def("tensor-remove-hook!", "(handle :optional handle2)",
        [](Value a, Value b) {
          Value h = isRemovableHandle(a) ? a : b;
          if (!isRemovableHandle(h)) throwTypeError("tensor-remove-hook!", 1, "a hook handle", a);
          return removableHandleOf(h)->remove();
        },
        "(tensor-remove-hook! handle) or (tensor-remove-hook! x handle): removes the hook that "
        "tensor-register-hook returned HANDLE for. True if it was still registered. hook-remove! is the same "
        "procedure and also removes module hooks (register-forward-hook! ...).");
  r.alias("hook-remove!", "tensor-remove-hook!");
  r.def("hook-handle?", "(x)", [](Value x) { return isRemovableHandle(x); },
        "True when X is a handle returned by tensor-register-hook or a module's register-forward-hook! / "
        "register-forward-pre-hook!.");

  // ---- gradient checking ----
  r.def("gradcheck", "(f inputs :key (eps 1e-6) (atol 1e-5) (rtol 1e-3) (raise-exception #t))",
        [](Interp& in, Procedure f, Value inputs, double eps, double atol, double rtol, bool raise) {
          PreparedArgs p = prepareArgs(inputs);
          std::string failure = checkJacobians(in, purpleTensorFn(in, f.value, p), p.tensors, {eps, atol, rtol});
          return gradcheckResult(failure, raise, "gradcheck");
        },
        "(gradcheck f inputs :eps :atol :rtol :raise-exception): checks the gradients of F (a "
        "procedure returning a tensor or a list of tensors) at INPUTS (a tensor or a list of "
        "arguments) against central finite differences. Floating tensors are converted to float64; "
        "gradients are checked for those that require grad. Returns #t, or raises an error "
        "describing the first mismatch (returns #f instead with :raise-exception #f).");
  r.def("gradgradcheck", "(f inputs :key (eps 1e-6) (atol 1e-5) (rtol 1e-3) (raise-exception #t))",
        [](Interp& in, Procedure f, Value inputs, double eps, double atol, double rtol, bool raise) {
          PreparedArgs p = prepareArgs(inputs);
          TensorFn first = purpleTensorFn(in, f.value, p);
          size_t nIn = p.tensors.size();
          // Random float64 weights for the outputs, themselves differentiated (as PyTorch does).
          ag::variable_list outs = floatingOutputs(first(p.tensors));
          ag::variable_list all = p.tensors;
          for (const auto& o : outs)
            all.push_back(at::randn(o.sizes(), o.options().dtype(at::kDouble)).requires_grad_(true));
          // The first derivatives, as a function of the inputs and the output weights.
          TensorFn second = [&in, first, nIn](const ag::variable_list& xs) {
            ag::variable_list ins(xs.begin(), xs.begin() + nIn);
            ag::variable_list weights(xs.begin() + nIn, xs.end());
            ag::variable_list o = floatingOutputs(first(ins));
            ag::variable_list diffIns, os, ws;
            for (const auto& t : ins)
              if (t.defined() && t.requires_grad()) diffIns.push_back(t);
            for (size_t j = 0; j < o.size() && j < weights.size(); j++)
              if (o[j].requires_grad()) {
                os.push_back(o[j]);
                ws.push_back(weights[j].to(o[j].scalar_type()));
              }
            if (os.empty()) return ag::variable_list{};
            ag::variable_list gs;
            runAutogradEngine(in, [&] { gs = ag::grad(os, diffIns, ws, true, true, true); });
            ag::variable_list defined;
            for (auto& g : gs)
              if (g.defined()) defined.push_back(g);
            return defined;
          };
          std::string failure = checkJacobians(in, second, all, {eps, atol, rtol});
          return gradcheckResult(failure, raise, "gradgradcheck");
        },
        "(gradgradcheck f inputs :eps :atol :rtol :raise-exception): like gradcheck, for the second "
        "derivatives: checks the gradients of F's vector-Jacobian products (with random output "
        "weights) against finite differences, in float64.");

  registerAutogradFunctions(r);
}

}  // namespace purple
