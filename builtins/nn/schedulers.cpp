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
#include "builtins/nn/scheduler.hpp"
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

namespace purple {

using namespace lr_scheduler;

namespace {

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
  r.def("chained-scheduler", "(. schedulers)",
        [](Interp&, RestArgs rest) {
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
