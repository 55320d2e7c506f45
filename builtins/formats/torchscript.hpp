// What torchscript.cpp (load-torchscript) shares with jit.cpp (jit-trace, jit-compile,
// save-torchscript): Purple values to IValues and back, and the Purple module that wraps a
// torch::jit::Module (its parameters and buffers are the script's own tensors).
#pragma once
#include <torch/script.h>
#include "interp/core/value.hpp"
#include <string>

namespace torch::nn { class Module; }

namespace purple::formats {

// Tensors, numbers, booleans, strings, lists (List[Tensor], List[int] ...), vectors (tuples) and
// hash tables (dicts); a type-error naming WHO for anything else.
c10::IValue toIValue(Value v, const std::string& who, int depth = 0);
// The other way; tuples become vectors, lists lists, dicts hash tables.
Value fromIValue(const c10::IValue& iv, int depth = 0);
// A Purple module running M (callable, parameters, state-dict, module-to ...).
Value wrapScriptModule(torch::jit::Module m);
// The torch::jit::Module inside a module that wrapScriptModule (or load-torchscript) made; null
// for any other module.
torch::jit::Module* scriptModuleOf(torch::nn::Module& m);
// Calls M's method METHOD on Purple arguments.
Value callScriptMethod(torch::jit::Module& m, const std::string& method, const Value* argv, int argc,
                       const std::string& who);

}  // namespace purple::formats
