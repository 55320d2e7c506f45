// Calling a function of a library load-inline compiled: each Purple argument is checked against
// the C++ parameter's type and converted to a c10::IValue (a wrong type is a Purple type-error that
// names the argument, before any C++ runs), the function is invoked, and its result converted back.
#pragma once
#include "builtins/extensions/shim/purple_extension_abi.h"
#include "interp/language/bind.hpp"
#include <string>

namespace purple::extensions {

namespace abi = ::purple_extension_abi;

// The Purple signature of FN for its procedure's help and arity: parameter names (from py::arg,
// else as load-inline read them from the source, else arg0 ...), those with defaults after
// :optional.
std::string purpleSignature(const abi::Function& fn);
// FN's C++ signature, as one line of help text: "torch::Tensor bias_gelu(torch::Tensor x, ...)".
std::string cppSignature(const abi::Function& fn);

// A procedure named NAME that calls FN; its metadata is made once per function and process (the
// library is never unloaded), its procedure value afresh each time.
Value extensionProcedure(Registry& r, const abi::Function* fn, const std::string& name, const std::string& doc);

}  // namespace purple::extensions
