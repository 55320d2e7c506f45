// Shared helpers for the tensor builtin families (tensor_*.cpp): argument types with their own
// conversions, tensor options, and number <-> scalar plumbing. Private to builtins/.
//
// The argument types below convert without keeping their Value (keepsValue = false), so a
// builtin that uses them still lets the evaluator free temporary tensors right after the call.
#pragma once
#include <ATen/ATen.h>
#include "interp/language/bind.hpp"
#include "interp/language/numbers.hpp"
#include <string>
#include <utility>
#include <vector>

namespace purple {

// A shape given as rest arguments `(tensor-zeros 2 3)` or as one list or vector
// `(tensor-zeros '(2 3))`. Used for the `. shape` rest parameter.
struct Shape { IntList dims; };
// One dimension or several: `:dim 0`, `:dim '(0 1)`.
struct Dims { IntList dims; };
// A norm order: a number (2, 1, +inf.0) or a name ("fro", 'nuc).
struct NormOrd {
  std::optional<at::Scalar> number;
  std::string name;
};
// A list of tensors given as rest arguments or as one list or vector (cat, stack, einsum).
struct TensorList { std::vector<at::Tensor> items; };

// A dtype name ('float32, "float64", :int64, "torch.float16" ...) or nullopt; never throws.
std::optional<at::ScalarType> lookupScalarType(Value v);

// Reads one integer element of a shape or dim list (an integral flonum or 1-element int tensor too).
int64_t intElement(Value v, const PrimitiveInfo* info, int i);
// Reads a list or vector of integers.
IntList intSequence(Value v, const PrimitiveInfo* info, int i);
bool isSequence(Value v);   // a proper list or a vector

template <> struct Convert<Shape> {
  static constexpr bool keepsValue = false;
  static Shape from(Interp&, Value v, const PrimitiveInfo* info, int i);
};
template <> struct Convert<Dims> {
  static constexpr bool keepsValue = false;
  static Dims from(Interp&, Value v, const PrimitiveInfo* info, int i);
};
template <> struct Convert<NormOrd> {
  static constexpr bool keepsValue = false;
  static NormOrd from(Interp&, Value v, const PrimitiveInfo* info, int i);
};
template <> struct Convert<TensorList> {
  static constexpr bool keepsValue = false;
  static TensorList from(Interp&, Value v, const PrimitiveInfo* info, int i);
};

// LibTorch 1.13 has its own c10::optional; 2.x makes it std::optional. Bridge explicitly.
template <class T> c10::optional<T> copt(const std::optional<T>& o) {
  return o ? c10::optional<T>(*o) : c10::optional<T>(c10::nullopt);
}

// TensorOptions from the usual :dtype / :device keywords; unset ones keep LibTorch's defaults.
at::TensorOptions tensorOptions(std::optional<at::ScalarType> dtype, std::optional<at::Device> device);
// The options of `like`, with :dtype / :device overriding (the -like creation variants).
at::TensorOptions likeOptions(const at::Tensor& like, std::optional<at::ScalarType> dtype,
                              std::optional<at::Device> device);
// Applies :requires-grad after creation: the at:: factories do not take it.
at::Tensor withRequiresGrad(at::Tensor t, bool requiresGrad);

// A Purple number as a Scalar: fixnums stay integral, flonums and other reals become doubles.
// ARGINDEX (from 1) names the argument in the type error.
at::Scalar numberToScalar(Value v, std::string_view who, int argIndex);
// A number as a 0-d tensor marked as a "wrapped number", so type promotion treats it as PyTorch
// treats a Python scalar (int tensor + 1.5 -> float32, float32 tensor * 2.0 stays float32).
at::Tensor wrappedScalar(const at::Scalar& s, const at::Device& device);
// Both operands of an elementwise binary op as tensors; at most one may be a number.
std::pair<at::Tensor, at::Tensor> binaryOperands(const TensorOrScalar& a, const TensorOrScalar& b,
                                                 std::string_view who);
at::Tensor operandTensor(const TensorOrScalar& x, const at::Device& device);

// Nested Purple data (lists, vectors, numbers, booleans, tensors) -> tensor. `dtype` unset:
// all booleans give bool, any flonum gives float32, otherwise int64 (torch.tensor's rules).
at::Tensor tensorFromData(Value data, std::optional<at::ScalarType> dtype, std::string_view who);
// Tensor -> nested lists (or vectors); a 0-d tensor gives the number itself.
Value tensorToNested(const at::Tensor& t, bool vectors, std::string_view who);

// Registered by registerTensorCreation: print options live with the printer.
void registerTensorPrint(Registry& r);

}  // namespace purple
