// What the evaluator's files share: eval.cpp (the tree walker), shaped_calls.cpp (the
// superinstructions the analyzer picks for `(< n 2)` and friends) and closure_args.cpp (binding
// a call's arguments in the general case). It declares the out-of-line entry points each calls
// in another, and holds the argument evaluation that must be inlined into all of them.
// Internal to interp/language/.
#pragma once
#include "interp/core/interp.hpp"
#include "interp/core/value.hpp"
#include "interp/language/node.hpp"
#include "interp/memory/tensor_value.hpp"

namespace purple {

[[noreturn]] void throwRecursionError(Interp& in);
[[noreturn]] void unboundVariable(const GlobalNode* n);
// A call or a variable that evalSimple does not handle in place, without a new eval activation
// where it can (builtin calls), else through Interp::eval.
Value evalCompound(Interp& in, Node* n, Frame* env);
// A builtin with an InlineBuiltin on what the inline code declined (generic numbers, tensors,
// errors), in its own call record, polling for interrupts as every builtin call does.
Value callInlineBuiltin(Interp& in, AppNode* app, Value fn, Value* argv, uint32_t argc);
// Fills the frame F of a call to closure PROC in the general case (closure_args.cpp).
void bindGeneralArgs(Interp& in, Value proc, Frame* f, const Value* argv, int argc);

// Bit i of a 32-bit argument mask. Calls can have more than 32 arguments; the analyzer marks
// only the first 32, and shifting by 32 or more is undefined (x86 shifts by i mod 32, which
// would read another argument's bit: a fuzz input with a 33-argument call found it).
inline bool argBit(uint32_t mask, uint32_t i) { return i < 32 && ((mask >> i) & 1); }

// After a builtin that keeps none of its arguments returned `result`: the tensors that calls
// of fresh-returning builtins made for it (bits of `fresh`) are dead, unless returned.
inline void releaseFreshArguments(Value* argv, uint32_t argc, uint32_t fresh, Value result) {
  for (uint32_t i = 0; fresh && i < argc; i++)
    if (argBit(fresh, i) && argv[i] != result && isTensor(argv[i])) releaseTensor(argv[i]);
}

// A call's own record, above the activation that makes it, for the length of the call: a
// builtin never overwrites the record of the closure calling it, so a backtrace shows both
// (`in car at ...`, then `in inner at ...`). A module call made outside eval's loop
// (borrowing_calls.cpp) is recorded as a user's call, as eval records it.
class PrimitiveFrame {
 public:
  PrimitiveFrame(Interp& in, AppNode* app, Value fn, bool userCall = false) : in_(in) {
    if (++in.depth > in.limits.maxDepth) {
      in.depth--;
      throwRecursionError(in);
    }
    Interp::CallRecord& r = in.callStack[in.depth];
    r.node = app;
    r.proc = fn;
    r.userCall = nullptr;
    if (userCall && !(app->flags & kAppInPrelude)) {
      r.userCall = app;
      r.userProc = fn;
    }
  }
  ~PrimitiveFrame() { in_.depth--; }
  PrimitiveFrame(const PrimitiveFrame&) = delete;
  PrimitiveFrame& operator=(const PrimitiveFrame&) = delete;

 private:
  Interp& in_;
};

// The frame DEPTH levels out from ENV.
inline Frame* frameAt(Frame* env, uint32_t depth) {
  while (depth--) env = env->parent;
  return env;
}

// True, with the module in *MODULE, when the operator FN of a call is a variable (global or
// local) whose value is a module: `(conv1 x)` inside a define-module forward.
inline bool moduleCallee(Node* fn, Frame* env, Value* module) {
  Value v;
  switch (fn->op()) {
    case Op::Global: v = static_cast<GlobalNode*>(fn)->cell->value; break;
    case Op::Local0: v = env->slots[static_cast<LocalNode*>(fn)->index]; break;
    case Op::Local1: v = env->parent->slots[static_cast<LocalNode*>(fn)->index]; break;
    case Op::LocalN: {
      auto* n = static_cast<LocalNode*>(fn);
      v = frameAt(env, n->depth)->slots[n->index];
      break;
    }
    default: return false;
  }
  if (!v.is(Kind::Module)) return false;
  *module = v;
  return true;
}
// A call of a module that borrows its arguments, made for an argument of a builtin that keeps
// none (borrowing_calls.cpp): its result, with *fresh set when no other cell or variable holds it.
Value evalModuleCallArgument(Interp& in, AppNode* call, Value module, Frame* env, bool* fresh);
// A module call whose arguments include calls of fresh-returning builtins (borrowing_calls.cpp).
Value callModuleReleasingArguments(Interp& in, AppNode* app, Value fn, Value* argv, uint32_t argc);

// Arguments that need no new activation: constants, variables, and calls of primitives
// (`(- n 1)`, `(< n 2)`), evaluated without entering `eval`. The leaves are inlined into every
// caller; the rest is one call away.
__attribute__((always_inline)) inline Value evalSimple(Interp& in, Node* n, Frame* env) {
  switch (n->op()) {
    case Op::Const: return static_cast<ConstNode*>(n)->value;
    case Op::Local0: return shareValue(env->slots[static_cast<LocalNode*>(n)->index]);
    case Op::Local1: return shareValue(env->parent->slots[static_cast<LocalNode*>(n)->index]);
    case Op::Global: {
      auto* cell = static_cast<GlobalNode*>(n)->cell;
      if (cell->value.isUnbound()) unboundVariable(static_cast<GlobalNode*>(n));
      return shareValue(cell->value);
    }
    default:
      if (n->flags & kAppShaped) return static_cast<AppNode*>(n)->shape(in, static_cast<AppNode*>(n), env);
      return evalCompound(in, n, env);
  }
}

// evalSimple for a node that is most often a shaped call: an `if`'s test (`(< n 2)`,
// `(null? l)`), the tests of `and` and `or`, the arguments of a closure call (`(fib (- n 1))`, `(loop (cdr l))`): the shape
// is tested before the dispatch on the node's kind (Const, Local0 and Local1 nodes never carry
// kAppShaped).
__attribute__((always_inline)) inline Value evalShapedFirst(Interp& in, Node* n, Frame* env) {
  if (n->flags & kAppShaped) return static_cast<AppNode*>(n)->shape(in, static_cast<AppNode*>(n), env);
  return evalSimple(in, n, env);
}

}  // namespace purple
