// Mixed precision: autocast regions and the gradient scaler (torch.autocast, torch.cuda.amp.GradScaler).
//
// call-with-autocast (the with-autocast syntax) switches LibTorch's autocast mode for a device on
// for the dynamic extent of a thunk, as torch.autocast's __enter__/__exit__ do: the previous
// state, dtype and cache flag come back afterwards, also on errors, and the cast cache is cleared
// when the outermost region ends. Autocast state is per thread in LibTorch; Purple evaluates on
// one thread.
//
// The grad scaler follows GradScaler step by step: a float32 scale and an int32 growth tracker,
// per-optimizer stages (ready, unscaled, stepped), unscaling with
// _amp_foreach_non_finite_check_and_unscale_ and dynamic scaling with _amp_update_scale_. Those
// two ops have only CUDA kernels in LibTorch 1.13 (CPU ones came later); where the dispatcher
// has no kernel for the tensors' device, the same arithmetic runs here (float32 products, the
// same found-inf and growth rules), so CPU runs, and a bfloat16/float16 CPU model trained with a
// scaler, behave as on CUDA.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include "interp/platform/torch_compat.hpp"
#include "builtins/nn/optim.hpp"
#include "builtins/nn/optim_state.hpp"
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/tensor/util.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <cmath>
#include <map>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {


// ---- autocast state, by device type (torch_compat.hpp, 11.) ------------------------------------------

using compat::autocastDtype;
using compat::autocastEnabled;
using compat::setAutocastDtype;
using compat::setAutocastEnabled;

at::DeviceType autocastDevice(std::optional<at::Device> device, const char* who) {
  at::DeviceType d = device ? device->type() : at::kCPU;
  if (d != at::kCPU && d != at::kCUDA)
    throwError("value-error", std::string(who) + ": autocast works on \"cpu\" and \"cuda\", not \"" + device->str() + "\"");
  if (d == at::kCUDA && !at::hasCUDA())
    throwError("value-error", std::string(who) + ": no CUDA device is available (this LibTorch has no CUDA, or no GPU "
                                                 "is present); use :device \"cpu\" with :dtype 'bfloat16");
  return d;
}

void checkAutocastDtype(at::DeviceType d, at::ScalarType t, const char* who) {
  if (t != at::kBFloat16 && t != at::kHalf)
    throwError("value-error", std::string(who) + ": autocast computes in bfloat16 or float16, not " + std::string(c10::toString(t)));
  if (!compat::kCpuAutocastHalf && d == at::kCPU && t != at::kBFloat16)
    throwError("value-error", std::string(who) + ": CPU autocast in this LibTorch (" TORCH_VERSION ") supports only "
                                                 "bfloat16; float16 needs CUDA or LibTorch 2.2");
}

// torch.autocast's __enter__ / __exit__ as RAII, so errors and escapes restore the state.
class AutocastRegion {
 public:
  AutocastRegion(at::DeviceType d, at::ScalarType t, bool enabled, bool cache)
      : device_(d), prevEnabled_(autocastEnabled(d)), prevDtype_(autocastDtype(d)),
        prevCache_(at::autocast::is_autocast_cache_enabled()) {
    setAutocastEnabled(d, enabled);
    setAutocastDtype(d, t);
    at::autocast::increment_nesting();
    at::autocast::set_autocast_cache_enabled(cache);
  }
  ~AutocastRegion() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    setAutocastEnabled(device_, prevEnabled_);
    setAutocastDtype(device_, prevDtype_);
    at::autocast::set_autocast_cache_enabled(prevCache_);
  }
  AutocastRegion(const AutocastRegion&) = delete;
  AutocastRegion& operator=(const AutocastRegion&) = delete;

 private:
  at::DeviceType device_;
  bool prevEnabled_;
  at::ScalarType prevDtype_;
  bool prevCache_;
};

// ---- the two AMP kernels, with a fallback where LibTorch has none for the device ------------------------

bool hasKernel(const char* op, const at::Device& device) {
  auto handle = c10::Dispatcher::singleton().findSchema({op, ""});
  if (!handle) return false;
  c10::DispatchKey key = device.is_cuda() ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU;
  return handle->hasKernelForDispatchKey(key);
}

// For each gradient: found_inf becomes 1 if it holds an inf or NaN; it is multiplied by inv_scale.
void nonFiniteCheckAndUnscale(std::vector<at::Tensor>& grads, at::Tensor& foundInf, const at::Tensor& invScale) {
  if (grads.empty()) return;
  if (hasKernel("aten::_amp_foreach_non_finite_check_and_unscale_", foundInf.device())) {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, foundInf, invScale);
    return;
  }
  bool unit = invScale.item<float>() == 1.0f;
  for (auto& g : grads) {
    if (!at::isfinite(g).all().item<bool>()) foundInf.fill_(1.0);
    if (!unit) g.mul_(invScale.to(g.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  }
}

// The scale shrinks by backoff on an inf/NaN step (tracker reset), and grows by growth after
// growth-interval clean steps in a row, as long as it stays finite.
void updateScale(at::Tensor& scale, at::Tensor& tracker, const at::Tensor& foundInf, double growth, double backoff,
                 int64_t interval) {
  if (hasKernel("aten::_amp_update_scale_", scale.device())) {
    at::_amp_update_scale_(scale, tracker, foundInf, growth, backoff, interval);
    return;
  }
  float s = scale.item<float>();
  int32_t t = tracker.item<int32_t>();
  if (foundInf.item<float>() != 0.f) {
    s = float(double(s) * backoff);
    t = 0;
  } else {
    int32_t successful = t + 1;
    if (successful == interval) {
      float grown = float(double(s) * growth);
      if (std::isfinite(grown)) s = grown;
      t = 0;
    } else {
      t = successful;
    }
  }
  scale.fill_(s);
  tracker.fill_(t);
}

// ---- the grad scaler ------------------------------------------------------------------------------------------

enum class Stage { Ready, Unscaled, Stepped };

struct OptimizerAmpState {
  OptPtr opt;             // kept alive until update
  Stage stage = Stage::Ready;
  std::vector<at::Tensor> foundInf;   // one per device
};

struct GradScaler {
  bool enabled = true;
  double initScale = 65536.0, growthFactor = 2.0, backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  int64_t initGrowthTracker = 0;
  at::Tensor scale;          // float32, 1 element, lazily made on the first scaled output's device
  at::Tensor growthTracker;  // int32, 1 element
  std::map<const torch::optim::Optimizer*, OptimizerAmpState> perOptimizer;

  void lazyInit(const at::Device& device) {
    if (scale.defined()) return;
    scale = at::full({1}, initScale, at::TensorOptions().dtype(at::kFloat).device(device));
    growthTracker = at::full({1}, initGrowthTracker, at::TensorOptions().dtype(at::kInt).device(device));
  }
  double getScale() const { return !enabled ? 1.0 : scale.defined() ? double(scale.item<float>()) : initScale; }
  int64_t getGrowthTracker() const { return !enabled ? 0 : growthTracker.defined() ? growthTracker.item<int32_t>() : initGrowthTracker; }

  OptimizerAmpState& stateOf(const OptPtr& opt) {
    auto& s = perOptimizer[opt.get()];
    s.opt = opt;
    return s;
  }

  void unscale(const OptPtr& opt, const char* who) {
    if (!enabled) return;
    if (!scale.defined()) throwError("value-error", std::string(who) + ": nothing was scaled yet; call grad-scaler-scale on the loss first");
    auto& st = stateOf(opt);
    if (st.stage == Stage::Unscaled)
      throwError("value-error", std::string(who) + ": unscale was already called on this optimizer since the last update");
    if (st.stage == Stage::Stepped) throwError("value-error", std::string(who) + ": unscale is being called after step");
    at::NoGradGuard noGrad;
    at::Tensor invScale = scale.to(at::kDouble).reciprocal().to(at::kFloat);
    std::map<std::pair<int, int>, std::vector<at::Tensor>> byDevice;   // (device type, index) -> grads
    for (auto& g : opt->param_groups())
      for (auto& p : g.params()) {
        if (!p.grad().defined()) continue;
        if (p.grad().scalar_type() == at::kHalf)
          throwError("value-error", std::string(who) + ": attempting to unscale float16 gradients; keep the parameters in "
                                                       "float32 and let autocast compute in float16");
        at::Tensor grad = p.grad();
        if (grad.is_sparse()) grad = grad.is_coalesced() ? grad._values() : grad.coalesce()._values();
        byDevice[{int(grad.device().type()), int(grad.device().index())}].push_back(grad);
      }
    st.foundInf.clear();
    for (auto& [dev, grads] : byDevice) {
      at::Device device = grads[0].device();
      at::Tensor found = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device));
      nonFiniteCheckAndUnscale(grads, found, invScale.to(device));
      st.foundInf.push_back(found);
    }
    st.stage = Stage::Unscaled;
  }

  bool foundInfIn(const OptimizerAmpState& st) const {
    double sum = 0;
    for (auto& f : st.foundInf) sum += f.item<double>();
    return sum != 0;
  }

  void update(std::optional<double> newScale, std::optional<at::Tensor> newScaleTensor, const char* who) {
    if (!enabled) return;
    if (!scale.defined()) throwError("value-error", std::string(who) + ": nothing was scaled yet; call grad-scaler-scale on the loss first");
    if (newScale) {
      scale.fill_(*newScale);
    } else if (newScaleTensor) {
      if (newScaleTensor->numel() != 1) throwError("value-error", std::string(who) + ": the new scale must be a single number");
      scale.copy_(newScaleTensor->reshape({1}).to(scale.options()));
    } else {
      std::vector<at::Tensor> found;
      for (auto& [k, st] : perOptimizer)
        for (auto& f : st.foundInf) found.push_back(f.to(scale.device()));
      if (found.empty())
        throwError("value-error", std::string(who) + ": no inf checks were recorded; call grad-scaler-step! (or unscale) before update");
      at::Tensor combined = found[0].clone();
      for (size_t i = 1; i < found.size(); i++) combined.add_(found[i]);
      updateScale(scale, growthTracker, combined, growthFactor, backoffFactor, growthInterval);
    }
    perOptimizer.clear();
  }
};

void destroyScaler(void* p) { delete static_cast<GradScaler*>(p); }

Value scalerSymbol() {
  static Value s = intern("grad-scaler");
  return s;
}

bool isScaler(Value v) { return v.is(Kind::Foreign) && v.as<Foreign>()->typeName == scalerSymbol() && v.as<Foreign>()->ptr; }

GradScaler& scalerArg(Value v, const char* who) {
  if (!isScaler(v)) throwTypeError(who, 1, "a grad scaler", v);
  return *static_cast<GradScaler*>(v.as<Foreign>()->ptr);
}

// OUTPUTS times the scale: a tensor, or (nested) lists and vectors of tensors.
Value scaleOutputs(GradScaler& s, Value v, const char* who) {
  if (isTensor(v)) {
    const at::Tensor& t = tensorOf(v);
    if (!t.defined()) throwError("tensor-error", std::string(who) + ": the tensor was already freed");
    if (!s.enabled) return v;
    s.lazyInit(t.device());
    return wrapTensor(t * s.scale.to(t.device(), /*non_blocking=*/true));
  }
  if (isPair(v)) {
    Value head = scaleOutputs(s, car(v), who);
    return cons(head, scaleOutputs(s, cdr(v), who));
  }
  if (v.isNil()) return v;
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    Value out = makeVector(vec->extra);
    for (uint32_t k = 0; k < vec->extra; k++) out.as<Vector>()->items[k] = scaleOutputs(s, vec->items[k], who);
    return out;
  }
  throwTypeError(who, 2, "a tensor or a list of tensors", v);
}

void clearGrads(torch::optim::Optimizer& opt) {
  for (auto& g : opt.param_groups())
    for (auto& p : g.params())
      if (p.grad().defined()) p.mutable_grad().reset();
}

double dictNumber(Interp& in, Value dict, const char* key, const char* who) {
  Value v = isHashTable(dict) ? hashTableGet(in, dict, makeString(key)) : Value::missing();
  if (!isHashTable(dict) && !isList(dict))   // a circular alist would never end
    throwError("type-error", std::string(who) + ": a state dict must be a hash table or an alist, got " +
                                 describeValueType(dict));
  if (!isHashTable(dict))
    for (Value p = dict; isPair(p); p = cdr(p))
      if (isPair(car(p)) && isString(car(car(p))) && stringView(car(car(p))) == key) v = cdr(car(p));
  if (v.isMissing()) throwError("value-error", std::string(who) + ": the state dict has no \"" + key + "\" entry");
  if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).numel() == 1) return tensorOf(v).item<double>();
  if (!isRealNumber(v)) throwError("value-error", std::string(who) + ": \"" + key + "\" is not a number");
  return toDouble(v);
}

}  // namespace

void registerAmp(Registry& r) {
  r.def("call-with-autocast", "(thunk :key device dtype (enabled #t) (cache-enabled #t))",
        [](Interp& in, Procedure thunk, std::optional<at::Device> device, std::optional<at::ScalarType> dtype, bool enabled,
           bool cache) {
          at::DeviceType d = autocastDevice(device, "with-autocast");
          at::ScalarType t = dtype ? *dtype : (d == at::kCUDA ? at::kHalf : at::kBFloat16);
          if (enabled) checkAutocastDtype(d, t, "with-autocast");
          AutocastRegion region(d, t, enabled, cache);
          return in.apply(thunk.value, nullptr, 0);
        },
        "(call-with-autocast thunk :device d :dtype t :enabled e :cache-enabled c): calls THUNK with LibTorch's "
        "autocast on for device D (default \"cpu\"), as torch.autocast does: matrix products, convolutions and linear "
        "layers compute in T (bfloat16 on CPU, float16 on CUDA by default), precision-sensitive ops (softmax, losses, "
        "norms) in float32. The previous state comes back afterwards, also on errors. with-autocast is the syntax.");
  sandboxAllowed(r, "call-with-autocast", "thread state: autocast",
               "LibTorch keeps it per thread; restored on exit");
  r.def("autocast-enabled?", "(:optional device)",
        [](std::optional<at::Device> device) { return autocastEnabled(device ? device->type() : at::kCPU); },
        "True inside an autocast region for DEVICE (default \"cpu\").");
  r.def("autocast-dtype", "(:optional device)",
        [](std::optional<at::Device> device) { return autocastDtype(device ? device->type() : at::kCPU); },
        "The dtype autocast computes in on DEVICE (default \"cpu\"): bfloat16 or float16.");

  r.def("grad-scaler",
        "(:key (init-scale 65536.0) (growth-factor 2.0) (backoff-factor 0.5) (growth-interval 2000) (enabled #t))",
        [](double init, double growth, double backoff, int64_t interval, bool enabled) {
          if (growth <= 1.0) throwError("value-error", "grad-scaler: :growth-factor must be > 1");
          if (backoff >= 1.0 || backoff <= 0) throwError("value-error", "grad-scaler: :backoff-factor must be in (0, 1)");
          if (interval <= 0) throwError("value-error", "grad-scaler: :growth-interval must be positive");
          auto* s = new GradScaler();
          s->initScale = init, s->growthFactor = growth, s->backoffFactor = backoff, s->growthInterval = interval;
          s->enabled = enabled;
          return makeForeign(s, destroyScaler, scalerSymbol());
        },
        "A gradient scaler for mixed-precision training (torch.cuda.amp.GradScaler): multiply the loss by the scale "
        "before backward (grad-scaler-scale), then grad-scaler-step! unscales the gradients and steps the optimizer "
        "unless they hold an inf or NaN, and grad-scaler-update! adjusts the scale: times :backoff-factor after an "
        "overflow, times :growth-factor after :growth-interval clean steps. With :enabled #f every operation is a "
        "plain pass-through. A training step: (backward (grad-scaler-scale gs loss)) (grad-scaler-step! gs opt) "
        "(grad-scaler-update! gs).");
  r.def("grad-scaler?", "(x)", [](Value x) { return isScaler(x); }, "True when X is a grad scaler.");
  r.def("grad-scaler-enabled?", "(gs)", [](Value s) { return scalerArg(s, "grad-scaler-enabled?").enabled; },
        "True unless grad scaler GS was made with :enabled #f.");
  r.def("grad-scaler-scale", "(gs outputs)",
        [](Value sv, Value outputs) { return scaleOutputs(scalerArg(sv, "grad-scaler-scale"), outputs, "grad-scaler-scale"); },
        "OUTPUTS (a loss tensor, or a list of them) multiplied by the current scale, ready for backward.");
  r.def("grad-scaler-unscale!", "(gs opt)",
        [](Value sv, Value opt) {
          scalerArg(sv, "grad-scaler-unscale!").unscale(optimizerArg(opt, "grad-scaler-unscale!", 2)->opt, "grad-scaler-unscale!");
        },
        "Divides the gradients of OPT's parameters by the scale, in place, and records whether any holds an inf or "
        "NaN. Call it before clipping gradients; grad-scaler-step! then does not unscale again. Once per optimizer "
        "between updates.");
  r.def("grad-scaler-step!", "(gs opt)",
        [](Value sv, Value optV) {
          GradScaler& s = scalerArg(sv, "grad-scaler-step!");
          OptimizerObj* o = optimizerArg(optV, "grad-scaler-step!", 2);
          if (o->optKind == "lbfgs") throwError("value-error", "grad-scaler-step!: lbfgs needs a closure, which a grad scaler does not support");
          if (!s.enabled) {
            beforeOptimizerStep(o);
            o->opt->step();
            afterOptimizerStep(o);
            if (o->autoZeroGrad) clearGrads(*o->opt);
            return true;
          }
          auto& st = s.stateOf(o->opt);
          if (st.stage == Stage::Stepped)
            throwError("value-error", "grad-scaler-step!: step was already called on this optimizer since the last update");
          if (st.stage == Stage::Ready) s.unscale(o->opt, "grad-scaler-step!");
          auto& st2 = s.stateOf(o->opt);
          if (st2.foundInf.empty() && st2.stage == Stage::Unscaled) {
            // no parameter has a gradient: nothing to check, as PyTorch asserts
            throwError("value-error", "grad-scaler-step!: no inf checks were recorded for this optimizer (no parameter has a gradient)");
          }
          bool skip = s.foundInfIn(st2);
          if (!skip) {
            beforeOptimizerStep(o);
            o->opt->step();
            afterOptimizerStep(o);
          }
          st2.stage = Stage::Stepped;
          if (o->autoZeroGrad) clearGrads(*o->opt);
          return !skip;
        },
        "Steps OPT with the unscaled gradients (unscaling them first unless grad-scaler-unscale! did), or skips the step "
        "when they hold an inf or NaN. Returns #t when the optimizer stepped. The gradients are cleared afterwards, "
        "stepped or not, unless OPT was made with :auto-zero-grad #f.");
  r.def("grad-scaler-update!", "(gs :optional new-scale)",
        [](Value sv, Value newScale) {
          GradScaler& s = scalerArg(sv, "grad-scaler-update!");
          std::optional<double> n;
          std::optional<at::Tensor> t;
          if (isTensor(newScale)) t = tensorOf(newScale);
          else if (!newScale.isMissing() && !newScale.isFalse()) n = toDoubleValue(newScale, "grad-scaler-update!");
          s.update(n, t, "grad-scaler-update!");
        },
        "Updates the scale after an iteration's steps: smaller after an overflow, larger after growth-interval clean "
        "iterations (_amp_update_scale_), or NEW-SCALE when given.");
  r.def("grad-scaler-get-scale", "(gs)", [](Value sv) { return scalerArg(sv, "grad-scaler-get-scale").getScale(); },
        "The current scale of GS as a number (1.0 when disabled).");
  r.def("grad-scaler-state-dict", "(gs)",
        [](Interp& in, Value sv) {
          GradScaler& s = scalerArg(sv, "grad-scaler-state-dict");
          Value d = makeHashTable(HashEquiv::Equal);
          if (!s.enabled) return d;
          hashTablePut(in, d, makeString("scale"), makeFlonum(s.getScale()));
          hashTablePut(in, d, makeString("growth_factor"), makeFlonum(s.growthFactor));
          hashTablePut(in, d, makeString("backoff_factor"), makeFlonum(s.backoffFactor));
          hashTablePut(in, d, makeString("growth_interval"), makeInteger(s.growthInterval));
          hashTablePut(in, d, makeString("_growth_tracker"), makeInteger(s.getGrowthTracker()));
          return d;
        },
        "The state of GS as a hash table in GradScaler.state_dict()'s layout: \"scale\", \"growth_factor\", "
        "\"backoff_factor\", \"growth_interval\", \"_growth_tracker\" (empty when disabled).");
  r.def("load-grad-scaler-state-dict!", "(gs state)",
        [](Interp& in, Value sv, Value state) {
          GradScaler& s = scalerArg(sv, "load-grad-scaler-state-dict!");
          const char* who = "load-grad-scaler-state-dict!";
          if (!s.enabled) return sv;
          if (isHashTable(state) && hashTableCount(state) == 0)
            throwError("value-error", "load-grad-scaler-state-dict!: the state dict is empty (saved from a disabled grad scaler)");
          s.initScale = dictNumber(in, state, "scale", who);
          s.growthFactor = dictNumber(in, state, "growth_factor", who);
          s.backoffFactor = dictNumber(in, state, "backoff_factor", who);
          s.growthInterval = int64_t(dictNumber(in, state, "growth_interval", who));
          s.initGrowthTracker = int64_t(dictNumber(in, state, "_growth_tracker", who));
          if (s.scale.defined()) {
            s.scale.fill_(s.initScale);
            s.growthTracker.fill_(s.initGrowthTracker);
          }
          return sv;
        },
        "Restores grad scaler GS from STATE, a state dict from grad-scaler-state-dict (or PyTorch's). Returns GS.");
}

}  // namespace purple
