// Pooling: max-pool, avg-pool, adaptive-avg-pool and adaptive-max-pool in 1, 2 and 3
// dimensions, each a module (LibTorch's layer) or, when the first argument is a tensor, the
// functional pool. PyTorch's defaults: stride = kernel size, padding 0, dilation 1.
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

Value pair(const at::Tensor& a, const at::Tensor& b) {
  Value items[2] = {wrapTensor(a), wrapTensor(b)};
  return listFromArray(items, 2);
}

void checkPoolInput(const at::Tensor& x, size_t d, const std::string& who) {
  if (x.dim() != int64_t(d) + 1 && x.dim() != int64_t(d) + 2)
    throwError("value-error", who + ": input must be " + std::to_string(d + 1) + "-d (C, spatial...) or " +
                                  std::to_string(d + 2) + "-d (N, C, spatial...), got shape " + pyTuple(x.sizes()));
}

template <size_t D>
std::tuple<at::Tensor, at::Tensor> maxPoolWithIndices(const at::Tensor& x, at::IntArrayRef k, at::IntArrayRef s,
                                                      at::IntArrayRef p, at::IntArrayRef d, bool ceil) {
  if constexpr (D == 1) {
    return at::max_pool1d_with_indices(x, k, s, p, d, ceil);
  } else if constexpr (D == 2) {
    return at::max_pool2d_with_indices(x, k, s, p, d, ceil);
  } else {
    return at::max_pool3d_with_indices(x, k, s, p, d, ceil);
  }
}

template <size_t D>
at::Tensor maxPool(const at::Tensor& x, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d,
                   bool ceil) {
  if constexpr (D == 1) return at::max_pool1d(x, k, s, p, d, ceil);
  else if constexpr (D == 2) return at::max_pool2d(x, k, s, p, d, ceil);
  else return at::max_pool3d(x, k, s, p, d, ceil);
}

// A max-pool module made with :return-indices #t returns (output indices), as Python's does.
template <class Impl>
struct IndexedPool : Layer<Impl> {
  using Layer<Impl>::Layer;
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc != 1) throwError("arity-error", this->tname + ": forward takes 1 argument (a tensor), got " + std::to_string(argc));
    auto r = Impl::forward_with_indices(tensorIn(argv[0], this->tname, 1));
    return pair(std::get<0>(r), std::get<1>(r));
  }
  bool hasTensorForward() const override { return false; }
  bool returnsNewValues() const override { return true; }
};

template <size_t D, class Impl, class Options>
Value maxPoolOrModule(const std::string& who, const char* moduleName, Value a, Value b, Value stride, Value padding,
                      Value dilation, Value ceil, bool returnIndices) {
  if (isTensor(a)) {
    if (b.isMissing()) throwError("arity-error", who + ": the functional form needs a kernel size: (" + who + " x kernel-size)");
    const at::Tensor& x = tensorArg(a, who, 1);
    checkPoolInput(x, D, who);
    IntList k = expandInts(intsArg(b, who, 2), D, who, "kernel-size");
    IntList s = expandInts(intsOr(stride, who, 3, k), D, who, "stride");
    IntList p = expandInts(intsOr(padding, who, 4, {0}), D, who, "padding");
    IntList d = expandInts(intsOr(dilation, who, 5, {1}), D, who, "dilation");
    if (returnIndices) {
      auto r = maxPoolWithIndices<D>(x, k, s, p, d, optBool(ceil, false));
      return pair(std::get<0>(r), std::get<1>(r));
    }
    return wrapTensor(maxPool<D>(x, k, s, p, d, optBool(ceil, false)));
  }
  if (!b.isMissing()) throwError("arity-error", who + ": the module form takes one kernel size: (" + who + " kernel-size :stride ...)");
  IntList k = intsArg(a, who, 1);
  Options o(ea<D>(k, who, "kernel-size"));
  IntList s = intsOr(stride, who, 3, k), p = intsOr(padding, who, 4, {0}), d = intsOr(dilation, who, 5, {1});
  o.stride(ea<D>(s, who, "stride")).padding(ea<D>(p, who, "padding")).dilation(ea<D>(d, who, "dilation"));
  o.ceil_mode(optBool(ceil, false));
  std::string extra = "kernel_size=" + pyUser(k) + ", stride=" + pyUser(s) + ", padding=" + pyUser(p) + ", dilation=" +
                      pyUser(d) + ", ceil_mode=" + pyBool(o.ceil_mode());
  if (returnIndices) {
    auto m = std::make_shared<IndexedPool<Impl>>(o);
    m->tname = moduleName;
    m->extra = extra;
    return wrapModule(m);
  }
  return makeLayer<Impl>(moduleName, o, extra);
}

template <size_t D, class Impl, class Options>
Value avgPoolOrModule(const std::string& who, const char* moduleName, Value a, Value b, Value stride, Value padding,
                      Value ceil, Value countPad, Value divisor) {
  c10::optional<int64_t> div;
  if (!divisor.isMissing() && !divisor.isFalse()) {
    if (D == 1) throwError("arity-error", who + ": :divisor-override is for 2-d and 3-d pools (as in PyTorch)");
    div = intArg(divisor, who, 7);
  }
  if (isTensor(a)) {
    if (b.isMissing()) throwError("arity-error", who + ": the functional form needs a kernel size: (" + who + " x kernel-size)");
    const at::Tensor& x = tensorArg(a, who, 1);
    checkPoolInput(x, D, who);
    IntList k = expandInts(intsArg(b, who, 2), D, who, "kernel-size");
    IntList s = expandInts(intsOr(stride, who, 3, k), D, who, "stride");
    IntList p = expandInts(intsOr(padding, who, 4, {0}), D, who, "padding");
    bool c = optBool(ceil, false), cp = optBool(countPad, true);
    if constexpr (D == 1) return wrapTensor(at::avg_pool1d(x, k, s, p, c, cp));
    else if constexpr (D == 2) return wrapTensor(at::avg_pool2d(x, k, s, p, c, cp, div));
    else return wrapTensor(at::avg_pool3d(x, k, s, p, c, cp, div));
  }
  if (!b.isMissing()) throwError("arity-error", who + ": the module form takes one kernel size: (" + who + " kernel-size :stride ...)");
  IntList k = intsArg(a, who, 1);
  Options o(ea<D>(k, who, "kernel-size"));
  IntList s = intsOr(stride, who, 3, k), p = intsOr(padding, who, 4, {0});
  o.stride(ea<D>(s, who, "stride")).padding(ea<D>(p, who, "padding"));
  o.ceil_mode(optBool(ceil, false)).count_include_pad(optBool(countPad, true)).divisor_override(div);
  // Python's AvgPool1d keeps its sizes as 1-tuples; 2-d and 3-d keep what was given.
  auto show = [](const IntList& v) { return D == 1 ? pyTuple(IntList(1, v[0])) : pyUser(v); };
  return makeLayer<Impl>(moduleName, o, "kernel_size=" + show(k) + ", stride=" + show(s) + ", padding=" + show(p));
}

// An adaptive output size: an integer, or one per dimension where #f keeps the input's size.
template <size_t D>
std::vector<c10::optional<int64_t>> outputSize(Value v, const std::string& who, int i) {
  std::vector<c10::optional<int64_t>> out;
  auto one = [&](Value x) -> c10::optional<int64_t> {
    if (x.isFalse()) return c10::nullopt;
    return intArg(x, who, i);
  };
  if (isList(v) && !v.isNil()) {
    for (Value p = v; isPair(p); p = cdr(p)) out.push_back(one(car(p)));
  } else if (v.is(Kind::Vector)) {
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) out.push_back(one(v.as<Vector>()->items[k]));
  } else {
    out.push_back(intArg(v, who, i));
  }
  if (out.size() == 1) out.resize(D, out[0]);
  if (out.size() != D)
    throwError("value-error", who + ": output size needs 1 or " + std::to_string(D) + " entries, got " + std::to_string(out.size()));
  return out;
}

template <size_t D>
std::string outputSizeRepr(Value v, const std::vector<c10::optional<int64_t>>& s) {
  if (!(isList(v) && !v.isNil()) && !v.is(Kind::Vector)) return std::to_string(*s[0]);
  std::string t = "(";
  for (size_t k = 0; k < s.size(); k++) t += (k ? ", " : "") + (s[k] ? std::to_string(*s[k]) : std::string("None"));
  return t + (s.size() == 1 ? ",)" : ")");
}

template <size_t D>
IntList resolvedSize(const at::Tensor& x, const std::vector<c10::optional<int64_t>>& s) {
  IntList out;
  for (size_t k = 0; k < D; k++) out.push_back(s[k] ? *s[k] : x.size(x.dim() - int64_t(D) + int64_t(k)));
  return out;
}

template <size_t D>
torch::ExpandingArrayWithOptionalElem<D> optionalArray(const std::vector<c10::optional<int64_t>>& s) {
  torch::ExpandingArrayWithOptionalElem<D> a((c10::optional<int64_t>(c10::nullopt)));   // (( )): clang reads ( ) as a function declaration
  for (size_t k = 0; k < D; k++) (*a)[k] = s[k];
  return a;
}

template <size_t D, class Impl, class Options>
Value adaptivePoolOrModule(const std::string& who, const char* moduleName, bool isMax, Value a, Value b, bool returnIndices) {
  if (isTensor(a)) {
    if (b.isMissing()) throwError("arity-error", who + ": the functional form needs an output size: (" + who + " x output-size)");
    const at::Tensor& x = tensorArg(a, who, 1);
    checkPoolInput(x, D, who);
    IntList size = resolvedSize<D>(x, outputSize<D>(b, who, 2));
    if (isMax) {
      std::tuple<at::Tensor, at::Tensor> r;
      if constexpr (D == 1) r = at::adaptive_max_pool1d(x, size);
      else if constexpr (D == 2) r = at::adaptive_max_pool2d(x, size);
      else r = at::adaptive_max_pool3d(x, size);
      return returnIndices ? pair(std::get<0>(r), std::get<1>(r)) : wrapTensor(std::get<0>(r));
    }
    if constexpr (D == 1) return wrapTensor(at::adaptive_avg_pool1d(x, size));
    else if constexpr (D == 2) return wrapTensor(at::adaptive_avg_pool2d(x, size));
    else return wrapTensor(at::adaptive_avg_pool3d(x, size));
  }
  if (!b.isMissing()) throwError("arity-error", who + ": the module form takes one output size: (" + who + " output-size)");
  auto s = outputSize<D>(a, who, 1);
  Options o = [&] {
    if constexpr (D == 1) {
      if (!s[0]) throwError("value-error", who + ": the output size of a 1-d pool must be an integer");
      return Options(torch::ExpandingArray<1>(*s[0]));
    } else {
      return Options(optionalArray<D>(s));
    }
  }();
  std::string extra = "output_size=" + outputSizeRepr<D>(a, s);
  if (returnIndices) {
    if constexpr (std::is_same_v<Impl, torch::nn::AdaptiveAvgPool1dImpl> || std::is_same_v<Impl, torch::nn::AdaptiveAvgPool2dImpl> ||
                  std::is_same_v<Impl, torch::nn::AdaptiveAvgPool3dImpl>) {
      throwError("arity-error", who + ": only max pools return indices");
    } else {
      auto m = std::make_shared<IndexedPool<Impl>>(o);
      m->tname = moduleName;
      m->extra = extra;
      return wrapModule(m);
    }
  }
  return makeLayer<Impl>(moduleName, o, extra);
}

}  // namespace

void registerPooling(Registry& r) {
  using namespace torch::nn;
  const char* maxDoc =
      " KERNEL-SIZE, :stride (default: the kernel size), :padding (0) and :dilation (1) are an integer or one per "
      "spatial dimension. With :return-indices #t the result is (output indices). With a tensor first, "
      "(max-poolNd x kernel-size ...) pools X directly (torch.nn.functional.max_poolNd).";
  r.def("max-pool1d", "(a :optional b :key stride padding dilation ceil-mode (return-indices #f))",
        [](Value a, Value b, Value stride, Value padding, Value dilation, Value ceil, bool ri) {
          return maxPoolOrModule<1, MaxPool1dImpl, MaxPool1dOptions>("max-pool1d", "MaxPool1d", a, b, stride, padding, dilation, ceil, ri);
        },
        std::string("(max-pool1d kernel-size :stride :padding :dilation :ceil-mode :return-indices) makes a MaxPool1d "
                    "module over (N, C, L) input.") + maxDoc, kPrimTensorFunction);
  r.def("max-pool2d", "(a :optional b :key stride padding dilation ceil-mode (return-indices #f))",
        [](Value a, Value b, Value stride, Value padding, Value dilation, Value ceil, bool ri) {
          return maxPoolOrModule<2, MaxPool2dImpl, MaxPool2dOptions>("max-pool2d", "MaxPool2d", a, b, stride, padding, dilation, ceil, ri);
        },
        std::string("(max-pool2d kernel-size :stride :padding :dilation :ceil-mode :return-indices) makes a MaxPool2d "
                    "module over (N, C, H, W) input.") + maxDoc, kPrimTensorFunction);
  r.def("max-pool3d", "(a :optional b :key stride padding dilation ceil-mode (return-indices #f))",
        [](Value a, Value b, Value stride, Value padding, Value dilation, Value ceil, bool ri) {
          return maxPoolOrModule<3, MaxPool3dImpl, MaxPool3dOptions>("max-pool3d", "MaxPool3d", a, b, stride, padding, dilation, ceil, ri);
        },
        std::string("(max-pool3d kernel-size :stride :padding :dilation :ceil-mode :return-indices) makes a MaxPool3d "
                    "module over (N, C, D, H, W) input.") + maxDoc, kPrimTensorFunction);

  const char* avgDoc =
      " KERNEL-SIZE, :stride (default: the kernel size) and :padding (0) are an integer or one per spatial "
      "dimension; :count-include-pad #t counts zero padding in the average. With a tensor first, (avg-poolNd x "
      "kernel-size ...) pools X directly (torch.nn.functional.avg_poolNd).";
  r.def("avg-pool1d", "(a :optional b :key stride padding ceil-mode count-include-pad)",
        [](Value a, Value b, Value stride, Value padding, Value ceil, Value countPad) {
          return avgPoolOrModule<1, AvgPool1dImpl, AvgPool1dOptions>("avg-pool1d", "AvgPool1d", a, b, stride, padding, ceil,
                                                                      countPad, Value::missing());
        },
        std::string("(avg-pool1d kernel-size :stride :padding :ceil-mode :count-include-pad) makes an AvgPool1d module "
                    "over (N, C, L) input.") + avgDoc, kPrimTensorFunction);
  r.def("avg-pool2d", "(a :optional b :key stride padding ceil-mode count-include-pad divisor-override)",
        [](Value a, Value b, Value stride, Value padding, Value ceil, Value countPad, Value divisor) {
          return avgPoolOrModule<2, AvgPool2dImpl, AvgPool2dOptions>("avg-pool2d", "AvgPool2d", a, b, stride, padding, ceil,
                                                                      countPad, divisor);
        },
        std::string("(avg-pool2d kernel-size :stride :padding :ceil-mode :count-include-pad :divisor-override) makes an "
                    "AvgPool2d module over (N, C, H, W) input.") + avgDoc, kPrimTensorFunction);
  r.def("avg-pool3d", "(a :optional b :key stride padding ceil-mode count-include-pad divisor-override)",
        [](Value a, Value b, Value stride, Value padding, Value ceil, Value countPad, Value divisor) {
          return avgPoolOrModule<3, AvgPool3dImpl, AvgPool3dOptions>("avg-pool3d", "AvgPool3d", a, b, stride, padding, ceil,
                                                                      countPad, divisor);
        },
        std::string("(avg-pool3d kernel-size :stride :padding :ceil-mode :count-include-pad :divisor-override) makes an "
                    "AvgPool3d module over (N, C, D, H, W) input.") + avgDoc, kPrimTensorFunction);

  const char* adaptiveDoc =
      " OUTPUT-SIZE is an integer or one per spatial dimension, where #f keeps that dimension of the input. With a "
      "tensor first, the call pools X directly (torch.nn.functional.adaptive_*_poolNd).";
  r.def("adaptive-avg-pool1d", "(a :optional b)",
        [](Value a, Value b) {
          return adaptivePoolOrModule<1, AdaptiveAvgPool1dImpl, AdaptiveAvgPool1dOptions>("adaptive-avg-pool1d", "AdaptiveAvgPool1d", false, a, b, false);
        },
        std::string("(adaptive-avg-pool1d output-size) makes an AdaptiveAvgPool1d module: averages (N, C, L) input "
                    "into OUTPUT-SIZE bins.") + adaptiveDoc, kPrimTensorFunction);
  r.def("adaptive-avg-pool2d", "(a :optional b)",
        [](Value a, Value b) {
          return adaptivePoolOrModule<2, AdaptiveAvgPool2dImpl, AdaptiveAvgPool2dOptions>("adaptive-avg-pool2d", "AdaptiveAvgPool2d", false, a, b, false);
        },
        std::string("(adaptive-avg-pool2d output-size) makes an AdaptiveAvgPool2d module: averages (N, C, H, W) input "
                    "into OUTPUT-SIZE bins.") + adaptiveDoc, kPrimTensorFunction);
  r.def("adaptive-avg-pool3d", "(a :optional b)",
        [](Value a, Value b) {
          return adaptivePoolOrModule<3, AdaptiveAvgPool3dImpl, AdaptiveAvgPool3dOptions>("adaptive-avg-pool3d", "AdaptiveAvgPool3d", false, a, b, false);
        },
        std::string("(adaptive-avg-pool3d output-size) makes an AdaptiveAvgPool3d module over (N, C, D, H, W) input.") +
            adaptiveDoc, kPrimTensorFunction);
  r.def("adaptive-max-pool1d", "(a :optional b :key (return-indices #f))",
        [](Value a, Value b, bool ri) {
          return adaptivePoolOrModule<1, AdaptiveMaxPool1dImpl, AdaptiveMaxPool1dOptions>("adaptive-max-pool1d", "AdaptiveMaxPool1d", true, a, b, ri);
        },
        std::string("(adaptive-max-pool1d output-size :return-indices #f) makes an AdaptiveMaxPool1d module: the "
                    "maximum of (N, C, L) input over OUTPUT-SIZE bins; with :return-indices #t it returns (output "
                    "indices).") + adaptiveDoc, kPrimTensorFunction);
  r.def("adaptive-max-pool2d", "(a :optional b :key (return-indices #f))",
        [](Value a, Value b, bool ri) {
          return adaptivePoolOrModule<2, AdaptiveMaxPool2dImpl, AdaptiveMaxPool2dOptions>("adaptive-max-pool2d", "AdaptiveMaxPool2d", true, a, b, ri);
        },
        std::string("(adaptive-max-pool2d output-size :return-indices #f) makes an AdaptiveMaxPool2d module over (N, C, "
                    "H, W) input; with :return-indices #t it returns (output indices).") + adaptiveDoc, kPrimTensorFunction);
  r.def("adaptive-max-pool3d", "(a :optional b :key (return-indices #f))",
        [](Value a, Value b, bool ri) {
          return adaptivePoolOrModule<3, AdaptiveMaxPool3dImpl, AdaptiveMaxPool3dOptions>("adaptive-max-pool3d", "AdaptiveMaxPool3d", true, a, b, ri);
        },
        std::string("(adaptive-max-pool3d output-size :return-indices #f) makes an AdaptiveMaxPool3d module over (N, C, "
                    "D, H, W) input; with :return-indices #t it returns (output indices).") + adaptiveDoc, kPrimTensorFunction);
}

}  // namespace nnlayer
}  // namespace purple
