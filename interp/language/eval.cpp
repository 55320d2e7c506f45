// The tree walker. Tail positions (if branches, the last form of a body, closure calls) loop
// instead of recursing, so tail calls run in constant C++ stack. Each C++ activation of `eval`
// owns a small frame buffer: a closure whose frame nobody can capture runs in it, without a
// heap allocation per call.
#include "interp/language/borrowing_calls.hpp"
#include "interp/language/eval_internal.hpp"
#include "interp/language/inline_ops.hpp"
#include "interp/language/node.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/language/equality.hpp"
#include "interp/language/printer.hpp"
#include "interp/core/gc.hpp"
#include "interp/language/bind.hpp"
#include "interp/memory/tensor_scope.hpp"
#include "interp/language/let_release.hpp"
#include "interp/language/tensor_origins.hpp"
#include <gc/gc.h>
#include <array>
#include <atomic>
#include <utility>

namespace purple {

Value callPrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env);
at::Tensor callTensorPrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env);

namespace {

constexpr uint32_t kInlineSlots = kFrameStoreSlots;
constexpr size_t kFrameStoreBytes = sizeof(Frame) + kInlineSlots * sizeof(Value);

struct DepthRestore {
  Interp& in;
  ~DepthRestore() { in.depth--; }
};

}  // namespace

[[noreturn]] void throwRecursionError(Interp& in) {
  throwError("recursion-error", "recursion too deep (more than " + std::to_string(in.limits.maxDepth) +
                                    " nested calls, or the C++ stack is nearly full)");
}

namespace {

// For eval, which has already counted its own activation in `depth`.
[[noreturn]] void recursionTooDeep(Interp& in) {
  in.depth--;
  throwRecursionError(in);
}

// The record of the closure call `app` made by the activation owning `rec`.
inline void recordClosureCall(Interp::CallRecord* rec, AppNode* app, Value fn) {
  rec->node = app;
  rec->proc = fn;
  if (!(app->flags & kAppInPrelude)) {
    rec->userCall = app;
    rec->userProc = fn;
  }
}

}  // namespace

// A reference is not a call, so no backtrace line shows where it is: the message does, as a
// syntax error's does.
[[noreturn]] void unboundVariable(const GlobalNode* n) {
  std::string where = sourcePosText(n->pos);
  throwError("unbound-variable", (where.empty() ? "" : where + ": ") + "unbound variable: " +
                                     std::string(symbolName(n->cell->name)));
}

namespace {

inline Frame* heapFrame(uint32_t size, Frame* parent) {
  auto* f = static_cast<Frame*>(GC_MALLOC(sizeof(Frame) + (size ? size - 1 : 0) * sizeof(Value)));
  if (!f) throw std::bad_alloc();
  f->kind = Kind::Frame;
  f->flags = 0;
  f->small = 0;
  f->extra = size;
  f->parent = parent;
  return f;
}

// The frame for a call of closure PROC made outside an eval activation (apply, call/cc's
// receiver): in STORE, the caller's stack space of kFrameStoreBytes, unless the lambda's frame
// may be captured or is too big.
inline Frame* frameForOutsideCall(Value proc, char* store) {
  LambdaNode* l = proc.as<Closure>()->code;
  Frame* parent = proc.as<Closure>()->env;
  if (l->heapFrame || l->frameSize > kInlineSlots) return heapFrame(l->frameSize, parent);
  auto* f = reinterpret_cast<Frame*>(store);
  f->kind = Kind::Frame;
  f->extra = l->frameSize;
  f->parent = parent;
  return f;
}

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
      if (t.defined()) noteTensorFreedUnboxed();   // (a parameter that adopted it left it empty)
      t.~Tensor();
    }
  }

 private:
  int used_ = 0;
  alignas(TensorObj) unsigned char store_[kMax][sizeof(TensorObj)];
};


inline Value inlinePrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env);
Value inlinePrimitiveCall(Interp& in, AppNode* app, Value fn, Frame* env);
inline Value inlineArithmeticApp(Interp& in, AppNode* app, Value fn, Frame* env);
Value inlinePrimitiveOnCalls(Interp& in, AppNode* app, Value fn, Frame* env);

// A call of a builtin with an InlineBuiltin (Primitive::small) and 1 to 3 arguments, none of them a
// call of a tensor builtin: run inline (inlinePrimitive), the builtin called only when that
// declines. `(< n 2)`, `(car l)`, `(vector-ref v i)`, `(+ (fib (- n 1)) (fib (- n 2)))`.
inline bool isInlineCall(AppNode* app, Value fn) {
  return fn.obj()->small && app->argc - 1 < 3 && !app->tensorArgMask;
}


// Variables need no eval activation: calls of internal definitions and letrec-bound
// procedures name them with these, and a named let's loop when it is not at depth 1.
// Out of line, so that evalCompound keeps a small frame.
__attribute__((noinline)) Value evalVariableOrEval(Interp& in, Node* n, Frame* env) {
  if (n->op() == Op::LocalChecked || n->op() == Op::LocalN) {
    auto* l = static_cast<LocalNode*>(n);
    Value v = frameAt(env, l->depth)->slots[l->index];
    if (!v.isUnbound()) return shareValue(v);   // else the error, from eval as before
  }
  return in.eval(n, env);
}

// A kAppSimpleOperands argument: a constant, or a local of this frame or the enclosing one.
__attribute__((always_inline)) inline Value simpleOperand(Node* a, Frame* env) {
  if (a->op() == Op::Const) return static_cast<ConstNode*>(a)->value;
  Frame* f = a->op() == Op::Local0 ? env : env->parent;
  return f->slots[static_cast<LocalNode*>(a)->index];
}

Value simpleOperandsCall(Interp& in, AppNode* app, Value fn, Frame* env);

}  // namespace

Value evalCompound(Interp& in, Node* n, Frame* env) {
  if (n->op() == Op::App) {
    auto* app = static_cast<AppNode*>(n);
    if (app->flags & kAppSimpleOperands) {
      // `(< n 2)`, `(- i 1)`: + - * < > <= >= = on two fixnums with no further checks. The
      // operands are read raw (a fixnum needs no shareValue); anything else takes the general
      // path below, which reads them again. `(car l)`, `(vector-ref v i)`: one call away.
      Value fn = static_cast<GlobalNode*>(app->fn)->cell->value, r;
      if (fn.is(Kind::Primitive) && fn.obj()->small) {
        if (app->argc != 2 || fn.obj()->small > uint16_t(InlineBuiltin::NumEq))
          return simpleOperandsCall(in, app, fn, env);
        if (fixnumArithmetic(InlineBuiltin(fn.obj()->small), simpleOperand(app->args[0], env),
                             simpleOperand(app->args[1], env), &r))
          return r;
      }
    }
    if (app->fn->op() == Op::Global) {
      Value fn = static_cast<GlobalNode*>(app->fn)->cell->value;
      if (fn.is(Kind::Primitive)) {
        if (isInlineCall(app, fn)) {
          if (app->appArgMask) return inlinePrimitiveOnCalls(in, app, fn, env);
          // `(< n 2)`, `(- n 1)` here; `(car l)` one call away
          if (app->argc == 2 && InlineBuiltin(fn.obj()->small) <= InlineBuiltin::NumEq)
            return inlineArithmeticApp(in, app, fn, env);
          return inlinePrimitiveCall(in, app, fn, env);
        }
        return callPrimitiveApp(in, app, fn, env);
      }
    }
    // `(tak (tak ...) ...)`, `(fib (- n 1))` as an argument: a closure call, straight to eval
    return in.eval(n, env);
  }
  return evalVariableOrEval(in, n, env);
}

namespace {

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

// Set once a variable may hold a tensor cell it alone owns (kTensorSoleOwner: evalIntoSlot,
// adoptOwnedArguments). Until then a frame reused by a tail call holds nothing to release, and
// releaseDeadFrame is skipped, as in code that never assigns tensors.
std::atomic<bool> variablesMayOwnTensors{false};
inline void noteVariableMayOwnTensor() {
  if (!variablesMayOwnTensors.load(std::memory_order_relaxed)) variablesMayOwnTensors.store(true, std::memory_order_relaxed);
}

// `set!`/`define` of a variable: a fresh tensor result may reuse the cell the variable alone
// held; any other value overwriting such a cell frees it.
inline void evalIntoSlot(Interp& in, Node* n, Frame* env, Value& slot) {
  Value fn;
  if (isUnboxedTensorCall(n, &fn)) {
    noteVariableMayOwnTensor();
    assignFreshTensor(slot, callTensorPrimitiveApp(in, static_cast<AppNode*>(n), fn, env));
    return;
  }
  Value v = evalSimple(in, n, env);
  dropOverwritten(slot);
  slot = v;
}

// SetLocal, SetGlobal and DefineGlobal nodes (no eval activation of their own).
inline void assign(Interp& in, Node* node, Frame* env) {
  if (node->op() == Op::SetLocal) {
    auto* n = static_cast<SetLocalNode*>(node);
    evalIntoSlot(in, n->value, env, frameAt(env, n->depth)->slots[n->index]);
    return;
  }
  auto* n = static_cast<SetGlobalNode*>(node);
  if (node->op() == Op::SetGlobal && n->cell->value.isUnbound()) {
    throwError("unbound-variable", "set!: unbound variable",
               listFromArray(&n->cell->name, 1));
  }
  evalIntoSlot(in, n->value, env, n->cell->value);
}

// A form whose value is dropped (not the last of a body): a fresh tensor it makes is freed
// at once instead of waiting for a collection, and assignments run without an activation.
inline void evalForEffect(Interp& in, Node* n, Frame* env) {
  Value fn;
  switch (n->op()) {
    case Op::SetLocal:
    case Op::SetGlobal:
    case Op::DefineGlobal:
      assign(in, n, env);
      return;
    case Op::App:
      if (isUnboxedTensorCall(n, &fn)) {
        callTensorPrimitiveApp(in, static_cast<AppNode*>(n), fn, env);
        noteTensorFreedUnboxed();
        return;
      }
      break;
    default: break;
  }
  evalSimple(in, n, env);
}




__attribute__((noinline)) bool inlinePrimitive(InlineBuiltin op, uint32_t argc, const Value* argv, Value* out) {
  return inlinePrimitiveBody(op, argc, argv, out);
}

}  // namespace

// A builtin with an InlineBuiltin on what inlinePrimitive declined (generic numbers, tensors, errors),
// in its own call record (PrimitiveFrame) and polling for interrupts as every builtin call does.
__attribute__((noinline)) Value callInlineBuiltin(Interp& in, AppNode* app, Value fn, Value* argv, uint32_t argc) {
  auto* p = fn.as<Primitive>();
  Value r;
  if (argc == 2 && p->small <= uint16_t(InlineBuiltin::NumEq) &&
      flonumArithmetic(InlineBuiltin(p->small), argv[0], argv[1], &r)) {
    in.poll();
    return r;
  }
  PrimitiveFrame frame(in, app, fn);
  in.poll();
  return p->fn(in, argv, int(argc), p->info);
}

namespace {

// The evaluated arguments of a builtin with an InlineBuiltin: inline when it can, else the builtin.
__attribute__((always_inline)) inline Value applyInline(Interp& in, AppNode* app, Value fn, Value* argv,
                                                        uint32_t argc) {
  auto op = InlineBuiltin(fn.as<Primitive>()->small);
  Value result;
  if (op <= InlineBuiltin::NumEq && argc == 2) {   // the commonest, `(< n 2)`, without a call
    if (fixnumArithmetic(op, argv[0], argv[1], &result)) return result;
  } else {
    // `(car l)` notices an interrupt or a passed deadline as every builtin call does (an
    // embedder relies on it: tests/unit/hardening.cpp); only fixnum arithmetic never polled.
    in.poll();
    if (inlinePrimitive(op, argc, argv, &result)) return result;
  }
  return callInlineBuiltin(in, app, fn, argv, argc);
}

// `(< n 2)`, `(car l)`: an inline builtin whose arguments are not calls, without the
// bookkeeping of the general primitive call.
__attribute__((always_inline)) inline Value inlinePrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env) {
  Value argv[3];
  uint32_t argc = app->argc;
  argv[0] = evalSimple(in, app->args[0], env);
  if (argc > 1) argv[1] = evalSimple(in, app->args[1], env);
  if (argc > 2) argv[2] = evalSimple(in, app->args[2], env);
  return applyInline(in, app, fn, argv, argc);
}

__attribute__((noinline)) Value inlinePrimitiveCall(Interp& in, AppNode* app, Value fn, Frame* env) {
  return inlinePrimitiveApp(in, app, fn, env);
}

// `(car l)`, `(null? x)`, `(vector-ref v i)`, `(vector-set! v i x)`: an inline builtin on one to
// three operands that are constants or locals of this frame or the enclosing one
// (kAppSimpleOperands), read in place, without evalSimple's dispatch per argument. It polls as
// every builtin call does; what the inline code declines takes the general inline path, which
// reads the operands again.
__attribute__((noinline)) Value simpleOperandsCall(Interp& in, AppNode* app, Value fn, Frame* env) {
  uint32_t argc = app->argc;
  Value argv[3], result;
  argv[0] = simpleOperand(app->args[0], env);
  if (argc > 1) argv[1] = simpleOperand(app->args[1], env);
  if (argc > 2) argv[2] = simpleOperand(app->args[2], env);
  in.poll();
  if (inlinePrimitiveBody(InlineBuiltin(fn.obj()->small), argc, argv, &result)) return result;
  return inlinePrimitiveCall(in, app, fn, env);
}

// `(< n 2)`: two simple arguments of + - * < > <= >= =.
__attribute__((always_inline)) inline Value inlineArithmeticApp(Interp& in, AppNode* app, Value fn, Frame* env) {
  Value argv[2] = {evalSimple(in, app->args[0], env), evalSimple(in, app->args[1], env)};
  Value result;
  if (fixnumArithmetic(InlineBuiltin(fn.as<Primitive>()->small), argv[0], argv[1], &result)) return result;
  return callInlineBuiltin(in, app, fn, argv, 2);
}


// After a builtin that keeps none of its arguments returned `result`: the strings that calls of
// kPrimFreshString builtins made for it (bits of `fresh`) are garbage now, unless returned, and
// their memory is taken back at once. `(string->symbol (string-append "k" (number->string i)))`
// otherwise leaves two strings per call for the next collection to find: the heap fills faster,
// and each collection marks every live object again. Reference counting frees them here too.
inline void freeDeadStrings(Value* argv, uint32_t argc, uint32_t fresh, Value result) {
  for (uint32_t i = 0; fresh && i < argc; i++)
    if (argBit(fresh, i) && argv[i] != result && argv[i].is(Kind::String)) freeDeadString(argv[i]);
}

// `(+ (fib (- n 1)) (fib (- n 2)))`, `(null? (cdr l))`: an inline builtin whose arguments are
// calls but not of tensor builtins (tensorArgMask), without the scratch cells of the general
// primitive call. A fresh result of another builtin, as in `(+ (* x 2) 1)` on tensors, is still
// released at once.
__attribute__((noinline)) Value inlinePrimitiveOnCalls(Interp& in, AppNode* app, Value fn, Frame* env) {
  if (reinterpret_cast<char*>(__builtin_frame_address(0)) < in.stackLimit) throwRecursionError(in);
  Value argv[3];
  uint32_t argc = app->argc, fresh = 0;
  for (uint32_t i = 0; i < argc; i++) {
    Node* a = app->args[i];
    if (a->op() == Op::App && static_cast<AppNode*>(a)->fn->op() == Op::Global) {
      Value g = static_cast<GlobalNode*>(static_cast<AppNode*>(a)->fn)->cell->value;
      // `(fib (- n 1))`: a call of a closure (or an unbound name, or a non-procedure) goes
      // straight to eval, as evalCompound would send it after the same checks
      if (!g.is(Kind::Primitive)) {
        argv[i] = in.eval(a, env);
        continue;
      }
      if (g.obj()->flags & kPrimReturnsFresh) fresh |= 1u << i;
    }
    argv[i] = evalSimple(in, a, env);
  }
  Value result = applyInline(in, app, fn, argv, argc);
  if (fresh && (fn.obj()->flags & kPrimBorrowsArgs)) releaseFreshArguments(argv, argc, fresh, result);
  return result;
}

inline bool hasSimpleParams(LambdaNode* l) { return !(l->nOptional | l->nKeys | l->hasRest); }

// The stack frame `f` is about to be reused by a tail call, its values dead: a tensor cell one
// of its variables alone held is freed, or, when the new call passes a fresh tensor in the
// same position (`(loop (+ i 1) (tensor-add x 1))`), takes that tensor and becomes the
// argument, clearing its bit in `ownedMask`.
void releaseDeadFrame(Frame* f, Value* argv, uint32_t argc, uint32_t& ownedMask) {
  for (uint32_t s = 0; s < f->extra; s++) {
    Value old = f->slots[s];
    if (!isSoleOwnedTensor(old)) continue;
    if (s < argc && argBit(ownedMask, s) && !tensorScopeOpen()) {
      reuseTensorCell(old, std::move(tensorOf(argv[s])));
      argv[s] = old;
      ownedMask &= ~(1u << s);
    } else {
      releaseTensor(old);
    }
  }
}

// The fresh tensors left in stack cells get cells of their own, owned by their parameter.
void adoptOwnedArguments(Value* argv, uint32_t argc, uint32_t ownedMask) {
  noteVariableMayOwnTensor();
  for (uint32_t i = 0; i < argc; i++)
    if (argBit(ownedMask, i)) argv[i] = wrapSoleOwnedTensor(std::move(tensorOf(argv[i])));
}

}  // namespace

// The common case inline: exactly the required arguments of a lambda with nothing else.
inline void bindClosureArgs(Interp& in, Value proc, Frame* f, const Value* argv, int argc) {
  LambdaNode* l = proc.as<Closure>()->code;
  if (uint32_t(argc) == l->nRequired && !(l->nOptional | l->nKeys | l->hasRest)) {
    for (int i = 0; i < argc; i++) f->slots[i] = argv[i];
    for (uint32_t i = uint32_t(argc); i < l->frameSize; i++) f->slots[i] = Value::unbound();
    return;
  }
  bindGeneralArgs(in, proc, f, argv, argc);
}

// The frame for a call of closure `fn`: on the heap when a closure may capture it or it is
// large, else this activation's frameStore. Reusing frameStore (a tail call) ends the frame it
// held: see releaseDeadFrame.
inline Frame* frameForCall(Value fn, char* frameStore, bool& frameStoreLive, Value* argv, uint32_t argc,
                           uint32_t& ownedMask) {
  LambdaNode* l = fn.as<Closure>()->code;
  if (l->heapFrame || l->frameSize > kInlineSlots) return heapFrame(l->frameSize, fn.as<Closure>()->env);
  auto* f = reinterpret_cast<Frame*>(frameStore);
  if (frameStoreLive && variablesMayOwnTensors.load(std::memory_order_relaxed)) releaseDeadFrame(f, argv, argc, ownedMask);
  frameStoreLive = true;
  f->kind = Kind::Frame;
  f->extra = l->frameSize;
  f->parent = fn.as<Closure>()->env;
  return f;
}

// A call of a closure with simple parameters where argument `first` (and maybe later ones) is
// a call of a tensor builtin: those results are held without a cell until the frame is bound,
// then each parameter owns its tensor alone (kTensorSoleOwner), reusing the cell of the
// previous iteration's tensor in a tail-recursive loop. Returns the bound frame.
__attribute__((noinline)) Frame* bindOwnedTensorCall(Interp& in, AppNode* app, Value fn, Frame* env, Value* argv,
                                                     uint32_t first, char* frameStore, bool& frameStoreLive,
                                                     Interp::CallRecord* rec) {
  ScratchTensors owned;
  uint32_t ownedMask = 0;
  for (uint32_t i = first; i < app->argc; i++) {
    Value g;
    if (argBit(app->tensorArgMask, i) && owned.hasRoom() && isUnboxedTensorCall(app->args[i], &g)) {
      argv[i] = owned.hold(callTensorPrimitiveApp(in, static_cast<AppNode*>(app->args[i]), g, env));
      ownedMask |= 1u << i;
    } else {
      argv[i] = evalSimple(in, app->args[i], env);
    }
  }
  recordClosureCall(rec, app, fn);
  Frame* f = frameForCall(fn, frameStore, frameStoreLive, argv, app->argc, ownedMask);
  if (ownedMask) adoptOwnedArguments(argv, app->argc, ownedMask);
  bindClosureArgs(in, fn, f, argv, int(app->argc));
  return f;
}

static Value makeClosure(LambdaNode* l, Frame* env) {
  auto* c = static_cast<Closure*>(GC_MALLOC(sizeof(Closure)));
  if (!c) throw std::bad_alloc();
  c->kind = Kind::Closure;
  c->flags = 0;
  c->small = 0;
  c->extra = 0;
  c->code = l;
  c->env = env;
  c->name = l->name;
  return Value(c);
}

// Picks the clause of a case-lambda that accepts argc arguments.
static Value selectCaseLambda(Value proc, int argc) {
  auto* cl = proc.as<CaseLambda>();
  for (uint32_t i = 0; i < cl->extra; i++) {
    LambdaNode* l = cl->clauses[i].as<Closure>()->code;
    if (uint32_t(argc) == l->nRequired || (l->hasRest && uint32_t(argc) >= l->nRequired)) return cl->clauses[i];
  }
  throwArityError(isSymbol(cl->name) ? std::string(symbolName(cl->name)) : "case-lambda", argc, "a matching clause");
}

namespace {
// A temporary the evaluator alone holds may be overwritten by an elementwise builtin: its
// storage is its own (no view shares it), autograd does not track it, and it is floating point
// (the in-place variants keep the dtype, as the builtins do for floating input).
inline bool canOverwriteTemporary(const at::Tensor& t) {
  return t.defined() && t.use_count() == 1 && t.has_storage() && t.storage().use_count() == 1 &&
         !t.requires_grad() && !t.is_inference() && t.is_floating_point() && t.is_non_overlapping_and_dense();
}

// A primitive call, with its result boxed (a Value) or, for a tensor-returning primitive,
// unboxed. Arguments that are calls of fresh-returning primitives are released as soon as this
// primitive returns, when it keeps none of its arguments: `(tensor-sum (tensor-relu (+ (* x 2) 1)))`
// frees each intermediate tensor right away, as Python's reference counting would, and
// tensor-returning ones never get a GC cell at all.
template <bool Unboxed>
std::conditional_t<Unboxed, at::Tensor, Value> primitiveApp(Interp& in, AppNode* app, Value fn, Frame* env) {
  // Nested primitive calls recurse here without a new eval activation: guard the C++ stack.
  if (reinterpret_cast<char*>(__builtin_frame_address(0)) < in.stackLimit) throwRecursionError(in);
  auto* p = fn.as<Primitive>();
  uint32_t argc = app->argc;
  Value argvBuf[kInlineSlots];
  Value* argv = argc <= kInlineSlots ? argvBuf : static_cast<Value*>(gcAlloc(argc * sizeof(Value)));
  ScratchTensors scratch;
  uint32_t fresh = 0, freshStrings = 0, scratchMask = 0;
  bool track = (p->flags & kPrimBorrowsArgs) && app->appArgMask;
  for (uint32_t i = 0; i < argc; i++) {
    Node* a = app->args[i];
    if (track && argBit(app->appArgMask, i)) {
      auto* inner = static_cast<AppNode*>(a);
      if (inner->fn->op() == Op::Global) {
        Value g = static_cast<GlobalNode*>(inner->fn)->cell->value;
        if (g.is(Kind::Primitive) && (g.obj()->flags & kPrimUnboxedTensor) && scratch.hasRoom()) {
          argv[i] = scratch.hold(primitiveApp<true>(in, inner, g, env));
          scratchMask |= 1u << i;
          continue;
        }
        if (g.is(Kind::Primitive) && (g.obj()->flags & kPrimReturnsFresh)) {
          argv[i] = primitiveApp<false>(in, inner, g, env);
          fresh |= 1u << i;
          continue;
        }
        if (g.is(Kind::Primitive) && (g.obj()->flags & kPrimFreshString)) {
          argv[i] = primitiveApp<false>(in, inner, g, env);
          freshStrings |= 1u << i;
          continue;
        }
      }
      if (Value m; moduleCallee(inner->fn, env, &m)) {   // `(tensor-relu (conv1 x))`
        bool moduleFresh;
        argv[i] = evalModuleCallArgument(in, inner, m, env, &moduleFresh);
        if (moduleFresh) fresh |= 1u << i;
        continue;
      }
    }
    argv[i] = evalSimple(in, a, env);
  }
  if constexpr (!Unboxed) {
    // Not with cells that die with this call (scratch) or are released after it (fresh).
    Value quick;
    if (p->small && !(fresh | freshStrings | scratchMask)) {
      auto op = InlineBuiltin(p->small);
      if (op > InlineBuiltin::NumEq) in.poll();   // as applyInline
      if (inlinePrimitive(op, argc, argv, &quick)) return quick;
    }
  }
  PrimitiveFrame frame(in, app, fn);
  in.poll();
  // `(tensor-relu (conv1 x))` on a temporary nobody else holds (a scratch tensor, or a fresh
  // cell, released here and its tensor given a new cell below): in place, as the builtin's
  // in-place twin (relu_).
  if ((scratchMask | fresh) == 1 && argc == 1 && p->info->inPlace && canOverwriteTemporary(tensorOf(argv[0]))) {
    at::Tensor t;
    if (fresh) {
      t = tensorOf(argv[0]);
      releaseTensor(argv[0]);   // uncharged, as a scratch tensor never was
    } else {
      t = std::move(tensorOf(argv[0]));
    }
    try {
      p->info->inPlace(t);
    } catch (...) {
      rethrowForeign(p->info);
    }
    if constexpr (Unboxed) {
      if (recordingTensorOrigins()) noteUnboxedTensorSite(app, t);
      return t;
    } else {
      return wrapTensor(std::move(t));
    }
  }
  if constexpr (Unboxed) {
    at::Tensor result = p->info->tensorInvoke(in, argv, int(argc), p->info);
    if (in.limits.maxTensorBytes > 0) checkTensorBudget(result);
    if (recordingTensorOrigins()) noteUnboxedTensorSite(app, result);
    releaseFreshArguments(argv, argc, fresh, Value::unspecified());
    if (freshStrings) freeDeadStrings(argv, argc, freshStrings, Value::unspecified());
    return result;
  } else {
    Value result = p->fn(in, argv, int(argc), p->info);
    releaseFreshArguments(argv, argc, fresh, result);
    if (freshStrings) freeDeadStrings(argv, argc, freshStrings, result);
    return result;
  }
}
}  // namespace

bool (*moduleCallBorrowsArguments)(Value fn) = nullptr;

Value callPrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env) {
  return primitiveApp<false>(in, app, fn, env);
}

at::Tensor callTensorPrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env) {
  return primitiveApp<true>(in, app, fn, env);
}

namespace {
// The stop carries the backtrace of where it found the evaluation, as builtin errors do, so
// that "interrupted" says where it stopped.
[[noreturn]] void throwStop(Interp& in, const char* kind, std::string message) {
  Value err = makeError(intern(kind), message, Value::nil());
  err.as<ErrorObject>()->backtrace = in.backtrace();
  throw PurpleInterrupt(err);
}
}  // namespace

void Interp::attend() {
  // A stop stays requested while it unwinds (cleanup code such as dynamic-wind exits meets it
  // again at its next poll); whoever receives the interrupt clears it, and the next
  // outermost evaluation re-arms the budgets.
  if (interruptRequested_.load(std::memory_order_acquire)) throwStop(*this, "interrupt", "interrupted");
  if (deadlinePassed.load(std::memory_order_acquire)) throwStop(*this, "time-limit", "time budget exhausted");
  attention.store(false, std::memory_order_relaxed);
  if (pendingWork.load(std::memory_order_seq_cst) && pendingWorkHook) pendingWorkHook(*this, false);
  // A request that arrived while the flag was being cleared must not be lost.
  if (interruptRequested_.load(std::memory_order_seq_cst) || deadlinePassed.load(std::memory_order_seq_cst))
    attention.store(true, std::memory_order_relaxed);
}

void Interp::safePoint() {
  stepsLeft = 1024;
  if (interruptRequested_.load(std::memory_order_relaxed)) throwStop(*this, "interrupt", "interrupted");
  if (gcFinalizersPending()) gcRunFinalizers();
  if (limits.maxSteps > 0) {
    if (stepBudgetLeft <= 1024)
      throwStop(*this, "step-limit", "step budget exhausted (" + std::to_string(limits.maxSteps) + " steps)");
    stepBudgetLeft -= 1024;
  }
  if (hasDeadline && std::chrono::steady_clock::now() > deadline) throwStop(*this, "time-limit", "time budget exhausted");
  if (pendingWork.load(std::memory_order_acquire) && pendingWorkHook) pendingWorkHook(*this, true);
}

void Interp::checkInterrupt() { safePoint(); }

namespace {
// The continuation of the call/cc whose receiver's body runs in the eval activation at `depth`
// (callWithEscape): calling it in a tail position of that activation's loop returns its values
// from the activation, which is the receiver's return, instead of unwinding C++ frames with an
// exception. Set only while that activation runs (nested call/cc save and restore it); no
// other activation at that depth can run meanwhile.
struct EscapeTarget {
  Interp* in;
  int64_t depth;
  uintptr_t continuation;
};
thread_local EscapeTarget escapeTarget{nullptr, -1, 0};

__attribute__((noinline)) bool isEscapeTarget(Interp& in, Value k) {
  const EscapeTarget& t = escapeTarget;
  return t.continuation == k.bits && t.depth == in.depth && t.in == &in && k.as<Continuation>()->valid;
}
}  // namespace

Value callWithEscape(Interp& in, Value proc, Value k) {
  if (!proc.is(Kind::Closure)) return in.apply(proc, &k, 1);
  LambdaNode* l = proc.as<Closure>()->code;
  alignas(16) char store[kFrameStoreBytes];
  Frame* f = frameForOutsideCall(proc, store);
  bindClosureArgs(in, proc, f, &k, 1);   // (a default expression that calls K unwinds as before)
  if (--in.stepsLeft <= 0) in.safePoint();
  struct Restore {
    EscapeTarget saved;
    ~Restore() { escapeTarget = saved; }
  } restore{escapeTarget};
  escapeTarget = EscapeTarget{&in, in.depth + 1, k.bits};
  return in.eval(l->body, f);
}

Value Interp::eval(Node* node, Frame* env) {
  if (++depth > limits.maxDepth || reinterpret_cast<char*>(__builtin_frame_address(0)) < stackLimit)
    recursionTooDeep(*this);
  DepthRestore restore{*this};
  CallRecord* rec = &callStack[depth];
  rec->node = node;
  rec->proc = Value::f();
  rec->userCall = nullptr;
  alignas(16) char frameStore[kFrameStoreBytes];
  bool frameStoreLive = false;        // frameStore holds the frame of an earlier call

  for (;;) {
    switch (node->op()) {
      case Op::Const:
        return static_cast<ConstNode*>(node)->value;
      case Op::Local0:
        return shareValue(env->slots[static_cast<LocalNode*>(node)->index]);
      case Op::Local1:
        return shareValue(env->parent->slots[static_cast<LocalNode*>(node)->index]);
      case Op::LocalN: {
        auto* n = static_cast<LocalNode*>(node);
        return shareValue(frameAt(env, n->depth)->slots[n->index]);
      }
      case Op::LocalChecked: {
        auto* n = static_cast<LocalNode*>(node);
        Value v = frameAt(env, n->depth)->slots[n->index];
        if (v.isUnbound())
          throwError("unbound-variable", "variable " + std::string(symbolName(n->name)) + " used before its definition");
        return shareValue(v);
      }
      case Op::Global: {
        auto* cell = static_cast<GlobalNode*>(node)->cell;
        if (cell->value.isUnbound()) unboundVariable(static_cast<GlobalNode*>(node));
        return shareValue(cell->value);
      }
      case Op::SetLocal:
      case Op::SetGlobal:
      case Op::DefineGlobal:
        assign(*this, node, env);
        return Value::unspecified();
      case Op::If: {
        auto* n = static_cast<IfNode*>(node);
        node = evalShapedFirst(*this, n->test, env).isTrue() ? n->then : n->otherwise;
        continue;
      }
      case Op::Seq: {
        auto* n = static_cast<SeqNode*>(node);
        for (uint32_t i = 0; i + 1 < n->count; i++) evalForEffect(*this, n->items[i], env);
        node = n->items[n->count - 1];
        continue;
      }
      case Op::And: {
        auto* n = static_cast<SeqNode*>(node);
        uint32_t i = 0;
        for (; i + 1 < n->count; i++)
          if (evalShapedFirst(*this, n->items[i], env).isFalse()) return Value::f();
        node = n->items[i];
        continue;
      }
      case Op::Or: {
        auto* n = static_cast<SeqNode*>(node);
        uint32_t i = 0;
        for (; i + 1 < n->count; i++) {
          Value v = evalShapedFirst(*this, n->items[i], env);
          if (v.isTrue()) return v;
        }
        node = n->items[i];
        continue;
      }
      case Op::Let: {
        auto* n = static_cast<LetNode*>(node);
        for (uint32_t i = 0; i < n->count; i++) env->slots[n->slots[i]] = evalSimple(*this, n->inits[i], env);
        // A variable that may be freed when the body returns holds a tensor: the body is then not
        // a tail (something happens after it). Numbers in such variables keep the tail call.
        if (n->releaseMask && letHoldsReleasableTensor(n, env)) return evalLetReleasing(*this, n, env);
        node = n->body;
        continue;
      }
      case Op::Lambda:
        return makeClosure(static_cast<LambdaNode*>(node), env);
      case Op::Case: {
        auto* n = static_cast<CaseNode*>(node);
        Value key = evalSimple(*this, n->key, env);
        env->slots[n->keySlot] = key;
        Node* next = n->otherwise;
        for (uint32_t c = 0; c < n->count && next == n->otherwise; c++)
          for (Value d = n->data[c]; isPair(d); d = cdr(d))
            if (eqv(car(d), key)) {
              next = n->bodies[c];
              break;
            }
        if (!next) return Value::unspecified();
        node = next;
        continue;
      }
      case Op::Guard: {
        auto* n = static_cast<GuardNode*>(node);
        Value saved = st->handlers;
        st->handlers = cons(Value::f(), saved);   // #f marks a guard: raise unwinds to it
        try {
          Value v = eval(n->body, env);
          st->handlers = saved;
          return v;
        } catch (const PurpleInterrupt&) {
          st->handlers = saved;
          throw;
        } catch (const PurpleException& e) {
          st->handlers = saved;
          env->slots[n->slot] = e.payload();
        } catch (...) {
          st->handlers = saved;
          throw;
        }
        node = n->handler;
        continue;
      }
      case Op::Reraise:
        raise(env->slots[static_cast<ReraiseNode*>(node)->slot], true);
      case Op::App: {
        auto* app = static_cast<AppNode*>(node);
        // The callee: a global's or a local's value is read without marking it shared, as
        // calling a procedure cannot keep it (a non-procedure is marked before the error names it).
        // (An unbound global is neither a closure nor a builtin: its error comes below, before
        // any argument is evaluated.)
        Value fn;
        if (app->fn->op() == Op::Global) {
          fn = static_cast<GlobalNode*>(app->fn)->cell->value;
          if ((app->flags & kAppShaped) && fn == app->expected) return app->shape(*this, app, env);
        } else if (app->fn->op() == Op::Local1) {
          fn = env->parent->slots[static_cast<LocalNode*>(app->fn)->index];
        } else if (app->fn->op() == Op::Local0) {
          fn = env->slots[static_cast<LocalNode*>(app->fn)->index];
        } else {
          fn = evalSimple(*this, app->fn, env);
        }
        uint32_t argc = app->argc;
        // The commonest call: a closure taking just its required parameters, in a frame this
        // activation's frameStore can hold (LambdaNode::directArity), no tensor builtin's result
        // passed on. The first such call evaluates its arguments straight into the new frame:
        // nothing else can see frameStore until the frame is complete. A tail call (a loop:
        // frameStore holds the frame the arguments may read) computes them first, then rebinds
        // the frame in place.
        if (fn.is(Kind::Closure)) {
          LambdaNode* l = fn.as<Closure>()->code;
          if (argc == l->directArity && !app->tensorArgMask) {
            auto* f = reinterpret_cast<Frame*>(frameStore);
            if (!frameStoreLive) {
              for (uint32_t i = 0; i < argc; i++) f->slots[i] = evalShapedFirst(*this, app->args[i], env);
            } else {
              alignas(Value) char nextStore[kInlineSlots * sizeof(Value)];   // (uninitialised: no stores)
              auto* next = reinterpret_cast<Value*>(nextStore);
              for (uint32_t i = 0; i < argc; i++) next[i] = evalShapedFirst(*this, app->args[i], env);
              if (variablesMayOwnTensors.load(std::memory_order_relaxed)) {
                uint32_t noOwned = 0;
                releaseDeadFrame(f, next, argc, noOwned);
              }
              for (uint32_t i = 0; i < argc; i++) {
                Value v = next[i];
                __asm__("" : "+r"(v.bits));   // (a few moves: not the call of memcpy gcc makes of this loop)
                f->slots[i] = v;
              }
            }
            for (uint32_t i = argc; i < l->frameSize; i++) f->slots[i] = Value::unbound();
            f->kind = Kind::Frame;
            f->extra = l->frameSize;
            f->parent = fn.as<Closure>()->env;
            frameStoreLive = true;
            recordClosureCall(rec, app, fn);
            if (__builtin_expect(--stepsLeft <= 0, 0)) safePoint();
            env = f;
            node = l->body;
            continue;
          }
        } else if (fn.is(Kind::Primitive)) {
          if (isInlineCall(app, fn))
            return app->appArgMask ? inlinePrimitiveOnCalls(*this, app, fn, env) : inlinePrimitiveApp(*this, app, fn, env);
          return callPrimitiveApp(*this, app, fn, env);
        } else if (fn.isUnbound() && app->fn->op() == Op::Global) {
          unboundVariable(static_cast<GlobalNode*>(app->fn));
        }
        alignas(Value) char argvStore[kInlineSlots * sizeof(Value)];   // (uninitialised: no stores)
        Value* argv = argc <= kInlineSlots ? reinterpret_cast<Value*>(argvStore)
                                           : static_cast<Value*>(gcAlloc(argc * sizeof(Value)));
        // A tensor builtin's result passed straight to a closure's parameter goes the slower
        // way of bindOwnedTensorCall, which keeps this activation's stack frame small.
        bool adopt = app->tensorArgMask && fn.is(Kind::Closure) && hasSimpleParams(fn.as<Closure>()->code);
        uint32_t i = 0;
        for (; i < argc; i++) {
          Value g;
          if (adopt && argBit(app->tensorArgMask, i) && isUnboxedTensorCall(app->args[i], &g)) break;
          argv[i] = evalSimple(*this, app->args[i], env);
        }
        if (i < argc) {
          env = bindOwnedTensorCall(*this, app, fn, env, argv, i, frameStore, frameStoreLive, rec);
          if (--stepsLeft <= 0) safePoint();
          node = fn.as<Closure>()->code->body;
          continue;
        }
        recordClosureCall(rec, app, fn);
        if (fn.is(Kind::CaseLambda)) fn = selectCaseLambda(fn, int(argc));
        if (!fn.is(Kind::Closure)) {
          if (fn.is(Kind::Continuation) && isEscapeTarget(*this, fn)) return makeValues(argv, size_t(argc));
          if (fn.is(Kind::Module) && app->appArgMask && moduleCallBorrowsArguments)
            return callModuleReleasingArguments(*this, app, fn, argv, argc);
          return apply(shareValue(fn), argv, int(argc));
        }
        LambdaNode* l = fn.as<Closure>()->code;
        uint32_t noOwned = 0;
        Frame* f = frameForCall(fn, frameStore, frameStoreLive, argv, argc, noOwned);
        bindClosureArgs(*this, fn, f, argv, int(argc));
        if (--stepsLeft <= 0) safePoint();
        env = f;
        node = l->body;
        continue;
      }
      default:
        // Every node comes from the analyzer, with one of the ops above: no bounds check
        // before the jump table.
        __builtin_unreachable();
    }
  }
}

Value Interp::apply(Value fn, const Value* argv, int argc) {
  if (!fn.isObject()) throwError("type-error", "attempt to call a non-procedure:", listFromArray(&fn, 1));
  switch (fn.obj()->kind) {
    case Kind::Primitive: {
      Value buf[kInlineSlots];
      Value* args = argc <= int(kInlineSlots) ? buf : static_cast<Value*>(gcAlloc(argc * sizeof(Value)));
      for (int i = 0; i < argc; i++) args[i] = argv[i];
      auto* p = fn.as<Primitive>();
      // A step, like a closure call: a builtin that loops calling a builtin (find with string?
      // on a circular list) stays within maxSteps.
      if (--stepsLeft <= 0) safePoint();
      poll();
      return p->fn(*this, args, argc, p->info);
    }
    case Kind::CaseLambda:
      return apply(selectCaseLambda(fn, argc), argv, argc);
    case Kind::Closure: {
      LambdaNode* l = fn.as<Closure>()->code;
      alignas(16) char store[kFrameStoreBytes];
      Frame* f = frameForOutsideCall(fn, store);
      bindClosureArgs(*this, fn, f, argv, argc);
      if (--stepsLeft <= 0) safePoint();
      // A body such as `(+ x k)` needs no eval activation of its own.
      return evalSimple(*this, l->body, f);
    }
    case Kind::Continuation: {
      auto* k = fn.as<Continuation>();
      if (!k->valid)
        throwError("error", "continuation invoked after its extent ended (Purple supports escaping continuations only)");
      throw ContinuationInvoked{k->id, Root(makeValues(argv, size_t(argc)))};
    }
    case Kind::Parameter: {
      auto* p = fn.as<Parameter>();
      if (argc == 0) return p->value;
      // through the converter, as parameterize does: the current ports accept only ports
      p->value = p->converter.isFalse() ? argv[0] : apply(p->converter, argv, 1);
      return Value::unspecified();
    }
    default:
      return applyExtension(fn, argv, argc);
  }
}

}  // namespace purple
