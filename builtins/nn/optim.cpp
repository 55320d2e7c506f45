// Optimizers (LibTorch's torch::optim classes), the current optimizer, gradient clipping.
// Learning-rate schedulers: schedulers.cpp. Optimizer state dicts: optim_state.cpp.
//
// optimizer-step steps, then (unless the optimizer was made with :auto-zero-grad #f) clears
// the gradients of its parameters. So the seed loop `(backward loss) (optimizer-step)` trains
// correctly without an explicit zero-grad, and PyTorch-style loops that call optimizer-zero-grad
// before backward behave exactly as in PyTorch (clearing twice is harmless). Pass
// :auto-zero-grad #f to keep gradients after the step (PyTorch's behaviour), e.g. to inspect them.
#include <torch/optim.h>
#include <torch/nn/utils/clip_grad.h>   // clip_grad_value_
#include "builtins/nn/optim.hpp"
#include "builtins/nn/multi_tensor_adam.hpp"
#include "builtins/nn/optim_state.hpp"
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include "interp/core/gc.hpp"
#include "interp/language/printer.hpp"
#include <cmath>
#include <fstream>
#include <sstream>

namespace purple {

using torch::optim::Optimizer;

// ---- the optimizer value -------------------------------------------------------------------------

namespace {
void finalizeOptimizer(void* obj, void*) {
  auto* cell = static_cast<OptimizerObj*>(obj);
  cell->opt.~shared_ptr<Optimizer>();
  cell->optKind.~basic_string();
  cell->initialLrs.~shared_ptr<std::vector<double>>();
}
const char* kCurrent = "%current-optimizer";
}  // namespace

Value wrapOptimizer(OptPtr opt, std::string kind, bool autoZeroGrad) {
  auto* cell = static_cast<OptimizerObj*>(gcAllocAtomic(sizeof(OptimizerObj)));
  cell->kind = Kind::Optimizer;
  cell->flags = 0;
  cell->small = 0;
  cell->extra = 0;
  new (&cell->opt) OptPtr(std::move(opt));
  new (&cell->optKind) std::string(std::move(kind));
  cell->autoZeroGrad = autoZeroGrad;
  new (&cell->initialLrs) std::shared_ptr<std::vector<double>>();
  gcRegisterFinalizer(cell, finalizeOptimizer, nullptr);
  return Value(cell);
}

bool isOptimizer(Value v) { return v.is(Kind::Optimizer); }

OptimizerObj* optimizerArg(Value v, std::string_view who, int argIndex) {
  if (!isOptimizer(v)) throwTypeError(who, argIndex, "an optimizer", v);
  return v.as<OptimizerObj>();
}

Value currentOptimizer(Interp& in) {
  Value v = in.globalCell(intern(kCurrent))->value;
  return isOptimizer(v) ? v : Value::f();
}

void setCurrentOptimizer(Interp& in, Value opt) { in.globalCell(intern(kCurrent))->value = opt; }

namespace {

// ---- parameters ----------------------------------------------------------------------------------

void addTensors(Value v, const char* who, std::vector<at::Tensor>& out) {
  // nested lists and vectors are walked recursively: data that contains itself ends here
  if (stackNearlyFull()) throwError("recursion-error", std::string(who) + ": parameters nested too deeply (or circular)");
  if (isModule(v)) {
    for (auto& p : moduleArg(v, who, 1)->parameters(true)) out.push_back(p);
    return;
  }
  if (isOptimizer(v)) {
    for (auto& g : optimizerArg(v, who, 1)->opt->param_groups())
      for (auto& p : g.params()) out.push_back(p);
    return;
  }
  if (isTensor(v)) {
    out.push_back(tensorArg(v, who, 1));
    return;
  }
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) addTensors(vec->items[k], who, out);
    return;
  }
  if (isList(v)) {
    for (Value p = v; isPair(p); p = cdr(p)) addTensors(car(p), who, out);
    return;
  }
  throwError("type-error", std::string(who) + ": expected a module, a tensor or a list of tensors, got " + toWriteString(v));
}

}  // namespace

std::vector<at::Tensor> optimizerTensors(Value v, const char* who) {
  std::vector<at::Tensor> out;
  addTensors(v, who, out);
  return out;
}

std::vector<at::Tensor> trainableTensors(Value v, const char* who) {
  std::vector<at::Tensor> ps = optimizerTensors(v, who);
  for (auto& p : ps) {
    if (!p.is_leaf()) throwError("value-error", std::string(who) + ": can't optimize a non-leaf tensor (one computed from others)");
    if (!p.requires_grad())
      throwError("value-error", std::string(who) + ": a tensor to optimize must require gradients (make it with :requires-grad #t)");
  }
  return ps;
}

bool isParamGroupSpec(Value g) { return isPair(g) && isKeyword(car(g)) && symbolName(car(g)) == "params"; }

std::tuple<double, double> betasArg(Value v, const char* who) {
  std::vector<double> b;
  if (isList(v))
    for (Value p = v; isPair(p); p = cdr(p)) b.push_back(toDoubleValue(car(p), who));
  else if (v.is(Kind::Vector))
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) b.push_back(toDoubleValue(v.as<Vector>()->items[k], who));
  if (b.size() != 2) throwError("type-error", std::string(who) + ": :betas must be a list of two numbers, got " + toWriteString(v));
  return {b[0], b[1]};
}

OptimizerObj* resolveOptimizer(Interp& in, Value v, const char* who) {
  if (v.isMissing() || v.isFalse()) {
    Value c = currentOptimizer(in);
    if (c.isFalse())
      throwError("error", std::string(who) + ": there is no current optimizer; make one first, e.g. (adam (parameters model))");
    return c.as<OptimizerObj>();
  }
  return optimizerArg(v, who, 1);
}

// ---- momentum (one-cycle-lr, cyclic-lr) ------------------------------------------------------------

bool setMomentum(torch::optim::OptimizerOptions& o, double m) {
  if (auto* s = dynamic_cast<torch::optim::SGDOptions*>(&o)) return s->momentum(m), true;
  if (auto* a = dynamic_cast<torch::optim::AdamOptions*>(&o)) return a->betas(std::make_tuple(m, std::get<1>(a->betas()))), true;
  if (auto* a = dynamic_cast<torch::optim::AdamWOptions*>(&o)) return a->betas(std::make_tuple(m, std::get<1>(a->betas()))), true;
  if (auto* r = dynamic_cast<torch::optim::RMSpropOptions*>(&o)) return r->momentum(m), true;
  if (auto* d = dynamic_cast<DescribedOptions*>(&o))
    if (auto* b = d->betasField()) return std::get<0>(*b) = m, true;
  return false;
}

std::optional<double> getMomentum(const torch::optim::OptimizerOptions& o) {
  if (auto* s = dynamic_cast<const torch::optim::SGDOptions*>(&o)) return s->momentum();
  if (auto* a = dynamic_cast<const torch::optim::AdamOptions*>(&o)) return std::get<0>(a->betas());
  if (auto* a = dynamic_cast<const torch::optim::AdamWOptions*>(&o)) return std::get<0>(a->betas());
  if (auto* r = dynamic_cast<const torch::optim::RMSpropOptions*>(&o)) return r->momentum();
  if (auto* d = dynamic_cast<const DescribedOptions*>(&o))
    if (auto* b = const_cast<DescribedOptions*>(d)->betasField()) return std::get<0>(*b);
  return std::nullopt;
}

bool usesBeta1(const torch::optim::OptimizerOptions& o) {
  if (dynamic_cast<const torch::optim::AdamOptions*>(&o) || dynamic_cast<const torch::optim::AdamWOptions*>(&o)) return true;
  auto* d = dynamic_cast<const DescribedOptions*>(&o);
  return d && const_cast<DescribedOptions*>(d)->betasField();
}

namespace {

void zeroGrads(Optimizer& opt, bool setToNone) {
  for (auto& g : opt.param_groups())
    for (auto& p : g.params()) {
      if (!p.grad().defined()) continue;
      if (setToNone) p.mutable_grad().reset();
      else {
        p.mutable_grad().detach_();
        p.mutable_grad().zero_();
      }
    }
}

Value optionsAlist(const torch::optim::OptimizerOptions& o) {
  std::vector<std::pair<const char*, Value>> kv;
  auto num = [&](const char* k, double v) { kv.emplace_back(k, makeFlonum(v)); };
  auto flag = [&](const char* k, bool v) { kv.emplace_back(k, Value::boolean(v)); };
  auto betas = [&](const std::tuple<double, double>& b) {
    Value items[2] = {makeFlonum(std::get<0>(b)), makeFlonum(std::get<1>(b))};
    kv.emplace_back("betas", listFromArray(items, 2));
  };
  num("lr", o.get_lr());
  if (auto* s = dynamic_cast<const torch::optim::SGDOptions*>(&o)) {
    num("momentum", s->momentum()), num("dampening", s->dampening()), num("weight-decay", s->weight_decay());
    flag("nesterov", s->nesterov());
  } else if (auto* a = dynamic_cast<const torch::optim::AdamOptions*>(&o)) {
    betas(a->betas()), num("eps", a->eps()), num("weight-decay", a->weight_decay()), flag("amsgrad", a->amsgrad());
  } else if (auto* a = dynamic_cast<const torch::optim::AdamWOptions*>(&o)) {
    betas(a->betas()), num("eps", a->eps()), num("weight-decay", a->weight_decay()), flag("amsgrad", a->amsgrad());
  } else if (auto* r = dynamic_cast<const torch::optim::RMSpropOptions*>(&o)) {
    num("alpha", r->alpha()), num("eps", r->eps()), num("weight-decay", r->weight_decay()), num("momentum", r->momentum());
    flag("centered", r->centered());
  } else if (auto* g = dynamic_cast<const torch::optim::AdagradOptions*>(&o)) {
    num("lr-decay", g->lr_decay()), num("weight-decay", g->weight_decay());
    num("initial-accumulator-value", g->initial_accumulator_value()), num("eps", g->eps());
  } else if (auto* l = dynamic_cast<const torch::optim::LBFGSOptions*>(&o)) {
    kv.emplace_back("max-iter", makeInteger(l->max_iter()));
    num("tolerance-grad", l->tolerance_grad()), num("tolerance-change", l->tolerance_change());
    kv.emplace_back("history-size", makeInteger(l->history_size()));
  } else if (auto* d = dynamic_cast<const DescribedOptions*>(&o)) {
    d->describe(kv);
  }
  Value r = Value::nil();
  for (size_t k = kv.size(); k-- > 0;) r = cons(cons(makeString(kv[k].first), kv[k].second), r);
  return r;
}

}  // namespace

namespace {
ForeachMode foreachMode(std::optional<bool> foreach) {
  return !foreach ? ForeachMode::Auto : *foreach ? ForeachMode::Always : ForeachMode::Never;
}

// The gradients scaled by min(1, max-norm / (TOTAL + 1e-6)); TOTAL returned.
at::Tensor scaleToNorm(std::vector<at::Tensor>& grads, const at::Tensor& total, double maxNorm, double normType,
                       bool errorIfNonfinite) {
  if (errorIfNonfinite && !std::isfinite(total.item<double>()))
    throwError("value-error", "clip-grad-norm!: the total norm of order " + std::to_string(normType) +
                                  " of the gradients is not finite, so they cannot be clipped "
                                  "(:error-if-nonfinite #f scales them anyway)");
  at::Tensor coef = at::clamp_max(maxNorm / (total + 1e-6), 1.0);
  for (at::Tensor& g : grads) g.mul_(coef.to(g.device()));
  return total;
}

// torch.nn.utils.clip_grad_norm_, returning the norm as a tensor. LibTorch's C++ version returns
// a double, so it waits for the GPU at every training step (char-GPT on an H100, where the kernels
// of a step are queued ahead of the interpreter); clip-grad-norm! reads this one back only for its
// number form. The NORM-TYPE norm of the per-gradient norms, and the gradients scaled by
// min(1, max-norm / (norm + 1e-6)), as Python computes them (norm type 0 included).
at::Tensor clipGradNorm(const std::vector<at::Tensor>& params, double maxNorm, double normType,
                                bool errorIfNonfinite) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  at::NoGradGuard noGrad;
  bool infinity = std::isinf(normType) && normType > 0;
  // Gradients of a fully-sharded model are this rank's parts: their norm is put together over
  // the group (every rank of it calls clip-grad-norm!), each element counted once.
  if (ShardedParameters* sp = shardedParameters()) {
    std::vector<int64_t> shape;
    const at::Tensor* ref = nullptr;
    for (const at::Tensor& p : params)
      if (sp->fullShape(p, shape)) {
        ref = &p;
        break;
      }
    if (ref) {
      if (!(normType > 0))
        throwError("value-error", "clip-grad-norm!: the gradients are sharded (fully-shard); :norm-type must be positive, not " +
                                      std::to_string(normType));
      at::Tensor shardedPart = at::zeros({}, at::kDouble), ownPart = at::zeros({}, at::kDouble);
      for (const at::Tensor& p : params) {
        if (!p.grad().defined()) continue;
        at::Tensor g = p.grad().to(at::kDouble);
        at::Tensor x = infinity ? (g.numel() ? g.abs().max() : at::zeros({}, at::kDouble)) : g.abs().pow(normType).sum();
        at::Tensor& part = sp->fullShape(p, shape) ? shardedPart : ownPart;
        part = infinity ? at::maximum(part, x.cpu()) : part + x.cpu();
      }
      // every rank of the group takes part, with or without gradients
      shardedPart = sp->reduceOverGroup(*ref, shardedPart, infinity);
      at::Tensor total = infinity ? at::maximum(shardedPart, ownPart) : (shardedPart + ownPart).pow(1.0 / normType);
      total = total.to(at::kFloat);
      return scaleToNorm(grads, total, maxNorm, normType, errorIfNonfinite);
    }
  }
  if (grads.empty()) return at::zeros({});
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  for (const at::Tensor& g : grads) norms.push_back(infinity ? g.abs().max() : g.norm(normType));
  at::Tensor total = norms.size() == 1 ? norms[0]
                     : infinity        ? at::stack(norms).max()
                                       : at::stack(norms).norm(normType);
  return scaleToNorm(grads, total, maxNorm, normType, errorIfNonfinite);
}
}  // namespace

void registerOptim(Registry& r) {
  r.def("sgd", "(params :key (lr 1e-3) (momentum 0.0) (dampening 0.0) (weight-decay 0.0) (nesterov #f) (auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, double momentum, double dampening, double wd, bool nesterov, bool autoZero) {
          torch::optim::SGDOptions o(lr);
          o.momentum(momentum).dampening(dampening).weight_decay(wd).nesterov(nesterov);
          return makeOptimizer<torch::optim::SGD>(in, params, o, "sgd", autoZero);
        },
        "Stochastic gradient descent (torch.optim.SGD) over PARAMS: a module, a list of tensors, or a list of "
        "parameter groups ((:params P :lr X :weight-decay Y) ...). It becomes the current optimizer.");
  r.def("adam", "(params :key (lr 1e-3) (betas '(0.9 0.999)) (eps 1e-8) (weight-decay 0.0) (amsgrad #f) (auto-zero-grad #t) foreach)",
        [](Interp& in, Value params, double lr, Value betas, double eps, double wd, bool amsgrad, bool autoZero,
           std::optional<bool> foreach) {
          torch::optim::AdamOptions o(lr);
          o.betas(betasArg(betas, "adam")).eps(eps).weight_decay(wd).amsgrad(amsgrad);
          return makeOptimizer<MultiTensorAdam>(in, params, o, "adam", autoZero,
                                                [&](MultiTensorAdam& a) { a.setForeach(foreachMode(foreach)); });
        },
        "Adam (torch.optim.Adam) over PARAMS (a module, tensors, or parameter groups). It becomes the current optimizer. "
        ":foreach as torch.optim's: unset, the step updates all of a group's tensors with multi-tensor kernels when "
        "every parameter is on a GPU (a few kernel launches instead of about ten per tensor); #t always; #f never.");
  r.def("adamw", "(params :key (lr 1e-3) (betas '(0.9 0.999)) (eps 1e-8) (weight-decay 1e-2) (amsgrad #f) (auto-zero-grad #t) foreach)",
        [](Interp& in, Value params, double lr, Value betas, double eps, double wd, bool amsgrad, bool autoZero,
           std::optional<bool> foreach) {
          torch::optim::AdamWOptions o(lr);
          o.betas(betasArg(betas, "adamw")).eps(eps).weight_decay(wd).amsgrad(amsgrad);
          return makeOptimizer<MultiTensorAdamW>(in, params, o, "adamw", autoZero,
                                                 [&](MultiTensorAdamW& a) { a.setForeach(foreachMode(foreach)); });
        },
        "AdamW, Adam with decoupled weight decay (torch.optim.AdamW). It becomes the current optimizer. :foreach as "
        "adam's.");
  r.def("rmsprop", "(params :key (lr 1e-2) (alpha 0.99) (eps 1e-8) (weight-decay 0.0) (momentum 0.0) (centered #f) (auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, double alpha, double eps, double wd, double momentum, bool centered, bool autoZero) {
          torch::optim::RMSpropOptions o(lr);
          o.alpha(alpha).eps(eps).weight_decay(wd).momentum(momentum).centered(centered);
          return makeOptimizer<torch::optim::RMSprop>(in, params, o, "rmsprop", autoZero);
        },
        "RMSprop (torch.optim.RMSprop). It becomes the current optimizer.");
  r.def("adagrad", "(params :key (lr 1e-2) (lr-decay 0.0) (weight-decay 0.0) (initial-accumulator-value 0.0) (eps 1e-10) (auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, double lrDecay, double wd, double init, double eps, bool autoZero) {
          torch::optim::AdagradOptions o(lr);
          o.lr_decay(lrDecay).weight_decay(wd).initial_accumulator_value(init).eps(eps);
          return makeOptimizer<torch::optim::Adagrad>(in, params, o, "adagrad", autoZero);
        },
        "Adagrad (torch.optim.Adagrad). It becomes the current optimizer.");
  r.def("lbfgs",
        "(params :key (lr 1.0) (max-iter 20) max-eval (tolerance-grad 1e-7) (tolerance-change 1e-9) (history-size 100) "
        "line-search-fn (auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, int64_t maxIter, std::optional<int64_t> maxEval, double tolGrad, double tolChange,
           int64_t history, std::optional<std::string> lineSearch, bool autoZero) {
          torch::optim::LBFGSOptions o(lr);
          o.max_iter(maxIter).tolerance_grad(tolGrad).tolerance_change(tolChange).history_size(history);
          o.max_eval(maxEval ? c10::optional<int64_t>(*maxEval) : c10::optional<int64_t>(maxIter * 5 / 4));
          if (lineSearch) {
            std::string ls = *lineSearch == "strong-wolfe" ? "strong_wolfe" : *lineSearch;
            if (ls != "strong_wolfe") throwError("value-error", "lbfgs: :line-search-fn must be \"strong-wolfe\" or #f");
            o.line_search_fn(ls);
          }
          return makeOptimizer<torch::optim::LBFGS>(in, params, o, "lbfgs", autoZero);
        },
        "L-BFGS (torch.optim.LBFGS). Its step needs a closure: (optimizer-step opt (lambda () (optimizer-zero-grad opt) "
        "(let ((loss ...)) (backward loss) loss))). It becomes the current optimizer.");

  r.def("optimizer?", "(x)", [](Value x) { return isOptimizer(x); }, "True when X is an optimizer.");
  r.def("optimizer-kind", "(opt)", [](Value o) { return optimizerArg(o, "optimizer-kind", 1)->optKind; },
        "The kind of optimizer OPT: \"sgd\", \"adam\", \"adamw\", \"rmsprop\", \"adagrad\" or \"lbfgs\".");

  r.def("optimizer-step", "(:optional a b)",
        [](Interp& in, Value a, Value b) -> Value {
          Value optV = a, closure = b;
          if (isProcedure(a) && !isOptimizer(a)) optV = Value::missing(), closure = a;
          OptimizerObj* o = resolveOptimizer(in, optV, "optimizer-step");
          OptPtr opt = o->opt;
          bool autoZero = o->autoZeroGrad;
          Value result = Value::unspecified();
          beforeOptimizerStep(o);
          if (!closure.isMissing() && !closure.isFalse()) {
            if (!isProcedure(closure)) throwTypeError("optimizer-step", 2, "a procedure (the closure)", closure);
            Root proc(closure);
            // The step's result is the first closure call's loss, as torch.optim returns it
            // (LBFGS evaluates the closure many times and returns the loss it started from).
            Root first;
            opt->step([&in, &proc, &first]() -> at::Tensor {
              torch::AutoGradMode enable(true);
              Value loss = in.apply(proc.get(), nullptr, 0);
              if (!isTensor(loss)) throwError("type-error", "optimizer-step: the closure must return the loss tensor, got " + toWriteString(loss));
              if (!first) first.set(loss);
              return tensorOf(loss);
            });
            result = first ? first.get() : Value::unspecified();
          } else {
            if (o->optKind == "lbfgs") throwError("value-error", "optimizer-step: lbfgs needs a closure that recomputes the loss");
            opt->step();
          }
          afterOptimizerStep(o);
          if (autoZero) zeroGrads(*opt, true);
          return result;
        },
        "Updates the parameters from their gradients: (optimizer-step) steps the current optimizer (the one made most "
        "recently, or set by with-optimizer); (optimizer-step opt) steps OPT; (optimizer-step [opt] closure) passes a "
        "closure that recomputes and returns the loss (needed by lbfgs) and returns the loss of its first call (for "
        "lbfgs, which calls it many times, the loss before the step, as torch.optim.LBFGS). Afterwards the "
        "gradients are cleared unless the optimizer was made with :auto-zero-grad #f, so (backward loss) "
        "(optimizer-step) is a complete training step.");
  r.def("optimizer-zero-grad", "(:optional opt :key (set-to-none #t))",
        [](Interp& in, Value opt, bool setToNone) { zeroGrads(*resolveOptimizer(in, opt, "optimizer-zero-grad")->opt, setToNone); },
        "Clears the gradients of the parameters of OPT (default: the current optimizer): to none, or to zeros with "
        ":set-to-none #f.");
  r.def("optimizer-lr", "(:optional opt)",
        [](Interp& in, Value opt) { return resolveOptimizer(in, opt, "optimizer-lr")->opt->param_groups().at(0).options().get_lr(); },
        "The learning rate of OPT's first parameter group (default: the current optimizer).");
  r.def("set-optimizer-lr!", "(opt lr)",
        [](Value opt, double lr) {
          for (auto& g : optimizerArg(opt, "set-optimizer-lr!", 1)->opt->param_groups()) g.options().set_lr(lr);
        },
        "Sets the learning rate of every parameter group of OPT to LR.");
  r.def("optimizer-options", "(:optional opt (group 0))",
        [](Interp& in, Value opt, int64_t group) {
          auto& groups = resolveOptimizer(in, opt, "optimizer-options")->opt->param_groups();
          if (group < 0 || size_t(group) >= groups.size())
            throwError("value-error", "optimizer-options: no parameter group " + std::to_string(group));
          return optionsAlist(groups[size_t(group)].options());
        },
        "The hyper-parameters of parameter group GROUP of OPT (default: the current optimizer, group 0) as an alist: "
        "(\"lr\" . 0.001) (\"betas\" 0.9 0.999) (\"momentum\" . 0.9) ... as schedulers leave them.");
  r.def("optimizer-parameters", "(opt)",
        [](Value opt) { return optimizerTensors(opt, "optimizer-parameters"); },
        "The tensors OPT updates, group after group.");
  r.def("current-optimizer", "()", [](Interp& in) { return currentOptimizer(in); },
        "The optimizer that (optimizer-step) with no argument steps, or #f.");
  r.def("set-current-optimizer!", "(opt)",
        [](Interp& in, Value opt) {
          if (!opt.isFalse()) optimizerArg(opt, "set-current-optimizer!", 1);
          setCurrentOptimizer(in, opt);
        },
        "Makes OPT (or #f for none) the current optimizer. with-optimizer does this for a dynamic extent.");

  // ---- gradient clipping ----
  r.def("clip-grad-norm!", "(params max-norm :key (norm-type 2.0) (error-if-nonfinite #f) (tensor #f))",
        [](Value params, double maxNorm, double normType, bool errorIfNonfinite, bool asTensor) -> Value {
          std::vector<at::Tensor> ps = optimizerTensors(params, "clip-grad-norm!");
          at::Tensor norm = clipGradNorm(ps, maxNorm, normType, errorIfNonfinite);
          return asTensor ? wrapTensor(norm) : makeFlonum(norm.item<double>());
        },
        "Scales the gradients of PARAMS (a module, an optimizer or tensors) so that their joint NORM-TYPE norm is at "
        "most MAX-NORM; returns the norm before clipping (torch.nn.utils.clip_grad_norm_). The norm is a number, "
        "which waits for the GPU to finish the step; with :tensor #t it is a 0-dim tensor on the gradients' "
        "device, as PyTorch returns it, and nothing waits (unless :error-if-nonfinite #t, which must read it). With "
        "the gradients of a fully-sharded model, every rank of its group calls it: the norm is that of the whole "
        "gradients, put together over the group.");
  r.def("clip-grad-value!", "(params clip-value)",
        [](Value params, double clip) {
          std::vector<at::Tensor> ps = optimizerTensors(params, "clip-grad-value!");
          torch::nn::utils::clip_grad_value_(ps, clip);
        },
        "Clamps every gradient element of PARAMS (a module, an optimizer or tensors) to [-CLIP-VALUE, CLIP-VALUE].");
}

}  // namespace purple
