// The learning-rate schedulers' common ground, shared by schedulers.cpp (the schedules with a
// closed form or a fixed shape) and cyclic_schedulers.cpp (cyclic-lr, one-cycle-lr, cosine
// warm restarts, reduce-lr-on-plateau): state-dict plumbing in PyTorch's layout, the
// Scheduler base (_LRScheduler's bookkeeping), and scheduler values. Internal to builtins/nn.
#pragma once
#include "builtins/nn/optim.hpp"
#include "interp/platform/torch_compat.hpp"
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/tensor/util.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <optional>

namespace purple {
namespace lr_scheduler {

constexpr double kPi = 3.14159265358979323846;

// ---- state-dict plumbing ---------------------------------------------------------------------------

inline Value str(const char* s) { return makeString(s); }

inline Value doubles(const std::vector<double>& xs) {
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
inline std::vector<double> perGroup(Value v, size_t groups, const char* who, const char* name) {
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

inline double callNumber(Interp& in, Value proc, Value arg, const std::string& who) {
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
  virtual bool closedForm(Interp&, std::vector<double>&) { return false; }
  virtual bool needsMetric() const { return false; }

  // _LRScheduler.step()
  virtual void step(Interp& in, std::optional<double> /*metric: ReduceLROnPlateau's*/) {
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
  virtual void saveFields(DictWriter&) const {}
  virtual void loadFields(const DictReader&) {}

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
  virtual void saveTrailingFields(DictWriter&) const {}
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

inline void initBase(Scheduler& s, OptimizerObj* o, const char* kind) {
  s.opt = o->opt;
  s.kind = kind;
  if (!o->initialLrs) o->initialLrs = std::make_shared<std::vector<double>>();
  auto& groups = o->opt->param_groups();
  while (o->initialLrs->size() < groups.size()) o->initialLrs->push_back(groups[o->initialLrs->size()].options().get_lr());
  s.baseLrs.assign(o->initialLrs->begin(), o->initialLrs->begin() + long(groups.size()));
}

// ---- values ----------------------------------------------------------------------------------------------

struct SchedulerBox {
  std::shared_ptr<Scheduler> s;
};

inline void destroyScheduler(void* p) { delete static_cast<SchedulerBox*>(p); }

inline Value schedulerSymbol() {
  static Value s = intern("scheduler");
  return s;
}

inline Value wrapScheduler(Interp& in, std::shared_ptr<Scheduler> s, bool initialStep = true) {
  if (initialStep) s->initialStep(in);
  return makeForeign(new SchedulerBox{std::move(s)}, destroyScheduler, schedulerSymbol());
}

inline bool isScheduler(Value v) {
  return v.is(Kind::Foreign) && v.as<Foreign>()->typeName == schedulerSymbol() && v.as<Foreign>()->ptr;
}

inline std::shared_ptr<Scheduler>& schedulerArg(Value v, const char* who, int index = 1) {
  if (!isScheduler(v)) throwTypeError(who, index, "a scheduler", v);
  return static_cast<SchedulerBox*>(v.as<Foreign>()->ptr)->s;
}

template <class S> std::shared_ptr<S> make(Value opt, const char* kind) {
  auto s = std::make_shared<S>();
  initBase(*s, optimizerArg(opt, kind, 1), kind);
  return s;
}

inline void requirePositive(int64_t n, const char* who, const char* what) {
  if (n <= 0) throwError("value-error", std::string(who) + ": " + what + " must be positive, got " + std::to_string(n));
}

inline std::vector<Root> procedures(Value v, size_t groups, const char* who) {
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

inline std::optional<double> metricValue(Value m) {
  if (m.isMissing()) return std::nullopt;
  if (isTensor(m)) {
    const at::Tensor& t = tensorOf(m);
    if (!t.defined() || t.numel() != 1) throwTypeError("scheduler-step!", 2, "a number or a one-element tensor (the metric)", m);
    return t.item<double>();
  }
  if (!isRealNumber(m)) throwTypeError("scheduler-step!", 2, "a number or a one-element tensor (the metric)", m);
  return toDouble(m);
}

}  // namespace lr_scheduler
}  // namespace purple
