// Option values shared by every tensor builtin: dtype and device names, scalars, shapes and
// dim lists, and the number <-> tensor plumbing behind "numbers broadcast".
#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include "builtins/tensor/util.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include <cmath>
#include <string>

namespace purple {

namespace {

struct DtypeName { const char* name; at::ScalarType type; };
// The first entry for each type is its canonical (printed) name; the rest are PyTorch's aliases.
const DtypeName kDtypes[] = {
    {"float32", at::kFloat},   {"float64", at::kDouble},   {"float16", at::kHalf},
    {"bfloat16", at::kBFloat16}, {"int64", at::kLong},     {"int32", at::kInt},
    {"int16", at::kShort},     {"int8", at::kChar},        {"uint8", at::kByte},
    {"bool", at::kBool},       {"complex64", at::kComplexFloat},
    {"complex128", at::kComplexDouble},
    {"float", at::kFloat},     {"double", at::kDouble},    {"half", at::kHalf},
    {"long", at::kLong},       {"int", at::kInt},          {"short", at::kShort},
    {"cfloat", at::kComplexFloat}, {"cdouble", at::kComplexDouble},
};

const char* kDtypeChoices =
    "float32 float64 float16 bfloat16 int64 int32 int16 int8 uint8 bool complex64 complex128";

bool nameOf(Value v, std::string& out) {
  if (isString(v)) { out = std::string(stringView(v)); return true; }
  if (v.is(Kind::Symbol)) { out = std::string(symbolName(v)); return true; }   // also keywords
  return false;
}

}  // namespace

std::optional<at::ScalarType> lookupScalarType(Value v) {
  std::string name;
  if (!nameOf(v, name)) return std::nullopt;
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  for (const auto& d : kDtypes)
    if (name == d.name) return d.type;
  return std::nullopt;
}

at::ScalarType scalarTypeFromValue(Value v, std::string_view who) {
  std::string name;
  if (!nameOf(v, name))
    throwError("type-error", std::string(who) + ": dtype must be a symbol or string such as 'float32, got " +
                                 describeValueType(v),
               cons(v, Value::nil()));
  for (const auto& d : kDtypes)
    if (name == d.name) return d.type;
  // "torch.float32" is what people copy from Python.
  if (name.rfind("torch.", 0) == 0) return scalarTypeFromValue(makeString(name.substr(6)), who);
  throwError("tensor-error", std::string(who) + ": unknown dtype " + name + " (expected one of " +
                                 kDtypeChoices + ")");
}

Value scalarTypeToValue(at::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return intern(d.name);
  // Quantized and other exotic types: LibTorch's own name, lower-cased.
  std::string name = c10::toString(t);
  for (auto& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  return intern(name);
}

at::Device deviceFromValue(Value v, std::string_view who) {
  std::string name;
  if (v.isFixnum()) {
    // A bare index means a CUDA device, as torch.device(0) does.
    if (v.fixnum() < 0) throwError("tensor-error", std::string(who) + ": device index must be >= 0, got", cons(v, Value::nil()));
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(v.fixnum()));
  }
  if (isTensor(v) && tensorOf(v).defined()) return tensorOf(v).device();
  if (!nameOf(v, name))
    throwError("type-error", std::string(who) + ": device must be a string such as \"cpu\" or \"cuda:0\", got " +
                                 describeValueType(v),
               cons(v, Value::nil()));
  try {
    return at::Device(name);
  } catch (const c10::Error&) {
    throwError("tensor-error", std::string(who) + ": unknown device \"" + name +
                                   "\" (expected \"cpu\", \"cuda\" or \"cuda:N\")");
  }
}

Value deviceToValue(const at::Device& d) { return makeString(d.str()); }

Value scalarToValue(const at::Scalar& s) {
  if (s.isBoolean()) return Value::boolean(s.toBool());
  if (s.isIntegral(false)) return makeInteger(s.toLong());
  if (s.isComplex()) {
    auto c = s.toComplexDouble();
    if (c.imag() == 0) return makeFlonum(c.real());
    throwError("tensor-error", "complex value " + std::to_string(c.real()) + (c.imag() < 0 ? "" : "+") +
                                   std::to_string(c.imag()) +
                                   "i has no Purple number; use tensor-real and tensor-imag");
  }
  return makeFlonum(s.toDouble());
}

// ---- argument types ------------------------------------------------------------------------

bool isSequence(Value v) { return v.is(Kind::Vector) || v.isNil() || (isPair(v) && isList(v)); }

int64_t intElement(Value v, const PrimitiveInfo* info, int i) {
  if (v.isFixnum()) return v.fixnum();
  if (isExactInteger(v) || (isFlonum(v) && std::floor(flonumValue(v)) == flonumValue(v)))
    return integerValue(v, info, i);
  // A one-element integer tensor is accepted so that (tensor-argmax x) can feed an index.
  if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).numel() == 1 &&
      !at::isFloatingType(tensorOf(v).scalar_type()))
    return tensorOf(v).item().toLong();
  throwConversionError(info, i, "an integer or a list of integers", v);
}

IntList intSequence(Value v, const PrimitiveInfo* info, int i) {
  IntList out;
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) out.push_back(intElement(vec->items[k], info, i));
    return out;
  }
  if (!isList(v)) throwConversionError(info, i, "a list of integers", v);
  for (Value p = v; isPair(p); p = cdr(p)) out.push_back(intElement(car(p), info, i));
  return out;
}

// The binder leaves undeclared keywords among the rest arguments; in a shape they can only be a
// misspelt option, so say that rather than "expected an integer".
static void rejectKeywords(Value rest, const PrimitiveInfo* info) {
  if (!isList(rest)) return;   // circular or improper: the conversion after this names it
  for (Value p = rest; isPair(p); p = cdr(p)) {
    if (!isKeyword(car(p))) continue;
    std::string known;
    for (int k = 0; k < info->nKeys; k++) known += (k ? " :" : ":") + std::string(symbolName(info->keys[k]));
    throwError("arity-error", info->name + ": unknown keyword :" + std::string(symbolName(car(p))) +
                                  (known.empty() ? std::string() : " (known: " + known + ")"));
  }
}

Shape Convert<Shape>::from(Interp&, Value v, const PrimitiveInfo* info, int i) {
  Shape s;
  if (v.isMissing() || v.isNil()) return s;
  rejectKeywords(v, info);
  if (isPair(v) && cdr(v).isNil() && isSequence(car(v))) {
    s.dims = intSequence(car(v), info, i);
    return s;
  }
  if (isSequence(v)) {   // a rest list of integers, or a list given directly to a list slot
    s.dims = intSequence(v, info, i);
    return s;
  }
  s.dims.push_back(intElement(v, info, i));   // a single integer in a non-rest slot
  return s;
}

Dims Convert<Dims>::from(Interp&, Value v, const PrimitiveInfo* info, int i) {
  Dims d;
  if (v.isMissing()) throwConversionError(info, i, "a dimension", v);
  if (isSequence(v)) d.dims = intSequence(v, info, i);
  else d.dims.push_back(intElement(v, info, i));
  return d;
}

NormOrd Convert<NormOrd>::from(Interp&, Value v, const PrimitiveInfo* info, int i) {
  NormOrd o;
  if (isString(v)) o.name = std::string(stringView(v));
  else if (v.is(Kind::Symbol)) o.name = std::string(symbolName(v));
  else if (v.isFixnum()) o.number = at::Scalar(int64_t(v.fixnum()));
  else if (isNumber(v)) o.number = at::Scalar(toDouble(v));
  else throwConversionError(info, i, "a norm order (a number, \"fro\" or \"nuc\")", v);
  if (!o.name.empty() && o.name != "fro" && o.name != "nuc")
    throwError("tensor-error", info->name + ": unknown norm order " + o.name + " (expected a number, \"fro\" or \"nuc\")",
               cons(v, Value::nil()));
  return o;
}

TensorList Convert<TensorList>::from(Interp& in, Value v, const PrimitiveInfo* info, int i) {
  TensorList out;
  if (v.isMissing()) return out;
  rejectKeywords(v, info);
  // Rest arguments arrive as a list; a single list or vector argument holds the tensors.
  if (isPair(v) && cdr(v).isNil() && isSequence(car(v))) v = car(v);
  auto add = [&](Value x) { out.items.push_back(Convert<at::Tensor>::from(in, x, info, i)); };
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) add(vec->items[k]);
    return out;
  }
  if (!isList(v)) throwConversionError(info, i, "a list of tensors", v);
  for (Value p = v; isPair(p); p = cdr(p)) add(car(p));
  return out;
}

// ---- options and scalars -------------------------------------------------------------------

// A new tensor's device must exist here. LibTorch's own message for a CUDA tensor without CUDA
// ("Could not run 'aten::empty.memory_format' with arguments from the 'CUDA' backend ...", then
// forty dispatch keys) does not say what is wrong.
void checkDeviceAvailable(const at::Device& d) {
  if (!d.is_cuda()) return;
  int64_t n = at::hasCUDA() ? int64_t(at::detail::getCUDAHooks().getNumGPUs()) : 0;
  if (n == 0)
    throwError("tensor-error", "device \"" + d.str() + "\": no CUDA device is available (this LibTorch has no "
                               "CUDA, or no GPU is present); see cuda-available?");
  if (d.has_index() && d.index() >= n)
    throwError("tensor-error", "device \"" + d.str() + "\": there " + (n == 1 ? "is 1 CUDA device" : "are " +
                               std::to_string(n) + " CUDA devices") + " (cuda:0 to cuda:" + std::to_string(n - 1) + ")");
}

at::TensorOptions tensorOptions(std::optional<at::ScalarType> dtype, std::optional<at::Device> device) {
  at::TensorOptions o;
  if (dtype) o = o.dtype(*dtype);
  if (device) {
    checkDeviceAvailable(*device);
    o = o.device(*device);
  }
  return o;
}

at::TensorOptions likeOptions(const at::Tensor& like, std::optional<at::ScalarType> dtype,
                              std::optional<at::Device> device) {
  at::TensorOptions o = like.options().requires_grad(false);
  if (dtype) o = o.dtype(*dtype);
  if (device) {
    checkDeviceAvailable(*device);
    o = o.device(*device);
  }
  return o;
}

at::Tensor withRequiresGrad(at::Tensor t, bool requiresGrad) {
  if (requiresGrad) t.set_requires_grad(true);
  return t;
}

// argIndex counts from 1, as throwTypeError's does.
at::Scalar numberToScalar(Value v, std::string_view who, int argIndex) {
  if (v.isFixnum()) return at::Scalar(int64_t(v.fixnum()));
  if (isFlonum(v)) return at::Scalar(flonumValue(v));
  if (v.isBool()) return at::Scalar(v.isTrue());
  if (isNumber(v)) return at::Scalar(toDouble(v));
  throwTypeError(who, argIndex, "a number or a tensor", v);
}

at::Tensor wrappedScalar(const at::Scalar& s, const at::Device& device) {
  return at::native::wrapped_scalar_tensor(s, device);
}

at::Tensor operandTensor(const TensorOrScalar& x, const at::Device& device) {
  return x.isTensor() ? *x.tensor : wrappedScalar(x.scalar, device);
}

// The number operand of an elementwise op with TENSOR: a wrapped number on the CPU, whatever
// TENSOR's device, as Python makes it for `x * 2`. A CUDA kernel takes a CPU wrapped number as
// an argument; one made on the GPU would cost an allocation and a fill kernel per op (x + 1 on
// an H100: 21.7 us against Python's 12.1, bench/results/2026-11-28-gpu.md). When the result
// dtype is the tensor's anyway (a real number with a floating tensor, an integer with an integer
// tensor), the wrapped number is made in that dtype at once: LibTorch would otherwise convert it
// on every call (a quarter of a tiny add, measured in bench/results/2026-11-22-profile.md).
static at::Tensor scalarOperand(const at::Scalar& s, const at::Tensor& tensor) {
  at::ScalarType t = tensor.scalar_type();
  bool sameKind = (at::isFloatingType(t) && !s.isComplex()) ||
                  (at::isIntegralType(t, /*includeBool=*/false) && s.isIntegral(/*includeBool=*/false));
  if (!sameKind) return wrappedScalar(s, at::kCPU);
  at::Tensor w = at::detail::scalar_tensor_static(s, t, at::kCPU);
  w.unsafeGetTensorImpl()->set_wrapped_number(true);
  return w;
}

std::pair<at::Tensor, at::Tensor> binaryOperands(const TensorOrScalar& a, const TensorOrScalar& b,
                                                 std::string_view /*who*/) {
  if (a.isTensor() && b.isTensor()) return {*a.tensor, *b.tensor};
  if (a.isTensor()) return {*a.tensor, scalarOperand(b.scalar, *a.tensor)};
  if (b.isTensor()) return {scalarOperand(a.scalar, *b.tensor), *b.tensor};
  // Two numbers: a 0-d tensor each, so the tensor op still answers with a tensor.
  auto plain = [](const at::Scalar& s) {
    at::ScalarType t = s.isBoolean() ? at::kBool : s.isIntegral(false) ? at::kLong
                       : s.isComplex() ? at::kComplexFloat : at::kFloat;
    return at::scalar_tensor(s, at::TensorOptions().dtype(t));
  };
  return {plain(a.scalar), plain(b.scalar)};
}

}  // namespace purple
