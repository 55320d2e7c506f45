// What the evaluator's files share: eval.cpp (the tree walker), shaped_calls.cpp (the
// superinstructions the analyzer picks for `(< n 2)` and friends) and closure_args.cpp (binding
// a call's arguments in the general case). It declares the out-of-line entry points each calls
// in another, and holds the argument evaluation that must be inlined into all of them.
// Internal to interp/language/.
#pragma once
#include "interp/core/interp.hpp"
#include "interp/core/value.hpp"
#include "interp/language/node.hpp"

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
