// Convolutions: conv1d/2d/3d and conv-transpose1d/2d/3d, each a module (torch.nn.ConvNd,
// LibTorch's layer) or, when the first argument is a tensor, the functional convolution.
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

template <size_t D, class Opts>
void convPadding(Opts& o, Value padding, int i, const std::string& who) {
  if (padding.isMissing()) return;
  if (isName(padding)) {
    std::string p = choiceArg(padding, who, "padding", {"same", "valid"});
    if (p == "same") o.padding(torch::kSame);
    else o.padding(torch::kValid);
    return;
  }
  o.padding(ea<D>(intsArg(padding, who, i), who, "padding"));
}

template <class Opts>
void convPaddingMode(Opts& o, Value mode, const std::string& who) {
  if (mode.isMissing()) return;
  std::string m = choiceArg(mode, who, "padding-mode", {"zeros", "reflect", "replicate", "circular"});
  if (m == "zeros") o.padding_mode(torch::kZeros);
  else if (m == "reflect") o.padding_mode(torch::kReflect);
  else if (m == "replicate") o.padding_mode(torch::kReplicate);
  else o.padding_mode(torch::kCircular);
}

void checkConvInput(const at::Tensor& x, size_t d, const std::string& who) {
  if (x.dim() != int64_t(d) + 1 && x.dim() != int64_t(d) + 2)
    throwError("value-error", who + ": input must be " + std::to_string(d + 1) + "-d (C, spatial...) or " +
                                  std::to_string(d + 2) + "-d (N, C, spatial...), got shape " + pyTuple(x.sizes()));
}

// conv1d / conv2d / conv3d: the functional convolution when A is a tensor (CONV is at::convNd),
// otherwise a ConvNd module with in-channels A, out-channels B, kernel-size C.
template <size_t D, class Impl, class Options, class Conv>
Value convolutionOrModule(const std::string& who, const char* moduleName, Conv conv, Value a, Value b, Value c,
                          Value stride, Value padding, Value dilation, Value groups, Value bias, Value mode) {
  if (isTensor(a)) {
    at::Tensor x = tensorArg(a, who, 1), w = tensorArg(b, who, 2), bs = optTensor(c, who, 3);
    checkConvInput(x, D, who);
    IntList st = expandInts(intsOr(stride, who, 4, {1}), D, who, "stride");
    IntList dl = expandInts(intsOr(dilation, who, 6, {1}), D, who, "dilation");
    int64_t g = intOr(groups, who, 7, 1);
    if (!mode.isMissing()) throwError("arity-error", who + ": :padding-mode is for the module form; pad with tensor-pad first");
    if (!bias.isMissing()) throwError("arity-error", who + ": the functional form takes the bias tensor as its third argument");
    if (!padding.isMissing() && isName(padding))
      return wrapTensor(conv(x, w, bs, at::IntArrayRef(st), choiceArg(padding, who, "padding", {"same", "valid"}),
                             at::IntArrayRef(dl), g));
    IntList pd = expandInts(intsOr(padding, who, 5, {0}), D, who, "padding");
    return wrapTensor(conv(x, w, bs, at::IntArrayRef(st), at::IntArrayRef(pd), at::IntArrayRef(dl), g));
  }
  if (c.isMissing())
    throwError("arity-error", who + ": a " + moduleName + " module needs in-channels, out-channels and kernel-size");
  Options o(intArg(a, who, 1), intArg(b, who, 2), ea<D>(intsArg(c, who, 3), who, "kernel-size"));
  if (!stride.isMissing()) o.stride(ea<D>(intsArg(stride, who, 4), who, "stride"));
  convPadding<D>(o, padding, 5, who);
  if (!dilation.isMissing()) o.dilation(ea<D>(intsArg(dilation, who, 6), who, "dilation"));
  if (!groups.isMissing()) o.groups(intArg(groups, who, 7));
  o.bias(optBool(bias, true));
  convPaddingMode(o, mode, who);
  return makeLayer<Impl>(moduleName, o);
}

// ConvTransposeNd's forward also takes an output size (Python's output_size=), which picks the
// output padding.
template <class Impl>
struct TransposedLayer : Layer<Impl> {
  using Layer<Impl>::Layer;
  Value forward(Interp&, const Value* argv, int argc) override {
    const std::string& who = this->tname;
    ForwardArgs a = splitForwardArgs(argv, argc, who, {"output-size"});
    needArgs(a, 1, 2, who);
    Value size = a.positional.size() > 1 ? a.positional[1] : a.key("output-size");
    const at::Tensor& x = tensorIn(a.positional[0], who, 1);
    if (size.isMissing() || size.isFalse()) return wrapTensor(Impl::forward(x));
    return wrapTensor(Impl::forward(x, at::IntArrayRef(intsArg(size, who, 2))));
  }
};

template <size_t D, class Impl, class Options, class Conv>
Value transposedOrModule(const std::string& who, const char* moduleName, Conv conv, Value a, Value b, Value c,
                         Value stride, Value padding, Value outPadding, Value dilation, Value groups, Value bias) {
  if (isTensor(a)) {
    at::Tensor x = tensorArg(a, who, 1), w = tensorArg(b, who, 2), bs = optTensor(c, who, 3);
    checkConvInput(x, D, who);
    if (!bias.isMissing()) throwError("arity-error", who + ": the functional form takes the bias tensor as its third argument");
    return wrapTensor(conv(x, w, bs, expandInts(intsOr(stride, who, 4, {1}), D, who, "stride"),
                           expandInts(intsOr(padding, who, 5, {0}), D, who, "padding"),
                           expandInts(intsOr(outPadding, who, 6, {0}), D, who, "output-padding"), intOr(groups, who, 8, 1),
                           expandInts(intsOr(dilation, who, 7, {1}), D, who, "dilation")));
  }
  if (c.isMissing())
    throwError("arity-error", who + ": a " + moduleName + " module needs in-channels, out-channels and kernel-size");
  Options o(intArg(a, who, 1), intArg(b, who, 2), ea<D>(intsArg(c, who, 3), who, "kernel-size"));
  if (!stride.isMissing()) o.stride(ea<D>(intsArg(stride, who, 4), who, "stride"));
  if (!padding.isMissing()) o.padding(ea<D>(intsArg(padding, who, 5), who, "padding"));
  if (!outPadding.isMissing()) o.output_padding(ea<D>(intsArg(outPadding, who, 6), who, "output-padding"));
  if (!dilation.isMissing()) o.dilation(ea<D>(intsArg(dilation, who, 7), who, "dilation"));
  if (!groups.isMissing()) o.groups(intArg(groups, who, 8));
  o.bias(optBool(bias, true));
  auto m = std::make_shared<TransposedLayer<Impl>>(o);
  m->tname = moduleName;
  return wrapModule(m);
}

}  // namespace

void registerConvolutions(Registry& r) {
  const char* convDoc =
      " (torch.nn.ConvNd): weight (OUT, IN/GROUPS, kernel...), bias (OUT) unless :bias #f. KERNEL-SIZE, :stride, "
      ":padding and :dilation are an integer or one per spatial dimension; :padding also takes \"same\" or \"valid\"; "
      ":padding-mode is \"zeros\" (default), \"reflect\", \"replicate\" or \"circular\". With a tensor first, "
      "(convNd x weight [bias] :stride :padding :dilation :groups) is the functional convolution "
      "(torch.nn.functional.convNd).";
  r.def("conv1d", "(a b :optional c :key stride padding dilation groups bias padding-mode)",
        [](Interp&, Value a, Value b, Value c, Value stride, Value padding, Value dilation, Value groups, Value bias,
           Value mode) {
          return convolutionOrModule<1, torch::nn::Conv1dImpl, torch::nn::Conv1dOptions>(
              "conv1d", "Conv1d", [](auto&&... xs) { return at::conv1d(xs...); }, a, b, c, stride, padding,
              dilation, groups, bias, mode);
        },
        std::string("(conv1d in-channels out-channels kernel-size :stride :padding :dilation :groups :bias :padding-mode) "
                    "makes a Conv1d module over (N, C, L) input") + convDoc, kPrimTensorFunction);
  r.def("conv2d", "(a b :optional c :key stride padding dilation groups bias padding-mode)",
        [](Interp&, Value a, Value b, Value c, Value stride, Value padding, Value dilation, Value groups, Value bias,
           Value mode) {
          return convolutionOrModule<2, torch::nn::Conv2dImpl, torch::nn::Conv2dOptions>(
              "conv2d", "Conv2d", [](auto&&... xs) { return at::conv2d(xs...); }, a, b, c, stride, padding,
              dilation, groups, bias, mode);
        },
        std::string("(conv2d in-channels out-channels kernel-size :stride :padding :dilation :groups :bias :padding-mode) "
                    "makes a Conv2d module over (N, C, H, W) input") + convDoc, kPrimTensorFunction);
  r.def("conv3d", "(a b :optional c :key stride padding dilation groups bias padding-mode)",
        [](Interp&, Value a, Value b, Value c, Value stride, Value padding, Value dilation, Value groups, Value bias,
           Value mode) {
          return convolutionOrModule<3, torch::nn::Conv3dImpl, torch::nn::Conv3dOptions>(
              "conv3d", "Conv3d", [](auto&&... xs) { return at::conv3d(xs...); }, a, b, c, stride, padding,
              dilation, groups, bias, mode);
        },
        std::string("(conv3d in-channels out-channels kernel-size :stride :padding :dilation :groups :bias :padding-mode) "
                    "makes a Conv3d module over (N, C, D, H, W) input") + convDoc, kPrimTensorFunction);

  const char* transposedDoc =
      " (torch.nn.ConvTransposeNd, the gradient of a convolution with respect to its input): weight "
      "(IN, OUT/GROUPS, kernel...). Apply it as (m x) or (m x output-size), where OUTPUT-SIZE picks the output "
      "padding as Python's output_size= does. With a tensor first, (conv-transposeNd x weight [bias] :stride :padding "
      ":output-padding :dilation :groups) is the functional form (torch.nn.functional.conv_transposeNd).";
  r.def("conv-transpose1d", "(a b :optional c :key stride padding output-padding dilation groups bias)",
        [](Value a, Value b, Value c, Value stride, Value padding, Value outPadding, Value dilation, Value groups,
           Value bias) -> Value {
          return transposedOrModule<1, torch::nn::ConvTranspose1dImpl, torch::nn::ConvTranspose1dOptions>(
              "conv-transpose1d", "ConvTranspose1d", [](auto&&... xs) { return at::conv_transpose1d(xs...); }, a, b, c,
              stride, padding, outPadding, dilation, groups, bias);
        },
        std::string("(conv-transpose1d in-channels out-channels kernel-size :stride :padding :output-padding :dilation "
                    ":groups :bias) makes a ConvTranspose1d module over (N, C, L) input") + transposedDoc, kPrimTensorFunction);
  r.def("conv-transpose2d", "(a b :optional c :key stride padding output-padding dilation groups bias)",
        [](Value a, Value b, Value c, Value stride, Value padding, Value outPadding, Value dilation, Value groups,
           Value bias) -> Value {
          return transposedOrModule<2, torch::nn::ConvTranspose2dImpl, torch::nn::ConvTranspose2dOptions>(
              "conv-transpose2d", "ConvTranspose2d", [](auto&&... xs) { return at::conv_transpose2d(xs...); }, a, b, c,
              stride, padding, outPadding, dilation, groups, bias);
        },
        std::string("(conv-transpose2d in-channels out-channels kernel-size :stride :padding :output-padding :dilation "
                    ":groups :bias) makes a ConvTranspose2d module over (N, C, H, W) input") + transposedDoc, kPrimTensorFunction);
  r.def("conv-transpose3d", "(a b :optional c :key stride padding output-padding dilation groups bias)",
        [](Value a, Value b, Value c, Value stride, Value padding, Value outPadding, Value dilation, Value groups,
           Value bias) -> Value {
          return transposedOrModule<3, torch::nn::ConvTranspose3dImpl, torch::nn::ConvTranspose3dOptions>(
              "conv-transpose3d", "ConvTranspose3d", [](auto&&... xs) { return at::conv_transpose3d(xs...); }, a, b, c,
              stride, padding, outPadding, dilation, groups, bias);
        },
        std::string("(conv-transpose3d in-channels out-channels kernel-size :stride :padding :output-padding :dilation "
                    ":groups :bias) makes a ConvTranspose3d module over (N, C, D, H, W) input") + transposedDoc, kPrimTensorFunction);

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

}  // namespace nnlayer
}  // namespace purple
