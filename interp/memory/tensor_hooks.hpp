// The LibTorch-free side of the tensor kind: what the reader, printer and generic numeric
// procedures call without including LibTorch's headers. Implemented in builtins/tensor_*.cpp.
#pragma once
#include "interp/core/value.hpp"
#include <string>

namespace purple {

// `#[[1 2] [3 4]]`: the reader hands the nested vectors it read; integers give int64 and any
// flonum gives float32, as torch.tensor does.
Value tensorFromLiteral(Value nestedVectors);
// Appends the printed form: a literal that reads back for small tensors, a summary for large
// ones, with dtype/device/grad_fn when they are not the defaults.
void printTensor(std::string& out, Value tensor);

// Generic arithmetic and maths (+ - * / expt exp log sqrt ...) when an argument is a tensor.
enum class TensorBinary { Add, Sub, Mul, Div, Pow, Min, Max, Lt, Le, Gt, Ge, Eq };
enum class TensorUnary { Neg, Exp, Log, Sqrt, Sin, Cos, Tan, Abs, Asin, Acos, Atan, Floor,
                         Ceiling, Round, Truncate, Reciprocal };
Value tensorBinary(TensorBinary op, Value a, Value b);   // either may be a number
Value tensorUnary(TensorUnary op, Value a);

// Finalizer-side helpers, LibTorch-free declarations (tensor_value.cpp).
void registerTensorFinalizer(Object* cell);

}  // namespace purple
