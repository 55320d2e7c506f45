// What the layer families of builtins/nn/ share (private to that folder): the Layer<Impl>
// wrapper that turns a LibTorch layer into a Purple module, argument readers for builtins whose
// arguments change meaning with the first one (module form vs functional form), option helpers,
// and the register functions of each layer family, called by registerNnModules.
//
// Names shared by a module constructor and a functional op follow one rule: when the first
// argument is a tensor the call is functional (torch.nn.functional.NAME), otherwise it makes a
// module, e.g. (conv2d 3 16 3) is a Conv2d module and (conv2d x weight bias :stride 2) convolves.
#pragma once
#include <torch/nn.h>
#include <torch/version.h>
#include "builtins/nn/value.hpp"
#include "builtins/tensor/util.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <gc/gc_allocator.h>
#include <array>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>

namespace purple {
namespace nnlayer {

using torch::nn::Module;
using ModulePtr = std::shared_ptr<Module>;

// ---- argument readers for raw Values ------------------------------------------------------------

inline const at::Tensor& tensorIn(Value v, const std::string& who, int index) { return tensorArg(v, who, index); }
inline at::Tensor optTensor(Value v, const std::string& who, int index) {
  if (v.isMissing() || v.isFalse()) return at::Tensor();
  return tensorArg(v, who, index);
}
inline bool optBool(Value v, bool dflt) { return v.isMissing() ? dflt : v.isTrue(); }
IntList intsArg(Value v, const std::string& who, int i);          // an integer or a list of them
int64_t intArg(Value v, const std::string& who, int i);
double realArg(Value v, const std::string& who, int i);
inline IntList intsOr(Value v, const std::string& who, int i, IntList dflt) {
  if (v.isMissing() || v.isFalse()) return dflt;
  return intsArg(v, who, i);
}
inline double realOr(Value v, const std::string& who, int i, double dflt) {
  if (v.isMissing()) return dflt;
  return realArg(v, who, i);
}
inline int64_t intOr(Value v, const std::string& who, int i, int64_t dflt) {
  if (v.isMissing()) return dflt;
  return intArg(v, who, i);
}
std::string nameOf(Value v);          // a string's or symbol's text, else ""
std::string lowerDash(std::string s);  // "Fan_In" -> "fan-in"
inline bool isName(Value v) { return isString(v) || v.is(Kind::Symbol); }
// A mode name (string, symbol or keyword) checked against CHOICES; the error lists them.
std::string choiceArg(Value v, const std::string& who, const char* what, std::initializer_list<const char*> choices);

// KERNEL-SIZE, STRIDE ... given as one integer or D of them.
template <size_t D>
torch::ExpandingArray<D> ea(const IntList& v, const std::string& who, const char* what) {
  if (v.size() == 1) return torch::ExpandingArray<D>(v[0]);
  if (v.size() != D)
    throwError("value-error", who + ": " + what + " needs 1 or " + std::to_string(D) + " integers, got " + std::to_string(v.size()));
  return torch::ExpandingArray<D>(at::IntArrayRef(v));
}
// The same, as a plain list of D integers (functional forms).
IntList expandInts(const IntList& v, size_t d, const std::string& who, const char* what);

void needArgs(const ForwardArgs& a, size_t lo, size_t hi, const std::string& who);
std::string trimMessage(std::string s);

// ---- Python-style printing ------------------------------------------------------------------------

std::string pyFloat(double x);                 // repr(float): 0.1, 1e-05, 2.0
inline const char* pyBool(bool b) { return b ? "True" : "False"; }
std::string pyTuple(at::IntArrayRef v);        // (3, 3) or (4,)
// An ExpandingArray as Python prints what the user passed: one integer when all are equal.
template <size_t D> std::string pyInts(const torch::ExpandingArray<D>& a) {
  bool same = true;
  for (size_t k = 1; k < D; k++) same = same && (*a)[k] == (*a)[0];
  return same ? std::to_string((*a)[0]) : pyTuple(*a);
}
// LibTorch's own description of module M, rewritten towards Python's (true -> True, [3, 3] -> (3, 3)),
// for layers without a hand-written extra_repr.
std::string libtorchExtraRepr(const Module& m);
// The same rewriting of a text LibTorch's pretty_print wrote ("ReLU()", "Dropout(p=0.5, inplace=false)").
std::string libtorchExtraRepr(std::string printed);

// The part inside the parentheses of Python's repr of each layer (extra_repr).
std::string extraRepr(const torch::nn::LinearImpl& m);
std::string extraRepr(const torch::nn::Conv1dImpl& m);
std::string extraRepr(const torch::nn::Conv2dImpl& m);
std::string extraRepr(const torch::nn::Conv3dImpl& m);
std::string extraRepr(const torch::nn::ConvTranspose1dImpl& m);
std::string extraRepr(const torch::nn::ConvTranspose2dImpl& m);
std::string extraRepr(const torch::nn::ConvTranspose3dImpl& m);
std::string extraRepr(const torch::nn::BatchNorm1dImpl& m);
std::string extraRepr(const torch::nn::BatchNorm2dImpl& m);
std::string extraRepr(const torch::nn::BatchNorm3dImpl& m);
std::string extraRepr(const torch::nn::InstanceNorm1dImpl& m);
std::string extraRepr(const torch::nn::InstanceNorm2dImpl& m);
std::string extraRepr(const torch::nn::InstanceNorm3dImpl& m);
std::string extraRepr(const torch::nn::LayerNormImpl& m);
std::string extraRepr(const torch::nn::GroupNormImpl& m);
std::string extraRepr(const torch::nn::EmbeddingImpl& m);
std::string extraRepr(const torch::nn::EmbeddingBagImpl& m);
std::string extraRepr(const torch::nn::FlattenImpl& m);
std::string extraRepr(const torch::nn::GELUImpl& m);
std::string extraRepr(const torch::nn::PReLUImpl& m);
// LibTorch's own pretty_print, called non-virtually: Layer<T> overrides it and calls this.
template <class T> std::string extraRepr(const T& m) {
  std::ostringstream os;
  m.T::pretty_print(os);
  return libtorchExtraRepr(os.str());
}

// ---- the layer wrapper ----------------------------------------------------------------------------

// Each file gets its own Layer (an unnamed namespace): with external linkage GCC emits construction
// vtables that name BatchNormImplBase<D>::pretty_print, which Debian's LibTorch 1.13 does not export.
namespace {

// A LibTorch layer whose forward maps one tensor to one tensor.
template <class Impl>
struct Layer : Impl, ModuleForward {
  using Impl::Impl;
  std::string tname;
  std::string extra;   // Python's extra_repr when set (the arguments as the user gave them)
  std::string typeName() const override { return tname; }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc != 1) throwError("arity-error", tname + ": forward takes 1 argument (a tensor), got " + std::to_string(argc));
    return wrapTensor(Impl::forward(tensorIn(argv[0], tname, 1)));
  }
  bool hasTensorForward() const override { return true; }
  at::Tensor tensorForward(const at::Tensor& x) override { return Impl::forward(x); }
  void pretty_print(std::ostream& s) const override {
    s << tname << "(" << (extra.empty() ? extraRepr(static_cast<const Impl&>(*this)) : extra) << ")";
  }
};

template <class Impl>
Value makeLayer(const char* tname) {
  auto m = std::make_shared<Layer<Impl>>();
  m->tname = tname;
  return wrapModule(m);
}

template <class Impl, class Options>
Value makeLayer(const char* tname, const Options& opts, std::string extra = "") {
  auto m = std::make_shared<Layer<Impl>>(opts);
  m->tname = tname;
  m->extra = std::move(extra);
  return wrapModule(m);
}

}  // namespace

// Python's text for an argument given as one integer or several: 2 or (2, 3).
inline std::string pyUser(const IntList& v) { return v.size() == 1 ? std::to_string(v[0]) : pyTuple(v); }

// A parameterless layer defined by a function of the module (for its mode) and one tensor:
// dropouts, identity, pixel shuffles ... where PyTorch's behaviour is what the function says.
struct FnLayer : Module, ModuleForward {
  using Fn = std::function<at::Tensor(const Module&, const at::Tensor&)>;
  FnLayer(std::string name, std::string extraRepr, Fn f)
      : Module(name), tname(std::move(name)), extra(std::move(extraRepr)), fn(std::move(f)) {}
  std::string tname, extra;
  Fn fn;
  std::string typeName() const override { return tname; }
  void pretty_print(std::ostream& s) const override { s << tname << "(" << extra << ")"; }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc != 1) throwError("arity-error", tname + ": forward takes 1 argument (a tensor), got " + std::to_string(argc));
    return wrapTensor(fn(*this, tensorIn(argv[0], tname, 1)));
  }
  bool hasTensorForward() const override { return true; }
  at::Tensor tensorForward(const at::Tensor& x) override { return fn(*this, x); }
};

inline Value makeFnLayer(std::string name, std::string extra, FnLayer::Fn f) {
  return wrapModule(std::make_shared<FnLayer>(std::move(name), std::move(extra), std::move(f)));
}

// ---- the layer families ---------------------------------------------------------------------------

void registerConvolutions(Registry& r);     // conv.cpp: conv1d/2d/3d, conv-transpose1d/2d/3d
void registerPooling(Registry& r);          // pooling.cpp: max/avg/adaptive pools, 1d to 3d
void registerNormalization(Registry& r);    // normalization.cpp: batch/instance/layer/group norm
void registerDropout(Registry& r);          // dropout.cpp: dropout, dropout1d/2d/3d, alpha-dropout
void registerActivations(Registry& r);      // activations.cpp: relu, gelu ..., prelu, identity
void registerEmbeddings(Registry& r);       // embedding.cpp: embedding, embedding-bag
void registerRecurrent(Registry& r);        // recurrent.cpp: rnn, lstm, gru, cells, packed sequences
void registerTransformers(Registry& r);     // transformer.cpp: attention, encoder/decoder, transformer
void registerResampling(Registry& r);       // resampling.cpp: tensor-pad, interpolate, upsample, pixel-shuffle
void registerDistances(Registry& r);        // distance.cpp: cosine-similarity, pairwise-distance, normalize, cdist
void registerModuleApi(Registry& r);        // module_api.cpp: parameters, state dicts, summaries
void registerHooks(Registry& r);            // hooks.cpp: forward hooks and pre-hooks
void registerInit(Registry& r);             // init.cpp: init-*! initialisers

}  // namespace nnlayer
}  // namespace purple
