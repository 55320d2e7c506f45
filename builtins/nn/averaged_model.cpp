// Weight averaging: an exponential moving average of a model's weights (ema-model) and
// stochastic weight averaging (swa-model), as torch.optim.swa_utils.AveragedModel computes them.
//
// PyTorch's AveragedModel deep-copies the module. A Purple module's forward may be a closure over
// its own submodules, which cannot be copied faithfully, so the averaged model here keeps the
// averaged tensors beside the model instead: one per parameter (and per buffer), initialised
// from the model, updated by averaged-model-update!. Evaluating "the averaged model" swaps the
// averages into the model for the extent of a thunk (call-with-averaged-model), and
// averaged-model-copy-to! writes them in for good. Buffers follow PyTorch: copied once when
// :use-buffers is #f (update-bn! recomputes batch-norm statistics for the averages), averaged with
// the parameters when #t. n_averaged counts the updates, as PyTorch's buffer does.
#include "builtins/nn/optim.hpp"
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>

namespace purple {

namespace {

struct AveragedModel {
  std::shared_ptr<torch::nn::Module> module;
  std::string kind;                      // "ema-model" or "swa-model"
  double decay = 0.999;                  // ema
  Root avgFn;                            // custom (avg param n) -> new avg, or unset
  bool useBuffers = false;
  int64_t nAveraged = 0;
  std::vector<std::string> names;        // parameter names, then buffer names
  std::vector<at::Tensor> averages;      // the averaged model's tensors, in that order
  size_t nParams = 0;

  std::vector<at::Tensor> modelTensors(torch::nn::Module& m) const {
    std::vector<at::Tensor> out;
    for (auto& p : m.named_parameters(true)) out.push_back(p.value());
    for (auto& b : m.named_buffers(true)) out.push_back(b.value());
    return out;
  }

  void init() {
    at::NoGradGuard noGrad;
    for (auto& p : module->named_parameters(true)) names.push_back(p.key()), averages.push_back(p.value().detach().clone());
    nParams = names.size();
    for (auto& b : module->named_buffers(true)) names.push_back(b.key()), averages.push_back(b.value().detach().clone());
  }

  void update(Interp& in, torch::nn::Module& from, const char* who) {
    std::vector<at::Tensor> current = modelTensors(from);
    if (current.size() != averages.size())
      throwError("value-error", std::string(who) + ": the model has " + std::to_string(current.size()) +
                                    " parameters and buffers, the averaged model " + std::to_string(averages.size()));
    size_t n = useBuffers ? averages.size() : nParams;
    at::NoGradGuard noGrad;
    for (size_t i = 0; i < n; i++) {
      at::Tensor& avg = averages[i];
      at::Tensor p = current[i].detach().to(avg.device());
      if (p.sizes() != avg.sizes())
        throwError("value-error", std::string(who) + ": " + names[i] + " changed shape since the averaged model was made");
      if (nAveraged == 0 || !avg.is_floating_point()) {
        avg.copy_(p);
      } else if (avgFn) {
        Value args[3] = {wrapTensor(avg.clone()), wrapTensor(p), makeInteger(nAveraged)};
        Value r = in.apply(avgFn.get(), args, 3);
        if (!isTensor(r) || !tensorOf(r).defined())
          throwError("type-error", std::string(who) + ": the :avg-fn procedure must return a tensor, got " + toWriteString(r));
        avg.copy_(tensorOf(r));
      } else if (kind == "ema-model") {
        avg.copy_(avg * decay + p * (1 - decay));
      } else {
        // swa: avg + (p - avg) / (n + 1), with n as a tensor on the averages' device, as in PyTorch
        at::Tensor count = at::scalar_tensor(nAveraged, at::TensorOptions().dtype(at::kLong).device(avg.device()));
        avg.copy_(avg + (p - avg) / (count + 1));
      }
    }
    nAveraged++;
  }

  // Swaps the averages and the model's tensors (the data, not the tensor objects).
  void swap() {
    at::NoGradGuard noGrad;
    std::vector<at::Tensor> current = modelTensors(*module);
    for (size_t i = 0; i < averages.size() && i < current.size(); i++) {
      at::Tensor tmp = current[i].detach().clone();
      current[i].detach().copy_(averages[i]);
      averages[i].copy_(tmp);
    }
  }
};

void destroyAveraged(void* p) { delete static_cast<AveragedModel*>(p); }

Value averagedSymbol() {
  static Value s = intern("averaged-model");
  return s;
}

bool isAveraged(Value v) {
  return v.is(Kind::Foreign) && v.as<Foreign>()->typeName == averagedSymbol() && v.as<Foreign>()->ptr;
}

AveragedModel& averagedArg(Value v, const char* who) {
  if (!isAveraged(v)) throwTypeError(who, 1, "an averaged model (from ema-model or swa-model)", v);
  return *static_cast<AveragedModel*>(v.as<Foreign>()->ptr);
}

Value makeAveraged(ModuleRef m, const char* kind, double decay, Value avgFn, bool useBuffers) {
  auto* a = new AveragedModel();
  a->module = m.ptr;
  a->kind = kind;
  a->decay = decay;
  a->useBuffers = useBuffers;
  if (!avgFn.isMissing() && !avgFn.isFalse()) {
    if (!isProcedure(avgFn)) {
      delete a;
      throwTypeError(kind, 2, "a procedure (:avg-fn)", avgFn);
    }
    a->avgFn.set(avgFn);
  }
  a->init();
  return makeForeign(a, destroyAveraged, averagedSymbol());
}

// Restores the swap whatever way the thunk exits.
struct SwapGuard {
  AveragedModel& a;
  explicit SwapGuard(AveragedModel& x) : a(x) { a.swap(); }
  ~SwapGuard() { a.swap(); }
};

// The batch-norm layers of M, as update_bn finds them.
template <class F> void forEachBatchNorm(torch::nn::Module& m, F f) {
  for (auto& sub : m.modules(/*include_self=*/true)) {
    if (auto* b = dynamic_cast<torch::nn::BatchNorm1dImpl*>(sub.get())) f(b->options, [b] { b->reset_running_stats(); });
    else if (auto* b2 = dynamic_cast<torch::nn::BatchNorm2dImpl*>(sub.get())) f(b2->options, [b2] { b2->reset_running_stats(); });
    else if (auto* b3 = dynamic_cast<torch::nn::BatchNorm3dImpl*>(sub.get())) f(b3->options, [b3] { b3->reset_running_stats(); });
  }
}

}  // namespace

void registerAveragedModels(Registry& r) {
  r.def("ema-model", "(model :key (decay 0.999) (use-buffers #f))",
        [](ModuleRef m, double decay, bool useBuffers) {
          if (!(decay >= 0 && decay <= 1)) throwError("value-error", "ema-model: :decay must be in [0, 1]");
          return makeAveraged(m, "ema-model", decay, Value::missing(), useBuffers);
        },
        "An exponential moving average of MODEL's weights (AveragedModel with an EMA average): each "
        "averaged-model-update! sets avg = decay * avg + (1 - decay) * weight (the first copies the weights). With "
        ":use-buffers #t, buffers (batch-norm statistics) are averaged too; otherwise they are the model's at creation. "
        "Evaluate with (call-with-averaged-model ema thunk) or averaged-model-forward.");
  r.def("swa-model", "(model :key avg-fn (use-buffers #f))",
        [](ModuleRef m, Value avgFn, bool useBuffers) { return makeAveraged(m, "swa-model", 0, avgFn, useBuffers); },
        "Stochastic weight averaging of MODEL (torch.optim.swa_utils.AveragedModel): averaged-model-update! keeps the "
        "running mean of the weights it has seen, or calls :avg-fn (averaged weight, current weight, number averaged so "
        "far) for each tensor. Buffers as for ema-model; recompute batch-norm statistics with update-bn!.");
  r.def("averaged-model?", "(x)", [](Value x) { return isAveraged(x); }, "True when X is made by ema-model or swa-model.");
  r.def("averaged-model-update!", "(avg :optional model)",
        [](Interp& in, Value av, std::optional<ModuleRef> model) {
          AveragedModel& a = averagedArg(av, "averaged-model-update!");
          a.update(in, model ? *model->ptr : *a.module, "averaged-model-update!");
        },
        "Folds the current weights of the averaged model's module (or of MODEL, of the same structure) into AVG "
        "(AveragedModel.update_parameters).");
  r.def("averaged-model-count", "(avg)", [](Value av) { return averagedArg(av, "averaged-model-count").nAveraged; },
        "How many times AVG has been updated (n_averaged).");
  r.def("averaged-model-module", "(avg)", [](Value av) { return ModuleRef{averagedArg(av, "averaged-model-module").module}; },
        "The module whose weights AVG averages.");
  r.def("averaged-model-parameters", "(avg)",
        [](Value av) {
          AveragedModel& a = averagedArg(av, "averaged-model-parameters");
          return std::vector<at::Tensor>(a.averages.begin(), a.averages.begin() + long(a.nParams));
        },
        "The averaged parameters of AVG, in the order of (parameters module).");
  r.def("averaged-model-state-dict", "(avg)",
        [](Value av) {
          AveragedModel& a = averagedArg(av, "averaged-model-state-dict");
          std::vector<std::pair<std::string, at::Tensor>> entries;
          for (size_t i = 0; i < a.names.size(); i++) entries.emplace_back("module." + a.names[i], a.averages[i]);
          entries.emplace_back("n_averaged", at::scalar_tensor(a.nAveraged, at::TensorOptions().dtype(at::kLong)));
          return stateDictToValue(entries);
        },
        "The averaged model's state dict in AveragedModel's layout: \"module.NAME\" for each averaged parameter and "
        "buffer, and \"n_averaged\".");
  r.def("load-averaged-model-state-dict!", "(avg state)",
        [](Value av, Value state) {
          AveragedModel& a = averagedArg(av, "load-averaged-model-state-dict!");
          auto entries = stateDictFromValue(state, "load-averaged-model-state-dict!");
          at::NoGradGuard noGrad;
          size_t found = 0;
          for (auto& [k, t] : entries) {
            if (k == "n_averaged") {
              a.nAveraged = t.item<int64_t>();
              continue;
            }
            for (size_t i = 0; i < a.names.size(); i++)
              if (k == "module." + a.names[i]) {
                if (t.sizes() != a.averages[i].sizes())
                  throwError("value-error", "load-averaged-model-state-dict!: " + k + " has the wrong shape");
                a.averages[i].copy_(t);
                found++;
              }
          }
          if (found != a.names.size())
            throwError("value-error", "load-averaged-model-state-dict!: the state dict lacks some of the averaged tensors");
          return av;
        },
        "Restores AVG from a state dict made by averaged-model-state-dict. Returns AVG.");
  r.def("%batch-norm-prepare-update!", "(m)",
        [](ModuleRef m) {
          std::vector<double> momenta;
          forEachBatchNorm(*m.ptr, [&](torch::nn::BatchNormOptions& o, auto reset) {
            if (!o.track_running_stats()) return;
            momenta.push_back(o.momentum() ? *o.momentum() : -1.0);
            reset();
            o.momentum(c10::nullopt);
          });
          return momenta;
        },
        "update-bn!'s first half: resets the running statistics of M's batch-norm layers and makes them cumulative "
        "(momentum None); returns their previous momenta (-1 for None), or () when M has none.");
  r.def("%batch-norm-restore-momenta!", "(m momenta)",
        [](ModuleRef m, std::vector<double> momenta) {
          size_t k = 0;
          forEachBatchNorm(*m.ptr, [&](torch::nn::BatchNormOptions& o, auto) {
            if (!o.track_running_stats() || k >= momenta.size()) return;
            double v = momenta[k++];
            o.momentum(v < 0 ? c10::optional<double>() : c10::optional<double>(v));
          });
        },
        "update-bn!'s second half: gives M's batch-norm layers back the MOMENTA %batch-norm-prepare-update! returned.");
  r.def("call-with-averaged-model", "(avg thunk)",
        [](Interp& in, Value av, Procedure thunk) {
          AveragedModel& a = averagedArg(av, "call-with-averaged-model");
          SwapGuard guard(a);
          return in.apply(thunk.value, nullptr, 0);
        },
        "Calls THUNK with the averaged weights in AVG's module, and puts the module's own weights back afterwards "
        "(also on errors): inside, (forward model x) is the averaged model's forward. with-averaged-model is the syntax.");
  r.def("averaged-model-copy-to!", "(avg :optional model)",
        [](Value av, std::optional<ModuleRef> model) {
          AveragedModel& a = averagedArg(av, "averaged-model-copy-to!");
          torch::nn::Module& m = model ? *model->ptr : *a.module;
          at::NoGradGuard noGrad;
          std::vector<at::Tensor> ts = a.modelTensors(m);
          if (ts.size() != a.averages.size()) throwError("value-error", "averaged-model-copy-to!: the model has a different structure");
          for (size_t i = 0; i < ts.size(); i++) ts[i].detach().copy_(a.averages[i]);
        },
        "Writes the averaged weights of AVG into its module (or MODEL), e.g. at the end of training.");
}

}  // namespace purple
