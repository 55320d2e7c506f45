// What the evaluator's files share: eval.cpp (the tree walker), shaped_calls.cpp (the
// superinstructions the analyzer picks for `(< n 2)` and friends) and closure_args.cpp (binding
// a call's arguments in the general case). It declares the out-of-line entry points each calls
// in another, and holds the argument evaluation that must be inlined into all of them.
// Internal to interp/language/.
#pragma once
#include "interp/core/interp.hpp"
#include "interp/core/value.hpp"
#include "interp/language/inline_ops.hpp"
#include "interp/language/node.hpp"
#include "interp/memory/tensor_value.hpp"

namespace purple {

[[noreturn]] void throwRecursionError(Interp& in);
[[noreturn]] void unboundVariable(const GlobalNode* n);
// A call or a variable that evalSimple does not handle in place, without a new eval activation
// where it can (builtin calls), else through Interp::eval.
Value evalCompound(Interp& in, Node* n, Frame* env);
// A builtin with an InlineBuiltin on what the inline code declined (generic numbers, tensors,
// errors), in its own call record, polling for interrupts as every builtin call does. LENT: the
// arguments read from variables without marking them shared (lentToBuiltin).
Value callInlineBuiltin(Interp& in, AppNode* app, Value fn, Value* argv, uint32_t argc, uint32_t lent);
// Fills the frame F of a call to closure PROC in the general case (closure_args.cpp). Returns
// the slots (below 16) whose parameter's default gave a cell in flight: theirs to own.
uint32_t bindGeneralArgs(Interp& in, Value proc, Frame* f, const Value* argv, int argc);

// Calls of builtins from the evaluator (primitive_calls.cpp): boxed, or for a tensor-returning
// builtin its at::Tensor without a cell.
Value callPrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env);
at::Tensor callTensorPrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env);
// The inline code of a builtin with an InlineBuiltin (eval.cpp: out of line, one copy).
bool inlinePrimitive(InlineBuiltin op, uint32_t argc, const Value* argv, Value* out);

// Tensor arguments made by nested primitive calls, held in cells on the C++ stack for the
// length of the outer call: no GC cell, no finalizer, freed when the call returns. Only for
// callees that keep no reference to their argument cells (kPrimBorrowsArgs).
class ScratchTensors {
 public:
  static constexpr int kMax = 4;
  bool hasRoom() const { return used_ < kMax; }
  Value hold(at::Tensor t) {
    auto* cell = reinterpret_cast<TensorObj*>(store_[used_++]);
    cell->kind = Kind::Tensor;
    cell->flags = 0;
    cell->small = 0;
    cell->extra = 0;
    new (&cell->tensor) at::Tensor(std::move(t));
    cell->countedBytes = 0;
    return Value(cell);
  }
  ~ScratchTensors() {
    for (int i = used_; i-- > 0;) {
      at::Tensor& t = reinterpret_cast<TensorObj*>(store_[i])->tensor;
      if (t.defined()) noteTensorFreedUnboxed(t);   // (a parameter that adopted it left it empty)
      t.~Tensor();
    }
  }

 private:
  int used_ = 0;
  alignas(TensorObj) unsigned char store_[kMax][sizeof(TensorObj)];
};

// The primitive a call node names, when it is a global bound to a tensor-returning primitive:
// such a call can hand its result over without a GC cell.
inline bool isUnboxedTensorCall(Node* n, Value* fnOut) {
  if (n->op() != Op::App) return false;
  Node* fn = static_cast<AppNode*>(n)->fn;
  if (fn->op() != Op::Global) return false;
  Value g = static_cast<GlobalNode*>(fn)->cell->value;
  if (!g.is(Kind::Primitive) || !(g.obj()->flags & kPrimUnboxedTensor)) return false;
  *fnOut = g;
  return true;
}

// Bit i of a 32-bit argument mask. Calls can have more than 32 arguments; the analyzer marks
// only the first 32, and shifting by 32 or more is undefined (x86 shifts by i mod 32, which
// would read another argument's bit: a fuzz input with a 33-argument call found it).
inline bool argBit(uint32_t mask, uint32_t i) { return i < 32 && ((mask >> i) & 1); }

// Is V one of ARGV[0..ARGC)?
inline bool isOneOf(Value v, const Value* argv, uint32_t argc) {
  for (uint32_t i = 0; i < argc; i++)
    if (argv[i] == v) return true;
  return false;
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
// A call of module MODULE as node APP (borrowing_calls.cpp): its arguments evaluated, and lent
// when the module keeps none of them; the cells in flight among them freed when it returns. REC:
// the record of the eval activation making the call, or null for a call in an argument, which
// gets a record of its own. The result may be a cell in flight.
Value evalModuleCall(Interp& in, AppNode* app, Value module, Frame* env, Interp::CallRecord* rec);

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

// A test whose value only decides a branch (`if`, `and` but its last form): a variable is read
// without marking what it holds shared, since nothing keeps it: `(when batch ...)` leaves the
// batch its variable's to free.
// (The shape first: a test is most often a shaped comparison, `(< n 2)`, `(null? l)`.)
__attribute__((always_inline)) inline Value evalTest(Interp& in, Node* n, Frame* env) {
  if (n->flags & kAppShaped) return static_cast<AppNode*>(n)->shape(in, static_cast<AppNode*>(n), env);
  if (n->op() == Op::Local0) return env->slots[static_cast<LocalNode*>(n)->index];
  if (n->op() == Op::Local1) return env->parent->slots[static_cast<LocalNode*>(n)->index];
  return evalSimple(in, n, env);
}

// The arguments of call APP that builtin FN borrows from this frame's variables: none unless
// FN keeps no reference to its arguments (ownership.hpp).
inline uint32_t lentToBuiltin(AppNode* app, Value fn) {
  return (fn.obj()->flags & kPrimBorrowsArgs) ? app->borrowArgMask : 0;
}

// Argument I of call APP: read in place, not marked shared, when lent (bit I of LENT).
__attribute__((always_inline)) inline Value evalArgument(Interp& in, AppNode* app, uint32_t i, Frame* env,
                                                         uint32_t lent) {
  if (argBit(lent, i)) return env->slots[static_cast<LocalNode*>(app->args[i])->index];
  return evalSimple(in, app->args[i], env);
}

}  // namespace purple
