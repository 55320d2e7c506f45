// Calls of modules, which keep none of their argument cells when the nn family says so.
//
// A builtin states with kPrimBorrowsArgs that it keeps no argument cell. A module value cannot
// carry such a flag (hooks can be registered on it at any time, through any cell holding it), so
// the nn family answers for it at call time through these hooks: a built-in layer without hooks
// borrows its arguments, and so does a define-module forward without hooks, whose parameters
// borrow them as any closure's do (ownership.hpp). The evaluator then lends a module its
// arguments read from variables, frees the cells in flight it was given when it returns, and
// passes its result on as a cell in flight: `(+ x (attn (ln-1 x)))` frees the layer norm's and
// the attention's results as soon as `+` is done with them, as Python's reference counting does.
#pragma once
#include "interp/core/value.hpp"

namespace purple {

class Interp;

// Null until the nn family installs them. moduleCallBorrowsArguments: true when calling module
// FN keeps none of its argument cells. callBorrowingModule: calls such a module; its result is a
// new cell (*FRESH set: a built-in layer's) or what a define-module forward returned, which may
// be a cell in flight.
extern bool (*moduleCallBorrowsArguments)(Value fn);
extern Value (*callBorrowingModule)(Interp& in, Value fn, const Value* argv, int argc, bool* fresh);

}  // namespace purple
