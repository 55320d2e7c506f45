// What a library compiled by load-inline and Purple say to each other. Both sides are compiled
// from this same text against the same LibTorch headers with the same compiler (load-inline
// writes this file beside its <torch/extension.h> and keys its cache by the text), so C++ types
// cross the boundary as they are: arguments and results travel as c10::IValue.
//
// The library exports one C function, purple_extension_module_v1, which describes every bound
// function: its name, docstring, and each parameter's type (so that Purple checks arguments
// before the C++ code runs, and names the argument it refuses).
#pragma once
#include <ATen/core/ivalue.h>
#include <cstdint>

namespace purple_extension_abi {

constexpr int32_t kVersion = 1;

// A parameter's type as Purple converts to it.
enum class Type : int32_t {
  Tensor = 1,      // at::Tensor, by value or reference
  Int,             // an integral type: bits and isUnsigned give its range
  Double,          // float or double
  Bool,
  String,          // std::string, std::string_view, c10::string_view
  TensorList,      // std::vector<at::Tensor>, at::TensorList
  IntList,         // std::vector<integral>, at::IntArrayRef
  DoubleList,      // std::vector<double or float>, c10::ArrayRef<double>
  BoolList,        // std::vector<bool>
  Scalar,          // at::Scalar: a number or a boolean
  ScalarType,      // at::ScalarType (torch::Dtype): a dtype
  Device,          // at::Device
};

struct Param {
  Type type;
  int32_t optional;            // std::optional / c10::optional: #f gives none
  int32_t bits;                // Int: the width of the C++ integer
  int32_t isUnsigned;          // Int: an unsigned C++ integer
  const char* cppType;         // the C++ type as the library spells it, for messages
  const char* name;            // from py::arg, else null
  const c10::IValue* defaultValue;   // from py::arg(...) = value, else null
};

struct Function {
  const char* name;
  const char* doc;
  int32_t nParams;
  const Param* params;
  int32_t returnsVoid;
  const char* resultType;      // the C++ result type, for help
  // Calls the function on ARGS (nParams of them, converted as PARAMS say). C++ exceptions
  // (c10::Error, std::exception) pass through to the caller.
  c10::IValue (*invoke)(const Function* self, c10::IValue* args);
  void* target;                // the callable, for invoke
};

struct Module {
  int32_t version;             // kVersion
  int32_t nFunctions;
  const Function* functions;
  const char* torchVersion;    // TORCH_VERSION of the headers it was compiled against
};

}  // namespace purple_extension_abi

// The library's one exported symbol (purple_extension.h defines it with PURPLE_EXTENSION_ENTRY).
#define PURPLE_EXTENSION_ENTRY_NAME "purple_extension_module_v1"
