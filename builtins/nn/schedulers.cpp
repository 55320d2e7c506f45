// Learning-rate schedulers (torch.optim.lr_scheduler), computed the way PyTorch computes them.
//
// Each scheduler follows _LRScheduler: it keeps base-lrs (each group's initial learning rate,
// shared by all schedulers of an optimizer, like PyTorch's `initial_lr`), last-epoch and a step
// count; making one performs the initial step (last-epoch 0). scheduler-step! increments
// last-epoch and sets every group's learning rate from the *chainable* form, which reads the
// group's current rate, so schedulers compose (chained-scheduler) exactly as in PyTorch.
// set-scheduler-step-count! jumps with the closed form where PyTorch has one.
//
// State dicts are hash tables with PyTorch's keys, in PyTorch's order (the scheduler's own
// fields, then base_lrs, last_epoch, verbose, _step_count, _get_lr_called_within_step,
// _last_lr), numbers as numbers and lists as lists, so that torch.save/torch.load move them to
// and from Python unchanged. Procedures (lambda-lr, a custom :scale-fn) are stored as None
// (the unspecified value), as PyTorch stores plain functions.
#include "builtins/nn/optim.hpp"
#include "interp/torch_compat.hpp"
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/tensor/util.hpp"
#include "interp/numbers.hpp"
#include "interp/printer.hpp"
#include "interp/tensor_value.hpp"
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace purple {

namespace {

const double kPi = 3.14159265358979323846;

// ---- state-dict plumbing ---------------------------------------------------------------------------

Value str(const char* s) { return makeString(s); }

Value doubles(const std::vector<double>& xs) {
  Value r = Value::nil();
  for (size_t k = xs.size(); k-- > 0;) r = cons(makeFlonum(xs[k]), r);
  return r;
}

struct DictWriter {
  Interp& in;
  Value table = makeHashTable(HashEquiv::Equal);
  void put(const char* key, Value v) { hashTablePut(in, table, str(key), v); }
  void num(const char* key, double v) { put(key, makeFlonum(v)); }
  void integer(const char* key, int64_t v) { put(key, makeInteger(v)); }
  void flag(const char* key, bool v) { put(key, Value::boolean(v)); }
  void list(const char* key, const std::vector<double>& v) { put(key, doubles(v)); }
  void text(const char* key, const std::string& v) { put(key, makeString(v)); }
};

// Reads a state dict: a hash table, or an alist with string keys.
struct DictReader {
  Interp& in;
  Value dict;
  std::string who;
  Value get(const char* key) const {
    Value v = Value::missing();
    if (isHashTable(dict)) v = hashTableGet(in, dict, str(key));
    else
      for (Value p = dict; isPair(p); p = cdr(p))
        if (isPair(car(p)) && isString(car(car(p))) && stringView(car(car(p))) == key) {
          v = cdr(car(p));
          break;
        }
    if (v.isMissing()) throwError("value-error", who + ": the state dict has no \"" + key + "\" entry");
    return v;
  }
  bool has(const char* key) const {
    if (isHashTable(dict)) return !hashTableGet(in, dict, str(key)).isMissing();
    for (Value p = dict; isPair(p); p = cdr(p))
      if (isPair(car(p)) && isString(car(car(p))) && stringView(car(car(p))) == key) return true;
    return false;
  }
  double num(const char* key) const {
    Value v = get(key);
    if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).numel() == 1) return tensorOf(v).item<double>();
    if (!isRealNumber(v)) throwError("value-error", who + ": \"" + key + "\" in the state dict is not a number: " + toWriteString(v));
    return toDouble(v);
  }
  int64_t integer(const char* key) const {
    double d = num(key);
    if (d != std::floor(d)) throwError("value-error", who + ": \"" + key + "\" in the state dict is not an integer");
    return int64_t(d);
  }
  bool flag(const char* key) const { return get(key).isTrue(); }
  std::vector<double> list(const char* key) const {
    Value v = get(key);
    std::vector<double> out;
    if (v.is(Kind::Vector)) v = listFromArray(v.as<Vector>()->items, v.as<Vector>()->extra);
    if (!isList(v)) throwError("value-error", who + ": \"" + key + "\" in the state dict is not a list");
    for (Value p = v; isPair(p); p = cdr(p)) {
      if (!isRealNumber(car(p))) throwError("value-error", who + ": \"" + key + "\" in the state dict holds a non-number");
      out.push_back(toDouble(car(p)));
    }
    return out;
  }
  std::string text(const char* key) const {
    Value v = get(key);
    if (isString(v)) return std::string(stringView(v));
    if (isSymbol(v)) return std::string(symbolName(v));
    throwError("value-error", who + ": \"" + key + "\" in the state dict is not a string");
  }
};

// A number, or a list with one number per parameter group (PyTorch's _format_param).
std::vector<double> perGroup(Value v, size_t groups, const char* who, const char* name) {
  std::vector<double> out;
  if (isRealNumber(v)) return std::vector<double>(groups, toDouble(v));
  if (v.is(Kind::Vector)) v = listFromArray(v.as<Vector>()->items, v.as<Vector>()->extra);
  if (!isList(v)) throwError("type-error", std::string(who) + ": " + name + " must be a number or a list of numbers, got " + toWriteString(v));
  for (Value p = v; isPair(p); p = cdr(p)) out.push_back(toDoubleValue(car(p), who));
  if (out.size() != groups)
    throwError("value-error", std::string(who) + ": expected " + std::to_string(groups) + " values for " + name + ", got " +
                                  std::to_string(out.size()));
  return out;
}

std::string optionName(std::string s) {
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

double callNumber(Interp& in, Value proc, Value arg, const std::string& who) {
  Value r = in.apply(proc, &arg, 1);
  if (isTensor(r) && tensorOf(r).defined() && tensorOf(r).numel() == 1) return tensorOf(r).item<double>();
  if (!isRealNumber(r)) throwError("type-error", who + ": the procedure must return a real number, got " + toWriteString(r));
  return toDouble(r);
}

// ---- the scheduler base ------------------------------------------------------------------------------

struct Scheduler {
  OptPtr opt;
  std::string kind;
  std::vector<double> baseLrs;
  std::vector<double> lastLr;
  int64_t lastEpoch = -1;
  int64_t stepCount = 0;
  bool hasLastLr = true;

  virtual ~Scheduler() = default;

  size_t groups() const { return opt->param_groups().size(); }
  double lr(size_t g) const { return opt->param_groups()[g].options().get_lr(); }
  std::vector<double> currentLrs() const {
    std::vector<double> out;
    for (size_t g = 0; g < groups(); g++) out.push_back(lr(g));
    return out;
  }
  void setLrs(const std::vector<double>& v) {
    auto& gs = opt->param_groups();
    for (size_t g = 0; g < gs.size() && g < v.size(); g++) gs[g].options().set_lr(v[g]);
    lastLr = currentLrs();
  }

  // The chainable form, called after last-epoch has been incremented.
  virtual std::vector<double> getLr(Interp& in) = 0;
  // The closed form at last-epoch, when there is one.
  virtual bool closedForm(Interp& in, std::vector<double>& out) { return false; }
  virtual bool needsMetric() const { return false; }

  // _LRScheduler.step()
  virtual void step(Interp& in, std::optional<double> metric) {
    stepCount++;
    lastEpoch++;
    setLrs(getLr(in));
  }
  // set-scheduler-step-count!: jump to last-epoch N.
  virtual void jumpTo(Interp& in, int64_t n) {
    lastEpoch = n;
    std::vector<double> v;
    if (!closedForm(in, v))
      throwError("value-error", "set-scheduler-step-count!: " + kind + " has no closed form; restore it with load-scheduler-state-dict!");
    setLrs(v);
  }

  // The scheduler's own state-dict fields (PyTorch's names), written before the common ones.
  virtual void saveFields(DictWriter& d) const {}
  virtual void loadFields(const DictReader& d) {}

  virtual Value stateDict(Interp& in) const {
    DictWriter d{in};
    saveFields(d);
    d.list("base_lrs", baseLrs);
    d.integer("last_epoch", lastEpoch);
    d.flag("verbose", false);
    d.integer("_step_count", stepCount);
    d.flag("_get_lr_called_within_step", false);
    d.list("_last_lr", lastLr);
    saveTrailingFields(d);
    return d.table;
  }
  virtual void saveTrailingFields(DictWriter& d) const {}
  virtual void loadStateDict(Interp& in, Value dict, const std::string& who) {
    DictReader d{in, dict, who};
    loadFields(d);
    baseLrs = d.list("base_lrs");
    lastEpoch = d.integer("last_epoch");
    stepCount = d.integer("_step_count");
    if (d.has("_last_lr")) {
      lastLr = d.list("_last_lr");
      // The optimizer's rates come from its own state dict in PyTorch; restoring the rates the
      // scheduler last set keeps a run resumed from the scheduler alone consistent too.
      setLrs(lastLr);
    }
  }

  // Makes the first step (last-epoch 0), as _LRScheduler.__init__ does.
  void initialStep(Interp& in) {
    stepCount = 0;
    step(in, std::nullopt);
  }
};

void initBase(Scheduler& s, OptimizerObj* o, const char* kind) {
  s.opt = o->opt;
  s.kind = kind;
  if (!o->initialLrs) o->initialLrs = std::make_shared<std::vector<double>>();
  auto& groups = o->opt->param_groups();
  while (o->initialLrs->size() < groups.size()) o->initialLrs->push_back(groups[o->initialLrs->size()].options().get_lr());
  s.baseLrs.assign(o->initialLrs->begin(), o->initialLrs->begin() + long(groups.size()));
}

// ---- the schedulers ------------------------------------------------------------------------------------

struct StepLR : Scheduler {
  int64_t stepSize = 1;
  double gamma = 0.1;
  std::vector<double> getLr(Interp&) override {
    if (lastEpoch == 0 || lastEpoch % stepSize != 0) return currentLrs();
    auto v = currentLrs();
    for (auto& x : v) x *= gamma;
    return v;
  }
  bool closedForm(Interp&, std::vector<double>& out) override {
    for (double b : baseLrs) out.push_back(b * std::pow(gamma, double(lastEpoch / stepSize)));
    return true;
  }
  void saveFields(DictWriter& d) const override { d.integer("step_size", stepSize), d.num("gamma", gamma); }
  void loadFields(const DictReader& d) override { stepSize = d.integer("step_size"), gamma = d.num("gamma"); }
};

struct MultiStepLR : Scheduler {
  std::map<int64_t, int64_t> milestones;   // epoch -> count (PyTorch's Counter)
  std::vector<int64_t> milestoneOrder;     // first-seen order, for the state dict
  double gamma = 0.1;
  std::vector<double> getLr(Interp&) override {
    auto it = milestones.find(lastEpoch);
    auto v = currentLrs();
    if (it == milestones.end()) return v;
    for (auto& x : v) x *= std::pow(gamma, double(it->second));
    return v;
  }
  bool closedForm(Interp&, std::vector<double>& out) override {
    int64_t passed = 0;
    for (auto& [m, c] : milestones)
      if (m <= lastEpoch) passed += c;
    for (double b : baseLrs) out.push_back(b * std::pow(gamma, double(passed)));
    return true;
  }
  void saveFields(DictWriter& d) const override {
    Value counter = makeHashTable(HashEquiv::Equal);
    // Counter's repr orders by count, but its dict order is first insertion: keep that.
    for (int64_t m : milestoneOrder) hashTablePut(d.in, counter, makeInteger(m), makeInteger(milestones.at(m)));
    d.put("milestones", counter);
    d.num("gamma", gamma);
  }
  void loadFields(const DictReader& d) override {
    Value c = d.get("milestones");
    milestones.clear();
    milestoneOrder.clear();
    auto add = [&](Value k, Value n) {
      if (!isExactInteger(k) || !isExactInteger(n)) throwError("value-error", d.who + ": bad milestones in the state dict");
      int64_t m = k.fixnum();
      if (!milestones.count(m)) milestoneOrder.push_back(m);
      milestones[m] += n.fixnum();
    };
    if (isHashTable(c)) {
      auto* h = c.as<HashTable>();
      for (uint32_t i = 0; i < h->entryUsed; i++)
        if (!h->entries[2 * i].isUnbound()) add(h->entries[2 * i], h->entries[2 * i + 1]);
    } else if (isList(c)) {
      for (Value p = c; isPair(p); p = cdr(p))
        if (isPair(car(p))) add(car(car(p)), cdr(car(p)));
        else add(car(p), Value::fixnum(1));
    }
    gamma = d.num("gamma");
  }
};

struct ExponentialLR : Scheduler {
  double gamma = 0.9;
  std::vector<double> getLr(Interp&) override {
    auto v = currentLrs();
    if (lastEpoch == 0) return v;
    for (auto& x : v) x *= gamma;
    return v;
  }
  bool closedForm(Interp&, std::vector<double>& out) override {
    for (double b : baseLrs) out.push_back(b * std::pow(gamma, double(lastEpoch)));
    return true;
  }
  void saveFields(DictWriter& d) const override { d.num("gamma", gamma); }
  void loadFields(const DictReader& d) override { gamma = d.num("gamma"); }
};

struct CosineAnnealingLR : Scheduler {
  int64_t tMax = 1;
  double etaMin = 0;
  std::vector<double> getLr(Interp&) override {
    auto v = currentLrs();
    if (lastEpoch == 0) return v;
    double T = double(tMax), t = double(lastEpoch);
    for (size_t g = 0; g < v.size(); g++) {
      if (stepCount == 1 && lastEpoch > 0)
        v[g] = etaMin + (baseLrs[g] - etaMin) * (1 + std::cos(t * kPi / T)) / 2;
      else if ((lastEpoch - 1 - tMax) % (2 * tMax) == 0)
        v[g] = v[g] + (baseLrs[g] - etaMin) * (1 - std::cos(kPi / T)) / 2;
      else
        v[g] = (1 + std::cos(kPi * t / T)) / (1 + std::cos(kPi * (t - 1) / T)) * (v[g] - etaMin) + etaMin;
    }
    return v;
  }
  bool closedForm(Interp&, std::vector<double>& out) override {
    for (double b : baseLrs) out.push_back(etaMin + (b - etaMin) * (1 + std::cos(kPi * double(lastEpoch) / double(tMax))) / 2);
    return true;
  }
  void saveFields(DictWriter& d) const override { d.integer("T_max", tMax), d.num("eta_min", etaMin); }
  void loadFields(const DictReader& d) override { tMax = d.integer("T_max"), etaMin = d.num("eta_min"); }
};

struct LinearLR : Scheduler {
  double startFactor = 1.0 / 3, endFactor = 1.0;
  int64_t totalIters = 5;
  std::vector<double> getLr(Interp&) override {
    auto v = currentLrs();
    if (lastEpoch == 0) {
      for (auto& x : v) x *= startFactor;
      return v;
    }
    if (lastEpoch > totalIters) return v;
    double f = 1. + (endFactor - startFactor) /
                        (double(totalIters) * startFactor + double(lastEpoch - 1) * (endFactor - startFactor));
    for (auto& x : v) x *= f;
    return v;
  }
  bool closedForm(Interp&, std::vector<double>& out) override {
    for (double b : baseLrs)
      out.push_back(b * (startFactor + (endFactor - startFactor) * double(std::min(totalIters, lastEpoch)) / double(totalIters)));
    return true;
  }
  void saveFields(DictWriter& d) const override {
    d.num("start_factor", startFactor), d.num("end_factor", endFactor), d.integer("total_iters", totalIters);
  }
  void loadFields(const DictReader& d) override {
    startFactor = d.num("start_factor"), endFactor = d.num("end_factor"), totalIters = d.integer("total_iters");
  }
};

struct ConstantLR : Scheduler {
  double factor = 1.0 / 3;
  int64_t totalIters = 5;
  std::vector<double> getLr(Interp&) override {
    auto v = currentLrs();
    if (lastEpoch == 0)
      for (auto& x : v) x *= factor;
    else if (lastEpoch == totalIters)
      for (auto& x : v) x *= 1.0 / factor;
    return v;
  }
  bool closedForm(Interp&, std::vector<double>& out) override {
    for (double b : baseLrs) out.push_back(b * (factor + double(lastEpoch >= totalIters) * (1 - factor)));
    return true;
  }
  void saveFields(DictWriter& d) const override { d.num("factor", factor), d.integer("total_iters", totalIters); }
  void loadFields(const DictReader& d) override { factor = d.num("factor"), totalIters = d.integer("total_iters"); }
};

struct PolynomialLR : Scheduler {
  int64_t totalIters = 5;
  double power = 1.0;
  std::vector<double> getLr(Interp&) override {
    auto v = currentLrs();
    if (lastEpoch == 0 || lastEpoch > totalIters) return v;
    double f = std::pow((1.0 - double(lastEpoch) / double(totalIters)) / (1.0 - double(lastEpoch - 1) / double(totalIters)), power);
    for (auto& x : v) x *= f;
    return v;
  }
  bool closedForm(Interp&, std::vector<double>& out) override {
    for (double b : baseLrs)
      out.push_back(b * std::pow(1.0 - double(std::min(totalIters, lastEpoch)) / double(totalIters), power));
    return true;
  }
  void saveFields(DictWriter& d) const override { d.integer("total_iters", totalIters), d.num("power", power); }
  void loadFields(const DictReader& d) override { totalIters = d.integer("total_iters"), power = d.num("power"); }
};

// LambdaLR and MultiplicativeLR: a Purple procedure per group gives the factor.
struct LambdaLR : Scheduler {
  std::vector<Root> lambdas;
  bool multiplicative = false;
  std::vector<double> getLr(Interp& in) override {
    std::vector<double> v;
    Value e = makeInteger(lastEpoch);
    if (multiplicative) {
      v = currentLrs();
      if (lastEpoch > 0)
        for (size_t g = 0; g < v.size(); g++) v[g] *= callNumber(in, lambdas[g].get(), e, kind);
      return v;
    }
    for (size_t g = 0; g < baseLrs.size(); g++) v.push_back(baseLrs[g] * callNumber(in, lambdas[g].get(), e, kind));
    return v;
  }
  bool closedForm(Interp& in, std::vector<double>& out) override {
    if (multiplicative) return false;
    out = getLr(in);
    return true;
  }
  void saveTrailingFields(DictWriter& d) const override {
    Value nones = Value::nil();
    for (size_t k = 0; k < lambdas.size(); k++) nones = cons(Value::unspecified(), nones);
    d.put("lr_lambdas", nones);
  }
};

struct CyclicLR : Scheduler {
  std::vector<double> maxLrs, baseMomentums, maxMomentums;
  double totalSize = 4000, stepRatio = 0.5, gamma = 1.0;
  std::string mode = "triangular", scaleMode = "cycle";
  Root scaleFn;   // custom, or unset
  bool cycleMomentum = true, useBeta1 = false;

  double scale(Interp& in, double x) {
    if (scaleFn) return callNumber(in, scaleFn.get(), makeFlonum(x), kind);
    if (mode == "triangular") return 1.0;
    if (mode == "triangular2") return 1.0 / std::pow(2.0, x - 1);
    return std::pow(gamma, x);   // exp_range
  }
  std::vector<double> getLr(Interp& in) override {
    double cycle = std::floor(1 + double(lastEpoch) / totalSize);
    double x = 1. + double(lastEpoch) / totalSize - cycle;
    double f = x <= stepRatio ? x / stepRatio : (x - 1) / (stepRatio - 1);
    double arg = scaleMode == "cycle" ? cycle : double(lastEpoch);
    double s = scale(in, arg);
    std::vector<double> v;
    for (size_t g = 0; g < baseLrs.size(); g++) v.push_back(baseLrs[g] + (maxLrs[g] - baseLrs[g]) * f * s);
    if (cycleMomentum) {
      auto& gs = opt->param_groups();
      for (size_t g = 0; g < gs.size() && g < baseMomentums.size(); g++)
        setMomentum(gs[g].options(), maxMomentums[g] - (maxMomentums[g] - baseMomentums[g]) * f * s);
    }
    return v;
  }
  bool closedForm(Interp& in, std::vector<double>& out) override {
    out = getLr(in);
    return true;
  }
  void saveFields(DictWriter& d) const override {
    d.list("max_lrs", maxLrs);
    d.num("total_size", totalSize);
    d.num("step_ratio", stepRatio);
    d.text("mode", mode);
    d.num("gamma", gamma);
    if (!compat::kPythonSchedulerState2) d.put("_scale_fn_custom", Value::unspecified());
    d.text("scale_mode", scaleMode);
    d.flag("cycle_momentum", cycleMomentum);
    if (cycleMomentum) {
      d.flag("use_beta1", useBeta1);
      d.list("base_momentums", baseMomentums);
      d.list("max_momentums", maxMomentums);
    }
  }
  // Python 2.x's CyclicLR.state_dict re-adds _scale_fn_custom after the common fields.
  void saveTrailingFields(DictWriter& d) const override {
    if (compat::kPythonSchedulerState2) d.put("_scale_fn_custom", Value::unspecified());
  }
  void loadFields(const DictReader& d) override {
    maxLrs = d.list("max_lrs");
    totalSize = d.num("total_size");
    stepRatio = d.num("step_ratio");
    mode = d.text("mode");
    gamma = d.num("gamma");
    scaleMode = d.text("scale_mode");
    cycleMomentum = d.flag("cycle_momentum");
    if (cycleMomentum) {
      baseMomentums = d.list("base_momentums");
      maxMomentums = d.list("max_momentums");
    }
  }
};

struct CosineAnnealingWarmRestarts : Scheduler {
  int64_t t0 = 1, tI = 1, tMult = 1;
  double etaMin = 0, tCur = -1;
  std::vector<double> getLr(Interp&) override {
    std::vector<double> v;
    for (double b : baseLrs) v.push_back(etaMin + (b - etaMin) * (1 + std::cos(kPi * tCur / double(tI))) / 2);
    return v;
  }
  // Its own step: PyTorch's does not count _step_count.
  void step(Interp& in, std::optional<double>) override {
    if (lastEpoch < 0) {
      stepTo(in, 0);
      return;
    }
    tCur = tCur + 1;
    if (tCur >= double(tI)) {
      tCur = tCur - double(tI);
      tI = tI * tMult;
    }
    lastEpoch++;
    setLrs(getLr(in));
  }
  void stepTo(Interp& in, double epoch) {
    if (epoch < 0) throwError("value-error", "cosine-annealing-warm-restarts: the epoch must be non-negative");
    if (epoch >= double(t0)) {
      if (tMult == 1) {
        tCur = std::fmod(epoch, double(t0));
      } else {
        int64_t n = int64_t(std::log(epoch / double(t0) * double(tMult - 1) + 1) / std::log(double(tMult)));
        tCur = epoch - double(t0) * (std::pow(double(tMult), double(n)) - 1) / double(tMult - 1);
        tI = t0 * int64_t(std::pow(double(tMult), double(n)));
      }
    } else {
      tI = t0;
      tCur = epoch;
    }
    lastEpoch = int64_t(std::floor(epoch));
    setLrs(getLr(in));
  }
  void jumpTo(Interp& in, int64_t n) override { stepTo(in, double(n)); }
  void saveFields(DictWriter& d) const override {
    d.integer("T_0", t0), d.integer("T_i", tI), d.integer("T_mult", tMult), d.num("eta_min", etaMin);
    if (tCur == std::floor(tCur)) d.integer("T_cur", int64_t(tCur));
    else d.num("T_cur", tCur);
  }
  void loadFields(const DictReader& d) override {
    t0 = d.integer("T_0"), tI = d.integer("T_i"), tMult = d.integer("T_mult"), etaMin = d.num("eta_min"), tCur = d.num("T_cur");
  }
};

struct OneCycleLR : Scheduler {
  struct Phase { double endStep; int startLr, endLr, startM, endM; };   // indexes into the per-group values
  std::vector<Phase> phases;
  int64_t totalSteps = 1;
  bool cosAnneal = true, cycleMomentum = true, useBeta1 = false, threePhase = false;
  // per group: 0 initial_lr, 1 max_lr, 2 min_lr; momenta 0 max_momentum, 1 base_momentum
  std::vector<double> initialLr, maxLr, minLr, maxM, baseM;

  double anneal(double s, double e, double pct) const {
    return cosAnneal ? e + (s - e) / 2.0 * (std::cos(kPi * pct) + 1) : (e - s) * pct + s;
  }
  double lrValue(int which, size_t g) const { return which == 0 ? initialLr[g] : which == 1 ? maxLr[g] : minLr[g]; }
  double mValue(int which, size_t g) const { return which == 0 ? maxM[g] : baseM[g]; }
  std::vector<double> getLr(Interp&) override {
    if (lastEpoch > totalSteps)
      throwError("value-error", "scheduler-step!: tried to step " + std::to_string(lastEpoch + 1) +
                                    " times; one-cycle-lr was made for " + std::to_string(totalSteps) + " total steps");
    std::vector<double> v;
    auto& gs = opt->param_groups();
    for (size_t g = 0; g < gs.size(); g++) {
      double start = 0, lr = 0, m = 0;
      for (size_t i = 0; i < phases.size(); i++) {
        const Phase& p = phases[i];
        if (double(lastEpoch) <= p.endStep || i + 1 == phases.size()) {
          double pct = (double(lastEpoch) - start) / (p.endStep - start);
          lr = anneal(lrValue(p.startLr, g), lrValue(p.endLr, g), pct);
          m = anneal(mValue(p.startM, g), mValue(p.endM, g), pct);
          break;
        }
        start = p.endStep;
      }
      v.push_back(lr);
      if (cycleMomentum) setMomentum(gs[g].options(), m);
    }
    return v;
  }
  bool closedForm(Interp& in, std::vector<double>& out) override {
    out = getLr(in);
    return true;
  }
  void saveFields(DictWriter& d) const override {
    static const char* lrNames[] = {"initial_lr", "max_lr", "min_lr"};
    static const char* mNames[] = {"max_momentum", "base_momentum"};
    d.integer("total_steps", totalSteps);
    Value ps = Value::nil();
    for (size_t i = phases.size(); i-- > 0;) {
      DictWriter p{d.in};
      if (phases[i].endStep == std::floor(phases[i].endStep) && i + 1 == phases.size()) p.integer("end_step", int64_t(phases[i].endStep));
      else p.num("end_step", phases[i].endStep);
      p.text("start_lr", lrNames[phases[i].startLr]);
      p.text("end_lr", lrNames[phases[i].endLr]);
      p.text("start_momentum", mNames[phases[i].startM]);
      p.text("end_momentum", mNames[phases[i].endM]);
      ps = cons(p.table, ps);
    }
    d.put("_schedule_phases", ps);
    d.text("_anneal_func_type", cosAnneal ? "cos" : "linear");
    d.flag("cycle_momentum", cycleMomentum);
    if (cycleMomentum) d.flag("use_beta1", useBeta1);
    // Purple keeps in the scheduler what PyTorch keeps in the optimizer's parameter groups.
    d.list("initial_lrs", initialLr);
    d.list("max_lrs", maxLr);
    d.list("min_lrs", minLr);
    d.list("max_momentums", maxM);
    d.list("base_momentums", baseM);
  }
  void loadFields(const DictReader& d) override {
    totalSteps = d.integer("total_steps");
    if (d.has("_anneal_func_type")) cosAnneal = d.text("_anneal_func_type") == "cos";
    cycleMomentum = d.flag("cycle_momentum");
    if (d.has("initial_lrs")) {
      initialLr = d.list("initial_lrs"), maxLr = d.list("max_lrs"), minLr = d.list("min_lrs");
      maxM = d.list("max_momentums"), baseM = d.list("base_momentums");
    }
  }
};

struct ReduceLROnPlateau : Scheduler {
  double factor = 0.1, threshold = 1e-4, eps = 1e-8, best = 0, modeWorse = 0;
  int64_t patience = 10, cooldown = 0, cooldownCounter = 0, numBadEpochs = 0;
  std::vector<double> minLrs;
  std::optional<double> defaultMinLr;   // :min-lr as one number (2.x's default_min_lr), else None
  std::string mode = "min", thresholdMode = "rel";

  std::vector<double> getLr(Interp&) override { return currentLrs(); }
  bool needsMetric() const override { return true; }
  void initIsBetter(const std::string& who) {
    if (mode != "min" && mode != "max") throwError("value-error", who + ": :mode must be min or max, got " + mode);
    if (thresholdMode != "rel" && thresholdMode != "abs")
      throwError("value-error", who + ": :threshold-mode must be rel or abs, got " + thresholdMode);
    modeWorse = mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  bool isBetter(double a) const {
    if (mode == "min" && thresholdMode == "rel") return a < best * (1. - threshold);
    if (mode == "min") return a < best - threshold;
    if (thresholdMode == "rel") return a > best * (threshold + 1.);
    return a > best + threshold;
  }
  void step(Interp&, std::optional<double> metric) override {
    if (!metric) throwError("value-error", "scheduler-step!: reduce-lr-on-plateau needs the metric: (scheduler-step! s val-loss)");
    double current = *metric;
    lastEpoch++;
    if (isBetter(current)) {
      best = current;
      numBadEpochs = 0;
    } else {
      numBadEpochs++;
    }
    if (cooldownCounter > 0) {
      cooldownCounter--;
      numBadEpochs = 0;
    }
    if (numBadEpochs > patience) {
      auto& gs = opt->param_groups();
      for (size_t g = 0; g < gs.size(); g++) {
        double old = gs[g].options().get_lr();
        double nw = std::max(old * factor, g < minLrs.size() ? minLrs[g] : 0.0);
        if (old - nw > eps) gs[g].options().set_lr(nw);
      }
      cooldownCounter = cooldown;
      numBadEpochs = 0;
    }
    lastLr = currentLrs();
    hasLastLr = true;
  }
  void jumpTo(Interp&, int64_t) override {
    throwError("value-error", "set-scheduler-step-count!: reduce-lr-on-plateau depends on the metrics it saw; restore it with load-scheduler-state-dict!");
  }
  Value stateDict(Interp& in) const override {
    DictWriter d{in};
    // Python's __dict__ order (torch_compat.hpp, 13.): 2.x adds default_min_lr and sets
    // mode_worse, best and num_bad_epochs last.
    constexpr bool v2 = compat::kPythonSchedulerState2;
    d.num("factor", factor);
    if (v2) d.put("default_min_lr", defaultMinLr ? makeFlonum(*defaultMinLr) : Value::unspecified());
    d.list("min_lrs", minLrs);
    d.integer("patience", patience);
    d.flag("verbose", false);
    d.integer("cooldown", cooldown);
    d.integer("cooldown_counter", cooldownCounter);
    d.text("mode", mode);
    d.num("threshold", threshold);
    d.text("threshold_mode", thresholdMode);
    if (!v2) {
      d.num("best", best);
      d.integer("num_bad_epochs", numBadEpochs);
      d.num("mode_worse", modeWorse);
    }
    d.num("eps", eps);
    d.integer("last_epoch", lastEpoch);
    if (hasLastLr) d.list("_last_lr", lastLr);
    if (v2) {
      d.num("mode_worse", modeWorse);
      d.num("best", best);
      d.integer("num_bad_epochs", numBadEpochs);
    }
    return d.table;
  }
  void loadStateDict(Interp& in, Value dict, const std::string& who) override {
    DictReader d{in, dict, who};
    factor = d.num("factor"), minLrs = d.list("min_lrs"), patience = d.integer("patience");
    cooldown = d.integer("cooldown"), cooldownCounter = d.integer("cooldown_counter");
    mode = d.text("mode"), threshold = d.num("threshold"), thresholdMode = d.text("threshold_mode");
    best = d.num("best"), numBadEpochs = d.integer("num_bad_epochs"), eps = d.num("eps");
    defaultMinLr.reset();
    if (d.has("default_min_lr") && isRealNumber(d.get("default_min_lr"))) defaultMinLr = toDouble(d.get("default_min_lr"));
    lastEpoch = d.integer("last_epoch");
    initIsBetter(who);
    if (d.has("_last_lr")) {
      lastLr = d.list("_last_lr");
      hasLastLr = true;
      setLrs(lastLr);
    }
  }
};

struct ChainedScheduler : Scheduler {
  std::vector<std::shared_ptr<Scheduler>> parts;
  std::vector<double> getLr(Interp&) override { return currentLrs(); }
  void step(Interp& in, std::optional<double> metric) override {
    for (auto& s : parts) s->step(in, metric);
    lastLr = currentLrs();
  }
  void jumpTo(Interp&, int64_t) override {
    throwError("value-error", "set-scheduler-step-count!: chained-scheduler has no closed form; restore it with load-scheduler-state-dict!");
  }
  Value stateDict(Interp& in) const override {
    DictWriter d{in};
    d.list("_last_lr", lastLr);
    Value items = Value::nil();
    for (size_t k = parts.size(); k-- > 0;) items = cons(parts[k]->stateDict(in), items);
    d.put("_schedulers", items);
    return d.table;
  }
  void loadStateDict(Interp& in, Value dict, const std::string& who) override {
    DictReader d{in, dict, who};
    Value items = d.get("_schedulers");
    if (!isList(items) || listLength(items) != parts.size())
      throwError("value-error", who + ": the state dict holds " + std::to_string(isList(items) ? listLength(items) : 0) +
                                    " schedulers, this chained-scheduler " + std::to_string(parts.size()));
    size_t k = 0;
    for (Value p = items; isPair(p); p = cdr(p)) parts[k++]->loadStateDict(in, car(p), who);
    if (d.has("_last_lr")) lastLr = d.list("_last_lr");
  }
};

// Purple's linear warm-up, optionally handing over to another scheduler.
struct LinearWarmup : Scheduler {
  int64_t warmup = 1;
  double startFactor = 0;
  std::shared_ptr<Scheduler> then;
  double factorAt(int64_t t) const { return startFactor + (1 - startFactor) * double(std::min(t, warmup)) / double(warmup); }
  std::vector<double> getLr(Interp&) override {
    std::vector<double> v;
    for (double b : baseLrs) v.push_back(b * factorAt(lastEpoch));
    return v;
  }
  bool closedForm(Interp& in, std::vector<double>& out) override {
    if (then && lastEpoch > warmup) {
      then->jumpTo(in, lastEpoch - warmup);
      out = then->currentLrs();
      return true;
    }
    out = getLr(in);
    return true;
  }
  void step(Interp& in, std::optional<double> metric) override {
    stepCount++;
    lastEpoch++;
    if (then && lastEpoch > warmup) {
      then->step(in, metric);
      lastLr = currentLrs();
      return;
    }
    setLrs(getLr(in));
  }
  void saveFields(DictWriter& d) const override {
    d.integer("warmup_steps", warmup), d.num("start_factor", startFactor);
    if (then) d.put("then", then->stateDict(d.in));
  }
  void loadFields(const DictReader& d) override {
    warmup = d.integer("warmup_steps"), startFactor = d.num("start_factor");
    if (then && d.has("then")) then->loadStateDict(d.in, d.get("then"), d.who);
  }
};

// ---- values ----------------------------------------------------------------------------------------------

struct SchedulerBox {
  std::shared_ptr<Scheduler> s;
};

void destroyScheduler(void* p) { delete static_cast<SchedulerBox*>(p); }

Value schedulerSymbol() {
  static Value s = intern("scheduler");
  return s;
}

Value wrapScheduler(Interp& in, std::shared_ptr<Scheduler> s, bool initialStep = true) {
  if (initialStep) s->initialStep(in);
  return makeForeign(new SchedulerBox{std::move(s)}, destroyScheduler, schedulerSymbol());
}

bool isScheduler(Value v) {
  return v.is(Kind::Foreign) && v.as<Foreign>()->typeName == schedulerSymbol() && v.as<Foreign>()->ptr;
}

std::shared_ptr<Scheduler>& schedulerArg(Value v, const char* who, int index = 1) {
  if (!isScheduler(v)) throwTypeError(who, index, "a scheduler", v);
  return static_cast<SchedulerBox*>(v.as<Foreign>()->ptr)->s;
}

template <class S> std::shared_ptr<S> make(Value opt, const char* kind) {
  auto s = std::make_shared<S>();
  initBase(*s, optimizerArg(opt, kind, 1), kind);
  return s;
}

void requirePositive(int64_t n, const char* who, const char* what) {
  if (n <= 0) throwError("value-error", std::string(who) + ": " + what + " must be positive, got " + std::to_string(n));
}

std::vector<Root> procedures(Value v, size_t groups, const char* who) {
  std::vector<Root> out;
  if (isProcedure(v)) {
    for (size_t g = 0; g < groups; g++) out.emplace_back(v);
    return out;
  }
  if (!isList(v)) throwTypeError(who, 2, "a procedure or a list of procedures (one per parameter group)", v);
  for (Value p = v; isPair(p); p = cdr(p)) {
    if (!isProcedure(car(p))) throwTypeError(who, 2, "a procedure or a list of procedures", car(p));
    out.emplace_back(car(p));
  }
  if (out.size() != groups)
    throwError("value-error", std::string(who) + ": expected " + std::to_string(groups) + " procedures (one per parameter group), got " +
                                  std::to_string(out.size()));
  return out;
}

std::optional<double> metricValue(Value m) {
  if (m.isMissing()) return std::nullopt;
  if (isTensor(m)) {
    const at::Tensor& t = tensorOf(m);
    if (!t.defined() || t.numel() != 1) throwTypeError("scheduler-step!", 2, "a number or a one-element tensor (the metric)", m);
    return t.item<double>();
  }
  if (!isRealNumber(m)) throwTypeError("scheduler-step!", 2, "a number or a one-element tensor (the metric)", m);
  return toDouble(m);
}

}  // namespace

void registerSchedulers(Registry& r) {
  r.def("step-lr", "(opt step-size :key (gamma 0.1))",
        [](Interp& in, Value opt, int64_t stepSize, double gamma) {
          requirePositive(stepSize, "step-lr", "step-size");
          auto s = make<StepLR>(opt, "step-lr");
          s->stepSize = stepSize, s->gamma = gamma;
          return wrapScheduler(in, s);
        },
        "A scheduler multiplying the learning rate by GAMMA every STEP-SIZE scheduler steps (torch.optim.lr_scheduler.StepLR).");
  r.def("multi-step-lr", "(opt milestones :key (gamma 0.1))",
        [](Interp& in, Value opt, std::vector<int64_t> milestones, double gamma) {
          auto s = make<MultiStepLR>(opt, "multi-step-lr");
          for (int64_t m : milestones) {
            if (!s->milestones.count(m)) s->milestoneOrder.push_back(m);
            s->milestones[m]++;
          }
          s->gamma = gamma;
          return wrapScheduler(in, s);
        },
        "A scheduler multiplying the learning rate by GAMMA when the step count reaches each of MILESTONES, a list "
        "of step numbers (a milestone listed twice multiplies by GAMMA twice) (MultiStepLR).");
  r.def("exponential-lr", "(opt gamma)",
        [](Interp& in, Value opt, double gamma) {
          auto s = make<ExponentialLR>(opt, "exponential-lr");
          s->gamma = gamma;
          return wrapScheduler(in, s);
        },
        "A scheduler multiplying the learning rate by GAMMA every scheduler step (ExponentialLR).");
  r.def("cosine-annealing-lr", "(opt t-max :key (eta-min 0.0))",
        [](Interp& in, Value opt, int64_t tMax, double etaMin) {
          requirePositive(tMax, "cosine-annealing-lr", "t-max");
          auto s = make<CosineAnnealingLR>(opt, "cosine-annealing-lr");
          s->tMax = tMax, s->etaMin = etaMin;
          return wrapScheduler(in, s);
        },
        "A scheduler annealing the learning rate from its initial value to ETA-MIN along half a cosine over T-MAX steps, "
        "then back up over the next T-MAX (CosineAnnealingLR, in its recursive form).");
  r.def("cosine-annealing-warm-restarts", "(opt t-0 :key (t-mult 1) (eta-min 0.0))",
        [](Interp& in, Value opt, int64_t t0, int64_t tMult, double etaMin) {
          requirePositive(t0, "cosine-annealing-warm-restarts", "t-0");
          if (tMult < 1) throwError("value-error", "cosine-annealing-warm-restarts: :t-mult must be an integer >= 1");
          auto s = make<CosineAnnealingWarmRestarts>(opt, "cosine-annealing-warm-restarts");
          s->t0 = s->tI = t0, s->tMult = tMult, s->etaMin = etaMin, s->tCur = -1;
          s->step(in, std::nullopt);   // PyTorch's initial step, which does not count
          return wrapScheduler(in, s, false);
        },
        "SGDR (CosineAnnealingWarmRestarts): the learning rate follows a cosine from its initial value to ETA-MIN over "
        "T-0 steps, then restarts; each period is T-MULT times longer than the one before.");
  r.def("lambda-lr", "(opt lr-lambda)",
        [](Interp& in, Value opt, Value lambda) {
          auto s = make<LambdaLR>(opt, "lambda-lr");
          s->lambdas = procedures(lambda, s->groups(), "lambda-lr");
          return wrapScheduler(in, s);
        },
        "A scheduler setting each group's learning rate to its initial rate times (LR-LAMBDA step), where LR-LAMBDA is a "
        "procedure of the step number (or a list of them, one per parameter group) (LambdaLR). E.g. a warm-up: "
        "(lambda-lr opt (lambda (step) (min 1. (/ (+ step 1) 100.)))).");
  r.def("multiplicative-lr", "(opt lr-lambda)",
        [](Interp& in, Value opt, Value lambda) {
          auto s = make<LambdaLR>(opt, "multiplicative-lr");
          s->multiplicative = true;
          s->lambdas = procedures(lambda, s->groups(), "multiplicative-lr");
          return wrapScheduler(in, s);
        },
        "A scheduler multiplying each group's learning rate by (LR-LAMBDA step) at every step after the first "
        "(MultiplicativeLR); LR-LAMBDA is a procedure or a list of them, one per parameter group.");
  r.def("linear-lr", "(opt :key (start-factor 0.3333333333333333) (end-factor 1.0) (total-iters 5))",
        [](Interp& in, Value opt, double start, double end, int64_t total) {
          if (start <= 0 || start > 1) throwError("value-error", "linear-lr: :start-factor must be in (0, 1]");
          if (end < 0 || end > 1) throwError("value-error", "linear-lr: :end-factor must be in [0, 1]");
          requirePositive(total, "linear-lr", ":total-iters");
          auto s = make<LinearLR>(opt, "linear-lr");
          s->startFactor = start, s->endFactor = end, s->totalIters = total;
          return wrapScheduler(in, s);
        },
        "A scheduler scaling the learning rate by a factor going linearly from :start-factor to :end-factor over "
        ":total-iters steps (LinearLR): a warm-up.");
  r.def("constant-lr", "(opt :key (factor 0.3333333333333333) (total-iters 5))",
        [](Interp& in, Value opt, double factor, int64_t total) {
          if (factor <= 0 || factor > 1) throwError("value-error", "constant-lr: :factor must be in (0, 1]");
          auto s = make<ConstantLR>(opt, "constant-lr");
          s->factor = factor, s->totalIters = total;
          return wrapScheduler(in, s);
        },
        "A scheduler scaling the learning rate by :factor for the first :total-iters steps (ConstantLR).");
  r.def("polynomial-lr", "(opt :key (total-iters 5) (power 1.0))",
        [](Interp& in, Value opt, int64_t total, double power) {
          requirePositive(total, "polynomial-lr", ":total-iters");
          auto s = make<PolynomialLR>(opt, "polynomial-lr");
          s->totalIters = total, s->power = power;
          return wrapScheduler(in, s);
        },
        "A scheduler decaying the learning rate to 0 over :total-iters steps as (1 - step/total)^power (PolynomialLR).");
  r.def("cyclic-lr",
        "(opt base-lr max-lr :key (step-size-up 2000) step-size-down (mode \"triangular\") (gamma 1.0) scale-fn "
        "(scale-mode \"cycle\") (cycle-momentum #t) (base-momentum 0.8) (max-momentum 0.9))",
        [](Interp& in, Value opt, Value baseLr, Value maxLr, double up, std::optional<double> down, std::string mode,
           double gamma, Value scaleFn, std::string scaleMode, bool cycleMomentum, Value baseM, Value maxM) {
          OptimizerObj* o = optimizerArg(opt, "cyclic-lr", 1);
          size_t n = o->opt->param_groups().size();
          // PyTorch sets the groups' rates to BASE-LR before the scheduler records initial rates.
          std::vector<double> base = perGroup(baseLr, n, "cyclic-lr", "base-lr");
          for (size_t g = 0; g < n; g++) o->opt->param_groups()[g].options().set_lr(base[g]);
          auto s = make<CyclicLR>(opt, "cyclic-lr");
          std::replace(mode.begin(), mode.end(), '-', '_');
          bool custom = !scaleFn.isMissing() && !scaleFn.isFalse();
          if (custom && !isProcedure(scaleFn)) throwTypeError("cyclic-lr", 4, "a procedure (:scale-fn)", scaleFn);
          if (!custom && mode != "triangular" && mode != "triangular2" && mode != "exp_range")
            throwError("value-error", "cyclic-lr: :mode must be triangular, triangular2 or exp-range, got " + mode);
          if (scaleMode != "cycle" && scaleMode != "iterations")
            throwError("value-error", "cyclic-lr: :scale-mode must be cycle or iterations, got " + scaleMode);
          if (up <= 0 || (down && *down < 0)) throwError("value-error", "cyclic-lr: step sizes must be positive");
          s->baseLrs = base;
          s->maxLrs = perGroup(maxLr, n, "cyclic-lr", "max-lr");
          double d = down ? *down : up;
          s->totalSize = up + d;
          s->stepRatio = up / s->totalSize;
          s->mode = mode;
          s->gamma = gamma;
          if (custom) s->scaleFn.set(scaleFn), s->scaleMode = scaleMode;
          else s->scaleMode = mode == "exp_range" ? "iterations" : "cycle";
          auto& gs = s->opt->param_groups();
          s->cycleMomentum = cycleMomentum;
          if (cycleMomentum) {
            if (!getMomentum(gs[0].options()))
              throwError("value-error", "cyclic-lr: the optimizer has no momentum to cycle; pass :cycle-momentum #f");
            s->useBeta1 = usesBeta1(gs[0].options());
            s->baseMomentums = perGroup(baseM, n, "cyclic-lr", "base-momentum");
            for (size_t g = 0; g < n; g++) setMomentum(gs[g].options(), s->baseMomentums[g]);
            s->maxMomentums = perGroup(maxM, n, "cyclic-lr", "max-momentum");
          }
          return wrapScheduler(in, s);
        },
        "Cyclical learning rates (CyclicLR): the rate goes from BASE-LR up to MAX-LR over :step-size-up steps and back "
        "over :step-size-down (default the same), with amplitude scaled per :mode (triangular, triangular2: halved "
        "each cycle, exp-range: GAMMA^step) or by a procedure :scale-fn of the cycle (or step, with :scale-mode "
        "'iterations). BASE-LR and MAX-LR may be lists, one per group. Momentum (or Adam's beta1) cycles inversely "
        "between :base-momentum and :max-momentum unless :cycle-momentum #f. Step it once per batch.");
  r.def("one-cycle-lr",
        "(opt max-lr :optional total-steps :key epochs steps-per-epoch (pct-start 0.3) (anneal-strategy \"cos\") "
        "(div-factor 25.0) (final-div-factor 1e4) (three-phase #f) (cycle-momentum #t) (base-momentum 0.85) "
        "(max-momentum 0.95))",
        [](Interp& in, Value opt, Value maxLr, std::optional<int64_t> total, std::optional<int64_t> epochs,
           std::optional<int64_t> perEpoch, double pct, std::string anneal, double div, double finalDiv, bool three,
           bool cycle, Value baseM, Value maxM) {
          if (!total) {
            if (!epochs || !perEpoch)
              throwError("value-error", "one-cycle-lr: give TOTAL-STEPS, or both :epochs and :steps-per-epoch");
            total = *epochs * *perEpoch;
          }
          requirePositive(*total, "one-cycle-lr", "total-steps");
          if (pct < 0 || pct > 1) throwError("value-error", "one-cycle-lr: :pct-start must be between 0 and 1");
          if (anneal != "cos" && anneal != "linear") throwError("value-error", "one-cycle-lr: :anneal-strategy must be \"cos\" or \"linear\"");
          auto s = make<OneCycleLR>(opt, "one-cycle-lr");
          size_t n = s->groups();
          double T = double(*total);
          s->totalSteps = *total;
          s->threePhase = three;
          s->cosAnneal = anneal == "cos";
          if (three)
            s->phases = {{pct * T - 1, 0, 1, 0, 1}, {2 * pct * T - 2, 1, 0, 1, 0}, {T - 1, 0, 2, 0, 0}};
          else
            s->phases = {{pct * T - 1, 0, 1, 0, 1}, {T - 1, 1, 2, 1, 0}};
          s->maxLr = perGroup(maxLr, n, "one-cycle-lr", "max-lr");
          for (size_t g = 0; g < n; g++) {
            s->initialLr.push_back(s->maxLr[g] / div);
            s->minLr.push_back(s->initialLr[g] / finalDiv);
          }
          // PyTorch overwrites the groups' initial_lr: the base rates are max-lr / div-factor.
          s->baseLrs = s->initialLr;
          auto& initial = *optimizerArg(opt, "one-cycle-lr", 1)->initialLrs;
          for (size_t g = 0; g < n && g < initial.size(); g++) initial[g] = s->initialLr[g];
          s->cycleMomentum = cycle;
          auto& gs = s->opt->param_groups();
          if (cycle) {
            if (!getMomentum(gs[0].options()))
              throwError("value-error", "one-cycle-lr: the optimizer has no momentum to cycle; pass :cycle-momentum #f");
            s->useBeta1 = usesBeta1(gs[0].options());
            s->maxM = perGroup(maxM, n, "one-cycle-lr", "max-momentum");
            s->baseM = perGroup(baseM, n, "one-cycle-lr", "base-momentum");
            for (size_t g = 0; g < n; g++) setMomentum(gs[g].options(), s->maxM[g]);
          } else {
            s->maxM.assign(n, 0), s->baseM.assign(n, 0);
          }
          return wrapScheduler(in, s);
        },
        "The 1cycle policy (OneCycleLR): the learning rate rises from MAX-LR/div-factor to MAX-LR over pct-start of "
        "TOTAL-STEPS (or :epochs times :steps-per-epoch), then anneals to initial/final-div-factor; momentum (SGD, "
        "RMSprop) or beta1 (the Adam family) cycles the other way unless :cycle-momentum #f. Step it once per batch.");
  r.def("reduce-lr-on-plateau",
        "(opt :key (mode \"min\") (factor 0.1) (patience 10) (threshold 1e-4) (threshold-mode \"rel\") (cooldown 0) "
        "(min-lr 0.0) (eps 1e-8))",
        [](Interp& in, Value opt, std::string mode, double factor, int64_t patience, double threshold,
           std::string thresholdMode, int64_t cooldown, Value minLr, double eps) {
          if (factor >= 1.0) throwError("value-error", "reduce-lr-on-plateau: :factor must be < 1");
          auto s = std::make_shared<ReduceLROnPlateau>();
          OptimizerObj* o = optimizerArg(opt, "reduce-lr-on-plateau", 1);
          s->opt = o->opt;
          s->kind = "reduce-lr-on-plateau";
          s->factor = factor, s->patience = patience, s->threshold = threshold, s->cooldown = cooldown, s->eps = eps;
          s->mode = mode, s->thresholdMode = thresholdMode;
          s->minLrs = perGroup(minLr, s->groups(), "reduce-lr-on-plateau", ":min-lr");
          if (minLr.isMissing() || isRealNumber(minLr)) s->defaultMinLr = minLr.isMissing() ? 0.0 : toDouble(minLr);
          s->initIsBetter("reduce-lr-on-plateau");
          s->best = s->modeWorse;
          s->lastEpoch = 0;
          s->hasLastLr = false;
          return wrapScheduler(in, s, false);
        },
        "A scheduler that multiplies the learning rate by :factor when the metric passed to scheduler-step! has not "
        "improved for more than :patience steps (ReduceLROnPlateau): (scheduler-step! s val-loss). :mode 'max for "
        "metrics that should grow; :threshold and :threshold-mode ('rel or 'abs) say what counts as better; "
        ":cooldown steps are waited after a reduction; :min-lr (a number or one per group) bounds the rate.");
  r.def("chained-scheduler", "(. schedulers)",
        [](Interp& in, RestArgs rest) {
          Value items = rest.list;
          if (isPair(items) && isList(car(items)) && cdr(items).isNil()) items = car(items);
          auto c = std::make_shared<ChainedScheduler>();
          for (Value p = items; isPair(p); p = cdr(p)) c->parts.push_back(schedulerArg(car(p), "chained-scheduler"));
          if (c->parts.empty()) throwError("value-error", "chained-scheduler: needs at least one scheduler");
          for (auto& s : c->parts)
            if (s->opt != c->parts[0]->opt)
              throwError("value-error", "chained-scheduler: all schedulers must drive the same optimizer");
          c->opt = c->parts[0]->opt;
          c->kind = "chained-scheduler";
          c->lastLr = c->currentLrs();
          return makeForeign(new SchedulerBox{c}, destroyScheduler, schedulerSymbol());
        },
        "A scheduler that steps each of SCHEDULERS (made on the same optimizer, given as arguments or one list) in "
        "turn on every scheduler-step! (ChainedScheduler), so their effects multiply: e.g. (chained-scheduler "
        "(constant-lr opt :factor 0.1 :total-iters 2) (exponential-lr opt 0.9)).");
  r.def("linear-warmup", "(opt warmup-steps :key (start-factor 0.0) then)",
        [](Interp& in, Value opt, int64_t warmup, double start, Value then) {
          requirePositive(warmup, "linear-warmup", "warmup-steps");
          auto s = make<LinearWarmup>(opt, "linear-warmup");
          s->warmup = warmup;
          s->startFactor = start;
          if (!then.isMissing() && !then.isFalse()) {
            s->then = schedulerArg(then, "linear-warmup", 3);
            if (s->then->opt != s->opt) throwError("value-error", "linear-warmup: the :then scheduler must drive the same optimizer");
          }
          return wrapScheduler(in, s);
        },
        "A scheduler raising the learning rate linearly from START-FACTOR times its initial value to the initial value "
        "over WARMUP-STEPS steps; afterwards it holds it, or hands over to the scheduler given as :then (made first, on "
        "the same optimizer), which then counts its own steps from 0.");

  r.def("scheduler-step!", "(s :optional metric)",
        [](Interp& in, Value sv, Value metric) {
          auto s = schedulerArg(sv, "scheduler-step!");
          s->step(in, metricValue(metric));
          return s->lr(0);
        },
        "Advances scheduler S by one step and sets its optimizer's learning rates; returns the new rate of the first "
        "group. reduce-lr-on-plateau needs the METRIC (a number or a one-element tensor) it watches.");
  r.def("scheduler-lr", "(s)", [](Value sv) { return schedulerArg(sv, "scheduler-lr")->lr(0); },
        "The learning rate scheduler S has set (its optimizer's first group).");
  r.def("scheduler-last-lr", "(s)", [](Value sv) { return doubles(schedulerArg(sv, "scheduler-last-lr")->lastLr); },
        "The learning rates scheduler S set at its last step, one per parameter group (get_last_lr).");
  r.def("scheduler-kind", "(s)", [](Value sv) { return schedulerArg(sv, "scheduler-kind")->kind; },
        "The kind of scheduler S, as the name of the procedure that made it: \"step-lr\", \"cyclic-lr\" ...");
  r.def("scheduler-step-count", "(s)", [](Value sv) { return schedulerArg(sv, "scheduler-step-count")->lastEpoch; },
        "How many times scheduler S has been stepped (its last_epoch).");
  r.def("set-scheduler-step-count!", "(s n)",
        [](Interp& in, Value sv, int64_t n) {
          auto s = schedulerArg(sv, "set-scheduler-step-count!");
          if (n < 0) throwError("value-error", "set-scheduler-step-count!: the count must be non-negative");
          s->jumpTo(in, n);
        },
        "Sets scheduler S's step count to N and its optimizer's learning rate to match, from the closed form of the "
        "schedule. Schedulers whose rate depends on history (reduce-lr-on-plateau, chained-scheduler, "
        "multiplicative-lr) are restored with load-scheduler-state-dict! instead.");
  r.def("scheduler-state-dict", "(s)", [](Interp& in, Value sv) { return schedulerArg(sv, "scheduler-state-dict")->stateDict(in); },
        "The state of scheduler S as a hash table with PyTorch's keys and layout (scheduler.state_dict()): e.g. "
        "\"base_lrs\", \"last_epoch\", \"_step_count\", \"_last_lr\" and the scheduler's own fields. Procedures are "
        "stored as the unspecified value (None), as PyTorch stores functions.");
  r.def("load-scheduler-state-dict!", "(s state)",
        [](Interp& in, Value sv, Value state) {
          if (!isHashTable(state) && !isList(state))
            throwTypeError("load-scheduler-state-dict!", 2, "a state dict (a hash table or an alist)", state);
          schedulerArg(sv, "load-scheduler-state-dict!")->loadStateDict(in, state, "load-scheduler-state-dict!");
          return sv;
        },
        "Restores scheduler S from STATE, a state dict from scheduler-state-dict (or PyTorch's, loaded with torch-load) "
        "for a scheduler of the same kind, and sets the optimizer's learning rates to the ones S last set. Returns S.");
  r.def("scheduler?", "(x)", [](Value x) { return isScheduler(x); }, "True when X is a learning-rate scheduler.");
}

}  // namespace purple
