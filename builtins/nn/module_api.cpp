// The module API: parameters, buffers, children, modes, devices, state dicts (PyTorch's names
// and order), module-apply, module-requires-grad!, and module-summary, which prints a model as
// PyTorch does (its class names and extra_repr) and, given an input, each submodule's output
// shape and parameter count.
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "interp/language/printer.hpp"
#include <fstream>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

namespace purple {

using namespace nnlayer;

uint64_t addNativeForwardHook(const std::shared_ptr<torch::nn::Module>& m, std::function<void(Value, Value)> fn);
void removeNativeHook(const std::shared_ptr<torch::nn::Module>& m, uint64_t id);

namespace {

int64_t reductionFromName(const std::string& r, std::string_view who) {
  if (r == "mean") return at::Reduction::Mean;
  if (r == "sum") return at::Reduction::Sum;
  if (r == "none") return at::Reduction::None;
  throwError("value-error", std::string(who) + ": reduction must be \"mean\", \"sum\" or \"none\", got " + r);
}

void collectState(const Module& m, const std::string& prefix, std::vector<std::pair<std::string, at::Tensor>>& out) {
  for (const auto& p : m.named_parameters(/*recurse=*/false))
    if (p.value().defined()) out.emplace_back(prefix + p.key(), p.value());
  for (const auto& b : m.named_buffers(/*recurse=*/false))
    if (b.value().defined()) out.emplace_back(prefix + b.key(), b.value());
  for (const auto& c : m.named_children()) collectState(*c.value(), prefix + c.key() + ".", out);
}

// ---- printing as PyTorch does ---------------------------------------------------------------------

// The class name and extra_repr of M, as Python's repr(module) shows them.
void describe(const Module& m, std::string& name, std::string& extra) {
  name = moduleTypeName(m);
  if (dynamic_cast<const ModuleForward*>(&m)) {
    std::ostringstream os;
    m.pretty_print(os);
    std::string s = os.str();
    extra = s.size() > name.size() + 1 && s.compare(0, name.size() + 1, name + "(") == 0 && s.back() == ')'
                ? s.substr(name.size() + 1, s.size() - name.size() - 2)
                : "";
    return;
  }
  // Parts of LibTorch's own layers (the out_proj of multihead-attention ...).
  if (auto* l = dynamic_cast<const torch::nn::LinearImpl*>(&m)) extra = extraRepr(*l);
  else if (auto* n = dynamic_cast<const torch::nn::LayerNormImpl*>(&m)) extra = extraRepr(*n);
  else extra = libtorchExtraRepr(m);
}

// Python's nn.Module.__repr__. (Python's MultiheadAttention calls its out_proj a
// NonDynamicallyQuantizableLinear; LibTorch's is a Linear.)
std::string reprOf(const Module& m, bool isOutProj = false) {
  std::string name, extra;
  describe(m, name, extra);
  if (isOutProj && name == "Linear") name = "NonDynamicallyQuantizableLinear";
  std::vector<std::string> lines;
  if (!extra.empty()) lines.push_back(extra);
  auto kids = m.named_children();
  for (const auto& c : kids) {
    std::string child = reprOf(*c.value(), c.key() == "out_proj" && name == "MultiheadAttention");
    std::string indented;
    for (char ch : child) indented += ch == '\n' ? std::string("\n  ") : std::string(1, ch);
    lines.push_back("(" + c.key() + "): " + indented);
  }
  std::string s = name + "(";
  if (lines.size() == 1 && kids.is_empty()) {
    s += lines[0];
  } else if (!lines.empty()) {
    s += "\n";
    for (auto& l : lines) s += "  " + l + "\n";
  }
  return s + ")";
}

// ---- output shapes for module-summary ----------------------------------------------------------------

std::string shapeText(Value v) {
  if (isTensor(v) && tensorOf(v).defined()) return pyTuple(tensorOf(v).sizes());
  if (stackNearlyFull() || (isPair(v) && !isList(v))) return "...";   // nested too deeply, or circular
  if (isPair(v) || v.isNil()) {
    std::string s = "[";
    for (Value p = v; isPair(p); p = cdr(p)) s += (s.size() > 1 ? ", " : "") + shapeText(car(p));
    return s + "]";
  }
  if (v.isFalse()) return "None";
  return describeValueType(v);
}

std::string thousands(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t k = 0; k < s.size(); k++) {
    if (k && (s.size() - k) % 3 == 0) out += ',';
    out += s[k];
  }
  return out;
}

struct ParamCounts {
  int64_t total = 0, trainable = 0;
};

ParamCounts countParameters(const Module& m) {
  ParamCounts c;
  std::unordered_set<const void*> seen;   // a parameter shared by two layers counts once, as in PyTorch
  for (auto& p : m.parameters(true)) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    c.total += p.numel();
    if (p.requires_grad()) c.trainable += p.numel();
  }
  return c;
}

std::string summaryTable(Interp& in, const ModulePtr& root, Value input) {
  auto mods = root->named_modules("", /*include_self=*/true);
  std::unordered_map<const Module*, std::string> shapes;
  std::vector<std::pair<ModulePtr, uint64_t>> installed;
  std::vector<std::pair<ModulePtr, bool>> modes;
  for (const auto& e : mods) {
    modes.emplace_back(e.value(), e.value()->is_training());
    if (!dynamic_cast<ModuleForward*>(e.value().get())) continue;
    const Module* key = e.value().get();
    installed.emplace_back(e.value(), addNativeForwardHook(e.value(), [&shapes, key](Value, Value out) { shapes[key] = shapeText(out); }));
  }
  struct Restore {
    std::vector<std::pair<ModulePtr, uint64_t>>& hooks;
    std::vector<std::pair<ModulePtr, bool>>& modes;
    ~Restore() {
      for (auto& h : hooks) removeNativeHook(h.first, h.second);
      // train() recurses into children; parents come first in named_modules order, so each
      // module ends with its own earlier flag.
      for (auto& m : modes) m.first->train(m.second);
    }
  } restore{installed, modes};
  root->eval();
  {
    torch::NoGradGuard noGrad;
    std::vector<Value, traceable_allocator<Value>> args;
    if (isTensor(input)) args.push_back(input);
    else if (isList(input)) for (Value p = input; isPair(p); p = cdr(p)) args.push_back(car(p));
    else throwTypeError("module-summary", 2, "a tensor or a list of forward arguments", input);
    callModule(in, root, args.data(), int(args.size()));
  }
  std::vector<std::array<std::string, 3>> rows;
  for (const auto& e : mods) {
    std::string path = e.key();
    size_t depth = path.empty() ? 0 : size_t(std::count(path.begin(), path.end(), '.')) + 1;
    std::string label = std::string(2 * depth, ' ') + (path.empty() ? "" : path.substr(path.rfind('.') == std::string::npos ? 0 : path.rfind('.') + 1) + " ") +
                        "(" + moduleTypeName(*e.value()) + ")";
    auto it = shapes.find(e.value().get());
    rows.push_back({label, it == shapes.end() ? std::string("--") : it->second, thousands(countParameters(*e.value()).total)});
  }
  size_t w0 = 12, w1 = 12, w2 = 7;
  for (auto& r : rows) w0 = std::max(w0, r[0].size()), w1 = std::max(w1, r[1].size()), w2 = std::max(w2, r[2].size());
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
  auto padLeft = [](const std::string& s, size_t w) { return std::string(w > s.size() ? w - s.size() : 0, ' ') + s; };
  std::string rule(w0 + w1 + w2 + 4, '=');
  std::string s = pad("Layer (type)", w0) + "  " + pad("Output Shape", w1) + "  " + padLeft("Param #", w2) + "\n" + rule + "\n";
  for (auto& r : rows) s += pad(r[0], w0) + "  " + pad(r[1], w1) + "  " + padLeft(r[2], w2) + "\n";
  ParamCounts c = countParameters(*root);
  s += rule + "\nTotal params: " + thousands(c.total) + "\nTrainable params: " + thousands(c.trainable) +
       "\nNon-trainable params: " + thousands(c.total - c.trainable);
  return s;
}

}  // namespace

namespace {
ShardedParameters* gSharded = nullptr;
}

void setShardedParameters(ShardedParameters* s) { gSharded = s; }
ShardedParameters* shardedParameters() { return gSharded; }

bool moduleStateDictWriter(const Module& m) {
  if (!gSharded) return true;
  std::vector<int64_t> shape;
  for (auto& p : m.parameters(true))
    if (gSharded->fullShape(p, shape)) return gSharded->writes(p);
  return true;
}

std::vector<std::pair<std::string, at::Tensor>> moduleLocalStateDict(const Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  collectState(m, "", out);
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> moduleStateDict(const Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> out = moduleLocalStateDict(m);
  if (gSharded) {
    std::vector<int64_t> shape;
    for (auto& e : out)
      if (gSharded->fullShape(e.second, shape)) e.second = gSharded->gather(e.second);
  }
  return out;
}

void loadModuleStateDict(Module& m, const std::vector<std::pair<std::string, at::Tensor>>& entries, bool strict) {
  auto own = moduleLocalStateDict(m);
  std::unordered_map<const void*, std::vector<int64_t>> wholeShapes;   // sharded parameters
  if (gSharded) {
    std::vector<int64_t> shape;
    for (auto& o : own)
      if (gSharded->fullShape(o.second, shape)) wholeShapes[o.second.unsafeGetTensorImpl()] = shape;
  }
  auto shapeOf = [&](const at::Tensor& t) -> std::vector<int64_t> {
    auto it = wholeShapes.find(t.unsafeGetTensorImpl());
    return it == wholeShapes.end() ? t.sizes().vec() : it->second;
  };
  std::unordered_map<std::string, const at::Tensor*> given;
  for (auto& e : entries) given[e.first] = &e.second;
  std::vector<std::string> missing, unexpected, mismatched;
  std::unordered_map<std::string, bool> known;
  for (auto& o : own) {
    known[o.first] = true;
    auto it = given.find(o.first);
    if (it == given.end()) {
      missing.push_back(o.first);
      continue;
    }
    if (!it->second->defined()) continue;
    if (it->second->sizes().vec() != shapeOf(o.second)) {
      std::ostringstream s;
      s << o.first << ": copying a tensor of shape " << it->second->sizes() << " into one of shape "
        << c10::IntArrayRef(shapeOf(o.second));
      mismatched.push_back(s.str());
    }
  }
  for (auto& e : entries)
    if (!known.count(e.first)) unexpected.push_back(e.first);
  std::string msg;
  auto join = [](const std::vector<std::string>& xs) {
    std::string s;
    for (auto& x : xs) s += (s.empty() ? "\"" : ", \"") + x + "\"";
    return s;
  };
  if (!mismatched.empty()) {
    msg += " size mismatch:";
    for (auto& x : mismatched) msg += " " + x + ";";
  }
  if (strict && !missing.empty()) msg += " missing key(s): " + join(missing) + ".";
  if (strict && !unexpected.empty()) msg += " unexpected key(s): " + join(unexpected) + ".";
  if (!msg.empty()) throwError("value-error", "load-state-dict!: error(s) loading the state dict of " + moduleTypeName(m) + ":" + msg);
  torch::NoGradGuard noGrad;
  for (auto& o : own) {
    auto it = given.find(o.first);
    if (it == given.end() || !it->second->defined()) continue;
    at::Tensor target = o.second;
    if (wholeShapes.count(target.unsafeGetTensorImpl())) gSharded->scatter(target, *it->second);
    else target.copy_(*it->second);
  }
}

std::vector<std::pair<std::string, at::Tensor>> stateDictFromValue(Value v, std::string_view who) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  auto add = [&](Value k, Value t) {
    std::string name = nameOf(k);
    if (name.empty() && !isString(k)) throwError("type-error", std::string(who) + ": state dict keys must be strings, got " + toWriteString(k));
    if (!isTensor(t)) throwError("type-error", std::string(who) + ": the value of \"" + name + "\" must be a tensor, got " + toWriteString(t));
    out.emplace_back(name, tensorArg(t, who, 1));
  };
  if (isHashTable(v)) {
    auto* h = v.as<HashTable>();
    for (uint32_t i = 0; i < h->entryUsed; i++) {
      Value k = h->entries[2 * i];
      if (k.isUnbound()) continue;
      add(k, h->entries[2 * i + 1]);
    }
    return out;
  }
  if (!isList(v)) throwError("type-error", std::string(who) + ": a state dict must be an alist or a hash table of name -> tensor, got " + toWriteString(v));
  for (Value p = v; isPair(p); p = cdr(p)) {
    Value e = car(p);
    if (!isPair(e)) throwError("type-error", std::string(who) + ": state dict entries must be (name . tensor) pairs, got " + toWriteString(e));
    add(car(e), cdr(e));
  }
  return out;
}

Value stateDictToValue(const std::vector<std::pair<std::string, at::Tensor>>& entries) {
  Value r = Value::nil();
  for (size_t k = entries.size(); k-- > 0;) r = cons(cons(makeString(entries[k].first), wrapTensor(entries[k].second)), r);
  return r;
}

int64_t reductionArg(const std::optional<std::string>& r, std::string_view who) {
  return r ? reductionFromName(lowerDash(*r), who) : int64_t(at::Reduction::Mean);
}

namespace {
std::vector<std::pair<std::string, at::Tensor>> readStateDictFile(Interp& in, const std::string& path) {
  // load-state-dict (formats/serialize.cpp) reads files; reuse it through the global so this file does
  // not need the pickler's headers.
  Value loader = in.lookupGlobal("load-state-dict");
  if (loader.isUnbound()) throwError("error", "load-state-dict!: reading files needs load-state-dict");
  Value arg = makeString(path);
  return stateDictFromValue(in.apply(loader, &arg, 1), "load-state-dict!");
}
}  // namespace

void nnlayer::registerModuleApi(Registry& r) {
  r.def("parameters", "(m :key (recurse #t))",
        [](ModuleRef m, bool recurse) { return m.ptr->parameters(recurse); },
        "The trainable tensors of module M (and its children unless :recurse #f), in PyTorch's order. The tensors are "
        "the module's own: optimizers update them in place.");
  r.def("named-parameters", "(m :key (recurse #t))",
        [](ModuleRef m, bool recurse) {
          auto d = m.ptr->named_parameters(recurse);
          std::vector<std::pair<std::string, at::Tensor>> items;
          for (const auto& p : d) items.emplace_back(p.key(), p.value());
          return stateDictToValue(items);
        },
        "An alist (name . tensor) of M's parameters, named as in PyTorch (\"0.weight\", \"l1.bias\" ...).");
  r.def("buffers", "(m :key (recurse #t))",
        [](ModuleRef m, bool recurse) { return m.ptr->buffers(recurse); },
        "The buffers of module M: state that is saved and moved but not trained (batch-norm running statistics).");
  r.def("named-buffers", "(m :key (recurse #t))",
        [](ModuleRef m, bool recurse) {
          std::vector<std::pair<std::string, at::Tensor>> items;
          for (const auto& p : m.ptr->named_buffers(recurse)) items.emplace_back(p.key(), p.value());
          return stateDictToValue(items);
        },
        "An alist (name . tensor) of M's buffers.");
  r.def("module-children", "(m)",
        [](ModuleRef m) {
          Value r = Value::nil();
          auto kids = m.ptr->named_children();
          for (size_t k = kids.size(); k-- > 0;) r = cons(cons(makeString(kids[k].key()), wrapModule(kids[k].value())), r);
          return r;
        },
        "An alist (name . module) of M's direct children.");
  r.def("named-modules", "(m)",
        [](ModuleRef m) {
          Value r = Value::nil();
          auto all = m.ptr->named_modules("", /*include_self=*/true);
          for (size_t k = all.size(); k-- > 0;) r = cons(cons(makeString(all[k].key()), wrapModule(all[k].value())), r);
          return r;
        },
        "An alist (name . module) of M itself (named \"\") and every module inside it, depth first.");
  r.def("module-parameter", "(m name)",
        [](ModuleRef m, std::string name) -> at::Tensor {
          for (const auto& p : m.ptr->named_parameters(true))
            if (p.key() == name) return p.value();
          for (const auto& p : m.ptr->named_buffers(true))
            if (p.key() == name) return p.value();
          throwError("value-error", "module-parameter: " + moduleTypeName(*m.ptr) + " has no parameter or buffer \"" + name + "\"");
        },
        "The parameter (or buffer) of M called NAME, e.g. (module-parameter model \"0.weight\"); the module's own tensor.");
  r.def("module-submodule", "(m name)",
        [](ModuleRef m, std::string name) -> Value {
          for (const auto& c : m.ptr->named_modules("", false))
            if (c.key() == name) return wrapModule(c.value());
          throwError("value-error", "module-submodule: " + moduleTypeName(*m.ptr) + " has no submodule \"" + name + "\"");
        },
        "The submodule of M called NAME (a dotted path such as \"0\" or \"encoder.l1\").");

  r.def("module-train!", "(m :optional (on #t))",
        [](Value mv, bool on) {
          moduleArg(mv, "module-train!", 1)->train(on);
          return mv;
        },
        "Puts M and its children in training mode (or evaluation mode with #f); returns M.");
  r.def("module-eval!", "(m)",
        [](Value mv) {
          moduleArg(mv, "module-eval!", 1)->eval();
          return mv;
        },
        "Puts M and its children in evaluation mode (dropout off, batch-norm uses running statistics); returns M.");
  r.def("module-training?", "(m)", [](ModuleRef m) { return m.ptr->is_training(); },
        "True when module M is in training mode (the default for new modules).");
  r.def("module-to", "(m :optional target :key device dtype (non-blocking #f))",
        [](Value mv, Value target, Value device, Value dtype, bool nonBlocking) {
          const ModulePtr& m = moduleArg(mv, "module-to", 1);
          c10::optional<at::Device> dev;
          c10::optional<at::ScalarType> st;
          if (!target.isMissing()) {
            if (auto t = lookupScalarType(target)) st = *t;
            else dev = deviceFromValue(target, "module-to");
          }
          if (!device.isMissing() && !device.isFalse()) dev = deviceFromValue(device, "module-to");
          if (!dtype.isMissing() && !dtype.isFalse()) st = scalarTypeFromValue(dtype, "module-to");
          if (dev) checkDeviceAvailable(*dev);
          if (dev && st) m->to(*dev, *st, nonBlocking);
          else if (dev) m->to(*dev, nonBlocking);
          else if (st) m->to(*st, nonBlocking);
          return mv;
        },
        "Moves M's parameters and buffers to a device and/or converts them to a dtype, in place: (module-to m \"cuda\"), "
        "(module-to m 'float64), (module-to m :device \"cuda:0\" :dtype 'float16). Returns M. Tensors already held "
        "(by an optimizer, or bound in a define-module) follow, since they are the same tensors.");
  r.def("module-zero-grad!", "(m :key (set-to-none #t))",
        [](Value mv, bool setToNone) {
          for (auto& p : moduleArg(mv, "module-zero-grad!", 1)->parameters(true)) {
            if (!p.grad().defined()) continue;
            if (setToNone) p.mutable_grad().reset();
            else {
              p.mutable_grad().detach_();
              p.mutable_grad().zero_();
            }
          }
          return mv;
        },
        "Clears the gradients of M's parameters (to none, or to zeros with :set-to-none #f); returns M.");
  r.def("parameter-count", "(m :key (trainable-only #f))",
        [](ModuleRef m, bool trainable) {
          int64_t n = 0;
          for (auto& p : m.ptr->parameters(true))
            if (!trainable || p.requires_grad()) n += p.numel();
          return n;
        },
        "The number of scalar parameters in M (only those requiring gradients with :trainable-only #t).");
  r.def("state-dict", "(m :key (copy #f))",
        [](ModuleRef m, bool copy) {
          auto entries = moduleStateDict(*m.ptr);
          for (auto& e : entries) e.second = copy ? e.second.detach().clone() : e.second.detach();
          return stateDictToValue(entries);
        },
        "M's state as an alist (\"name\" . tensor) of parameters and buffers, in PyTorch's order and with PyTorch's "
        "names. The tensors are detached views of the module's own (they change as it trains, as in PyTorch); "
        ":copy #t returns independent copies.");
  r.def("load-state-dict!", "(m state :key (strict #t))",
        [](Interp& in, Value mv, Value state, bool strict) {
          const ModulePtr& m = moduleArg(mv, "load-state-dict!", 1);
          if (isString(state)) loadModuleStateDict(*m, readStateDictFile(in, std::string(stringView(state))), strict);
          else loadModuleStateDict(*m, stateDictFromValue(state, "load-state-dict!"), strict);
          return mv;
        },
        "Copies STATE into M's parameters and buffers, in place and without recording gradients. STATE is an alist or "
        "hash table of name -> tensor (from state-dict, load-state-dict, load-safetensors, or the \"model\" entry of a "
        "checkpoint read with torch-load) or the path of a file holding one: written by save-state-dict or by Python's "
        "torch.save(model.state_dict(), path), OrderedDicts and the legacy format included (read safely; tensors saved "
        "on a GPU need (load-state-dict path :map-location \"cpu\") here). Shapes must match; with :strict #t (the "
        "default) missing and unexpected names are errors too. Returns M.");

  r.def("module-summary", "(m :optional input)",
        [](Interp& in, ModuleRef m, Value input) {
          std::string s = reprOf(*m.ptr);
          ParamCounts c = countParameters(*m.ptr);
          s += "\nparameters: " + std::to_string(c.total) + " (trainable: " + std::to_string(c.trainable) + ")";
          if (!input.isMissing()) s += "\n\n" + summaryTable(in, m.ptr, input);
          return s;
        },
        "A printable summary of M: the model as PyTorch prints it (class names such as Linear, Conv2d, LSTM, and their "
        "arguments), then its parameter count:\n"
        "  Sequential(\n    (0): Linear(in_features=784, out_features=128, bias=True)\n    ...)\n"
        "  parameters: 101770 (trainable: 101770)\n"
        "Given an INPUT (a tensor, or a list of forward arguments), it also runs M once on it in evaluation mode without "
        "gradients and tabulates every submodule with its output shape and parameter count (modes are restored after). "
        "Display it with (display (module-summary m x)).");
  r.def("module-repr", "(m)", [](ModuleRef m) { return reprOf(*m.ptr); },
        "The text Python's repr(model) gives for M: the module tree with PyTorch's class names and arguments.");

  r.def("module-apply", "(m proc)",
        [](Interp& in, Value mv, Procedure proc) {
          std::function<void(const ModulePtr&)> visit = [&](const ModulePtr& mod) {
            for (const auto& c : mod->named_children()) visit(c.value());
            Value arg = wrapModule(mod);
            in.apply(proc.value, &arg, 1);
          };
          visit(moduleArg(mv, "module-apply", 1));
          return mv;
        },
        "Calls (PROC module) on every submodule of M and then on M itself, children before parents "
        "(torch.nn.Module.apply), typically to initialise weights: (module-apply model (lambda (m) (when (equal? "
        "(module-type m) \"Linear\") (init-xavier-uniform! (module-parameter m \"weight\"))))). Returns M.");
  r.def("module-requires-grad!", "(m :optional (requires-grad #t))",
        [](Value mv, bool on) {
          for (auto& p : moduleArg(mv, "module-requires-grad!", 1)->parameters(true)) p.set_requires_grad(on);
          return mv;
        },
        "Sets whether autograd records operations on M's parameters (torch.nn.Module.requires_grad_): "
        "(module-requires-grad! m #f) freezes M (an optimizer then leaves its parameters alone, and backward does "
        "not compute their gradients), (module-requires-grad! m) unfreezes it. Returns M.");
  registerHooks(r);
}

}  // namespace purple
