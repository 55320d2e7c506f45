// nn modules: the module value kind, LibTorch's built-in layers, activations, `sequential`,
// `forward` and the module API (parameters, modes, devices, state dicts, summaries,
// initialisers).
//
// Names shared by a module constructor and a functional op follow one rule: when the first
// argument is a tensor the call is functional (torch.nn.functional.NAME; for activations, dropout
// and flatten, `(f x args ...)` equals `((f args ...) x)`), otherwise it makes a module:
//   (conv2d 3 16 3)            a Conv2d module      (conv2d x weight bias :stride 2)  functional
//   (max-pool2d 2)             a MaxPool2d module   (max-pool2d x 2)                  functional
//   (relu)                     a ReLU module        (relu x)                          applies it
//   (softmax -1)               a Softmax module     (softmax x -1)                    applies it
//
// State dicts are alists ("name" . tensor) in PyTorch's order, so names and order match
// Python's `model.state_dict()` for the same architecture; load-state-dict! also takes a hash
// table or a file path.
#include <torch/nn.h>
#include <torch/version.h>
#include "builtins/nn/value.hpp"
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/tensor/util.hpp"
#include "interp/gc.hpp"
#include "interp/printer.hpp"
#include "interp/tensor_value.hpp"
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace purple {

using torch::nn::Module;
using ModulePtr = std::shared_ptr<Module>;

// ---- the module value --------------------------------------------------------------------------

namespace {
void finalizeModule(void* obj, void*) {
  auto* cell = static_cast<ModuleObj*>(obj);
  cell->module.~shared_ptr<Module>();
}
}  // namespace

Value wrapModule(ModulePtr m) {
  auto* cell = static_cast<ModuleObj*>(gcAllocAtomic(sizeof(ModuleObj)));
  cell->kind = Kind::Module;
  cell->flags = 0;
  cell->small = 0;
  cell->extra = 0;
  new (&cell->module) ModulePtr(std::move(m));
  gcRegisterFinalizer(cell, finalizeModule, nullptr);
  return Value(cell);
}

bool isModule(Value v) { return v.is(Kind::Module); }

at::Tensor ModuleForward::tensorForward(const at::Tensor&) {
  throwError("internal-error", typeName() + ": no tensor fast path");
}

const ModulePtr& moduleArg(Value v, std::string_view who, int argIndex) {
  if (!isModule(v)) throwTypeError(who, argIndex, "a module", v);
  const ModulePtr& m = v.as<ModuleObj>()->module;
  if (!m) throwError("type-error", std::string(who) + ": the module was already released");
  return m;
}

std::string moduleTypeName(const Module& m) {
  if (auto* f = dynamic_cast<const ModuleForward*>(&m)) return f->typeName();
  std::string n = m.name();
  if (n.rfind("torch::nn::", 0) == 0) n = n.substr(11);
  if (n.size() > 4 && n.compare(n.size() - 4, 4, "Impl") == 0) n.resize(n.size() - 4);
  return n;
}

namespace {
std::string trimMessage(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
}  // namespace

Value callModule(Interp& in, const ModulePtr& m, const Value* argv, int argc) {
  ModulePtr keep = m;   // the cell may become garbage while its forward runs
  auto* f = dynamic_cast<ModuleForward*>(keep.get());
  if (!f) throwError("type-error", "module " + moduleTypeName(*keep) + " has no forward that Purple can call");
  try {
    return f->forward(in, argv, argc);
  } catch (const PurpleException&) {
    throw;
  } catch (const ContinuationInvoked&) {
    throw;
  } catch (const c10::Error& e) {
    throwError("tensor-error", f->typeName() + ": " + trimMessage(e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    gcCollectNow();
    throwError("memory-error", f->typeName() + ": out of memory");
  } catch (const std::exception& e) {
    throwError("error", f->typeName() + ": " + trimMessage(e.what()));
  }
}

ForwardArgs splitForwardArgs(const Value* argv, int argc, const std::string& who,
                             std::initializer_list<const char*> allowed) {
  ForwardArgs r;
  int i = 0;
  while (i < argc && !isKeyword(argv[i])) r.positional.push_back(argv[i++]);
  while (i < argc) {
    if (!isKeyword(argv[i]))
      throwError("arity-error", who + ": unexpected argument " + toWriteString(argv[i]) + " after keywords");
    std::string k(symbolName(argv[i]));
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) {
      std::string known;
      for (const char* a : allowed) known += std::string(known.empty() ? ":" : " :") + a;
      throwError("arity-error", who + ": unknown keyword :" + k + " (known: " + (known.empty() ? "none" : known) + ")");
    }
    if (i + 1 >= argc) throwError("arity-error", who + ": keyword :" + k + " needs a value");
    r.keys.emplace_back(k, argv[i + 1]);
    i += 2;
  }
  return r;
}

Value ForwardArgs::key(std::string_view name) const {
  for (auto& kv : keys)
    if (kv.first == name) return kv.second;
  return Value::missing();
}

namespace {

const at::Tensor& tensorIn(Value v, const std::string& who, int index) { return tensorArg(v, who, index); }
at::Tensor optTensor(Value v, const std::string& who, int index) {
  if (v.isMissing() || v.isFalse()) return at::Tensor();
  return tensorArg(v, who, index);
}
bool optBool(Value v, bool dflt) { return v.isMissing() ? dflt : v.isTrue(); }

void needArgs(const ForwardArgs& a, size_t lo, size_t hi, const std::string& who) {
  if (a.positional.size() < lo || a.positional.size() > hi)
    throwError("arity-error", who + ": forward takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
                                  " positional arguments, got " + std::to_string(a.positional.size()));
}

// ---- built-in layers -----------------------------------------------------------------------------

// A LibTorch layer whose forward maps one tensor to one tensor.
template <class Impl>
struct Layer : Impl, ModuleForward {
  using Impl::Impl;
  std::string tname;
  std::string typeName() const override { return tname; }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc != 1) throwError("arity-error", tname + ": forward takes 1 argument (a tensor), got " + std::to_string(argc));
    return wrapTensor(Impl::forward(tensorIn(argv[0], tname, 1)));
  }
  bool hasTensorForward() const override { return true; }
  at::Tensor tensorForward(const at::Tensor& x) override { return Impl::forward(x); }
  void pretty_print(std::ostream& s) const override {
    // Debian's LibTorch 1.13 does not export BatchNormImplBase<D>::pretty_print.
    if constexpr (std::is_base_of_v<torch::nn::BatchNormImplBase<1, torch::nn::BatchNorm1dImpl>, Impl> ||
                  std::is_base_of_v<torch::nn::BatchNormImplBase<2, torch::nn::BatchNorm2dImpl>, Impl>) {
      const auto& o = this->options;
      s << std::boolalpha << tname << "(" << o.num_features() << ", eps=" << o.eps() << ", momentum=";
      if (o.momentum()) s << *o.momentum();
      else s << "None";
      s << ", affine=" << o.affine() << ", track_running_stats=" << o.track_running_stats() << ")";
    } else {
      Impl::pretty_print(s);
    }
  }
};

template <class Impl>
Value makeLayer(const char* tname) {
  auto m = std::make_shared<Layer<Impl>>();
  m->tname = tname;
  return wrapModule(m);
}

template <class Impl, class Options>
Value makeLayer(const char* tname, const Options& opts) {
  auto m = std::make_shared<Layer<Impl>>(opts);
  m->tname = tname;
  return wrapModule(m);
}

// rnn and gru: (m x [h0]) -> (output h_n)
template <class Impl>
struct RecurrentLayer : Impl, ModuleForward {
  using Impl::Impl;
  std::string tname;
  std::string typeName() const override { return tname; }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc < 1 || argc > 2) throwError("arity-error", tname + ": forward takes an input and an optional hidden state");
    at::Tensor h = argc == 2 ? optTensor(argv[1], tname, 2) : at::Tensor();
    auto r = Impl::forward(tensorIn(argv[0], tname, 1), h);
    return listFromArray(std::array<Value, 2>{wrapTensor(std::get<0>(r)), wrapTensor(std::get<1>(r))}.data(), 2);
  }
};

// lstm: (m x [(h0 c0)]) -> (output (h_n c_n))
struct LstmLayer : torch::nn::LSTMImpl, ModuleForward {
  using torch::nn::LSTMImpl::LSTMImpl;
  std::string typeName() const override { return "LSTM"; }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc < 1 || argc > 2) throwError("arity-error", "LSTM: forward takes an input and an optional (h0 c0) list");
    torch::optional<std::tuple<at::Tensor, at::Tensor>> hx;
    if (argc == 2 && !argv[1].isFalse()) {
      Value s = argv[1];
      if (!isPair(s) || !isPair(cdr(s)) || !cddr(s).isNil()) throwTypeError("LSTM", 2, "a list (h0 c0)", s);
      hx = std::make_tuple(tensorIn(car(s), "LSTM", 2), tensorIn(cadr(s), "LSTM", 2));
    }
    auto r = torch::nn::LSTMImpl::forward(tensorIn(argv[0], "LSTM", 1), hx);
    Value hc[2] = {wrapTensor(std::get<0>(std::get<1>(r))), wrapTensor(std::get<1>(std::get<1>(r)))};
    Value out[2] = {wrapTensor(std::get<0>(r)), listFromArray(hc, 2)};
    return listFromArray(out, 2);
  }
};

// multihead-attention: (m q k v :key-padding-mask :need-weights :attn-mask
// :average-attn-weights) -> (output weights-or-#f). LibTorch's layer is sequence-first; with
// :batch-first the inputs and output are transposed around it, as Python's option does.
struct MhaLayer : torch::nn::MultiheadAttentionImpl, ModuleForward {
  using torch::nn::MultiheadAttentionImpl::MultiheadAttentionImpl;
  bool batchFirst = false;
  std::string typeName() const override { return "MultiheadAttention"; }
  Value forward(Interp&, const Value* argv, int argc) override {
    const std::string who = "MultiheadAttention";
    ForwardArgs a = splitForwardArgs(argv, argc, who, {"key-padding-mask", "need-weights", "attn-mask", "average-attn-weights"});
    needArgs(a, 1, 3, who);
    at::Tensor q = tensorIn(a.positional[0], who, 1);
    at::Tensor k = a.positional.size() > 1 ? tensorIn(a.positional[1], who, 2) : q;
    at::Tensor v = a.positional.size() > 2 ? tensorIn(a.positional[2], who, 3) : k;
    if (batchFirst) {
      q = q.transpose(0, 1);
      k = k.transpose(0, 1);
      v = v.transpose(0, 1);
    }
    auto r = torch::nn::MultiheadAttentionImpl::forward(
        q, k, v, optTensor(a.key("key-padding-mask"), who, 4), optBool(a.key("need-weights"), true),
        optTensor(a.key("attn-mask"), who, 5), optBool(a.key("average-attn-weights"), true));
    at::Tensor out = std::get<0>(r);
    if (batchFirst) out = out.transpose(0, 1);
    Value items[2] = {wrapTensor(out), std::get<1>(r).defined() ? wrapTensor(std::get<1>(r)) : Value::f()};
    return listFromArray(items, 2);
  }
};

// transformer-encoder-layer: (m src :src-mask :src-key-padding-mask) -> tensor
struct EncoderLayer : torch::nn::TransformerEncoderLayerImpl, ModuleForward {
  using torch::nn::TransformerEncoderLayerImpl::TransformerEncoderLayerImpl;
  bool batchFirst = false;
  std::string typeName() const override { return "TransformerEncoderLayer"; }
  at::Tensor run(at::Tensor src, const at::Tensor& mask, const at::Tensor& padding) {
    if (batchFirst) src = src.transpose(0, 1);
    at::Tensor out = torch::nn::TransformerEncoderLayerImpl::forward(src, mask, padding);
    return batchFirst ? out.transpose(0, 1) : out;
  }
  Value forward(Interp&, const Value* argv, int argc) override {
    const std::string who = typeName();
    ForwardArgs a = splitForwardArgs(argv, argc, who, {"src-mask", "src-key-padding-mask"});
    needArgs(a, 1, 2, who);
    at::Tensor mask = a.positional.size() > 1 ? optTensor(a.positional[1], who, 2) : optTensor(a.key("src-mask"), who, 2);
    return wrapTensor(run(tensorIn(a.positional[0], who, 1), mask, optTensor(a.key("src-key-padding-mask"), who, 3)));
  }
  bool hasTensorForward() const override { return true; }
  at::Tensor tensorForward(const at::Tensor& x) override { return run(x, at::Tensor(), at::Tensor()); }
};

// ---- sequential --------------------------------------------------------------------------------

struct SequentialModule : Module, ModuleForward {
  SequentialModule() : Module("Sequential") {}
  std::vector<std::pair<std::string, ModulePtr>> items;   // also registered as children
  bool allTensor = true;
  std::string typeName() const override { return "Sequential"; }
  void pretty_print(std::ostream& s) const override { s << "Sequential"; }

  void add(const std::string& name, ModulePtr m) {
    register_module(name, m);
    auto* f = dynamic_cast<ModuleForward*>(m.get());
    allTensor = allTensor && f && f->hasTensorForward();
    items.emplace_back(name, std::move(m));
  }

  at::Tensor step(size_t i, const at::Tensor& x) {
    auto* f = dynamic_cast<ModuleForward*>(items[i].second.get());
    try {
      return f->tensorForward(x);
    } catch (const c10::Error& e) {
      throwError("tensor-error", f->typeName() + " (layer " + items[i].first + "): " + trimMessage(e.what_without_backtrace()));
    }
  }

  bool hasTensorForward() const override { return allTensor; }
  at::Tensor tensorForward(const at::Tensor& x) override {
    at::Tensor t = x;
    for (size_t i = 0; i < items.size(); i++) t = step(i, t);
    return t;
  }

  Value forward(Interp& in, const Value* argv, int argc) override {
    if (items.empty()) {
      if (argc != 1) throwError("arity-error", "Sequential: an empty sequential takes 1 argument");
      return argv[0];
    }
    at::Tensor t;
    bool haveT = false;
    Value v = Value::unspecified();
    size_t i = 0;
    if (argc == 1 && isTensor(argv[0])) {
      t = tensorIn(argv[0], "Sequential", 1);
      haveT = true;
    } else {
      v = callModule(in, items[0].second, argv, argc);
      i = 1;
      if (isTensor(v) && tensorOf(v).defined()) t = tensorOf(v), haveT = true;
    }
    bool vIsT = !haveT || i == 1;   // v holds t (so it can be returned as is)
    if (i == 0) vIsT = false;
    for (; i < items.size(); i++) {
      auto* f = dynamic_cast<ModuleForward*>(items[i].second.get());
      if (haveT && f && f->hasTensorForward()) {
        t = step(i, t);
        vIsT = false;
        continue;
      }
      Value arg = haveT ? (vIsT ? v : wrapTensor(t)) : v;
      v = callModule(in, items[i].second, &arg, 1);
      haveT = isTensor(v) && tensorOf(v).defined();
      if (haveT) t = tensorOf(v);
      vIsT = true;
    }
    if (!haveT) return v;
    return vIsT ? v : wrapTensor(t);
  }
};

// ---- the apply hook: (model x) --------------------------------------------------------------------

Value (*gPreviousApplyHook)(Interp&, Value, const Value*, int) = nullptr;

Value moduleApplyHook(Interp& in, Value fn, const Value* argv, int argc) {
  if (isModule(fn)) return callModule(in, moduleArg(fn, "apply", 0), argv, argc);
  if (gPreviousApplyHook) return gPreviousApplyHook(in, fn, argv, argc);
  throwError("type-error", "attempt to call a non-procedure:", listFromArray(&fn, 1));
}

// ---- option helpers ------------------------------------------------------------------------------


// Argument readers for raw Values (builtins whose arguments change meaning with the first one).
IntList intsArg(Value v, const std::string& who, int i) {
  IntList out;
  if (v.isFixnum()) return {v.fixnum()};
  if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).dim() <= 1 && !tensorOf(v).is_floating_point()) {
    at::Tensor t = tensorOf(v).to(at::kCPU).to(at::kLong).contiguous();
    for (int64_t k = 0; k < t.numel(); k++) out.push_back(t.data_ptr<int64_t>()[k]);
    return out;
  }
  auto one = [&](Value x) {
    if (x.isFixnum()) return x.fixnum();
    if (isFlonum(x) && flonumValue(x) == std::floor(flonumValue(x))) return int64_t(flonumValue(x));
    throwTypeError(who, i, "an integer or a list of integers", v);
  };
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) out.push_back(one(vec->items[k]));
    return out;
  }
  if (!isList(v) || v.isNil()) throwTypeError(who, i, "an integer or a list of integers", v);
  for (Value p = v; isPair(p); p = cdr(p)) out.push_back(one(car(p)));
  return out;
}
int64_t intArg(Value v, const std::string& who, int i) {
  if (v.isFixnum()) return v.fixnum();
  if (isFlonum(v) && flonumValue(v) == std::floor(flonumValue(v))) return int64_t(flonumValue(v));
  throwTypeError(who, i, "an integer", v);
}
double realArg(Value v, const std::string& who, int i) {
  if (v.isFixnum()) return double(v.fixnum());
  if (isFlonum(v)) return flonumValue(v);
  if (isNumber(v)) return toDouble(v);
  throwTypeError(who, i, "a real number", v);
}

template <size_t D>
torch::ExpandingArray<D> ea(const IntList& v, const std::string& who, const char* what) {
  if (v.size() == 1) return torch::ExpandingArray<D>(v[0]);
  if (v.size() != D)
    throwError("value-error", who + ": " + what + " needs 1 or " + std::to_string(D) + " integers, got " + std::to_string(v.size()));
  return torch::ExpandingArray<D>(at::IntArrayRef(v));
}

IntList intsOr(Value v, const std::string& who, int i, IntList dflt) {
  if (v.isMissing() || v.isFalse()) return dflt;
  return intsArg(v, who, i);
}
double realOr(Value v, const std::string& who, int i, double dflt) {
  if (v.isMissing()) return dflt;
  return realArg(v, who, i);
}
int64_t intOr(Value v, const std::string& who, int i, int64_t dflt) {
  if (v.isMissing()) return dflt;
  return intArg(v, who, i);
}
std::string nameOf(Value v) {
  if (isString(v)) return std::string(stringView(v));
  if (v.is(Kind::Symbol)) return std::string(symbolName(v));
  return "";
}
std::string lowerDash(std::string s) {
  for (char& c : s) c = c == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool isPaddingName(Value v) { return isString(v) || v.is(Kind::Symbol); }

template <size_t D, class Opts>
void convPadding(Opts& o, Value padding, int i, const std::string& who) {
  if (padding.isMissing()) return;
  if (isPaddingName(padding)) {
    std::string p = lowerDash(nameOf(padding));
    if (p == "same") o.padding(torch::kSame);
    else if (p == "valid") o.padding(torch::kValid);
    else throwError("value-error", who + ": padding must be integers, \"same\" or \"valid\", got " + p);
    return;
  }
  o.padding(ea<D>(intsArg(padding, who, i), who, "padding"));
}

template <class Opts>
void convPaddingMode(Opts& o, Value mode, const std::string& who) {
  if (mode.isMissing()) return;
  std::string m = lowerDash(nameOf(mode));
  if (m == "zeros") o.padding_mode(torch::kZeros);
  else if (m == "reflect") o.padding_mode(torch::kReflect);
  else if (m == "replicate") o.padding_mode(torch::kReplicate);
  else if (m == "circular") o.padding_mode(torch::kCircular);
  else throwError("value-error", who + ": padding-mode must be zeros, reflect, replicate or circular, got " + m);
}

int64_t reductionFromName(const std::string& r, std::string_view who) {
  if (r == "mean") return at::Reduction::Mean;
  if (r == "sum") return at::Reduction::Sum;
  if (r == "none") return at::Reduction::None;
  throwError("value-error", std::string(who) + ": reduction must be \"mean\", \"sum\" or \"none\", got " + r);
}

// ---- state dicts ---------------------------------------------------------------------------------

void collectState(const Module& m, const std::string& prefix, std::vector<std::pair<std::string, at::Tensor>>& out) {
  for (const auto& p : m.named_parameters(/*recurse=*/false))
    if (p.value().defined()) out.emplace_back(prefix + p.key(), p.value());
  for (const auto& b : m.named_buffers(/*recurse=*/false))
    if (b.value().defined()) out.emplace_back(prefix + b.key(), b.value());
  for (const auto& c : m.named_children()) collectState(*c.value(), prefix + c.key() + ".", out);
}

void printModule(std::ostream& s, const Module& m, const std::string& indent) {
  std::ostringstream head;
  m.pretty_print(head);
  std::string h = head.str();
  for (size_t pos; (pos = h.find("torch::nn::")) != std::string::npos;) h.erase(pos, 11);
  s << h;
  auto kids = m.named_children();
  if (kids.is_empty()) return;
  s << "(\n";
  for (const auto& c : kids) {
    s << indent << "  (" << c.key() << "): ";
    printModule(s, *c.value(), indent + "  ");
    s << "\n";
  }
  s << indent << ")";
}

torch::nn::init::NonlinearityType nonlinearityOf(const std::string& n0, const std::string& who) {
  std::string n = lowerDash(n0);
  if (n == "linear") return torch::kLinear;
  if (n == "conv1d") return torch::kConv1D;
  if (n == "conv2d") return torch::kConv2D;
  if (n == "conv3d") return torch::kConv3D;
  if (n == "conv-transpose1d") return torch::kConvTranspose1D;
  if (n == "conv-transpose2d") return torch::kConvTranspose2D;
  if (n == "conv-transpose3d") return torch::kConvTranspose3D;
  if (n == "sigmoid") return torch::kSigmoid;
  if (n == "tanh") return torch::kTanh;
  if (n == "relu") return torch::kReLU;
  if (n == "leaky-relu") return torch::kLeakyReLU;
  throwError("value-error", who + ": unknown nonlinearity " + n0 +
                                " (linear conv1d conv2d conv3d conv-transpose1d/2d/3d sigmoid tanh relu leaky-relu)");
}

torch::nn::init::FanModeType fanModeOf(const std::string& m0, const std::string& who) {
  std::string m = lowerDash(m0);
  if (m == "fan-in") return torch::kFanIn;
  if (m == "fan-out") return torch::kFanOut;
  throwError("value-error", who + ": mode must be \"fan-in\" or \"fan-out\", got " + m0);
}

const at::Tensor& initTarget(Value v, const char* who) {
  const at::Tensor& t = tensorArg(v, who, 1);
  return t;
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> moduleStateDict(const Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  collectState(m, "", out);
  return out;
}

void loadModuleStateDict(Module& m, const std::vector<std::pair<std::string, at::Tensor>>& entries, bool strict) {
  auto own = moduleStateDict(m);
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
    if (it->second->sizes() != o.second.sizes()) {
      std::ostringstream s;
      s << o.first << ": copying a tensor of shape " << it->second->sizes() << " into one of shape " << o.second.sizes();
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
    target.copy_(*it->second);
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
  return r ? reductionFromName(lowerDash(*r), who) : at::Reduction::Mean;
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

// conv1d / conv2d: the functional convolution when A is a tensor (CONV is at::conv1d or
// at::conv2d), otherwise a ConvNd module with in-channels A, out-channels B, kernel-size C.
template <size_t D, class Impl, class Options, class Conv>
Value convolutionOrModule(const std::string& who, const char* moduleName, Conv conv, Value a, Value b, Value c,
                          Value stride, Value padding, Value dilation, Value groups, Value bias, Value mode) {
  if (isTensor(a)) {
    at::Tensor x = tensorArg(a, who, 1), w = tensorArg(b, who, 2), bs = optTensor(c, who, 3);
    IntList st = stride.isMissing() ? IntList{1} : intsArg(stride, who, 5);
    IntList dl = dilation.isMissing() ? IntList{1} : intsArg(dilation, who, 7);
    int64_t g = groups.isMissing() ? 1 : intArg(groups, who, 8);
    if (!padding.isMissing() && isPaddingName(padding))
      return wrapTensor(conv(x, w, bs, at::IntArrayRef(st), lowerDash(nameOf(padding)), at::IntArrayRef(dl), g));
    IntList pd = padding.isMissing() ? IntList{0} : intsArg(padding, who, 6);
    return wrapTensor(conv(x, w, bs, at::IntArrayRef(st), at::IntArrayRef(pd), at::IntArrayRef(dl), g));
  }
  if (c.isMissing())
    throwError("arity-error", who + ": a " + moduleName + " module needs in-channels, out-channels and kernel-size");
  Options o(intArg(a, who, 1), intArg(b, who, 2), ea<D>(intsArg(c, who, 3), who, "kernel-size"));
  if (!stride.isMissing()) o.stride(ea<D>(intsArg(stride, who, 5), who, "stride"));
  convPadding<D>(o, padding, 5, who);
  if (!dilation.isMissing()) o.dilation(ea<D>(intsArg(dilation, who, 7), who, "dilation"));
  if (!groups.isMissing()) o.groups(intArg(groups, who, 8));
  o.bias(optBool(bias, true));
  convPaddingMode(o, mode, who);
  return makeLayer<Impl>(moduleName, o);
}

void registerNnModules(Registry& r) {
  static bool hooked = false;
  if (!hooked) {
    hooked = true;
    gPreviousApplyHook = Interp::extensionApplyHook;
    Interp::extensionApplyHook = &moduleApplyHook;
  }

  // ---- layers ----
  r.def("linear", "(in-features out-features :key (bias #t))",
        [](int64_t in, int64_t out, bool bias) {
          return makeLayer<torch::nn::LinearImpl>("Linear", torch::nn::LinearOptions(in, out).bias(bias));
        },
        "A fully connected layer y = x W^T + b (torch.nn.Linear): weight (OUT-FEATURES x IN-FEATURES), "
        "bias (OUT-FEATURES) unless :bias #f. Apply it with (forward m x) or (m x).");

  r.def("conv1d", "(a b :optional c :key stride padding dilation groups bias padding-mode)",
        [](Interp&, Value a, Value b, Value c, Value stride, Value padding, Value dilation, Value groups, Value bias,
           Value mode) {
          return convolutionOrModule<1, torch::nn::Conv1dImpl, torch::nn::Conv1dOptions>(
              "conv1d", "Conv1d", [](auto&&... xs) { return at::conv1d(xs...); }, a, b, c, stride, padding,
              dilation, groups, bias, mode);
        },
        "(conv1d in-channels out-channels kernel-size :stride :padding :dilation :groups :bias :padding-mode) makes a "
        "Conv1d module (torch.nn.Conv1d); (conv1d x weight [bias] :stride :padding :dilation :groups) is the "
        "functional convolution. :padding takes integers, \"same\" or \"valid\".");

  r.def("conv2d", "(a b :optional c :key stride padding dilation groups bias padding-mode)",
        [](Interp&, Value a, Value b, Value c, Value stride, Value padding, Value dilation, Value groups, Value bias,
           Value mode) {
          return convolutionOrModule<2, torch::nn::Conv2dImpl, torch::nn::Conv2dOptions>(
              "conv2d", "Conv2d", [](auto&&... xs) { return at::conv2d(xs...); }, a, b, c, stride, padding,
              dilation, groups, bias, mode);
        },
        "(conv2d in-channels out-channels kernel-size :stride :padding :dilation :groups :bias :padding-mode) makes a "
        "Conv2d module (torch.nn.Conv2d; KERNEL-SIZE, STRIDE ... are an integer or a list of 2); "
        "(conv2d x weight [bias] :stride :padding :dilation :groups) is the functional convolution "
        "(torch.nn.functional.conv2d). :padding takes integers, \"same\" or \"valid\".");

  r.def("conv-transpose2d", "(a b :optional c :key stride padding output-padding dilation groups bias)",
        [](Value a, Value b, Value c, Value stride, Value padding, Value outPadding, Value dilation, Value groups,
           Value bias) -> Value {
          const std::string who = "conv-transpose2d";
          if (isTensor(a)) {
            at::Tensor x = tensorArg(a, who, 1), w = tensorArg(b, who, 2), bs = optTensor(c, who, 3);
            return wrapTensor(at::conv_transpose2d(x, w, bs, intsOr(stride, who, 5, {1}), intsOr(padding, who, 6, {0}),
                                                   intsOr(outPadding, who, 7, {0}), intOr(groups, who, 9, 1),
                                                   intsOr(dilation, who, 8, {1})));
          }
          if (c.isMissing()) throwError("arity-error", "conv-transpose2d: a ConvTranspose2d module needs in-channels, out-channels and kernel-size");
          torch::nn::ConvTranspose2dOptions o(intArg(a, who, 1), intArg(b, who, 2),
                                              ea<2>(intsArg(c, who, 3), who, "kernel-size"));
          if (!stride.isMissing()) o.stride(ea<2>(intsArg(stride, who, 5), who, "stride"));
          if (!padding.isMissing()) o.padding(ea<2>(intsArg(padding, who, 6), who, "padding"));
          if (!outPadding.isMissing()) o.output_padding(ea<2>(intsArg(outPadding, who, 7), who, "output-padding"));
          if (!dilation.isMissing()) o.dilation(ea<2>(intsArg(dilation, who, 8), who, "dilation"));
          if (!groups.isMissing()) o.groups(intArg(groups, who, 9));
          o.bias(optBool(bias, true));
          return makeLayer<torch::nn::ConvTranspose2dImpl>("ConvTranspose2d", o);
        },
        "(conv-transpose2d in-channels out-channels kernel-size :stride :padding :output-padding :dilation :groups :bias) "
        "makes a ConvTranspose2d module; (conv-transpose2d x weight [bias] ...) is the functional form.");

  r.def("max-pool2d", "(a :optional b :key stride padding dilation ceil-mode)",
        [](Value a, Value b, Value stride, Value padding, Value dilation, Value ceil) -> Value {
          const std::string who = "max-pool2d";
          if (isTensor(a)) {
            if (b.isMissing()) throwError("arity-error", "max-pool2d: the functional form needs a kernel size: (max-pool2d x kernel-size)");
            IntList k = intsArg(b, who, 2);
            return wrapTensor(at::max_pool2d(tensorArg(a, who, 1), k, intsOr(stride, who, 3, k), intsOr(padding, who, 4, {0}),
                                             intsOr(dilation, who, 5, {1}), optBool(ceil, false)));
          }
          torch::nn::MaxPool2dOptions o(ea<2>(intsArg(a, who, 1), who, "kernel-size"));
          if (!stride.isMissing()) o.stride(ea<2>(intsArg(stride, who, 3), who, "stride"));
          if (!padding.isMissing()) o.padding(ea<2>(intsArg(padding, who, 4), who, "padding"));
          if (!dilation.isMissing()) o.dilation(ea<2>(intsArg(dilation, who, 5), who, "dilation"));
          o.ceil_mode(optBool(ceil, false));
          return makeLayer<torch::nn::MaxPool2dImpl>("MaxPool2d", o);
        },
        "(max-pool2d kernel-size :stride :padding :dilation :ceil-mode) makes a MaxPool2d module (stride defaults to "
        "the kernel size); (max-pool2d x kernel-size ...) pools X directly.");

  r.def("avg-pool2d", "(a :optional b :key stride padding ceil-mode count-include-pad divisor-override)",
        [](Value a, Value b, Value stride, Value padding, Value ceil, Value countPad, Value divisor) -> Value {
          const std::string who = "avg-pool2d";
          c10::optional<int64_t> div;
          if (!divisor.isMissing() && !divisor.isFalse()) div = intArg(divisor, who, 7);
          if (isTensor(a)) {
            if (b.isMissing()) throwError("arity-error", "avg-pool2d: the functional form needs a kernel size: (avg-pool2d x kernel-size)");
            IntList k = intsArg(b, who, 2);
            return wrapTensor(at::avg_pool2d(tensorArg(a, who, 1), k, intsOr(stride, who, 3, k), intsOr(padding, who, 4, {0}),
                                             optBool(ceil, false), optBool(countPad, true), div));
          }
          torch::nn::AvgPool2dOptions o(ea<2>(intsArg(a, who, 1), who, "kernel-size"));
          if (!stride.isMissing()) o.stride(ea<2>(intsArg(stride, who, 3), who, "stride"));
          if (!padding.isMissing()) o.padding(ea<2>(intsArg(padding, who, 4), who, "padding"));
          o.ceil_mode(optBool(ceil, false));
          o.count_include_pad(optBool(countPad, true));
          o.divisor_override(div);
          return makeLayer<torch::nn::AvgPool2dImpl>("AvgPool2d", o);
        },
        "(avg-pool2d kernel-size :stride :padding :ceil-mode :count-include-pad :divisor-override) makes an AvgPool2d "
        "module; (avg-pool2d x kernel-size ...) pools X directly.");

  r.def("adaptive-avg-pool2d", "(a :optional b)",
        [](Value a, Value b) -> Value {
          const std::string who = "adaptive-avg-pool2d";
          if (isTensor(a)) {
            if (b.isMissing()) throwError("arity-error", "adaptive-avg-pool2d: the functional form needs an output size");
            IntList s = intsArg(b, who, 2);
            if (s.size() == 1) s.push_back(s[0]);
            return wrapTensor(at::adaptive_avg_pool2d(tensorArg(a, who, 1), s));
          }
          IntList s = intsArg(a, who, 1);
          if (s.size() == 1) s.push_back(s[0]);
          if (s.size() != 2) throwError("value-error", "adaptive-avg-pool2d: output size needs 1 or 2 integers");
          torch::nn::AdaptiveAvgPool2dOptions o(torch::ExpandingArrayWithOptionalElem<2>({s[0], s[1]}));
          return makeLayer<torch::nn::AdaptiveAvgPool2dImpl>("AdaptiveAvgPool2d", o);
        },
        "(adaptive-avg-pool2d output-size) makes an AdaptiveAvgPool2d module; (adaptive-avg-pool2d x output-size) "
        "pools X to OUTPUT-SIZE (an integer or a list of 2) directly.");

  r.def("batch-norm1d", "(num-features :key (eps 1e-5) (momentum 0.1) (affine #t) (track-running-stats #t))",
        [](int64_t n, double eps, std::optional<double> momentum, bool affine, bool track) {
          torch::nn::BatchNorm1dOptions o(n);
          o.eps(eps).affine(affine).track_running_stats(track);
          o.momentum(momentum ? c10::optional<double>(*momentum) : c10::nullopt);
          return makeLayer<torch::nn::BatchNorm1dImpl>("BatchNorm1d", o);
        },
        "A BatchNorm1d module over (N, C) or (N, C, L) input (torch.nn.BatchNorm1d). :momentum #f uses a cumulative "
        "average. Uses batch statistics in training mode and running statistics after module-eval!.");

  r.def("batch-norm2d", "(num-features :key (eps 1e-5) (momentum 0.1) (affine #t) (track-running-stats #t))",
        [](int64_t n, double eps, std::optional<double> momentum, bool affine, bool track) {
          torch::nn::BatchNorm2dOptions o(n);
          o.eps(eps).affine(affine).track_running_stats(track);
          o.momentum(momentum ? c10::optional<double>(*momentum) : c10::nullopt);
          return makeLayer<torch::nn::BatchNorm2dImpl>("BatchNorm2d", o);
        },
        "A BatchNorm2d module over (N, C, H, W) input (torch.nn.BatchNorm2d). :momentum #f uses a cumulative average.");

  r.def("layer-norm", "(a :optional b c d :key eps elementwise-affine)",
        [](Value a, Value b, Value c, Value d, Value eps, Value affine) -> Value {
          const std::string who = "layer-norm";
          double e = realOr(eps, who, 5, 1e-5);
          if (isTensor(a)) {
            if (b.isMissing()) throwError("arity-error", "layer-norm: the functional form needs a normalized shape: (layer-norm x shape [weight bias])");
            IntList shape = intsArg(b, who, 2);
            return wrapTensor(at::layer_norm(tensorArg(a, who, 1), shape, optTensor(c, who, 3), optTensor(d, who, 4), e));
          }
          if (!b.isMissing()) throwError("arity-error", "layer-norm: the module form takes one normalized shape: (layer-norm shape :eps :elementwise-affine)");
          torch::nn::LayerNormOptions o(intsArg(a, who, 1));
          o.eps(e).elementwise_affine(optBool(affine, true));
          return makeLayer<torch::nn::LayerNormImpl>("LayerNorm", o);
        },
        "(layer-norm normalized-shape :eps 1e-5 :elementwise-affine #t) makes a LayerNorm module; "
        "(layer-norm x normalized-shape [weight bias] :eps 1e-5) normalizes X directly.");

  r.def("group-norm", "(num-groups num-channels :key (eps 1e-5) (affine #t))",
        [](int64_t g, int64_t c, double eps, bool affine) {
          return makeLayer<torch::nn::GroupNormImpl>("GroupNorm", torch::nn::GroupNormOptions(g, c).eps(eps).affine(affine));
        },
        "A GroupNorm module: NUM-CHANNELS split into NUM-GROUPS groups, each normalized (torch.nn.GroupNorm).");

  r.def("dropout", "(:optional a b :key training)",
        [](Value a, Value b, Value training) -> Value {
          const std::string who = "dropout";
          if (isTensor(a)) {
            double p = realOr(b, who, 2, 0.5);
            return wrapTensor(at::dropout(tensorArg(a, who, 1), p, optBool(training, true)));
          }
          if (!b.isMissing()) throwError("arity-error", "dropout: the module form takes one probability: (dropout p)");
          double p = realOr(a, who, 1, 0.5);
          return makeLayer<torch::nn::DropoutImpl>("Dropout", torch::nn::DropoutOptions(p));
        },
        "(dropout [p]) makes a Dropout module (p = 0.5): zeroes elements with probability P and scales the rest by "
        "1/(1-P) in training mode, the identity after module-eval!. (dropout x [p] :training #t) applies it to X "
        "directly; pass :training (module-training? m) inside a module's forward.");

  r.def("embedding", "(a b :key padding-idx max-norm (norm-type 2.0) (scale-grad-by-freq #f) (sparse #f))",
        [](Value a, Value b, Value paddingIdx, Value maxNorm, double normType, bool scaleGrad, bool sparse) -> Value {
          const std::string who = "embedding";
          c10::optional<int64_t> pad;
          if (!paddingIdx.isMissing() && !paddingIdx.isFalse()) pad = intArg(paddingIdx, who, 3);
          if (isTensor(a)) {
            at::Tensor idx = tensorArg(a, who, 1), w = tensorArg(b, who, 2);
            if (!maxNorm.isMissing() && !maxNorm.isFalse()) {
              torch::NoGradGuard g;
              at::embedding_renorm_(w, idx, realArg(maxNorm, who, 4), normType);
            }
            int64_t p = pad ? (*pad < 0 ? *pad + w.size(0) : *pad) : -1;
            return wrapTensor(at::embedding(w, idx, p, scaleGrad, sparse));
          }
          torch::nn::EmbeddingOptions o(intArg(a, who, 1), intArg(b, who, 2));
          o.padding_idx(pad).norm_type(normType).scale_grad_by_freq(scaleGrad).sparse(sparse);
          if (!maxNorm.isMissing() && !maxNorm.isFalse()) o.max_norm(realArg(maxNorm, who, 4));
          return makeLayer<torch::nn::EmbeddingImpl>("Embedding", o);
        },
        "(embedding num-embeddings embedding-dim :padding-idx :max-norm ...) makes an Embedding module (a lookup table "
        "applied to integer tensors); (embedding indices weight :padding-idx ...) looks INDICES up in WEIGHT directly.");

  r.def("flatten", "(:optional a :key (start-dim 1) (end-dim -1))",
        [](Value a, int64_t start, int64_t end) -> Value {
          if (isTensor(a)) return wrapTensor(tensorArg(a, "flatten", 1).flatten(start, end));
          if (!a.isMissing()) throwTypeError("flatten", 1, "a tensor (or nothing, for the module)", a);
          return makeLayer<torch::nn::FlattenImpl>("Flatten", torch::nn::FlattenOptions().start_dim(start).end_dim(end));
        },
        "(flatten :start-dim 1 :end-dim -1) makes a Flatten module (torch.nn.Flatten: keeps the batch dimension); "
        "(flatten x) applies it to X. tensor-flatten flattens from dimension 0.");

  auto rnnCommon = [](auto& o, int64_t layers, bool bias, bool batchFirst, double dropout, bool bidirectional) {
    o.num_layers(layers).bias(bias).batch_first(batchFirst).dropout(dropout).bidirectional(bidirectional);
  };
  r.def("rnn", "(input-size hidden-size :key (num-layers 1) (nonlinearity \"tanh\") (bias #t) (batch-first #f) (dropout 0.0) (bidirectional #f))",
        [rnnCommon](int64_t in, int64_t hidden, int64_t layers, std::string nl, bool bias, bool bf, double dropout, bool bi) {
          torch::nn::RNNOptions o(in, hidden);
          rnnCommon(o, layers, bias, bf, dropout, bi);
          std::string n = lowerDash(nl);
          if (n == "tanh") o.nonlinearity(torch::kTanh);
          else if (n == "relu") o.nonlinearity(torch::kReLU);
          else throwError("value-error", "rnn: nonlinearity must be \"tanh\" or \"relu\", got " + nl);
          auto m = std::make_shared<RecurrentLayer<torch::nn::RNNImpl>>(o);
          m->tname = "RNN";
          return wrapModule(m);
        },
        "An Elman RNN module (torch.nn.RNN). (m x [h0]) returns (output h-n); input is (L, N, IN) or (N, L, IN) "
        "with :batch-first #t.");
  r.def("lstm", "(input-size hidden-size :key (num-layers 1) (bias #t) (batch-first #f) (dropout 0.0) (bidirectional #f) (proj-size 0))",
        [rnnCommon](int64_t in, int64_t hidden, int64_t layers, bool bias, bool bf, double dropout, bool bi, int64_t proj) {
          torch::nn::LSTMOptions o(in, hidden);
          rnnCommon(o, layers, bias, bf, dropout, bi);
          o.proj_size(proj);
          return wrapModule(std::make_shared<LstmLayer>(o));
        },
        "An LSTM module (torch.nn.LSTM). (m x [(h0 c0)]) returns (output (h-n c-n)).");
  r.def("gru", "(input-size hidden-size :key (num-layers 1) (bias #t) (batch-first #f) (dropout 0.0) (bidirectional #f))",
        [rnnCommon](int64_t in, int64_t hidden, int64_t layers, bool bias, bool bf, double dropout, bool bi) {
          torch::nn::GRUOptions o(in, hidden);
          rnnCommon(o, layers, bias, bf, dropout, bi);
          auto m = std::make_shared<RecurrentLayer<torch::nn::GRUImpl>>(o);
          m->tname = "GRU";
          return wrapModule(m);
        },
        "A GRU module (torch.nn.GRU). (m x [h0]) returns (output h-n).");

  r.def("multihead-attention",
        "(embed-dim num-heads :key (dropout 0.0) (bias #t) (add-bias-kv #f) (add-zero-attn #f) kdim vdim (batch-first #f))",
        [](int64_t e, int64_t h, double dropout, bool bias, bool addBiasKv, bool addZeroAttn, std::optional<int64_t> kdim,
           std::optional<int64_t> vdim, bool batchFirst) {
          torch::nn::MultiheadAttentionOptions o(e, h);
          o.dropout(dropout).bias(bias).add_bias_kv(addBiasKv).add_zero_attn(addZeroAttn);
          if (kdim) o.kdim(*kdim);
          if (vdim) o.vdim(*vdim);
          auto m = std::make_shared<MhaLayer>(o);
          m->batchFirst = batchFirst;
          return wrapModule(m);
        },
        "A multi-head attention module (torch.nn.MultiheadAttention). (m query [key value] :key-padding-mask "
        ":need-weights #t :attn-mask :average-attn-weights #t) returns (output weights); weights is #f with "
        ":need-weights #f. Inputs are (L, N, E), or (N, L, E) with :batch-first #t.");

  r.def("transformer-encoder-layer",
        "(d-model nhead :key (dim-feedforward 2048) (dropout 0.1) (activation \"relu\") (batch-first #f))",
        [](int64_t d, int64_t h, int64_t ff, double dropout, std::string act, bool batchFirst) {
          torch::nn::TransformerEncoderLayerOptions o(d, h);
          o.dim_feedforward(ff).dropout(dropout);
          std::string a = lowerDash(act);
          if (a == "relu") o.activation(torch::kReLU);
          else if (a == "gelu") o.activation(torch::kGELU);
          else throwError("value-error", "transformer-encoder-layer: activation must be \"relu\" or \"gelu\", got " + act);
          auto m = std::make_shared<EncoderLayer>(o);
          m->batchFirst = batchFirst;
          return wrapModule(m);
        },
        "A Transformer encoder layer (torch.nn.TransformerEncoderLayer, post-norm): self-attention then a "
        "feed-forward block. (m src :src-mask :src-key-padding-mask); src is (S, N, E), or (N, S, E) with "
        ":batch-first #t.");

  // ---- activations: (relu) is a module, (relu x) applies it ----
  r.def("relu", "(:optional x)",
        [](Value x) -> Value {
          if (x.isMissing()) return makeLayer<torch::nn::ReLUImpl>("ReLU", torch::nn::ReLUOptions());
          if (isTensor(x)) return wrapTensor(at::relu(tensorArg(x, "relu", 1)));
          if (!isNumber(x)) throwTypeError("relu", 1, "a tensor or a real number", x);
          if (isExactRational(x)) return (isFlonum(x) || !(realArg(x, "activation", 1) < 0)) ? x : Value::fixnum(0);
          double d = realArg(x, "activation", 1);
          return makeFlonum(d > 0 ? d : 0.0);
        },
        "(relu) makes a ReLU module; (relu x) is max(0, X) for a tensor or a number.");
  r.def("gelu", "(:optional x :key (approximate \"none\"))",
        [](Value x, std::string approx) -> Value {
          if (approx != "none" && approx != "tanh") throwError("value-error", "gelu: :approximate must be \"none\" or \"tanh\"");
          if (x.isMissing()) return makeLayer<torch::nn::GELUImpl>("GELU", torch::nn::GELUOptions().approximate(approx));
          if (isTensor(x)) return wrapTensor(at::gelu(tensorArg(x, "gelu", 1), approx));
          if (!isNumber(x)) throwTypeError("gelu", 1, "a tensor or a real number", x);
          double d = realArg(x, "activation", 1);
          if (approx == "tanh") return makeFlonum(0.5 * d * (1 + std::tanh(std::sqrt(2 / M_PI) * (d + 0.044715 * d * d * d))));
          return makeFlonum(0.5 * d * (1 + std::erf(d / std::sqrt(2.0))));
        },
        "(gelu :approximate \"none\") makes a GELU module; (gelu x) applies the Gaussian error linear unit to a "
        "tensor or a number (:approximate \"tanh\" uses the tanh formula).");
  r.def("sigmoid", "(:optional x)",
        [](Value x) -> Value {
          if (x.isMissing()) return makeLayer<torch::nn::SigmoidImpl>("Sigmoid");
          if (isTensor(x)) return wrapTensor(at::sigmoid(tensorArg(x, "sigmoid", 1)));
          if (!isNumber(x)) throwTypeError("sigmoid", 1, "a tensor or a real number", x);
          return makeFlonum(1.0 / (1.0 + std::exp(-realArg(x, "activation", 1))));
        },
        "(sigmoid) makes a Sigmoid module; (sigmoid x) is 1/(1+e^-X) for a tensor or a number.");
  r.def("tanh", "(:optional x)",
        [](Value x) -> Value {
          if (x.isMissing()) return makeLayer<torch::nn::TanhImpl>("Tanh");
          if (isTensor(x)) return wrapTensor(at::tanh(tensorArg(x, "tanh", 1)));
          if (!isNumber(x)) throwTypeError("tanh", 1, "a tensor or a real number", x);
          return makeFlonum(std::tanh(realArg(x, "activation", 1)));
        },
        "(tanh) makes a Tanh module; (tanh x) is the hyperbolic tangent of a tensor or a number.");
  r.def("softmax", "(a :optional b)",
        [](Value a, Value b) -> Value {
          if (isTensor(a)) return wrapTensor(at::softmax(tensorArg(a, "softmax", 1), intOr(b, "softmax", 2, -1)));
          if (!b.isMissing()) throwError("arity-error", "softmax: the module form takes one dimension: (softmax dim)");
          return makeLayer<torch::nn::SoftmaxImpl>("Softmax", torch::nn::SoftmaxOptions(intArg(a, "softmax", 1)));
        },
        "(softmax dim) makes a Softmax module over DIM; (softmax x [dim]) applies it to X (DIM defaults to -1).");
  r.def("log-softmax", "(a :optional b)",
        [](Value a, Value b) -> Value {
          if (isTensor(a)) return wrapTensor(at::log_softmax(tensorArg(a, "log-softmax", 1), intOr(b, "softmax", 2, -1)));
          if (!b.isMissing()) throwError("arity-error", "log-softmax: the module form takes one dimension: (log-softmax dim)");
          return makeLayer<torch::nn::LogSoftmaxImpl>("LogSoftmax", torch::nn::LogSoftmaxOptions(intArg(a, "log-softmax", 1)));
        },
        "(log-softmax dim) makes a LogSoftmax module over DIM; (log-softmax x [dim]) applies it to X (DIM defaults to -1).");

  // ---- composing and calling ----
  r.def("sequential", "(. modules)",
        [](RestArgs rest) -> Value {
          auto seq = std::make_shared<SequentialModule>();
          int64_t k = 0;
          for (Value p = rest.list; isPair(p); p = cdr(p), k++) {
            Value x = car(p);
            std::string name = std::to_string(k);
            if (isPair(x) && (isString(car(x)) || x.is(Kind::Symbol)) && (isModule(cdr(x)) || isProcedure(cdr(x)))) {
              name = nameOf(car(x));
              x = cdr(x);
            }
            if (isModule(x)) seq->add(name, moduleArg(x, "sequential", int(k + 1)));
            else if (isProcedure(x)) seq->add(name, procedureModule(x));
            else throwTypeError("sequential", int(k + 1), "a module, a procedure or a (name . module) pair", x);
          }
          return wrapModule(seq);
        },
        "Composes MODULES in order: the output of each is the input of the next (torch.nn.Sequential). An item may "
        "be a module, a (name . module) pair (named child), or a procedure of one argument (a parameterless step). "
        "Children are named \"0\", \"1\" ... so parameter names match PyTorch's.");

  r.def("forward", "(model . args)",
        [](Interp& in, Value model, RestArgs rest) -> Value {
          std::vector<Value> args;
          for (Value p = rest.list; isPair(p); p = cdr(p)) args.push_back(car(p));
          if (isModule(model)) return callModule(in, moduleArg(model, "forward", 1), args.data(), int(args.size()));
          if (isProcedure(model)) return in.apply(model, args.data(), int(args.size()));
          throwTypeError("forward", 1, "a module", model);
        },
        "Runs MODEL's forward on ARGS: (forward model x). Applying a module directly, (model x), is the same.");

  r.def("module?", "(x)", [](Value x) { return isModule(x); }, "True when X is an nn module.");
  r.def("module=?", "(a b)",
        [](ModuleRef a, ModuleRef b) { return a.ptr.get() == b.ptr.get(); },
        "True when A and B are the same module (two values may hold one module, e.g. a child fetched twice).");
  r.def("module-type", "(m)", [](ModuleRef m) { return moduleTypeName(*m.ptr); },
        "The type name of module M: \"Linear\", \"Sequential\", a define-module name ...");

  // ---- module API ----
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
  r.def("module-summary", "(m)",
        [](ModuleRef m) {
          std::ostringstream s;
          printModule(s, *m.ptr, "");
          int64_t total = 0, trainable = 0;
          for (auto& p : m.ptr->parameters(true)) {
            total += p.numel();
            if (p.requires_grad()) trainable += p.numel();
          }
          s << "\nparameters: " << total << " (trainable: " << trainable << ")";
          return s.str();
        },
        "A printable summary of M, as PyTorch prints a model, plus its parameter count:\n"
        "  Sequential(\n    (0): Linear(in_features=784, out_features=128, bias=true)\n    ...)\n"
        "  parameters: 101770 (trainable: 101770)\nDisplay it with (display (module-summary m)).");

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
        "hash table of name -> tensor (from state-dict or load-state-dict) or a file path written by save-state-dict "
        "or Python's torch.save(model.state_dict()). Shapes must match; with :strict #t (the default) missing and "
        "unexpected names are errors too. Returns M.");

  // ---- initialisers ----
  r.def("init-kaiming-uniform!", "(t :key (a 0.0) (mode \"fan-in\") (nonlinearity \"leaky-relu\"))",
        [](Value t, double a, std::string mode, std::string nl) {
          torch::nn::init::kaiming_uniform_(initTarget(t, "init-kaiming-uniform!"), a, fanModeOf(mode, "init-kaiming-uniform!"),
                                            nonlinearityOf(nl, "init-kaiming-uniform!"));
          return t;
        },
        "Fills tensor T in place from U(-b, b), b = gain * sqrt(3 / fan) (He et al.; torch.nn.init.kaiming_uniform_). "
        ":mode \"fan-in\" or \"fan-out\"; :nonlinearity \"relu\", \"leaky-relu\" (with slope :a) .... Returns T.");
  r.def("init-kaiming-normal!", "(t :key (a 0.0) (mode \"fan-in\") (nonlinearity \"leaky-relu\"))",
        [](Value t, double a, std::string mode, std::string nl) {
          torch::nn::init::kaiming_normal_(initTarget(t, "init-kaiming-normal!"), a, fanModeOf(mode, "init-kaiming-normal!"),
                                           nonlinearityOf(nl, "init-kaiming-normal!"));
          return t;
        },
        "Fills tensor T in place from N(0, std^2), std = gain / sqrt(fan) (torch.nn.init.kaiming_normal_). Returns T.");
  r.def("init-xavier-uniform!", "(t :key (gain 1.0))",
        [](Value t, double gain) {
          torch::nn::init::xavier_uniform_(initTarget(t, "init-xavier-uniform!"), gain);
          return t;
        },
        "Fills tensor T in place from U(-a, a), a = gain * sqrt(6 / (fan-in + fan-out)) (Glorot). Returns T.");
  r.def("init-xavier-normal!", "(t :key (gain 1.0))",
        [](Value t, double gain) {
          torch::nn::init::xavier_normal_(initTarget(t, "init-xavier-normal!"), gain);
          return t;
        },
        "Fills tensor T in place from N(0, std^2), std = gain * sqrt(2 / (fan-in + fan-out)) (Glorot). Returns T.");
  r.def("init-normal!", "(t :optional (mean 0.0) (std 1.0))",
        [](Value t, double mean, double std) {
          torch::nn::init::normal_(initTarget(t, "init-normal!"), mean, std);
          return t;
        },
        "Fills tensor T in place from N(MEAN, STD^2). Returns T.");
  r.def("init-uniform!", "(t :optional (low 0.0) (high 1.0))",
        [](Value t, double lo, double hi) {
          torch::nn::init::uniform_(initTarget(t, "init-uniform!"), lo, hi);
          return t;
        },
        "Fills tensor T in place from U(LOW, HIGH). Returns T.");
  r.def("init-zeros!", "(t)",
        [](Value t) {
          torch::nn::init::zeros_(initTarget(t, "init-zeros!"));
          return t;
        },
        "Fills tensor T with zeros in place. Returns T.");
  r.def("init-ones!", "(t)",
        [](Value t) {
          torch::nn::init::ones_(initTarget(t, "init-ones!"));
          return t;
        },
        "Fills tensor T with ones in place. Returns T.");
  r.def("init-constant!", "(t value)",
        [](Value t, double v) {
          torch::nn::init::constant_(initTarget(t, "init-constant!"), v);
          return t;
        },
        "Fills tensor T with VALUE in place. Returns T.");
  r.def("init-orthogonal!", "(t :key (gain 1.0))",
        [](Value t, double gain) {
          torch::nn::init::orthogonal_(initTarget(t, "init-orthogonal!"), gain);
          return t;
        },
        "Fills tensor T (at least 2-d) in place with a (semi-)orthogonal matrix scaled by GAIN. Returns T.");

  // ---- seed conveniences ----
  r.def("linear-layer", "(in-features out-features x :key (bias #t))",
        [](int64_t in, int64_t out, const at::Tensor& x, bool bias) {
          torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(bias));
          return l->forward(x);
        },
        "One-shot convenience: makes a fresh, randomly initialised Linear layer IN-FEATURES -> OUT-FEATURES and applies "
        "it to X. The layer is not kept, so its weights cannot be trained; use (linear in out) in models.");
  r.def("conv2d-layer", "(in-channels out-channels kernel-size x :key (stride 1) (padding 0) (bias #t))",
        [](int64_t in, int64_t out, IntList k, const at::Tensor& x, IntList stride, IntList padding, bool bias) {
          torch::nn::Conv2dOptions o(in, out, ea<2>(k, "conv2d-layer", "kernel-size"));
          o.stride(ea<2>(stride, "conv2d-layer", "stride")).padding(ea<2>(padding, "conv2d-layer", "padding")).bias(bias);
          torch::nn::Conv2d c(o);
          return c->forward(x);
        },
        "One-shot convenience: makes a fresh, randomly initialised Conv2d layer and applies it to X (N, C, H, W). "
        "The layer is not kept; use (conv2d in out kernel) in models.");
}

}  // namespace purple
