// Reductions: over the whole tensor, or over :dim (one dimension or a list) with :keepdim.
// As in PyTorch, the dimension (and keepdim) may also be given positionally: (tensor-sum x 0 #t).
// Reductions that also locate their result (max, min, median over a dim) return a list
// (values indices), as PyTorch returns a (values, indices) pair.
#include <ATen/ATen.h>
#include "builtins/tensor/util.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"

namespace purple {

namespace {

using OptType = std::optional<at::ScalarType>;
using OptDims = std::optional<Dims>;

int64_t singleDim(const Dims& d, const char* who) {
  if (d.dims.size() != 1)
    throwError("tensor-error", std::string(who) + ": :dim must be one dimension here, got " +
                                   std::to_string(d.dims.size()));
  return d.dims[0];
}

// Moved out of the tuple: a sole owner's storage is what the tensor collector counts.
Value pairValue(std::tuple<at::Tensor, at::Tensor> t) {
  Value items[2] = {wrapTensor(std::move(std::get<0>(t))), Value::nil()};
  items[1] = wrapTensor(std::move(std::get<1>(t)));
  return listFromArray(items, 2);
}

// max and min share their three forms: whole tensor, elementwise against OTHER, and over a dim.
template <class Whole, class Binary, class OverDim>
Value extremum(const at::Tensor& x, const std::optional<TensorOrScalar>& other, const OptDims& dim,
               bool keepdim, const char* who, Whole whole, Binary binary, OverDim overDim) {
  if (other) {
    if (dim) throwError("tensor-error", std::string(who) + ": give either OTHER or :dim, not both");
    return wrapTensor(binary(x, operandTensor(*other, x.device())));
  }
  if (dim) return pairValue(overDim(x, singleDim(*dim, who), keepdim));
  return wrapTensor(whole(x));
}

// torch.max(x, 1) reduces over dim 1: an integer in OTHER's place is a dimension, a tensor (or a
// float) is the other operand of an elementwise maximum.
void positionalDim(std::optional<TensorOrScalar>& other, OptDims& dim) {
  if (!other || other->isTensor() || !other->scalar.isIntegral(false)) return;
  if (!dim) dim = Dims{IntList{other->scalar.toLong()}};
  other.reset();
}

}  // namespace

void registerTensorReduction(Registry& r) {
  r.def("tensor-sum", "(x :optional dim keepdim :key dim keepdim dtype)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim, OptType dtype) {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          if (dim) return at::sum(x, dim->dims, keepdim, copt(dtype));
          at::Tensor s = at::sum(x, copt(dtype));
          return keepdim ? s.reshape(IntList(x.dim(), 1)) : s;
        },
        "The sum of the elements of X, or over :dim (an integer or a list; also accepted positionally, "
        "with KEEPDIM after it, as torch.sum(x, 0, True) takes them) keeping reduced "
        "dimensions when :keepdim is #t: (tensor-sum x :dim 0 :keepdim #t). :dtype sets the "
        "accumulation and result type.");
  r.def("tensor-mean", "(x :optional dim keepdim :key dim keepdim dtype)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim, OptType dtype) {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          if (dim) return at::mean(x, dim->dims, keepdim, copt(dtype));
          at::Tensor m = at::mean(x, copt(dtype));
          return keepdim ? m.reshape(IntList(x.dim(), 1)) : m;
        },
        "The mean of the elements of X (floating point), or over :dim with :keepdim.");
  r.def("tensor-prod", "(x :optional dim keepdim :key dim keepdim dtype)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim, OptType dtype) {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          if (dim) return at::prod(x, singleDim(*dim, "tensor-prod"), keepdim, copt(dtype));
          at::Tensor p = at::prod(x, copt(dtype));
          return keepdim ? p.reshape(IntList(x.dim(), 1)) : p;
        },
        "The product of the elements of X, or over one :dim with :keepdim.");
  r.def("tensor-max", "(x :optional other keepdim :key dim keepdim)",
        [](const at::Tensor& x, std::optional<TensorOrScalar> other, bool keepPos, OptDims dim, bool keepdim) {
          keepdim = keepdim || keepPos;
          positionalDim(other, dim);
          return extremum(
              x, other, dim, keepdim, "tensor-max", [](const at::Tensor& t) { return at::max(t); },
              [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); },
              [](const at::Tensor& t, int64_t d, bool k) { return at::max(t, d, k); });
        },
        "The largest element of X; with a tensor OTHER, the elementwise maximum of X and OTHER; with "
        ":dim (or an integer in OTHER's place, as torch.max(x, 1)), a list (values indices) of the "
        "maxima along that dimension and where they are.");
  r.def("tensor-min", "(x :optional other keepdim :key dim keepdim)",
        [](const at::Tensor& x, std::optional<TensorOrScalar> other, bool keepPos, OptDims dim, bool keepdim) {
          keepdim = keepdim || keepPos;
          positionalDim(other, dim);
          return extremum(
              x, other, dim, keepdim, "tensor-min", [](const at::Tensor& t) { return at::min(t); },
              [](const at::Tensor& a, const at::Tensor& b) { return at::minimum(a, b); },
              [](const at::Tensor& t, int64_t d, bool k) { return at::min(t, d, k); });
        },
        "The smallest element of X; with a tensor OTHER, the elementwise minimum of X and OTHER; with "
        ":dim (or an integer in OTHER's place, as torch.min(x, 1)), a list (values indices) of the "
        "minima along that dimension and where they are.");
  r.def("tensor-amax", "(x :optional dim keepdim :key dim keepdim)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim) {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          return at::amax(x, dim ? dim->dims : IntList{}, keepdim);
        },
        "The maximum of X over :dim (an integer or a list; all dimensions when omitted), values only.");
  r.def("tensor-amin", "(x :optional dim keepdim :key dim keepdim)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim) {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          return at::amin(x, dim ? dim->dims : IntList{}, keepdim);
        },
        "The minimum of X over :dim (an integer or a list; all dimensions when omitted), values only.");
  r.def("tensor-argmax", "(x :optional dim keepdim :key dim keepdim)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim) {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          return at::argmax(x, dim ? c10::optional<int64_t>(singleDim(*dim, "tensor-argmax")) : c10::nullopt, keepdim);
        },
        "The index of the largest element of X (in the flattened tensor), or along :dim.");
  r.def("tensor-argmin", "(x :optional dim keepdim :key dim keepdim)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim) {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          return at::argmin(x, dim ? c10::optional<int64_t>(singleDim(*dim, "tensor-argmin")) : c10::nullopt, keepdim);
        },
        "The index of the smallest element of X (in the flattened tensor), or along :dim.");
  r.def("tensor-median", "(x :optional dim keepdim :key dim keepdim)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim) -> Value {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          if (dim) return pairValue(at::median(x, singleDim(*dim, "tensor-median"), keepdim));
          return wrapTensor(at::median(x));
        },
        "The median of X (the lower of the two middle values for even counts); with :dim, a list "
        "(values indices).");
  r.def("tensor-std", "(x :optional dim :key dim (unbiased #t) keepdim)",
        [](const at::Tensor& x, OptDims dimPos, OptDims dim, bool unbiased, bool keepdim) {
          if (!dim) dim = dimPos;
          if (dim) return at::std(x, at::OptionalIntArrayRef(dim->dims), unbiased, keepdim);
          at::Tensor s = at::std(x, unbiased);
          return keepdim ? s.reshape(IntList(x.dim(), 1)) : s;
        },
        "The standard deviation of X, or over :dim. :unbiased #t (the default) divides by N-1.");
  r.def("tensor-var", "(x :optional dim :key dim (unbiased #t) keepdim)",
        [](const at::Tensor& x, OptDims dimPos, OptDims dim, bool unbiased, bool keepdim) {
          if (!dim) dim = dimPos;
          if (dim) return at::var(x, at::OptionalIntArrayRef(dim->dims), unbiased, keepdim);
          at::Tensor v = at::var(x, unbiased);
          return keepdim ? v.reshape(IntList(x.dim(), 1)) : v;
        },
        "The variance of X, or over :dim. :unbiased #t (the default) divides by N-1.");
  r.def("tensor-norm", "(x :key p dim keepdim dtype)",
        [](const at::Tensor& x0, std::optional<NormOrd> p, OptDims dim, bool keepdim, OptType dtype) {
          at::Tensor x = dtype ? x0.to(*dtype) : x0;
          IntList dims = dim ? dim->dims : IntList{};
          if (p && p->name == "nuc") {
            if (!dim && x.dim() != 2)
              throwError("tensor-error", "tensor-norm: the nuclear norm needs a matrix or a :dim of two dimensions");
            return at::linalg_matrix_norm(x, "nuc", dim ? dims : IntList{-2, -1}, keepdim);
          }
          // "fro" over all dimensions or a list of them is the 2-norm of those elements.
          at::Scalar ord = p && p->number ? *p->number : at::Scalar(2.0);
          return at::linalg_vector_norm(x, ord, dim ? at::OptionalIntArrayRef(dims) : c10::nullopt, keepdim);
        },
        "The norm of X: by default the 2-norm (Frobenius) of all elements; :p a number (1, 2, "
        "+inf.0 ...), \"fro\" or \"nuc\"; over :dim with :keepdim.");
  r.def("tensor-all", "(x :optional dim keepdim :key dim keepdim)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim) {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          if (dim) return at::all(x, singleDim(*dim, "tensor-all"), keepdim);
          return at::all(x);
        },
        "A bool tensor: #t when every element of X (or along :dim) is non-zero.");
  r.def("tensor-any", "(x :optional dim keepdim :key dim keepdim)",
        [](const at::Tensor& x, OptDims dimPos, bool keepPos, OptDims dim, bool keepdim) {
          if (!dim) dim = dimPos;
          keepdim = keepdim || keepPos;
          if (dim) return at::any(x, singleDim(*dim, "tensor-any"), keepdim);
          return at::any(x);
        },
        "A bool tensor: #t when some element of X (or along :dim) is non-zero.");
  r.def("tensor-count-nonzero", "(x :optional dim :key dim)",
        [](const at::Tensor& x, OptDims dimPos, OptDims dim) {
          if (!dim) dim = dimPos;
          return dim ? at::count_nonzero(x, dim->dims) : at::count_nonzero(x);
        },
        "The number of non-zero elements of X, or along :dim.");
  r.def("tensor-cumsum", "(x dim :key dtype)",
        [](const at::Tensor& x, int64_t dim, OptType dtype) { return at::cumsum(x, dim, copt(dtype)); },
        "Running sums of X along DIM: (tensor-cumsum x 0).");
  r.def("tensor-cumprod", "(x dim :key dtype)",
        [](const at::Tensor& x, int64_t dim, OptType dtype) { return at::cumprod(x, dim, copt(dtype)); },
        "Running products of X along DIM.");
  r.def("tensor-logsumexp", "(x dim :optional keepdim :key keepdim)",
        [](const at::Tensor& x, Dims dim, bool keepPos, bool keepdim) {
          keepdim = keepdim || keepPos; return at::logsumexp(x, dim.dims, keepdim); },
        "log(sum(e^X)) along DIM (an integer or a list), computed stably.");

  r.def("tensor-bincount", "(x :key weights (minlength 0))",
        [](const at::Tensor& x, std::optional<at::Tensor> w, int64_t minlength) {
          if (x.dim() != 1 || x.is_floating_point() || x.scalar_type() == at::kBool)
            throwError("value-error", "tensor-bincount: X must be a 1-d tensor of non-negative integers");
          if (minlength < 0) throwError("value-error", "tensor-bincount: :minlength must be non-negative");
          if (x.numel() > 0 && x.min().item<int64_t>() < 0)
            throwError("value-error", "tensor-bincount: X must not hold negative values");
          return at::bincount(x, copt(w), minlength);
        },
        "How many times each value 0, 1, ... max(X) occurs in the 1-d integer tensor X (torch.bincount); at least "
        ":minlength bins. With :weights (X's shape), each occurrence adds its weight instead of 1.");
  auto quantile = [](const char* who, bool nan) {
    return [who, nan](const at::Tensor& x, Value q, std::optional<int64_t> dim, bool keepdim, std::optional<std::string> interp) {
      std::string mode = interp ? *interp : "linear";
      if (mode != "linear" && mode != "lower" && mode != "higher" && mode != "midpoint" && mode != "nearest")
        throwError("value-error", std::string(who) + ": :interpolation must be \"linear\", \"lower\", \"higher\", \"midpoint\" or \"nearest\", got \"" + mode + "\"");
      if (!x.is_floating_point()) throwError("type-error", std::string(who) + ": X must be a float32 or float64 tensor");
      c10::optional<int64_t> d = copt(dim);
      if (isNumber(q)) {
        double v = numberToScalar(q, who, 2).toDouble();
        if (!(v >= 0 && v <= 1)) throwError("value-error", std::string(who) + ": q must be in [0, 1]");
        return nan ? at::nanquantile(x, v, d, keepdim, mode) : at::quantile(x, v, d, keepdim, mode);
      }
      at::Tensor qt = isTensor(q) ? tensorOf(q) : tensorFromData(q, x.scalar_type(), who);
      qt = qt.to(x.scalar_type());
      if (qt.numel() > 0 && ((qt < 0).any().item<bool>() || (qt > 1).any().item<bool>()))
        throwError("value-error", std::string(who) + ": q values must be in [0, 1]");
      return nan ? at::nanquantile(x, qt, d, keepdim, mode) : at::quantile(x, qt, d, keepdim, mode);
    };
  };
  r.def("tensor-quantile", "(x q :key dim (keepdim #f) interpolation)", quantile("tensor-quantile", false),
        "The Q-th quantiles of X (torch.quantile): Q is a number in [0, 1] or a list / 1-d tensor of them (a leading "
        "dimension then indexes them); over all elements, or along :dim. :interpolation between the two nearest "
        "values: \"linear\" (default), \"lower\", \"higher\", \"midpoint\" or \"nearest\".");
  r.def("tensor-nanquantile", "(x q :key dim (keepdim #f) interpolation)", quantile("tensor-nanquantile", true),
        "tensor-quantile ignoring NaN values (torch.nanquantile).");
}

}  // namespace purple
