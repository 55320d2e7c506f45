// Optimizers LibTorch's C++ API lacks, written as torch::optim::Optimizer subclasses so that
// parameter groups, optimizer-step, zero-grad, schedulers, clipping and optimizer state work on
// them as on LibTorch's own: nadam, radam, adamax, adadelta (torch.optim.NAdam, RAdam, Adamax,
// Adadelta, single-tensor algorithms of PyTorch 1.13, with PyTorch 2's decoupled weight decay
// as an option).
//
// Per-parameter state is one class for all of them, a list of named tensors under PyTorch's
// state keys ("step", "exp_avg", ...), so the state reads and writes like PyTorch's. The step
// counter is a float32 scalar tensor, and NAdam's mu_product too, as in PyTorch: NAdam's update
// depends on mu_product's float32 rounding.
#include "builtins/nn/optim.hpp"
#include "interp/platform/torch_compat.hpp"
#include "builtins/nn/optim_state.hpp"
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include <c10/util/StringUtil.h>
#include <torch/serialize/archive.h>
#include <cmath>
#include <mutex>
#include <type_traits>

namespace purple {

namespace {

using torch::optim::Optimizer;
using torch::optim::OptimizerParamGroup;
using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

// ---- state: named tensors ------------------------------------------------------------------------

struct NamedTensorState : torch::optim::OptimizerCloneableParamState<NamedTensorState> {
  std::vector<std::pair<std::string, at::Tensor>> entries;   // PyTorch's keys, in PyTorch's order

  at::Tensor& operator[](const std::string& name) {
    for (auto& e : entries)
      if (e.first == name) return e.second;
    entries.emplace_back(name, at::Tensor());
    return entries.back().second;
  }
  void serialize(OutputArchive& archive) const override {
    for (auto& e : entries) archive.write(e.first, e.second, /*is_buffer=*/true);
  }
  void serialize(InputArchive& archive) override {
    entries.clear();
    for (auto& key : archive.keys()) {
      at::Tensor t;
      archive.read(key, t, /*is_buffer=*/true);
      entries.emplace_back(key, t);
    }
  }
};

// LibTorch 1.13 keys optimizer state by the parameter's TensorImpl address as a string; 2.x by
// the address itself.
using StateMap = std::decay_t<decltype(std::declval<Optimizer&>().state())>;
using StateKey = typename StateMap::key_type;
StateKey stateKey(const at::Tensor& p) { return compat::optimizerStateKey<StateKey>(p); }

// ---- options ---------------------------------------------------------------------------------------

// The fields every option class here has, serialized under PyTorch's names.
#define PURPLE_OPTIONS_BOILERPLATE(Name)                                                         \
  double get_lr() const override { return lr(); }                                                \
  void set_lr(const double v) override { lr(v); }

struct NAdamOptions : torch::optim::OptimizerCloneableOptions<NAdamOptions>, DescribedOptions {
  typedef std::tuple<double, double> betas_t;
  NAdamOptions(double lr = 2e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 2e-3;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(double, momentum_decay) = 4e-3;
  TORCH_ARG(bool, decoupled_weight_decay) = false;

 public:
  PURPLE_OPTIONS_BOILERPLATE(NAdam)
  std::tuple<double, double>* betasField() override { return &betas_; }
  void describe(std::vector<std::pair<const char*, Value>>& kv) const override {
    Value b[2] = {makeFlonum(std::get<0>(betas_)), makeFlonum(std::get<1>(betas_))};
    kv.emplace_back("betas", listFromArray(b, 2));
    kv.emplace_back("eps", makeFlonum(eps_));
    kv.emplace_back("weight-decay", makeFlonum(weight_decay_));
    kv.emplace_back("momentum-decay", makeFlonum(momentum_decay_));
    kv.emplace_back("decoupled-weight-decay", Value::boolean(decoupled_weight_decay_));
  }
  void serialize(OutputArchive& a) const override {
    a.write("lr", c10::IValue(lr_));
    a.write("betas", c10::IValue(betas_));
    a.write("eps", c10::IValue(eps_));
    a.write("weight_decay", c10::IValue(weight_decay_));
    a.write("momentum_decay", c10::IValue(momentum_decay_));
    a.write("decoupled_weight_decay", c10::IValue(decoupled_weight_decay_));
  }
  void serialize(InputArchive& a) override {
    c10::IValue v;
    if (a.try_read("lr", v)) lr_ = v.toDouble();
    if (a.try_read("betas", v)) betas_ = v.to<std::tuple<double, double>>();
    if (a.try_read("eps", v)) eps_ = v.toDouble();
    if (a.try_read("weight_decay", v)) weight_decay_ = v.toDouble();
    if (a.try_read("momentum_decay", v)) momentum_decay_ = v.toDouble();
    if (a.try_read("decoupled_weight_decay", v)) decoupled_weight_decay_ = v.toBool();
  }
};

struct RAdamOptions : torch::optim::OptimizerCloneableOptions<RAdamOptions>, DescribedOptions {
  typedef std::tuple<double, double> betas_t;
  RAdamOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-3;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(bool, decoupled_weight_decay) = false;

 public:
  PURPLE_OPTIONS_BOILERPLATE(RAdam)
  std::tuple<double, double>* betasField() override { return &betas_; }
  void describe(std::vector<std::pair<const char*, Value>>& kv) const override {
    Value b[2] = {makeFlonum(std::get<0>(betas_)), makeFlonum(std::get<1>(betas_))};
    kv.emplace_back("betas", listFromArray(b, 2));
    kv.emplace_back("eps", makeFlonum(eps_));
    kv.emplace_back("weight-decay", makeFlonum(weight_decay_));
    kv.emplace_back("decoupled-weight-decay", Value::boolean(decoupled_weight_decay_));
  }
  void serialize(OutputArchive& a) const override {
    a.write("lr", c10::IValue(lr_));
    a.write("betas", c10::IValue(betas_));
    a.write("eps", c10::IValue(eps_));
    a.write("weight_decay", c10::IValue(weight_decay_));
    a.write("decoupled_weight_decay", c10::IValue(decoupled_weight_decay_));
  }
  void serialize(InputArchive& a) override {
    c10::IValue v;
    if (a.try_read("lr", v)) lr_ = v.toDouble();
    if (a.try_read("betas", v)) betas_ = v.to<std::tuple<double, double>>();
    if (a.try_read("eps", v)) eps_ = v.toDouble();
    if (a.try_read("weight_decay", v)) weight_decay_ = v.toDouble();
    if (a.try_read("decoupled_weight_decay", v)) decoupled_weight_decay_ = v.toBool();
  }
};

struct AdamaxOptions : torch::optim::OptimizerCloneableOptions<AdamaxOptions>, DescribedOptions {
  typedef std::tuple<double, double> betas_t;
  AdamaxOptions(double lr = 2e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 2e-3;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(bool, maximize) = false;

 public:
  PURPLE_OPTIONS_BOILERPLATE(Adamax)
  std::tuple<double, double>* betasField() override { return &betas_; }
  void describe(std::vector<std::pair<const char*, Value>>& kv) const override {
    Value b[2] = {makeFlonum(std::get<0>(betas_)), makeFlonum(std::get<1>(betas_))};
    kv.emplace_back("betas", listFromArray(b, 2));
    kv.emplace_back("eps", makeFlonum(eps_));
    kv.emplace_back("weight-decay", makeFlonum(weight_decay_));
    kv.emplace_back("maximize", Value::boolean(maximize_));
  }
  void serialize(OutputArchive& a) const override {
    a.write("lr", c10::IValue(lr_));
    a.write("betas", c10::IValue(betas_));
    a.write("eps", c10::IValue(eps_));
    a.write("weight_decay", c10::IValue(weight_decay_));
    a.write("maximize", c10::IValue(maximize_));
  }
  void serialize(InputArchive& a) override {
    c10::IValue v;
    if (a.try_read("lr", v)) lr_ = v.toDouble();
    if (a.try_read("betas", v)) betas_ = v.to<std::tuple<double, double>>();
    if (a.try_read("eps", v)) eps_ = v.toDouble();
    if (a.try_read("weight_decay", v)) weight_decay_ = v.toDouble();
    if (a.try_read("maximize", v)) maximize_ = v.toBool();
  }
};

struct AdadeltaOptions : torch::optim::OptimizerCloneableOptions<AdadeltaOptions>, DescribedOptions {
  AdadeltaOptions(double lr = 1.0) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1.0;
  TORCH_ARG(double, rho) = 0.9;
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(bool, maximize) = false;

 public:
  PURPLE_OPTIONS_BOILERPLATE(Adadelta)
  void describe(std::vector<std::pair<const char*, Value>>& kv) const override {
    kv.emplace_back("rho", makeFlonum(rho_));
    kv.emplace_back("eps", makeFlonum(eps_));
    kv.emplace_back("weight-decay", makeFlonum(weight_decay_));
    kv.emplace_back("maximize", Value::boolean(maximize_));
  }
  void serialize(OutputArchive& a) const override {
    a.write("lr", c10::IValue(lr_));
    a.write("rho", c10::IValue(rho_));
    a.write("eps", c10::IValue(eps_));
    a.write("weight_decay", c10::IValue(weight_decay_));
    a.write("maximize", c10::IValue(maximize_));
  }
  void serialize(InputArchive& a) override {
    c10::IValue v;
    if (a.try_read("lr", v)) lr_ = v.toDouble();
    if (a.try_read("rho", v)) rho_ = v.toDouble();
    if (a.try_read("eps", v)) eps_ = v.toDouble();
    if (a.try_read("weight_decay", v)) weight_decay_ = v.toDouble();
    if (a.try_read("maximize", v)) maximize_ = v.toBool();
  }
};

// ---- the optimizers ----------------------------------------------------------------------------------

// The loop every optimizer here shares: for each parameter with a gradient, fetch or create its
// state and run UPDATE(param, grad, state, options) without recording gradients.
template <class Options, class Derived>
class PurpleOptimizer : public Optimizer {
 public:
  PurpleOptimizer(std::vector<OptimizerParamGroup> groups, const Options& defaults)
      : Optimizer(std::move(groups), std::make_unique<Options>(defaults)) {}

  at::Tensor step(LossClosure closure = nullptr) override {
    at::NoGradGuard noGrad;
    at::Tensor loss;
    if (closure) {
      at::AutoGradMode enable(true);
      loss = closure();
    }
    for (auto& group : param_groups_) {
      auto& o = static_cast<Options&>(group.options());
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        TORCH_CHECK(!p.grad().is_sparse(), Derived::kName, " does not support sparse gradients");
        auto it = state_.find(stateKey(p));
        if (it == state_.end()) {
          auto s = std::make_unique<NamedTensorState>();
          Derived::initState(*s, p);
          it = state_.emplace(stateKey(p), std::move(s)).first;
        }
        Derived::update(p, p.grad(), static_cast<NamedTensorState&>(*it->second), o);
      }
    }
    return loss;
  }
  void save(OutputArchive& archive) const override {
    torch::optim::serialize<NamedTensorState, Options>(archive, *this);
  }
  void load(InputArchive& archive) override { torch::optim::serialize<NamedTensorState, Options>(archive, *this); }
};

at::Tensor scalarState(double v) { return at::scalar_tensor(v, at::TensorOptions().dtype(at::kFloat)); }

// The step counter: a float32 tensor incremented in place, read back as a Python float.
double advanceStep(at::Tensor& step) {
  step.add_(1);
  return step.item<double>();
}

class NAdam : public PurpleOptimizer<NAdamOptions, NAdam> {
 public:
  using PurpleOptimizer::PurpleOptimizer;
  static constexpr const char* kName = "nadam";
  static void initState(NamedTensorState& s, const at::Tensor& p) {
    s["step"] = scalarState(0);
    s["mu_product"] = scalarState(1);
    s["exp_avg"] = at::zeros_like(p, at::MemoryFormat::Preserve);
    s["exp_avg_sq"] = at::zeros_like(p, at::MemoryFormat::Preserve);
  }
  static void update(at::Tensor& param, at::Tensor grad, NamedTensorState& s, const NAdamOptions& o) {
    double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas()), lr = o.lr();
    double step = advanceStep(s["step"]);
    double bc2 = 1 - std::pow(beta2, step);
    if (o.weight_decay() != 0) {
      if (o.decoupled_weight_decay()) param.mul_(1 - lr * o.weight_decay());
      else grad = grad.add(param, o.weight_decay());
    }
    double mu = beta1 * (1. - 0.5 * std::pow(0.96, step * o.momentum_decay()));
    double muNext = beta1 * (1. - 0.5 * std::pow(0.96, (step + 1) * o.momentum_decay()));
    at::Tensor& muProduct = s["mu_product"];
    muProduct.mul_(mu);
    // mu_product_next (torch_compat.hpp, 6.): a float32 product in 1.13, a double in 2.x.
    double muProductNext = compat::kNadamMuTwice ? (muProduct * mu * muNext).item<double>()
                                                 : muProduct.item<double>() * muNext;
    at::Tensor& expAvg = s["exp_avg"];
    at::Tensor& expAvgSq = s["exp_avg_sq"];
    expAvg.mul_(beta1).add_(grad, 1 - beta1);
    expAvgSq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
    at::Tensor denom = expAvgSq.div(bc2).sqrt().add_(o.eps());
    param.addcdiv_(grad, denom, -lr * (1. - mu) / (1. - muProduct.item<double>()));
    param.addcdiv_(expAvg, denom, -lr * muNext / (1. - muProductNext));
  }
};

class RAdam : public PurpleOptimizer<RAdamOptions, RAdam> {
 public:
  using PurpleOptimizer::PurpleOptimizer;
  static constexpr const char* kName = "radam";
  static void initState(NamedTensorState& s, const at::Tensor& p) {
    s["step"] = scalarState(0);
    s["exp_avg"] = at::zeros_like(p, at::MemoryFormat::Preserve);
    s["exp_avg_sq"] = at::zeros_like(p, at::MemoryFormat::Preserve);
  }
  static void update(at::Tensor& param, at::Tensor grad, NamedTensorState& s, const RAdamOptions& o) {
    double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas()), lr = o.lr();
    double step = advanceStep(s["step"]);
    double bc1 = 1 - std::pow(beta1, step), bc2 = 1 - std::pow(beta2, step);
    if (o.weight_decay() != 0) {
      if (o.decoupled_weight_decay()) param.mul_(1 - lr * o.weight_decay());
      else grad = grad.add(param, o.weight_decay());
    }
    at::Tensor& expAvg = s["exp_avg"];
    at::Tensor& expAvgSq = s["exp_avg_sq"];
    expAvg.mul_(beta1).add_(grad, 1 - beta1);
    expAvgSq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
    at::Tensor corrected = expAvg / bc1;
    double rhoInf = 2 / (1 - beta2) - 1;
    double rhoT = rhoInf - 2 * step * std::pow(beta2, step) / bc2;
    if (rhoT > 5.) {
      double rect = std::sqrt((rhoT - 4) * (rhoT - 2) * rhoInf / ((rhoInf - 4) * (rhoInf - 2) * rhoT));
      // Python's scalar / tensor is reciprocal() * scalar: the same rounding here.
      at::Tensor adaptive = expAvgSq.sqrt().add_(o.eps()).reciprocal() * std::sqrt(bc2);
      param.add_(corrected * lr * adaptive * rect, -1.0);
    } else {
      param.add_(corrected * lr, -1.0);
    }
  }
};

class Adamax : public PurpleOptimizer<AdamaxOptions, Adamax> {
 public:
  using PurpleOptimizer::PurpleOptimizer;
  static constexpr const char* kName = "adamax";
  static void initState(NamedTensorState& s, const at::Tensor& p) {
    s["step"] = scalarState(0);
    s["exp_avg"] = at::zeros_like(p, at::MemoryFormat::Preserve);
    s["exp_inf"] = at::zeros_like(p, at::MemoryFormat::Preserve);
  }
  static void update(at::Tensor& param, at::Tensor grad, NamedTensorState& s, const AdamaxOptions& o) {
    double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    if (o.maximize()) grad = -grad;
    double step = advanceStep(s["step"]);
    if (o.weight_decay() != 0) grad = grad.add(param, o.weight_decay());
    at::Tensor& expAvg = s["exp_avg"];
    at::Tensor& expInf = s["exp_inf"];
    expAvg.mul_(beta1).add_(grad, 1 - beta1);
    at::Tensor norms = at::cat({expInf.mul_(beta2).unsqueeze(0), grad.abs().add_(o.eps()).unsqueeze_(0)}, 0);
    at::amax_out(expInf, norms, {0}, false);
    double clr = o.lr() / (1 - std::pow(beta1, step));
    param.addcdiv_(expAvg, expInf, -clr);
  }
};

class Adadelta : public PurpleOptimizer<AdadeltaOptions, Adadelta> {
 public:
  using PurpleOptimizer::PurpleOptimizer;
  static constexpr const char* kName = "adadelta";
  static void initState(NamedTensorState& s, const at::Tensor& p) {
    s["step"] = scalarState(0);
    s["square_avg"] = at::zeros_like(p, at::MemoryFormat::Preserve);
    s["acc_delta"] = at::zeros_like(p, at::MemoryFormat::Preserve);
  }
  static void update(at::Tensor& param, at::Tensor grad, NamedTensorState& s, const AdadeltaOptions& o) {
    if (o.maximize()) grad = -grad;
    advanceStep(s["step"]);
    if (o.weight_decay() != 0) grad = grad.add(param, o.weight_decay());
    double rho = o.rho();
    at::Tensor& squareAvg = s["square_avg"];
    at::Tensor& accDelta = s["acc_delta"];
    squareAvg.mul_(rho).addcmul_(grad, grad, 1 - rho);
    at::Tensor std = squareAvg.add(o.eps()).sqrt_();
    at::Tensor delta = accDelta.add(o.eps()).sqrt_().div_(std).mul_(grad);
    accDelta.mul_(rho).addcmul_(delta, delta, 1 - rho);
    param.add_(delta, -o.lr());
  }
};

void checkBetas(const std::tuple<double, double>& b, const char* who) {
  if (!(std::get<0>(b) >= 0 && std::get<0>(b) < 1)) throwError("value-error", std::string(who) + ": beta1 must be in [0, 1)");
  if (!(std::get<1>(b) >= 0 && std::get<1>(b) < 1)) throwError("value-error", std::string(who) + ": beta2 must be in [0, 1)");
}

void checkNonNegative(double x, const char* who, const char* what) {
  if (!(x >= 0)) throwError("value-error", std::string(who) + ": " + what + " must be non-negative");
}


// ---- state dicts in Python's layout (optim_state.hpp) ---------------------------------------

// One entry of NamedTensorState under Python's key. Counters ("step", NAdam's "mu_product") stay
// float32 scalars whatever the parameter's dtype; Adadelta's step is a Python int in 1.13's state
// dict. Other buffers follow their parameter's dtype and device, as Python's load_state_dict does.
enum class Entry { Buffer, FloatCounter, IntCounter };

StateField namedEntry(std::string name, Entry kind) {
  return {name,
          [name, kind](const OptimizerParamState& s) -> Value {
            for (auto& e : static_cast<const NamedTensorState&>(s).entries)
              if (e.first == name && e.second.defined())
                return kind == Entry::IntCounter ? fieldToValue(int64_t(e.second.item<double>())) : fieldToValue(e.second);
            return Value::missing();
          },
          [name, kind](OptimizerParamState& s, Value v, const at::Tensor& param, const std::string& who) {
            at::Tensor& t = static_cast<NamedTensorState&>(s)[name];
            if (kind == Entry::Buffer) {
              fieldFromValue(v, t, FieldContext{who, name, &param});
              return;
            }
            double d;
            fieldFromValue(v, d, FieldContext{who, name, nullptr});
            t = scalarState(d);
          }};
}

template <class Options, class Ref>
GroupField opt(const char* name, Ref ref) { return option<Options>(name, ref); }
#define PURPLE_OPT(Options, key, member) opt<Options>(key, [](auto& o) -> auto& { return o.member(); })

// Python's keys in its order, for the Python of this LibTorch (torch_compat.hpp, 7.).
void registerStateLayouts() {
  auto makeState = [] { return std::make_unique<NamedTensorState>(); };
  constexpr bool v2 = compat::kPythonOptimState2;
  using Keys = std::initializer_list<const char*>;
  // Python 1.13 has no decoupled_weight_decay; PyTorch 2 writes it, and 1.13 ignores the key.
  std::vector<GroupField> nadam{PURPLE_OPT(NAdamOptions, "lr", lr), PURPLE_OPT(NAdamOptions, "betas", betas),
                                PURPLE_OPT(NAdamOptions, "eps", eps), PURPLE_OPT(NAdamOptions, "weight_decay", weight_decay),
                                PURPLE_OPT(NAdamOptions, "momentum_decay", momentum_decay)};
  if (v2) {
    nadam.push_back(PURPLE_OPT(NAdamOptions, "decoupled_weight_decay", decoupled_weight_decay));
    nadam = withFlags(std::move(nadam), {"maximize", "foreach", "capturable", "differentiable"});
  } else {
    nadam = withFlags(std::move(nadam), {"foreach"});
    nadam.push_back(PURPLE_OPT(NAdamOptions, "decoupled_weight_decay", decoupled_weight_decay));
  }
  registerOptimizerLayout({"nadam", std::move(nadam),
                           {namedEntry("step", Entry::FloatCounter), namedEntry("mu_product", Entry::FloatCounter),
                            namedEntry("exp_avg", Entry::Buffer), namedEntry("exp_avg_sq", Entry::Buffer)},
                           makeState});
  std::vector<GroupField> radam{PURPLE_OPT(RAdamOptions, "lr", lr), PURPLE_OPT(RAdamOptions, "betas", betas),
                                PURPLE_OPT(RAdamOptions, "eps", eps), PURPLE_OPT(RAdamOptions, "weight_decay", weight_decay)};
  radam = withFlags(std::move(radam), v2 ? Keys{"maximize", "foreach", "capturable"} : Keys{"foreach"});
  radam.push_back(PURPLE_OPT(RAdamOptions, "decoupled_weight_decay", decoupled_weight_decay));
  if (v2) radam = withFlags(std::move(radam), {"differentiable"});
  registerOptimizerLayout({"radam", std::move(radam),
                           {namedEntry("step", Entry::FloatCounter), namedEntry("exp_avg", Entry::Buffer),
                            namedEntry("exp_avg_sq", Entry::Buffer)},
                           makeState});
  std::vector<GroupField> adamax{PURPLE_OPT(AdamaxOptions, "lr", lr), PURPLE_OPT(AdamaxOptions, "betas", betas),
                                 PURPLE_OPT(AdamaxOptions, "eps", eps), PURPLE_OPT(AdamaxOptions, "weight_decay", weight_decay)};
  adamax = withFlags(std::move(adamax), {"foreach"});
  adamax.push_back(PURPLE_OPT(AdamaxOptions, "maximize", maximize));
  if (v2) adamax = withFlags(std::move(adamax), {"differentiable", "capturable"});
  registerOptimizerLayout({"adamax", std::move(adamax),
                           {namedEntry("step", Entry::FloatCounter), namedEntry("exp_avg", Entry::Buffer),
                            namedEntry("exp_inf", Entry::Buffer)},
                           makeState});
  std::vector<GroupField> adadelta{PURPLE_OPT(AdadeltaOptions, "lr", lr), PURPLE_OPT(AdadeltaOptions, "rho", rho),
                                   PURPLE_OPT(AdadeltaOptions, "eps", eps), PURPLE_OPT(AdadeltaOptions, "weight_decay", weight_decay),
                                   PURPLE_OPT(AdadeltaOptions, "maximize", maximize)};
  adadelta = withFlags(std::move(adadelta), v2 ? Keys{"capturable", "foreach", "differentiable"} : Keys{"foreach"});
  // Adadelta's step: a Python int in 1.13, a float32 tensor in 2.x.
  registerOptimizerLayout({"adadelta", std::move(adadelta),
                           {namedEntry("step", v2 ? Entry::FloatCounter : Entry::IntCounter),
                            namedEntry("square_avg", Entry::Buffer), namedEntry("acc_delta", Entry::Buffer)},
                           makeState});
}
#undef PURPLE_OPT

}  // namespace

void registerOptimizers(Registry& r) {
  // Once per process: every interpreter registered them again, and interpreters made on several
  // threads at once wrote the shared table together (heap corruption in
  // hardening/interpreter-churn, about one run in 60 with other tests beside it).
  static std::once_flag layoutsRegistered;
  std::call_once(layoutsRegistered, registerStateLayouts);
  r.def("nadam",
        "(params :key (lr 2e-3) (betas '(0.9 0.999)) (eps 1e-8) (weight-decay 0.0) (momentum-decay 4e-3) "
        "(decoupled-weight-decay #f) (auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, Value betas, double eps, double wd, double md, bool decoupled, bool autoZero) {
          NAdamOptions o(lr);
          o.betas(betasArg(betas, "nadam")).eps(eps).weight_decay(wd).momentum_decay(md).decoupled_weight_decay(decoupled);
          checkBetas(o.betas(), "nadam");
          checkNonNegative(lr, "nadam", ":lr"), checkNonNegative(eps, "nadam", ":eps");
          checkNonNegative(wd, "nadam", ":weight-decay"), checkNonNegative(md, "nadam", ":momentum-decay");
          return makeOptimizer<NAdam>(in, params, o, "nadam", autoZero);
        },
        "NAdam, Adam with Nesterov momentum (torch.optim.NAdam) over PARAMS (a module, tensors, or parameter groups). "
        ":decoupled-weight-decay #t decays the weights as AdamW does (PyTorch 2's option). It becomes the current "
        "optimizer.");
  r.def("radam",
        "(params :key (lr 1e-3) (betas '(0.9 0.999)) (eps 1e-8) (weight-decay 0.0) (decoupled-weight-decay #f) "
        "(auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, Value betas, double eps, double wd, bool decoupled, bool autoZero) {
          RAdamOptions o(lr);
          o.betas(betasArg(betas, "radam")).eps(eps).weight_decay(wd).decoupled_weight_decay(decoupled);
          checkBetas(o.betas(), "radam");
          checkNonNegative(lr, "radam", ":lr"), checkNonNegative(eps, "radam", ":eps");
          checkNonNegative(wd, "radam", ":weight-decay");
          return makeOptimizer<RAdam>(in, params, o, "radam", autoZero);
        },
        "RAdam, Adam with a rectified adaptive learning rate (torch.optim.RAdam) over PARAMS. :decoupled-weight-decay "
        "#t decays the weights as AdamW does. It becomes the current optimizer.");
  r.def("adamax",
        "(params :key (lr 2e-3) (betas '(0.9 0.999)) (eps 1e-8) (weight-decay 0.0) (maximize #f) (auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, Value betas, double eps, double wd, bool maximize, bool autoZero) {
          AdamaxOptions o(lr);
          o.betas(betasArg(betas, "adamax")).eps(eps).weight_decay(wd).maximize(maximize);
          checkBetas(o.betas(), "adamax");
          checkNonNegative(lr, "adamax", ":lr"), checkNonNegative(eps, "adamax", ":eps");
          checkNonNegative(wd, "adamax", ":weight-decay");
          return makeOptimizer<Adamax>(in, params, o, "adamax", autoZero);
        },
        "Adamax, Adam with the infinity norm (torch.optim.Adamax) over PARAMS. :maximize #t ascends. It becomes the "
        "current optimizer.");
  r.def("adadelta",
        "(params :key (lr 1.0) (rho 0.9) (eps 1e-6) (weight-decay 0.0) (maximize #f) (auto-zero-grad #t))",
        [](Interp& in, Value params, double lr, double rho, double eps, double wd, bool maximize, bool autoZero) {
          AdadeltaOptions o(lr);
          o.rho(rho).eps(eps).weight_decay(wd).maximize(maximize);
          if (!(rho >= 0 && rho <= 1)) throwError("value-error", "adadelta: :rho must be in [0, 1]");
          checkNonNegative(lr, "adadelta", ":lr"), checkNonNegative(eps, "adadelta", ":eps");
          checkNonNegative(wd, "adadelta", ":weight-decay");
          return makeOptimizer<Adadelta>(in, params, o, "adadelta", autoZero);
        },
        "Adadelta (torch.optim.Adadelta) over PARAMS. :maximize #t ascends. It becomes the current optimizer.");
}

}  // namespace purple
