// Calls of values other than builtins and closures that keep none of their argument cells.
//
// The evaluator releases the tensor of an argument cell a fresh-returning builtin made for a
// call (`(conv2 (tensor-relu (conv1 x)))`) as soon as the call returns, when the callee keeps no
// argument cell: builtins say so with kPrimBorrowsArgs. A module value cannot carry such a flag
// (hooks can be registered on it at any time, through any cell holding it), so the nn family
// answers for it at call time through this hook. Without the release, every activation passed to
// a layer waits for the collector: a test pass in batches of 1,000 kept about 120 MB more than
// Python does.
#pragma once
#include "interp/core/value.hpp"

namespace purple {

// Null until the nn family installs it: true when calling module FN keeps none of its argument
// cells (a built-in one-tensor layer without hooks).
extern bool (*moduleCallBorrowsArguments)(Value fn);

}  // namespace purple
