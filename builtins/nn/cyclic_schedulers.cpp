// The schedules with phases or feedback: cyclic-lr (triangular, triangular2, exp-range, with
// momentum cycling), one-cycle-lr, cosine-annealing-warm-restarts and reduce-lr-on-plateau,
// computed as torch.optim.lr_scheduler computes them. The common ground is scheduler.hpp.
#include "builtins/nn/scheduler.hpp"

namespace purple {

using namespace lr_scheduler;

namespace {

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

}  // namespace

void registerCyclicSchedulers(Registry& r) {
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
}

}  // namespace purple
