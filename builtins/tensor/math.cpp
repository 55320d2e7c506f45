// Elementwise tensor maths: arithmetic, functions, comparisons and logic, activations, the
// in-place `!` forms, and the hooks behind the generic + - * / < expt exp ... on tensors.
//
// Numbers broadcast: a number operand becomes a 0-d "wrapped number" tensor on the other
// operand's device, so type promotion is PyTorch's Python-scalar rule (int64 tensor + 0.5 gives
// float32; float32 tensor * 2.0 stays float32). Either operand of a binary op may be the number.
#include <ATen/ATen.h>
#include "builtins/tensor/util.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_hooks.hpp"
#include "interp/memory/tensor_value.hpp"
#include <string>

namespace purple {

namespace {

using OptType = std::optional<at::ScalarType>;

// In-place builtins return the cell they were given (not a new cell sharing the TensorImpl), so
// (eq? x (tensor-add! x 1)) holds and no extra cell is made.
const at::Tensor& target(Value v, const char* who) {
  if (!isTensor(v))
    throwError("type-error", std::string(who) + ": argument 1 must be a tensor, got " + describeValueType(v),
               cons(v, Value::nil()));
  const at::Tensor& t = tensorOf(v);
  if (!t.defined()) throwError("tensor-error", std::string(who) + ": argument 1 is a tensor that was already freed");
  return t;
}

at::Tensor clampBound(const TensorOrScalar& b, const at::Tensor& like) { return operandTensor(b, like.device()); }

at::Tensor clampImpl(const at::Tensor& x, const std::optional<TensorOrScalar>& lo,
                     const std::optional<TensorOrScalar>& hi) {
  bool tensors = (lo && lo->isTensor()) || (hi && hi->isTensor());
  if (!tensors) {
    return at::clamp(x, lo ? c10::optional<at::Scalar>(lo->scalar) : c10::nullopt,
                     hi ? c10::optional<at::Scalar>(hi->scalar) : c10::nullopt);
  }
  return at::clamp(x, lo ? c10::optional<at::Tensor>(clampBound(*lo, x)) : c10::nullopt,
                   hi ? c10::optional<at::Tensor>(clampBound(*hi, x)) : c10::nullopt);
}

at::Tensor powImpl(const TensorOrScalar& a, const TensorOrScalar& b) {
  if (a.isTensor() && b.isTensor()) return at::pow(*a.tensor, *b.tensor);
  if (a.isTensor()) return at::pow(*a.tensor, b.scalar);
  if (b.isTensor()) return at::pow(a.scalar, *b.tensor);
  return at::pow(wrappedScalar(a.scalar, at::kCPU), b.scalar);
}

TensorOrScalar operandOf(Value v, const char* who, int index) {
  TensorOrScalar r;
  if (isTensor(v)) {
    if (!tensorOf(v).defined())
      throwError("tensor-error", std::string(who) + ": argument " + std::to_string(index + 1) +
                                     " is a tensor that was already freed");
    r.tensor = &tensorOf(v);
  } else {
    r.scalar = numberToScalar(v, who, index + 1);
  }
  return r;
}

[[noreturn]] void rethrowTorch(const char* who, const c10::Error& e) {
  throwError("tensor-error", std::string(who) + ": " + e.what_without_backtrace());
}

const char* binaryName(TensorBinary op) {
  switch (op) {
    case TensorBinary::Add: return "+";
    case TensorBinary::Sub: return "-";
    case TensorBinary::Mul: return "*";
    case TensorBinary::Div: return "/";
    case TensorBinary::Pow: return "expt";
    case TensorBinary::Min: return "min";
    case TensorBinary::Max: return "max";
    case TensorBinary::Lt: return "<";
    case TensorBinary::Le: return "<=";
    case TensorBinary::Gt: return ">";
    case TensorBinary::Ge: return ">=";
    case TensorBinary::Eq: return "=";
  }
  return "tensor operation";
}

const char* unaryName(TensorUnary op) {
  switch (op) {
    case TensorUnary::Neg: return "-";
    case TensorUnary::Exp: return "exp";
    case TensorUnary::Log: return "log";
    case TensorUnary::Sqrt: return "sqrt";
    case TensorUnary::Sin: return "sin";
    case TensorUnary::Cos: return "cos";
    case TensorUnary::Tan: return "tan";
    case TensorUnary::Abs: return "abs";
    case TensorUnary::Asin: return "asin";
    case TensorUnary::Acos: return "acos";
    case TensorUnary::Atan: return "atan";
    case TensorUnary::Floor: return "floor";
    case TensorUnary::Ceiling: return "ceiling";
    case TensorUnary::Round: return "round";
    case TensorUnary::Truncate: return "truncate";
    case TensorUnary::Reciprocal: return "reciprocal";
  }
  return "tensor operation";
}

}  // namespace

Value tensorBinary(TensorBinary op, Value a, Value b) {
  const char* who = binaryName(op);
  TensorOrScalar x = operandOf(a, who, 0), y = operandOf(b, who, 1);
  try {
    if (op == TensorBinary::Pow) return wrapTensor(powImpl(x, y));
    auto [l, r] = binaryOperands(x, y, who);
    switch (op) {
      case TensorBinary::Add: return wrapTensor(at::add(l, r));
      case TensorBinary::Sub: return wrapTensor(at::sub(l, r));
      case TensorBinary::Mul: return wrapTensor(at::mul(l, r));
      case TensorBinary::Div: return wrapTensor(at::div(l, r));
      case TensorBinary::Min: return wrapTensor(at::minimum(l, r));
      case TensorBinary::Max: return wrapTensor(at::maximum(l, r));
      case TensorBinary::Lt: return wrapTensor(at::lt(l, r));
      case TensorBinary::Le: return wrapTensor(at::le(l, r));
      case TensorBinary::Gt: return wrapTensor(at::gt(l, r));
      case TensorBinary::Ge: return wrapTensor(at::ge(l, r));
      case TensorBinary::Eq: return wrapTensor(at::eq(l, r));
      case TensorBinary::Pow: break;
    }
  } catch (const c10::Error& e) {
    rethrowTorch(who, e);
  }
  throwError("tensor-error", std::string(who) + ": unsupported tensor operation");
}

Value tensorUnary(TensorUnary op, Value a) {
  const char* who = unaryName(op);
  if (!isTensor(a)) throwTypeError(who, 1, "a tensor", a);
  const at::Tensor& t = tensorOf(a);
  if (!t.defined()) throwError("tensor-error", std::string(who) + ": argument 1 is a tensor that was already freed");
  try {
    switch (op) {
      case TensorUnary::Neg: return wrapTensor(at::neg(t));
      case TensorUnary::Exp: return wrapTensor(at::exp(t));
      case TensorUnary::Log: return wrapTensor(at::log(t));
      case TensorUnary::Sqrt: return wrapTensor(at::sqrt(t));
      case TensorUnary::Sin: return wrapTensor(at::sin(t));
      case TensorUnary::Cos: return wrapTensor(at::cos(t));
      case TensorUnary::Tan: return wrapTensor(at::tan(t));
      case TensorUnary::Abs: return wrapTensor(at::abs(t));
      case TensorUnary::Asin: return wrapTensor(at::asin(t));
      case TensorUnary::Acos: return wrapTensor(at::acos(t));
      case TensorUnary::Atan: return wrapTensor(at::atan(t));
      case TensorUnary::Floor: return wrapTensor(at::floor(t));
      case TensorUnary::Ceiling: return wrapTensor(at::ceil(t));
      case TensorUnary::Round: return wrapTensor(at::round(t));
      case TensorUnary::Truncate: return wrapTensor(at::trunc(t));
      case TensorUnary::Reciprocal: return wrapTensor(at::reciprocal(t));
    }
  } catch (const c10::Error& e) {
    rethrowTorch(who, e);
  }
  throwError("tensor-error", std::string(who) + ": unsupported tensor operation");
}

void registerTensorMath(Registry& r) {
  using TS = TensorOrScalar;

  // ---- arithmetic ----
  r.def("tensor-add", "(x other :key (alpha 1))",
        [](TS a, TS b, at::Scalar alpha) {
          auto [l, rr] = binaryOperands(a, b, "tensor-add");
          return at::add(l, rr, alpha);
        },
        "X + ALPHA * OTHER, elementwise with broadcasting; either may be a number.");
  r.def("tensor-sub", "(x other :key (alpha 1))",
        [](TS a, TS b, at::Scalar alpha) {
          auto [l, rr] = binaryOperands(a, b, "tensor-sub");
          return at::sub(l, rr, alpha);
        },
        "X - ALPHA * OTHER, elementwise with broadcasting; either may be a number.");
  r.def("tensor-mul", "(x other)",
        [](TS a, TS b) {
          auto [l, rr] = binaryOperands(a, b, "tensor-mul");
          return at::mul(l, rr);
        },
        "X * OTHER, elementwise with broadcasting; either may be a number.");
  r.def("tensor-div", "(x other :key rounding-mode)",
        [](TS a, TS b, std::optional<std::string> mode) {
          auto [l, rr] = binaryOperands(a, b, "tensor-div");
          if (mode) return at::div(l, rr, c10::string_view(*mode));
          return at::div(l, rr);
        },
        "X / OTHER, elementwise with broadcasting (true division: integer tensors give floats). "
        ":rounding-mode \"trunc\" or \"floor\" rounds the quotient.");
  r.def("tensor-floor-divide", "(x other)",
        [](TS a, TS b) {
          auto [l, rr] = binaryOperands(a, b, "tensor-floor-divide");
          return at::div(l, rr, c10::string_view("floor"));
        },
        "X / OTHER rounded towards negative infinity, elementwise.");
  r.def("tensor-pow", "(x exponent)", [](TS a, TS b) { return powImpl(a, b); },
        "X raised to EXPONENT, elementwise with broadcasting; either may be a number.");
  r.def("tensor-fmod", "(x other)",
        [](TS a, TS b) {
          auto [l, rr] = binaryOperands(a, b, "tensor-fmod");
          return at::fmod(l, rr);
        },
        "Remainder of X / OTHER with the sign of X (C's fmod), elementwise.");
  r.def("tensor-remainder", "(x other)",
        [](TS a, TS b) {
          auto [l, rr] = binaryOperands(a, b, "tensor-remainder");
          return at::remainder(l, rr);
        },
        "Remainder of X / OTHER with the sign of OTHER (Python's %), elementwise.");
  r.def("tensor-atan2", "(x other)",
        [](TS a, TS b) {
          auto [l, rr] = binaryOperands(a, b, "tensor-atan2");
          return at::atan2(l, rr);
        },
        "The angle atan(X / OTHER) in the correct quadrant, elementwise.");
  r.def("tensor-maximum", "(x other)",
        [](TS a, TS b) {
          auto [l, rr] = binaryOperands(a, b, "tensor-maximum");
          return at::maximum(l, rr);
        },
        "The larger of X and OTHER, elementwise with broadcasting (NaN wins).");
  r.def("tensor-minimum", "(x other)",
        [](TS a, TS b) {
          auto [l, rr] = binaryOperands(a, b, "tensor-minimum");
          return at::minimum(l, rr);
        },
        "The smaller of X and OTHER, elementwise with broadcasting (NaN wins).");
  r.def("tensor-lerp", "(x end weight)",
        [](const at::Tensor& x, const at::Tensor& end, TS w) {
          return w.isTensor() ? at::lerp(x, end, *w.tensor) : at::lerp(x, end, w.scalar);
        },
        "Linear interpolation X + WEIGHT * (END - X), elementwise.");

  // ---- unary functions ----
#define PURPLE_UNARY(NAME, EXPR, DOC) \
  r.def(NAME, "(x)", [](const at::Tensor& x) { return EXPR; }, DOC)
  PURPLE_UNARY("tensor-neg", at::neg(x), "-X, elementwise.");
  PURPLE_UNARY("tensor-abs", at::abs(x), "The absolute value of each element of X.");
  PURPLE_UNARY("tensor-sqrt", at::sqrt(x), "The square root of each element of X (NaN for negatives).");
  PURPLE_UNARY("tensor-rsqrt", at::rsqrt(x), "1 / sqrt(X), elementwise.");
  PURPLE_UNARY("tensor-square", at::square(x), "X * X, elementwise.");
  PURPLE_UNARY("tensor-exp", at::exp(x), "e^X, elementwise.");
  PURPLE_UNARY("tensor-exp2", at::exp2(x), "2^X, elementwise.");
  PURPLE_UNARY("tensor-expm1", at::expm1(x), "e^X - 1, elementwise (accurate for small X).");
  PURPLE_UNARY("tensor-log", at::log(x), "The natural logarithm of each element of X.");
  PURPLE_UNARY("tensor-log1p", at::log1p(x), "log(1 + X), elementwise (accurate for small X).");
  PURPLE_UNARY("tensor-log2", at::log2(x), "The base-2 logarithm of each element of X.");
  PURPLE_UNARY("tensor-log10", at::log10(x), "The base-10 logarithm of each element of X.");
  PURPLE_UNARY("tensor-sin", at::sin(x), "The sine of each element of X (radians).");
  PURPLE_UNARY("tensor-cos", at::cos(x), "The cosine of each element of X (radians).");
  PURPLE_UNARY("tensor-tan", at::tan(x), "The tangent of each element of X (radians).");
  PURPLE_UNARY("tensor-asin", at::asin(x), "The arcsine of each element of X.");
  PURPLE_UNARY("tensor-acos", at::acos(x), "The arccosine of each element of X.");
  PURPLE_UNARY("tensor-atan", at::atan(x), "The arctangent of each element of X.");
  PURPLE_UNARY("tensor-sinh", at::sinh(x), "The hyperbolic sine of each element of X.");
  PURPLE_UNARY("tensor-cosh", at::cosh(x), "The hyperbolic cosine of each element of X.");
  PURPLE_UNARY("tensor-floor", at::floor(x), "The largest integer <= each element of X.");
  PURPLE_UNARY("tensor-ceil", at::ceil(x), "The smallest integer >= each element of X.");
  PURPLE_UNARY("tensor-trunc", at::trunc(x), "Each element of X rounded towards zero.");
  PURPLE_UNARY("tensor-frac", at::frac(x), "The fractional part of each element of X (X - trunc(X)).");
  PURPLE_UNARY("tensor-sign", at::sign(x), "-1, 0 or 1 by the sign of each element of X.");
  PURPLE_UNARY("tensor-reciprocal", at::reciprocal(x), "1 / X, elementwise.");
  PURPLE_UNARY("tensor-erf", at::erf(x), "The error function of each element of X.");
  PURPLE_UNARY("tensor-erfc", at::erfc(x), "The complementary error function of each element of X.");
  PURPLE_UNARY("tensor-isnan", at::isnan(x), "A bool tensor: #t where X is NaN.");
  PURPLE_UNARY("tensor-isinf", at::isinf(x), "A bool tensor: #t where X is infinite.");
  PURPLE_UNARY("tensor-isfinite", at::isfinite(x), "A bool tensor: #t where X is finite.");
  PURPLE_UNARY("tensor-real", at::real(x), "The real part of complex X (X itself when real).");
  PURPLE_UNARY("tensor-imag", at::imag(x), "The imaginary part of complex X (an error for real X).");
  PURPLE_UNARY("tensor-angle", at::angle(x), "The argument (phase) of each element of X.");
  PURPLE_UNARY("tensor-logical-not", at::logical_not(x), "A bool tensor: #t where X is zero.");
  r.def("tensor-round", "(x :key (decimals 0))",
        [](const at::Tensor& x, int64_t decimals) { return decimals ? at::round(x, decimals) : at::round(x); },
        "Each element of X rounded to the nearest integer (halves to even), or to :decimals places.");
  r.def("tensor-clamp", "(x :key min max)",
        [](const at::Tensor& x, std::optional<TS> lo, std::optional<TS> hi) { return clampImpl(x, lo, hi); },
        "X limited to [:min, :max] elementwise; either bound may be omitted, and may be a number or "
        "a tensor: (tensor-clamp x :min -1 :max 1).");

  // ---- comparison and logic ----
#define PURPLE_BINARY(NAME, FN, DOC)                                  \
  r.def(NAME, "(x other)",                                            \
        [](TS a, TS b) {                                              \
          auto [l, rr] = binaryOperands(a, b, NAME);                  \
          return FN(l, rr);                                           \
        },                                                            \
        DOC)
  PURPLE_BINARY("tensor-eq", at::eq, "A bool tensor: #t where X = OTHER (broadcasting; either may be a number).");
  PURPLE_BINARY("tensor-ne", at::ne, "A bool tensor: #t where X /= OTHER.");
  PURPLE_BINARY("tensor-lt", at::lt, "A bool tensor: #t where X < OTHER.");
  PURPLE_BINARY("tensor-le", at::le, "A bool tensor: #t where X <= OTHER.");
  PURPLE_BINARY("tensor-gt", at::gt, "A bool tensor: #t where X > OTHER.");
  PURPLE_BINARY("tensor-ge", at::ge, "A bool tensor: #t where X >= OTHER.");
  PURPLE_BINARY("tensor-logical-and", at::logical_and, "A bool tensor: #t where both X and OTHER are non-zero.");
  PURPLE_BINARY("tensor-logical-or", at::logical_or, "A bool tensor: #t where X or OTHER is non-zero.");
  PURPLE_BINARY("tensor-logical-xor", at::logical_xor, "A bool tensor: #t where exactly one of X and OTHER is non-zero.");
  r.def("tensor-where", "(condition x y)",
        [](const at::Tensor& cond, TS a, TS b) {
          auto [l, rr] = binaryOperands(a, b, "tensor-where");
          // Promote first: where() itself did not promote mixed dtypes before LibTorch 2.0.
          at::ScalarType common = at::result_type(l, rr);
          return at::where(cond, l.to(common), rr.to(common));
        },
        "Elementwise choice: X where CONDITION (a bool tensor) holds, else Y. X and Y may be numbers.");
  r.def("tensor-equal?", "(x other)",
        [](const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes() && at::equal(a, b); },
        "#t when X and OTHER have the same shape and the same elements.");
  r.def("tensor-allclose?", "(x other :key (rtol 1e-05) (atol 1e-08) equal-nan)",
        [](const at::Tensor& a, const at::Tensor& b, double rtol, double atol, bool nan) {
          return at::allclose(a, b, rtol, atol, nan);
        },
        "#t when |X - OTHER| <= :atol + :rtol * |OTHER| everywhere (defaults 1e-8 and 1e-5).");
  r.def("tensor-isclose", "(x other :key (rtol 1e-05) (atol 1e-08) equal-nan)",
        [](const at::Tensor& a, const at::Tensor& b, double rtol, double atol, bool nan) {
          return at::isclose(a, b, rtol, atol, nan);
        },
        "A bool tensor: #t where |X - OTHER| <= :atol + :rtol * |OTHER|.");

  // ---- activations ----
  PURPLE_UNARY("tensor-relu", at::relu(x), "max(0, X), elementwise.");
  PURPLE_UNARY("tensor-relu6", at::hardtanh(x, 0, 6), "min(max(0, X), 6), elementwise.");
  PURPLE_UNARY("tensor-sigmoid", at::sigmoid(x), "1 / (1 + e^-X), elementwise.");
  PURPLE_UNARY("tensor-log-sigmoid", at::log_sigmoid(x), "log(sigmoid(X)), elementwise and stable.");
  PURPLE_UNARY("tensor-tanh", at::tanh(x), "The hyperbolic tangent of each element of X.");
  PURPLE_UNARY("tensor-silu", at::silu(x), "X * sigmoid(X) (also called swish), elementwise.");
  PURPLE_UNARY("tensor-mish", at::mish(x), "X * tanh(softplus(X)), elementwise.");
  PURPLE_UNARY("tensor-selu", at::selu(x), "The scaled exponential linear unit, elementwise.");
  PURPLE_UNARY("tensor-hardsigmoid", at::hardsigmoid(x), "A piecewise-linear sigmoid: clamp(X/6 + 1/2, 0, 1).");
  PURPLE_UNARY("tensor-hardswish", at::hardswish(x), "X * hardsigmoid(X), elementwise.");
  // Computed in place when the argument is a temporary nobody else holds.
  r.inPlaceOnTemporary("tensor-neg", [](at::Tensor& x) { x.neg_(); });
  r.inPlaceOnTemporary("tensor-abs", [](at::Tensor& x) { x.abs_(); });
  r.inPlaceOnTemporary("tensor-sqrt", [](at::Tensor& x) { x.sqrt_(); });
  r.inPlaceOnTemporary("tensor-exp", [](at::Tensor& x) { x.exp_(); });
  r.inPlaceOnTemporary("tensor-log", [](at::Tensor& x) { x.log_(); });
  r.inPlaceOnTemporary("tensor-sin", [](at::Tensor& x) { x.sin_(); });
  r.inPlaceOnTemporary("tensor-cos", [](at::Tensor& x) { x.cos_(); });
  r.inPlaceOnTemporary("tensor-relu", [](at::Tensor& x) { x.relu_(); });
  r.inPlaceOnTemporary("tensor-relu6", [](at::Tensor& x) { at::hardtanh_(x, 0, 6); });
  r.inPlaceOnTemporary("tensor-sigmoid", [](at::Tensor& x) { x.sigmoid_(); });
  r.inPlaceOnTemporary("tensor-tanh", [](at::Tensor& x) { x.tanh_(); });
  r.inPlaceOnTemporary("tensor-silu", [](at::Tensor& x) { at::silu_(x); });
  r.def("tensor-leaky-relu", "(x :key (negative-slope 0.01))",
        [](const at::Tensor& x, at::Scalar slope) { return at::leaky_relu(x, slope); },
        "X where X >= 0, else :negative-slope * X (default 0.01).");
  r.def("tensor-gelu", "(x :key (approximate \"none\"))",
        [](const at::Tensor& x, std::string approx) { return at::gelu(x, approx); },
        "The Gaussian error linear unit X * Phi(X); :approximate \"tanh\" uses the tanh formula.");
  r.def("tensor-elu", "(x :key (alpha 1.0))",
        [](const at::Tensor& x, at::Scalar alpha) { return at::elu(x, alpha); },
        "X where X > 0, else :alpha * (e^X - 1).");
  r.def("tensor-celu", "(x :key (alpha 1.0))",
        [](const at::Tensor& x, at::Scalar alpha) { return at::celu(x, alpha); },
        "max(0, X) + min(0, :alpha * (e^(X / :alpha) - 1)).");
  r.def("tensor-softplus", "(x :key (beta 1) (threshold 20))",
        [](const at::Tensor& x, at::Scalar beta, at::Scalar threshold) { return at::softplus(x, beta, threshold); },
        "log(1 + e^(:beta * X)) / :beta, linear above :threshold.");
  r.def("tensor-hardtanh", "(x :key (min-val -1) (max-val 1))",
        [](const at::Tensor& x, at::Scalar lo, at::Scalar hi) { return at::hardtanh(x, lo, hi); },
        "X clamped to [:min-val, :max-val] (default [-1, 1]).");
  r.def("tensor-softmax", "(x dim :key dtype)",
        [](const at::Tensor& x, int64_t dim, OptType dtype) { return at::softmax(x, dim, copt(dtype)); },
        "e^X / sum(e^X) along DIM: (tensor-softmax x 1). :dtype casts X first.");
  r.def("tensor-log-softmax", "(x dim :key dtype)",
        [](const at::Tensor& x, int64_t dim, OptType dtype) { return at::log_softmax(x, dim, copt(dtype)); },
        "log(softmax(X)) along DIM, computed stably. :dtype casts X first.");
  r.def("tensor-softmin", "(x dim :key dtype)",
        [](const at::Tensor& x, int64_t dim, OptType dtype) { return at::softmax(at::neg(x), dim, copt(dtype)); },
        "softmax(-X) along DIM.");

  // ---- in place ----
  // Each returns X itself after changing it.
#define PURPLE_INPLACE_BIN(NAME, METHOD, DOC)                                \
  r.def(NAME, "(x other)",                                                   \
        [](Value xv, TS b) {                                                 \
          const at::Tensor& x = target(xv, NAME);                            \
          if (b.isTensor()) x.METHOD(*b.tensor);                             \
          else x.METHOD(b.scalar);                                           \
          return xv;                                                         \
        },                                                                   \
        DOC)
  r.def("tensor-add!", "(x other :key (alpha 1))",
        [](Value xv, TS b, at::Scalar alpha) {
          const at::Tensor& x = target(xv, "tensor-add!");
          if (b.isTensor()) x.add_(*b.tensor, alpha);
          else x.add_(b.scalar, alpha);
          return xv;
        },
        "Adds ALPHA * OTHER to X in place and returns X.", kPrimTensorFunction);
  r.def("tensor-sub!", "(x other :key (alpha 1))",
        [](Value xv, TS b, at::Scalar alpha) {
          const at::Tensor& x = target(xv, "tensor-sub!");
          if (b.isTensor()) x.sub_(*b.tensor, alpha);
          else x.sub_(b.scalar, alpha);
          return xv;
        },
        "Subtracts ALPHA * OTHER from X in place and returns X.", kPrimTensorFunction);
  PURPLE_INPLACE_BIN("tensor-mul!", mul_, "Multiplies X by OTHER in place and returns X.");
  PURPLE_INPLACE_BIN("tensor-div!", div_, "Divides X by OTHER in place and returns X (X must be floating point).");
  PURPLE_INPLACE_BIN("tensor-pow!", pow_, "Raises X to OTHER in place and returns X.");
  PURPLE_INPLACE_BIN("tensor-fmod!", fmod_, "Replaces X by fmod(X, OTHER) in place and returns X.");
  PURPLE_INPLACE_BIN("tensor-fill!", fill_, "Sets every element of X to OTHER (a number or a 0-d tensor); returns X.");
  r.def("tensor-copy!", "(x src)",
        [](Value xv, const at::Tensor& src) {
          target(xv, "tensor-copy!").copy_(src);
          return xv;
        },
        "Copies the elements of SRC (broadcast, converted to X's dtype and device) into X; returns X.", kPrimTensorFunction);
  r.def("tensor-clamp!", "(x :key min max)",
        [](Value xv, std::optional<TS> lo, std::optional<TS> hi) {
          const at::Tensor& x = target(xv, "tensor-clamp!");
          bool tensors = (lo && lo->isTensor()) || (hi && hi->isTensor());
          if (!tensors)
            x.clamp_(lo ? c10::optional<at::Scalar>(lo->scalar) : c10::nullopt,
                     hi ? c10::optional<at::Scalar>(hi->scalar) : c10::nullopt);
          else
            x.clamp_(lo ? c10::optional<at::Tensor>(clampBound(*lo, x)) : c10::nullopt,
                     hi ? c10::optional<at::Tensor>(clampBound(*hi, x)) : c10::nullopt);
          return xv;
        },
        "Limits X to [:min, :max] in place and returns X.", kPrimTensorFunction);
#define PURPLE_INPLACE_UN(NAME, METHOD, DOC) \
  r.def(NAME, "(x)", [](Value xv) { target(xv, NAME).METHOD(); return xv; }, DOC)
  PURPLE_INPLACE_UN("tensor-zero!", zero_, "Sets every element of X to zero and returns X.");
  PURPLE_INPLACE_UN("tensor-neg!", neg_, "Negates X in place and returns X.");
  PURPLE_INPLACE_UN("tensor-abs!", abs_, "Replaces X by its absolute value in place and returns X.");
  PURPLE_INPLACE_UN("tensor-sqrt!", sqrt_, "Replaces X by its square root in place and returns X.");
  PURPLE_INPLACE_UN("tensor-exp!", exp_, "Replaces X by e^X in place and returns X.");
  PURPLE_INPLACE_UN("tensor-log!", log_, "Replaces X by log(X) in place and returns X.");
  PURPLE_INPLACE_UN("tensor-floor!", floor_, "Rounds X down in place and returns X.");
  PURPLE_INPLACE_UN("tensor-ceil!", ceil_, "Rounds X up in place and returns X.");
  PURPLE_INPLACE_UN("tensor-round!", round_, "Rounds X to the nearest integer in place and returns X.");
  PURPLE_INPLACE_UN("tensor-relu!", relu_, "Replaces X by max(0, X) in place and returns X.");
  PURPLE_INPLACE_UN("tensor-sigmoid!", sigmoid_, "Replaces X by sigmoid(X) in place and returns X.");
  PURPLE_INPLACE_UN("tensor-tanh!", tanh_, "Replaces X by tanh(X) in place and returns X.");
  r.def("tensor-uniform!", "(x :key (from 0.0) (to 1.0))",
        [](Value xv, double from, double to) {
          target(xv, "tensor-uniform!").uniform_(from, to);
          return xv;
        },
        "Fills X with uniform random numbers in [:from, :to) and returns X.", kPrimTensorFunction);
  r.def("tensor-normal!", "(x :key (mean 0.0) (std 1.0))",
        [](Value xv, double mean, double stdev) {
          target(xv, "tensor-normal!").normal_(mean, stdev);
          return xv;
        },
        "Fills X with normal random numbers (:mean, :std) and returns X.", kPrimTensorFunction);
#undef PURPLE_UNARY
  r.def("tensor-nan-to-num", "(x :key (nan 0.0) posinf neginf)",
        [](const at::Tensor& x, double nan, std::optional<double> posinf, std::optional<double> neginf) {
          return at::nan_to_num(x, nan, copt(posinf), copt(neginf));
        },
        "X with NaN replaced by :nan (0.0), +inf by :posinf and -inf by :neginf (by default the largest and smallest "
        "finite values of X's dtype) (torch.nan_to_num).");
  r.def("tensor-diff", "(x :key (n 1) (dim -1) prepend append)",
        [](const at::Tensor& x, int64_t n, int64_t dim, std::optional<at::Tensor> prepend, std::optional<at::Tensor> append) {
          if (x.dim() == 0) throwError("value-error", "tensor-diff: X must have at least one dimension");
          if (n < 0) throwError("value-error", "tensor-diff: :n must be non-negative, got " + std::to_string(n));
          return at::diff(x, n, dim, copt(prepend), copt(append));
        },
        "The N-th forward differences of X along :dim (the last by default): x[i+1] - x[i], N times "
        "(torch.diff). :prepend and :append tensors are joined to X along :dim first.");
#undef PURPLE_BINARY
#undef PURPLE_INPLACE_BIN
#undef PURPLE_INPLACE_UN
}

}  // namespace purple
