// Optimizers (LibTorch's torch::optim classes), the current optimizer, learning-rate schedulers,
// gradient clipping. Optimizer state dicts: optim_state.cpp.
//
// optimizer-step steps, then (unless the optimizer was made with :auto-zero-grad #f) clears
// the gradients of its parameters. So the seed loop `(backward loss) (optimizer-step)` trains
// correctly without an explicit zero-grad, and PyTorch-style loops that call optimizer-zero-grad
// before backward behave exactly as in PyTorch (clearing twice is harmless). Pass
// :auto-zero-grad #f to keep gradients after the step (PyTorch's behaviour), e.g. to inspect them.
#include <torch/optim.h>
#include <torch/nn/utils/clip_grad.h>
#include "builtins/nn/value.hpp"
#include "builtins/nn/optim_state.hpp"
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include "interp/gc.hpp"
#include "interp/printer.hpp"
#include <cmath>
#include <fstream>
#include <sstream>

namespace purple {

using torch::optim::Optimizer;
using OptPtr = std::shared_ptr<Optimizer>;

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

std::vector<at::Tensor> tensorsOf(Value v, const char* who) {
  std::vector<at::Tensor> out;
  addTensors(v, who, out);
  return out;
}

std::vector<at::Tensor> trainable(Value v, const char* who) {
  std::vector<at::Tensor> ps = tensorsOf(v, who);
  for (auto& p : ps) {
    if (!p.is_leaf()) throwError("value-error", std::string(who) + ": can't optimize a non-leaf tensor (one computed from others)");
    if (!p.requires_grad())
      throwError("value-error", std::string(who) + ": a tensor to optimize must require gradients (make it with :requires-grad #t)");
  }
  return ps;
}

bool isGroupSpec(Value g) { return isPair(g) && isKeyword(car(g)) && symbolName(car(g)) == "params"; }

// PARAMS: a module, tensors, or a list of groups (:params P :lr X :weight-decay Y ...).
template <class Options>
std::vector<torch::optim::OptimizerParamGroup> paramGroups(Value params, const Options& defaults, const char* who) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  bool grouped = isPair(params) && isGroupSpec(car(params));
  if (!grouped) {
    groups.emplace_back(trainable(params, who));
    return groups;
  }
  for (Value p = params; isPair(p); p = cdr(p)) {
    Value g = car(p);
    if (!isGroupSpec(g)) throwError("type-error", std::string(who) + ": each parameter group must be a list (:params P :lr X ...), got " + toWriteString(g));
    auto opts = std::make_unique<Options>(defaults);
    std::vector<at::Tensor> ts;
    for (Value q = g; isPair(q); q = cddr(q)) {
      if (!isKeyword(car(q)) || !isPair(cdr(q))) throwError("type-error", std::string(who) + ": bad parameter group " + toWriteString(g));
      std::string k(symbolName(car(q)));
      Value val = cadr(q);
      if (k == "params") ts = trainable(val, who);
      else if (k == "lr") opts->lr(toDouble(val));
      else if (k == "weight-decay") {
        if constexpr (std::is_same_v<Options, torch::optim::LBFGSOptions>)
          throwError("value-error", std::string(who) + ": lbfgs has no weight decay");
        else
          opts->weight_decay(toDouble(val));
      } else
        throwError("value-error", std::string(who) + ": parameter groups take :params, :lr and :weight-decay, not :" + k);
    }
    groups.emplace_back(std::move(ts), std::move(opts));
  }
  return groups;
}

template <class Opt, class Options>
Value makeOptimizer(Interp& in, Value params, const Options& o, const char* kind, bool autoZero) {
  auto opt = std::make_shared<Opt>(paramGroups(params, o, kind), o);
  Value v = wrapOptimizer(opt, kind, autoZero);
  setCurrentOptimizer(in, v);
  return v;
}

std::tuple<double, double> betasOf(Value v, const char* who) {
  std::vector<double> b;
  if (isList(v))
    for (Value p = v; isPair(p); p = cdr(p)) b.push_back(toDouble(car(p)));
  else if (v.is(Kind::Vector))
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) b.push_back(toDouble(v.as<Vector>()->items[k]));
  if (b.size() != 2) throwError("type-error", std::string(who) + ": :betas must be a list of two numbers, got " + toWriteString(v));
  return {b[0], b[1]};
}

OptimizerObj* resolve(Interp& in, Value v, const char* who) {
  if (v.isMissing() || v.isFalse()) {
    Value c = currentOptimizer(in);
    if (c.isFalse())
      throwError("error", std::string(who) + ": there is no current optimizer; make one first, e.g. (adam (parameters model))");
    return c.as<OptimizerObj>();
  }
  return optimizerArg(v, who, 1);
}

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

// ---- momentum (one-cycle) --------------------------------------------------------------------------

bool setMomentum(torch::optim::OptimizerOptions& o, double m) {
  if (auto* s = dynamic_cast<torch::optim::SGDOptions*>(&o)) return s->momentum(m), true;
  if (auto* a = dynamic_cast<torch::optim::AdamOptions*>(&o)) return a->betas(std::make_tuple(m, std::get<1>(a->betas()))), true;
  if (auto* a = dynamic_cast<torch::optim::AdamWOptions*>(&o)) return a->betas(std::make_tuple(m, std::get<1>(a->betas()))), true;
  if (auto* r = dynamic_cast<torch::optim::RMSpropOptions*>(&o)) return r->momentum(m), true;
  return false;
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
  }
  Value r = Value::nil();
  for (size_t k = kv.size(); k-- > 0;) r = cons(cons(makeString(kv[k].first), kv[k].second), r);
  return r;
}

// ---- schedulers --------------------------------------------------------------------------------------

struct Scheduler {
  OptPtr opt;
  std::string kind;
  std::vector<double> base;        // initial lr per group
  int64_t step = 0;
  // kind parameters
  int64_t stepSize = 1, tMax = 1, totalSteps = 1, warmup = 1;
  double gamma = 0.1, etaMin = 0, maxLr = 0, pctStart = 0.3, divFactor = 25, finalDiv = 1e4;
  double startFactor = 0, baseMomentum = 0.85, maxMomentum = 0.95;
  bool cosAnneal = true, threePhase = false, cycleMomentum = true;
  std::shared_ptr<Scheduler> then;

  double lrAt(size_t g, int64_t t, double* momentum) const {
    double b = base[g];
    if (kind == "step-lr") return b * std::pow(gamma, double(t / stepSize));
    if (kind == "exponential-lr") return b * std::pow(gamma, double(t));
    if (kind == "cosine-annealing-lr") return etaMin + (b - etaMin) * (1 + std::cos(M_PI * double(t) / double(tMax))) / 2;
    if (kind == "linear-warmup") {
      double f = startFactor + (1 - startFactor) * double(std::min(t, warmup)) / double(warmup);
      return b * f;
    }
    // one-cycle-lr (PyTorch's OneCycleLR)
    double initial = maxLr / divFactor, minLr = initial / finalDiv;
    struct Phase { double end, startLr, endLr, startM, endM; };
    Phase phases[3];
    size_t n;
    double T = double(totalSteps);
    if (threePhase) {
      phases[0] = {pctStart * T - 1, initial, maxLr, maxMomentum, baseMomentum};
      phases[1] = {2 * pctStart * T - 2, maxLr, initial, baseMomentum, maxMomentum};
      phases[2] = {T - 1, initial, minLr, maxMomentum, maxMomentum};
      n = 3;
    } else {
      phases[0] = {pctStart * T - 1, initial, maxLr, maxMomentum, baseMomentum};
      phases[1] = {T - 1, maxLr, minLr, baseMomentum, maxMomentum};
      n = 2;
    }
    auto anneal = [&](double s, double e, double pct) {
      return cosAnneal ? e + (s - e) / 2.0 * (std::cos(M_PI * pct) + 1) : (e - s) * pct + s;
    };
    double start = 0;
    for (size_t i = 0; i < n; i++) {
      if (double(t) <= phases[i].end || i + 1 == n) {
        double pct = (double(t) - start) / (phases[i].end - start);
        if (momentum) *momentum = anneal(phases[i].startM, phases[i].endM, pct);
        return anneal(phases[i].startLr, phases[i].endLr, pct);
      }
      start = phases[i].end;
    }
    return b;
  }

  void apply(int64_t t) {
    if (kind == "linear-warmup" && then && t >= warmup) {
      then->apply(t - warmup);
      return;
    }
    if (kind == "one-cycle-lr" && t > totalSteps)
      throwError("value-error", "scheduler-step!: tried to step " + std::to_string(t) + " times; one-cycle-lr was made for " +
                                    std::to_string(totalSteps) + " total steps");
    auto& groups = opt->param_groups();
    for (size_t g = 0; g < groups.size() && g < base.size(); g++) {
      double m = 0;
      double lr = lrAt(g, t, kind == "one-cycle-lr" ? &m : nullptr);
      groups[g].options().set_lr(lr);
      if (kind == "one-cycle-lr" && cycleMomentum) setMomentum(groups[g].options(), m);
    }
  }
};

void destroyScheduler(void* p) { delete static_cast<std::shared_ptr<Scheduler>*>(p); }

Value makeScheduler(OptimizerObj* o, std::shared_ptr<Scheduler> s) {
  if (!o->initialLrs) {
    o->initialLrs = std::make_shared<std::vector<double>>();
    for (auto& g : o->opt->param_groups()) o->initialLrs->push_back(g.options().get_lr());
  }
  s->opt = o->opt;
  s->base = *o->initialLrs;
  while (s->base.size() < o->opt->param_groups().size()) s->base.push_back(o->opt->param_groups()[s->base.size()].options().get_lr());
  if (s->kind == "one-cycle-lr" && s->cycleMomentum) {
    for (auto& g : o->opt->param_groups())
      if (!setMomentum(g.options(), s->maxMomentum))
        throwError("value-error", "one-cycle-lr: the optimizer (" + o->optKind + ") has no momentum to cycle; pass :cycle-momentum #f");
  }
  s->apply(0);
  return makeForeign(new std::shared_ptr<Scheduler>(std::move(s)), destroyScheduler, intern("scheduler"));
}

std::shared_ptr<Scheduler>& schedulerArg(Value v, const char* who) {
  if (!v.is(Kind::Foreign) || v.as<Foreign>()->typeName != intern("scheduler") || !v.as<Foreign>()->ptr)
    throwTypeError(who, 1, "a scheduler", v);
  return *static_cast<std::shared_ptr<Scheduler>*>(v.as<Foreign>()->ptr);
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
  r.def("adam", "(params :key (lr 1e-3) (betas '(0.9 0.999)) (eps 1e-8) (weight-decay 0.0) (amsgrad #f) (auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, Value betas, double eps, double wd, bool amsgrad, bool autoZero) {
          torch::optim::AdamOptions o(lr);
          o.betas(betasOf(betas, "adam")).eps(eps).weight_decay(wd).amsgrad(amsgrad);
          return makeOptimizer<torch::optim::Adam>(in, params, o, "adam", autoZero);
        },
        "Adam (torch.optim.Adam) over PARAMS (a module, tensors, or parameter groups). It becomes the current optimizer.");
  r.def("adamw", "(params :key (lr 1e-3) (betas '(0.9 0.999)) (eps 1e-8) (weight-decay 1e-2) (amsgrad #f) (auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, Value betas, double eps, double wd, bool amsgrad, bool autoZero) {
          torch::optim::AdamWOptions o(lr);
          o.betas(betasOf(betas, "adamw")).eps(eps).weight_decay(wd).amsgrad(amsgrad);
          return makeOptimizer<torch::optim::AdamW>(in, params, o, "adamw", autoZero);
        },
        "AdamW, Adam with decoupled weight decay (torch.optim.AdamW). It becomes the current optimizer.");
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
          OptimizerObj* o = resolve(in, optV, "optimizer-step");
          OptPtr opt = o->opt;
          bool autoZero = o->autoZeroGrad;
          Value result = Value::unspecified();
          beforeOptimizerStep(o);
          if (!closure.isMissing() && !closure.isFalse()) {
            if (!isProcedure(closure)) throwTypeError("optimizer-step", 2, "a procedure (the closure)", closure);
            Root proc(closure);
            Root last;
            opt->step([&in, &proc, &last]() -> at::Tensor {
              torch::AutoGradMode enable(true);
              Value loss = in.apply(proc.get(), nullptr, 0);
              if (!isTensor(loss)) throwError("type-error", "optimizer-step: the closure must return the loss tensor, got " + toWriteString(loss));
              last.set(loss);
              return tensorOf(loss);
            });
            result = last ? last.get() : Value::unspecified();
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
        "closure that recomputes and returns the loss (needed by lbfgs) and returns that loss. Afterwards the "
        "gradients are cleared unless the optimizer was made with :auto-zero-grad #f, so (backward loss) "
        "(optimizer-step) is a complete training step.");
  r.def("optimizer-zero-grad", "(:optional opt :key (set-to-none #t))",
        [](Interp& in, Value opt, bool setToNone) { zeroGrads(*resolve(in, opt, "optimizer-zero-grad")->opt, setToNone); },
        "Clears the gradients of the parameters of OPT (default: the current optimizer): to none, or to zeros with "
        ":set-to-none #f.");
  r.def("optimizer-lr", "(:optional opt)",
        [](Interp& in, Value opt) { return resolve(in, opt, "optimizer-lr")->opt->param_groups().at(0).options().get_lr(); },
        "The learning rate of OPT's first parameter group (default: the current optimizer).");
  r.def("set-optimizer-lr!", "(opt lr)",
        [](Value opt, double lr) {
          for (auto& g : optimizerArg(opt, "set-optimizer-lr!", 1)->opt->param_groups()) g.options().set_lr(lr);
        },
        "Sets the learning rate of every parameter group of OPT to LR.");
  r.def("optimizer-options", "(:optional opt (group 0))",
        [](Interp& in, Value opt, int64_t group) {
          auto& groups = resolve(in, opt, "optimizer-options")->opt->param_groups();
          if (group < 0 || size_t(group) >= groups.size())
            throwError("value-error", "optimizer-options: no parameter group " + std::to_string(group));
          return optionsAlist(groups[size_t(group)].options());
        },
        "The hyper-parameters of parameter group GROUP of OPT (default: the current optimizer, group 0) as an alist: "
        "(\"lr\" . 0.001) (\"betas\" 0.9 0.999) (\"momentum\" . 0.9) ... as schedulers leave them.");
  r.def("optimizer-parameters", "(opt)",
        [](Value opt) { return tensorsOf(opt, "optimizer-parameters"); },
        "The tensors OPT updates, group after group.");
  r.def("current-optimizer", "()", [](Interp& in) { return currentOptimizer(in); },
        "The optimizer that (optimizer-step) with no argument steps, or #f.");
  r.def("set-current-optimizer!", "(opt)",
        [](Interp& in, Value opt) {
          if (!opt.isFalse()) optimizerArg(opt, "set-current-optimizer!", 1);
          setCurrentOptimizer(in, opt);
        },
        "Makes OPT (or #f for none) the current optimizer. with-optimizer does this for a dynamic extent.");

  // ---- schedulers ----
  r.def("step-lr", "(opt step-size :key (gamma 0.1))",
        [](Value opt, int64_t stepSize, double gamma) {
          if (stepSize <= 0) throwError("value-error", "step-lr: step-size must be positive");
          auto s = std::make_shared<Scheduler>();
          s->kind = "step-lr";
          s->stepSize = stepSize;
          s->gamma = gamma;
          return makeScheduler(optimizerArg(opt, "step-lr", 1), s);
        },
        "A scheduler multiplying the learning rate by GAMMA every STEP-SIZE scheduler steps (torch.optim.lr_scheduler.StepLR).");
  r.def("exponential-lr", "(opt gamma)",
        [](Value opt, double gamma) {
          auto s = std::make_shared<Scheduler>();
          s->kind = "exponential-lr";
          s->gamma = gamma;
          return makeScheduler(optimizerArg(opt, "exponential-lr", 1), s);
        },
        "A scheduler multiplying the learning rate by GAMMA every scheduler step (ExponentialLR).");
  r.def("cosine-annealing-lr", "(opt t-max :key (eta-min 0.0))",
        [](Value opt, int64_t tMax, double etaMin) {
          if (tMax <= 0) throwError("value-error", "cosine-annealing-lr: t-max must be positive");
          auto s = std::make_shared<Scheduler>();
          s->kind = "cosine-annealing-lr";
          s->tMax = tMax;
          s->etaMin = etaMin;
          return makeScheduler(optimizerArg(opt, "cosine-annealing-lr", 1), s);
        },
        "A scheduler annealing the learning rate from its initial value to ETA-MIN along half a cosine over T-MAX steps "
        "(CosineAnnealingLR, closed form).");
  r.def("one-cycle-lr",
        "(opt max-lr total-steps :key (pct-start 0.3) (anneal-strategy \"cos\") (div-factor 25.0) (final-div-factor 1e4) "
        "(three-phase #f) (cycle-momentum #t) (base-momentum 0.85) (max-momentum 0.95))",
        [](Value opt, double maxLr, int64_t total, double pct, std::string anneal, double div, double finalDiv, bool three,
           bool cycle, double baseM, double maxM) {
          if (total <= 0) throwError("value-error", "one-cycle-lr: total-steps must be positive");
          if (anneal != "cos" && anneal != "linear") throwError("value-error", "one-cycle-lr: :anneal-strategy must be \"cos\" or \"linear\"");
          auto s = std::make_shared<Scheduler>();
          s->kind = "one-cycle-lr";
          s->maxLr = maxLr;
          s->totalSteps = total;
          s->pctStart = pct;
          s->cosAnneal = anneal == "cos";
          s->divFactor = div;
          s->finalDiv = finalDiv;
          s->threePhase = three;
          s->cycleMomentum = cycle;
          s->baseMomentum = baseM;
          s->maxMomentum = maxM;
          return makeScheduler(optimizerArg(opt, "one-cycle-lr", 1), s);
        },
        "The 1cycle policy (OneCycleLR): the learning rate rises from MAX-LR/div-factor to MAX-LR over pct-start of "
        "TOTAL-STEPS, then anneals to initial/final-div-factor; momentum (SGD, RMSprop) or beta1 (Adam, AdamW) cycles "
        "the other way unless :cycle-momentum #f. Step it once per batch.");
  r.def("linear-warmup", "(opt warmup-steps :key (start-factor 0.0) then)",
        [](Value opt, int64_t warmup, double start, Value then) {
          if (warmup <= 0) throwError("value-error", "linear-warmup: warmup-steps must be positive");
          auto s = std::make_shared<Scheduler>();
          s->kind = "linear-warmup";
          s->warmup = warmup;
          s->startFactor = start;
          if (!then.isMissing() && !then.isFalse()) {
            s->then = schedulerArg(then, "linear-warmup");
            if (s->then->opt != optimizerArg(opt, "linear-warmup", 1)->opt)
              throwError("value-error", "linear-warmup: the :then scheduler must drive the same optimizer");
          }
          return makeScheduler(optimizerArg(opt, "linear-warmup", 1), s);
        },
        "A scheduler raising the learning rate linearly from START-FACTOR times its initial value to the initial value "
        "over WARMUP-STEPS steps; afterwards it holds it, or hands over to the scheduler given as :then (made first, on "
        "the same optimizer), which then counts its own steps from 0.");
  r.def("scheduler-step!", "(s)",
        [](Value sv) {
          auto& s = schedulerArg(sv, "scheduler-step!");
          s->apply(s->step + 1);
          s->step++;
          return s->opt->param_groups().at(0).options().get_lr();
        },
        "Advances scheduler S by one step and sets its optimizer's learning rate; returns the new rate (first group).");
  r.def("scheduler-lr", "(s)",
        [](Value sv) { return schedulerArg(sv, "scheduler-lr")->opt->param_groups().at(0).options().get_lr(); },
        "The learning rate scheduler S has set (its optimizer's first group).");
  r.def("scheduler-step-count", "(s)", [](Value sv) { return schedulerArg(sv, "scheduler-step-count")->step; },
        "How many times scheduler S has been stepped (save it in checkpoints; restore with set-scheduler-step-count!).");
  r.def("set-scheduler-step-count!", "(s n)",
        [](Value sv, int64_t n) {
          auto& s = schedulerArg(sv, "set-scheduler-step-count!");
          if (n < 0) throwError("value-error", "set-scheduler-step-count!: the count must be non-negative");
          s->apply(n);
          s->step = n;
        },
        "Sets scheduler S's step count to N and its optimizer's learning rate to match (for resuming training).");
  r.def("scheduler?", "(x)",
        [](Value x) { return x.is(Kind::Foreign) && x.as<Foreign>()->typeName == intern("scheduler"); },
        "True when X is a learning-rate scheduler.");

  // ---- gradient clipping ----
  r.def("clip-grad-norm!", "(params max-norm :key (norm-type 2.0) (error-if-nonfinite #f))",
        [](Value params, double maxNorm, double normType, bool errorIfNonfinite) {
          std::vector<at::Tensor> ps = tensorsOf(params, "clip-grad-norm!");
          return torch::nn::utils::clip_grad_norm_(ps, maxNorm, normType, errorIfNonfinite);
        },
        "Scales the gradients of PARAMS (a module, an optimizer or tensors) so that their joint NORM-TYPE norm is at "
        "most MAX-NORM; returns the norm before clipping (torch.nn.utils.clip_grad_norm_).");
  r.def("clip-grad-value!", "(params clip-value)",
        [](Value params, double clip) {
          std::vector<at::Tensor> ps = tensorsOf(params, "clip-grad-value!");
          torch::nn::utils::clip_grad_value_(ps, clip);
        },
        "Clamps every gradient element of PARAMS (a module, an optimizer or tensors) to [-CLIP-VALUE, CLIP-VALUE].");
}

}  // namespace purple
