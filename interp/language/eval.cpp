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
#include "interp/language/ownership.hpp"
#include "interp/language/tensor_origins.hpp"
#include <gc/gc.h>
#include <array>
#include <atomic>
#include <utility>

namespace purple {

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

inline Frame* heapFrame(uint32_t size, uint16_t ownable, Frame* parent) {
  auto* f = static_cast<Frame*>(GC_MALLOC(sizeof(Frame) + (size ? size - 1 : 0) * sizeof(Value)));
  if (!f) throw std::bad_alloc();
  f->kind = Kind::Frame;
  f->flags = 0;
  f->small = 0;
  f->extra = ownable;
  f->parent = parent;
  return f;
}

// The frame for a call of closure PROC made outside an eval activation (apply, call/cc's
// receiver): in STORE, the caller's stack space of kFrameStoreBytes, unless the lambda's frame
// may be captured or is too big.
inline Frame* frameForOutsideCall(Value proc, char* store) {
  LambdaNode* l = proc.as<Closure>()->code;
  Frame* parent = proc.as<Closure>()->env;
  if (l->heapFrame || l->frameSize > kInlineSlots) return heapFrame(l->frameSize, l->ownableSlots, parent);
  auto* f = reinterpret_cast<Frame*>(store);
  f->kind = Kind::Frame;
  f->small = 0;
  f->extra = l->ownableSlots;
  f->parent = parent;
  return f;
}

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

namespace {
__attribute__((noinline)) Value evalBuiltinOrOther(Interp& in, AppNode* app, Frame* env);
}

// `(tak (tak ...) ...)`, `(fib (- n 1))` as an argument: a closure call, straight to eval. It is
// tested first, and everything else is out of line, so that this path saves no registers.
Value evalCompound(Interp& in, Node* n, Frame* env) {
  if (n->op() != Op::App) return evalVariableOrEval(in, n, env);
  auto* app = static_cast<AppNode*>(n);
  if (app->fn->op() == Op::Global && !(app->flags & kAppSimpleOperands) &&
      static_cast<GlobalNode*>(app->fn)->cell->value.is(Kind::Closure))
    return in.eval(n, env);
  return evalBuiltinOrOther(in, app, env);
}

namespace {
Value evalBuiltinOrOther(Interp& in, AppNode* app, Frame* env) {
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
  return in.eval(app, env);   // a call of anything else: a local's closure, a continuation
}

// `set!`/`define` of a global: a fresh tensor result may reuse the cell the global alone held;
// any other value overwriting such a cell frees it. A global owns a sole-owned cell it holds
// (ownership.hpp): every read of a global marks the cell shared, so none is ever lent.
inline void evalIntoGlobal(Interp& in, Node* n, Frame* env, Value& slot) {
  Value fn;
  if (isUnboxedTensorCall(n, &fn)) {
    assignFreshTensor(slot, callTensorPrimitiveApp(in, static_cast<AppNode*>(n), fn, env));
    return;
  }
  Value v = evalSimple(in, n, env);
  if (!isSoleOwnedTensor(v)) shareValue(v);   // (a list a global holds owns nothing)
  dropOverwritten(slot);
  slot = v;
}

// `set!` (or an internal define) of slot S of frame F: the cell the slot owned is freed, or
// reused for a fresh tensor result; a cell in flight becomes the slot's.
inline void evalIntoLocal(Interp& in, SetLocalNode* set, Frame* env, Frame* f, uint32_t s) {
  Node* n = set->value;
  bool keepOld = set->flags & kSetLocalKeepsOld;
  Value fn;
  if (isUnboxedTensorCall(n, &fn)) {
    at::Tensor t = callTensorPrimitiveApp(in, static_cast<AppNode*>(n), fn, env);
    Value old = f->slots[s];
    if (!keepOld && (f->small & ownerBit(s)) && isSoleOwnedTensor(old) && !tensorScopeOpen()) {
      reuseTensorCell(old, std::move(t));
      return;
    }
    storeInFlight(f, s, wrapSoleOwnedTensor(std::move(t)), keepOld);
    return;
  }
  storeInFlight(f, s, evalSimple(in, n, env), keepOld);
}

// SetLocal, SetGlobal and DefineGlobal nodes (no eval activation of their own).
inline void assign(Interp& in, Node* node, Frame* env) {
  if (node->op() == Op::SetLocal) {
    auto* n = static_cast<SetLocalNode*>(node);
    evalIntoLocal(in, n, env, frameAt(env, n->depth), n->index);
    return;
  }
  auto* n = static_cast<SetGlobalNode*>(node);
  if (node->op() == Op::SetGlobal && n->cell->value.isUnbound()) {
    throwError("unbound-variable", "set!: unbound variable",
               listFromArray(&n->cell->name, 1));
  }
  evalIntoGlobal(in, n->value, env, n->cell->value);
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
        noteTensorFreedUnboxed(callTensorPrimitiveApp(in, static_cast<AppNode*>(n), fn, env));
        return;
      }
      break;
    default: break;
  }
  // A value in flight (a call's result nobody else holds) dies here.
  Value v = evalSimple(in, n, env);
  if (isSoleOwned(v)) releaseOwned(v);
}




}  // namespace

__attribute__((noinline)) bool inlinePrimitive(InlineBuiltin op, uint32_t argc, const Value* argv, Value* out) {
  return inlinePrimitiveBody(op, argc, argv, out);
}

namespace {

// The evaluated arguments of a builtin with an InlineBuiltin: inline when it can, else the builtin.
__attribute__((always_inline)) inline Value applyInline(Interp& in, AppNode* app, Value fn, Value* argv,
                                                        uint32_t argc, uint32_t lent) {
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
  return callInlineBuiltin(in, app, fn, argv, argc, lent);
}

// `(< n 2)`, `(car l)`: an inline builtin whose arguments are not calls, without the
// bookkeeping of the general primitive call.
__attribute__((always_inline)) inline Value inlinePrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env) {
  Value argv[3];
  uint32_t argc = app->argc, lent = lentToBuiltin(app, fn);
  argv[0] = evalArgument(in, app, 0, env, lent);
  if (argc > 1) argv[1] = evalArgument(in, app, 1, env, lent);
  if (argc > 2) argv[2] = evalArgument(in, app, 2, env, lent);
  return applyInline(in, app, fn, argv, argc, lent);
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
  uint32_t lent = lentToBuiltin(app, fn);
  Value argv[2] = {evalArgument(in, app, 0, env, lent), evalArgument(in, app, 1, env, lent)};
  Value result;
  if (fixnumArithmetic(InlineBuiltin(fn.as<Primitive>()->small), argv[0], argv[1], &result)) return result;
  return callInlineBuiltin(in, app, fn, argv, 2, lent);
}


// `(+ (fib (- n 1)) (fib (- n 2)))`, `(null? (cdr l))`: an inline builtin whose arguments are
// calls but not of tensor builtins (tensorArgMask), without the scratch cells of the general
// primitive call. A cell in flight, as `(* x 2)` on tensors makes in `(+ (* x 2) 1)`, is still
// freed at once (callInlineBuiltin).
__attribute__((noinline)) Value inlinePrimitiveOnCalls(Interp& in, AppNode* app, Value fn, Frame* env) {
  if (reinterpret_cast<char*>(__builtin_frame_address(0)) < in.stackLimit) throwRecursionError(in);
  Value argv[3];
  uint32_t argc = app->argc, lent = lentToBuiltin(app, fn);
  for (uint32_t i = 0; i < argc; i++) {
    Node* a = app->args[i];
    // `(fib (- n 1))`: a call of a closure (or an unbound name, or a non-procedure) goes
    // straight to eval, as evalCompound would send it after the same checks
    if (a->op() == Op::App && static_cast<AppNode*>(a)->fn->op() == Op::Global &&
        !static_cast<GlobalNode*>(static_cast<AppNode*>(a)->fn)->cell->value.is(Kind::Primitive)) {
      argv[i] = in.eval(a, env);
      continue;
    }
    argv[i] = evalArgument(in, app, i, env, lent);
  }
  return applyInline(in, app, fn, argv, argc, lent);
}

inline bool hasSimpleParams(LambdaNode* l) { return !(l->nOptional | l->nKeys | l->hasRest); }

// The fresh tensors left in stack cells get cells of their own, sole-owned, in flight to their
// parameters.
void adoptOwnedArguments(Value* argv, uint32_t argc, uint32_t scratchMask) {
  for (uint32_t i = 0; i < argc; i++)
    if (argBit(scratchMask, i)) argv[i] = wrapSoleOwnedTensor(std::move(tensorOf(argv[i])));
}

// Before the frame OLD dies for a tail call whose argument I is a fresh tensor in a stack cell
// (bit I of SCRATCHMASK): when OLD's slot I owns a cell that is not passed on, the new tensor
// takes that cell, and the old tensor goes first, as under reference counting. The bits of the
// arguments so placed leave SCRATCHMASK.
void reuseDeadCells(Frame* old, Value* argv, uint32_t argc, uint32_t& scratchMask) {
  if (tensorScopeOpen()) return;
  for (uint32_t i = 0; i < argc && i < kOwnerSlots; i++) {
    if (!argBit(scratchMask, i) || !(old->small & old->extra & ownerBit(i))) continue;
    Value cell = old->slots[i];
    if (!isSoleOwnedTensor(cell)) continue;
    bool passedOn = false;
    for (uint32_t j = 0; j < argc; j++) passedOn = passedOn || argv[j] == cell;
    if (passedOn) continue;
    reuseTensorCell(cell, std::move(tensorOf(argv[i])));
    argv[i] = cell;            // retireOwnedFrame sees it passed on once: it moves
    scratchMask &= ~(1u << i);
  }
}

}  // namespace

// The common case inline: exactly the required arguments of a lambda with nothing else.
// Returns the slots a default filled with a cell in flight (bindGeneralArgs).
inline uint32_t bindClosureArgs(Interp& in, Value proc, Frame* f, const Value* argv, int argc) {
  LambdaNode* l = proc.as<Closure>()->code;
  if (uint32_t(argc) == l->nRequired && !(l->nOptional | l->nKeys | l->hasRest)) {
    for (int i = 0; i < argc; i++) {
      Value v = argv[i];
      __asm__("" : "+r"(v.bits));   // (a few moves: gcc would call memcpy for this loop)
      f->slots[i] = v;
    }
    for (uint32_t i = uint32_t(argc); i < l->frameSize; i++) f->slots[i] = Value::unbound();
    return 0;
  }
  return bindGeneralArgs(in, proc, f, argv, argc);
}

// The owner bits of frame F, just bound for closure L from ARGV, of which INFLIGHT
// (inFlightArguments) are cells in flight, and whose slots DEFAULTED got a cell in flight from a
// parameter's default: each parameter takes what it was given. A cell in flight that no slot can
// own (in a rest list, past the first 16 slots) is marked shared.
inline uint16_t ownerBitsAfterBinding(LambdaNode* l, Frame* f, Value* argv, uint32_t argc, uint32_t inflight,
                                      uint32_t defaulted) {
  uint32_t bits = defaulted & ((1u << kOwnerSlots) - 1);
  if (!(l->nOptional | l->nKeys | l->hasRest)) {   // parameter i is argument i
    bits |= inflight & ((1u << kOwnerSlots) - 1);
    for (uint32_t rest = inflight >> kOwnerSlots, i = kOwnerSlots; rest; rest >>= 1, i++)
      if (rest & 1) argv[i] = shareValue(argv[i]);
    return uint16_t(bits);
  }
  uint32_t slots = std::min(l->frameSize, kOwnerSlots);
  for (uint32_t s = 0; s < slots && inflight; s++) {
    Value v = f->slots[s];
    if (!isSoleOwned(v)) continue;
    for (uint32_t i = 0; i < argc && i < 32; i++)
      if (argBit(inflight, i) && argv[i] == v) {
        bits |= 1u << s;
        inflight &= ~(1u << i);
        break;
      }
  }
  for (uint32_t i = 0; inflight; i++, inflight >>= 1)
    if (inflight & 1) argv[i] = shareValue(argv[i]);
  return uint16_t(bits);
}

// The arguments a closure's parameters may borrow: calls of closures with optional, keyword or
// rest parameters lend only to the required ones, whose slots are the arguments' positions.
inline uint32_t lendableTo(AppNode* app, LambdaNode* l) {
  uint32_t required = l->nRequired >= 32 ? ~0u : (1u << l->nRequired) - 1;
  return app->borrowArgMask & l->ownableSlots & required;
}

// The frame for a call of closure `fn`: on the heap when a closure may capture it or it is
// large, else this activation's frameStore.
inline Frame* frameForCall(Value fn, char* frameStore, bool& frameStoreLive) {
  LambdaNode* l = fn.as<Closure>()->code;
  if (l->heapFrame || l->frameSize > kInlineSlots) return heapFrame(l->frameSize, l->ownableSlots, fn.as<Closure>()->env);
  auto* f = reinterpret_cast<Frame*>(frameStore);
  frameStoreLive = true;
  f->kind = Kind::Frame;
  f->small = 0;
  f->extra = l->ownableSlots;
  f->parent = fn.as<Closure>()->env;
  return f;
}

namespace {

// A closure call's arguments, evaluated: those in LENT read from this frame's variables without
// marking them shared (the callee's parameter borrows the cell), the others as any value is.
__attribute__((always_inline)) inline void evalLending(Interp& in, AppNode* app, Frame* env, uint32_t lent,
                                                       Value* out) {
  for (uint32_t i = 0; i < app->argc; i++)
    out[i] = argBit(lent, i) ? env->slots[static_cast<LocalNode*>(app->args[i])->index]
                             : evalShapedFirst(in, app->args[i], env);
}

}  // namespace

// A call of a closure with simple parameters where argument `first` (and maybe later ones) is
// a call of a tensor builtin: those results are held without a cell until the frame is bound,
// then each parameter owns its tensor alone (kTensorSoleOwner), reusing the cell of the
// previous iteration's tensor in a tail-recursive loop. OWNED: the frame this activation owns,
// which dies now (ownership.hpp). Returns the bound frame.
__attribute__((noinline)) Frame* bindOwnedTensorCall(Interp& in, AppNode* app, Value fn, Frame* env, Value* argv,
                                                     uint32_t first, char* frameStore, bool& frameStoreLive,
                                                     Interp::CallRecord* rec, Frame* owned) {
  LambdaNode* l = fn.as<Closure>()->code;
  uint32_t lent = lendableTo(app, l);
  ScratchTensors scratch;
  uint32_t scratchMask = 0;
  for (uint32_t i = first; i < app->argc; i++) {
    Value g;
    if (argBit(app->tensorArgMask, i) && scratch.hasRoom() && isUnboxedTensorCall(app->args[i], &g)) {
      argv[i] = scratch.hold(callTensorPrimitiveApp(in, static_cast<AppNode*>(app->args[i]), g, env));
      scratchMask |= 1u << i;
    } else {
      argv[i] = argBit(lent, i) ? env->slots[static_cast<LocalNode*>(app->args[i])->index]
                                : evalSimple(in, app->args[i], env);
    }
  }
  recordClosureCall(rec, app, fn);
  uint32_t moved = 0;
  if (owned) {
    reuseDeadCells(owned, argv, app->argc, scratchMask);
    moved = retireOwnedFrame(owned, argv, app->argc);
  }
  if (scratchMask) adoptOwnedArguments(argv, app->argc, scratchMask);
  Frame* f = frameForCall(fn, frameStore, frameStoreLive);
  uint32_t defaulted = bindClosureArgs(in, fn, f, argv, int(app->argc));
  f->small = ownerBitsAfterBinding(l, f, argv, app->argc, inFlightArguments(argv, app->argc, lent, moved), defaulted);
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
  return shareValue(in.eval(l->body, f));
}

Frame gNoOwnedFrame{};   // (zero: constant-initialised, usable before any constructor runs)

// The activation's returns: the frame it owns dies (ownership.hpp), and the cells its slots own
// go with it, except the value returned.

#define EVAL_RETURN(expr)                                                                      \
  do {                                                                                        \
    Value result_ = (expr);                                                                   \
    if (kOwning && __builtin_expect(ownedEnv->small != 0, 0)) finishOwnedFrame(ownedEnv, result_); \
    return result_;                                                                           \
  } while (0)

// One C++ activation of the tree walker. OWNEDENV is the frame this activation owns, if any
// (one it bound for a closure call, or one handed over by evalOwning): what the variables of its
// ownable slots (Frame::extra) own dies when the frame does.
//
// Two walkers: kOwning tracks the frame the activation owns; the plain one runs while no cell is
// sole-owned anywhere in the process (soleOwnedCellsExist: code that has made no tensor yet, as a
// plain Lisp program), where every owner bit is zero and the tracking would only cost time. A
// plain activation that finds cells owned at its next closure call goes on as an owning one.
template <bool kOwning>
Value Interp::evalActivation(Node* node, Frame* env, Frame* ownedEnv) {
  if (!kOwning && __builtin_expect(soleOwnedCellsExist(), 0)) return evalActivation<true>(node, env, &gNoOwnedFrame);
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
        EVAL_RETURN(static_cast<ConstNode*>(node)->value);
      case Op::Local0: {
        uint32_t index = static_cast<LocalNode*>(node)->index;
        Value v = env->slots[index];
        // The variable of a dying frame that owns its cell passes it on to the caller.
        if (kOwning && __builtin_expect(env->small != 0, 0) && env == ownedEnv &&
            (env->small & env->extra & ownerBit(index)))
          EVAL_RETURN(v);
        EVAL_RETURN(shareValue(v));
      }
      case Op::Local1:
        EVAL_RETURN(shareValue(env->parent->slots[static_cast<LocalNode*>(node)->index]));
      case Op::LocalN: {
        auto* n = static_cast<LocalNode*>(node);
        EVAL_RETURN(shareValue(frameAt(env, n->depth)->slots[n->index]));
      }
      case Op::LocalChecked: {
        auto* n = static_cast<LocalNode*>(node);
        Value v = frameAt(env, n->depth)->slots[n->index];
        if (v.isUnbound())
          throwError("unbound-variable", "variable " + std::string(symbolName(n->name)) + " used before its definition");
        EVAL_RETURN(shareValue(v));
      }
      case Op::Global: {
        auto* cell = static_cast<GlobalNode*>(node)->cell;
        if (cell->value.isUnbound()) unboundVariable(static_cast<GlobalNode*>(node));
        EVAL_RETURN(shareValue(cell->value));
      }
      case Op::SetLocal:
      case Op::SetGlobal:
      case Op::DefineGlobal:
        assign(*this, node, env);
        EVAL_RETURN(Value::unspecified());
      case Op::If: {
        auto* n = static_cast<IfNode*>(node);
        node = evalTest(*this, n->test, env).isTrue() ? n->then : n->otherwise;
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
          if (evalTest(*this, n->items[i], env).isFalse()) EVAL_RETURN(Value::f());
        node = n->items[i];
        continue;
      }
      case Op::Or: {
        auto* n = static_cast<SeqNode*>(node);
        uint32_t i = 0;
        for (; i + 1 < n->count; i++) {
          Value v = evalShapedFirst(*this, n->items[i], env);
          if (v.isTrue()) EVAL_RETURN(v);
        }
        node = n->items[i];
        continue;
      }
      case Op::Let: {
        auto* n = static_cast<LetNode*>(node);
        for (uint32_t i = 0; i < n->count; i++) storeInFlight(env, n->slots[i], evalSimple(*this, n->inits[i], env));
        // A variable that may be freed when the body returns holds a tensor: the body is then not
        // a tail (something happens after it). Numbers in such variables keep the tail call.
        if (n->releaseMask && letHoldsReleasableTensor(n, env)) EVAL_RETURN(evalLetReleasing(*this, n, env));
        node = n->body;
        continue;
      }
      case Op::Lambda:
        EVAL_RETURN(makeClosure(static_cast<LambdaNode*>(node), env));
      case Op::Case: {
        auto* n = static_cast<CaseNode*>(node);
        Value key = shareValue(evalSimple(*this, n->key, env));
        env->slots[n->keySlot] = key;
        Node* next = n->otherwise;
        for (uint32_t c = 0; c < n->count && next == n->otherwise; c++)
          for (Value d = n->data[c]; isPair(d); d = cdr(d))
            if (eqv(car(d), key)) {
              next = n->bodies[c];
              break;
            }
        if (!next) EVAL_RETURN(Value::unspecified());
        node = next;
        continue;
      }
      case Op::Guard: {
        auto* n = static_cast<GuardNode*>(node);
        Value saved = st->handlers;
        st->handlers = cons(Value::f(), saved);   // #f marks a guard: raise unwinds to it
        Value v;
        try {
          v = eval(n->body, env);
        } catch (const PurpleInterrupt&) {
          st->handlers = saved;
          throw;
        } catch (const PurpleException& e) {
          st->handlers = saved;
          env->slots[n->slot] = shareValue(e.payload());
          node = n->handler;
          continue;
        } catch (...) {
          st->handlers = saved;
          throw;
        }
        st->handlers = saved;
        EVAL_RETURN(v);
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
          if ((app->flags & kAppShaped) && fn == app->expected) EVAL_RETURN(app->shape(*this, app, env));
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
        // the frame in place. The frame this activation owned dies either way: its cells are
        // freed, or move to the new frame when passed on (retireOwnedFrame).
        if (fn.is(Kind::Closure)) {
          LambdaNode* l = fn.as<Closure>()->code;
          if (argc == l->directArity && !app->tensorArgMask) {
            auto* f = reinterpret_cast<Frame*>(frameStore);
            // (Lending matters only once a cell is owned somewhere; before that a plain read
            // is the same thing.)
            uint32_t lent = kOwning ? app->borrowArgMask : 0, moved = 0;
            if (__builtin_expect(lent != 0, 0)) lent &= l->ownableSlots;
            if (!frameStoreLive) {
              if (!lent) {
                for (uint32_t i = 0; i < argc; i++) f->slots[i] = evalShapedFirst(*this, app->args[i], env);
              } else {
                evalLending(*this, app, env, lent, f->slots);
              }
              if (kOwning && __builtin_expect(ownedEnv->small != 0, 0)) moved = retireOwnedFrame(ownedEnv, f->slots, argc);
            } else {
              alignas(Value) char nextStore[kInlineSlots * sizeof(Value)];   // (uninitialised: no stores)
              auto* next = reinterpret_cast<Value*>(nextStore);
              if (!lent) {
                for (uint32_t i = 0; i < argc; i++) next[i] = evalShapedFirst(*this, app->args[i], env);
              } else {
                evalLending(*this, app, env, lent, next);
              }
              if (kOwning && __builtin_expect(ownedEnv->small != 0, 0)) moved = retireOwnedFrame(ownedEnv, next, argc);
              for (uint32_t i = 0; i < argc; i++) {
                Value v = next[i];
                __asm__("" : "+r"(v.bits));   // (a few moves: not the call of memcpy gcc makes of this loop)
                f->slots[i] = v;
              }
            }
            for (uint32_t i = argc; i < l->frameSize; i++) f->slots[i] = Value::unbound();
            f->kind = Kind::Frame;
            f->parent = fn.as<Closure>()->env;
            frameStoreLive = true;
            recordClosureCall(rec, app, fn);
            // (The plain walk leaves Frame::extra alone: only an owning activation reads it.)
            bool handOver = false;
            if (kOwning || __builtin_expect(soleOwnedCellsExist(), 0)) {
              f->small = uint16_t(inFlightArguments(f->slots, argc, lent, moved));   // argc <= 8: all can own
              f->extra = l->ownableSlots;
              handOver = !kOwning;
            } else {
              f->small = 0;
            }
            ownedEnv = f;
            if (__builtin_expect(--stepsLeft <= 0, 0)) safePoint();
            if (!kOwning && __builtin_expect(handOver, 0)) return evalActivation<true>(l->body, f, f);
            env = f;
            node = l->body;
            continue;
          }
        } else if (fn.is(Kind::Primitive)) {
          if (isInlineCall(app, fn))
            EVAL_RETURN(app->appArgMask ? inlinePrimitiveOnCalls(*this, app, fn, env) : inlinePrimitiveApp(*this, app, fn, env));
          EVAL_RETURN(callPrimitiveApp(*this, app, fn, env));
        } else if (fn.is(Kind::Module)) {
          EVAL_RETURN(evalModuleCall(*this, app, fn, env, rec));
        } else if (fn.isUnbound() && app->fn->op() == Op::Global) {
          unboundVariable(static_cast<GlobalNode*>(app->fn));
        }
        if (fn.is(Kind::CaseLambda)) fn = selectCaseLambda(fn, int(argc));
        alignas(Value) char argvStore[kInlineSlots * sizeof(Value)];   // (uninitialised: no stores)
        Value* argv = argc <= kInlineSlots ? reinterpret_cast<Value*>(argvStore)
                                           : static_cast<Value*>(gcAlloc(argc * sizeof(Value)));
        if (!fn.is(Kind::Closure)) {
          // A continuation, a parameter, a host object: each may keep its arguments.
          for (uint32_t i = 0; i < argc; i++) argv[i] = shareValue(evalSimple(*this, app->args[i], env));
          recordClosureCall(rec, app, fn);
          if (fn.is(Kind::Continuation) && isEscapeTarget(*this, fn)) EVAL_RETURN(makeValues(argv, size_t(argc)));
          EVAL_RETURN(apply(shareValue(fn), argv, int(argc)));
        }
        LambdaNode* l = fn.as<Closure>()->code;
        // A tensor builtin's result passed straight to a closure's parameter goes the slower
        // way of bindOwnedTensorCall, which keeps this activation's stack frame small.
        uint32_t lent = kOwning ? lendableTo(app, l) : 0;
        bool adopt = app->tensorArgMask && hasSimpleParams(l);
        uint32_t i = 0;
        for (; i < argc; i++) {
          Value g;
          if (adopt && argBit(app->tensorArgMask, i) && isUnboxedTensorCall(app->args[i], &g)) break;
          argv[i] = argBit(lent, i) ? env->slots[static_cast<LocalNode*>(app->args[i])->index]
                                    : evalSimple(*this, app->args[i], env);
        }
        if (i < argc) {
          env = bindOwnedTensorCall(*this, app, fn, env, argv, i, frameStore, frameStoreLive, rec,
                                    kOwning && ownedEnv->small ? ownedEnv : nullptr);
        } else {
          recordClosureCall(rec, app, fn);
          uint32_t moved = 0;
          if (kOwning && __builtin_expect(ownedEnv->small != 0, 0)) moved = retireOwnedFrame(ownedEnv, argv, argc);
          Frame* f = frameForCall(fn, frameStore, frameStoreLive);
          uint32_t defaulted = bindClosureArgs(*this, fn, f, argv, int(argc));
          f->small = uint16_t(f->small | ownerBitsAfterBinding(l, f, argv, argc, inFlightArguments(argv, argc, lent, moved),
                                                               defaulted));
          env = f;
        }
        ownedEnv = env;
        if (--stepsLeft <= 0) safePoint();
        if (!kOwning && __builtin_expect(soleOwnedCellsExist(), 0)) return evalActivation<true>(l->body, env, env);
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

#undef EVAL_RETURN

template Value Interp::evalActivation<false>(Node*, Frame*, Frame*);
template Value Interp::evalActivation<true>(Node*, Frame*, Frame*);


// A call made from C++ (a builtin's callback, a module's forward, the embedding API): the
// closure's parameters borrow the arguments, whose owner is the caller. Its result may be a
// cell in flight (ownership.hpp): apply marks it shared for callers that are not the evaluator.
Value Interp::applyOwning(Value fn, const Value* argv, int argc) {
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
      if (!(p->flags & kPrimBorrowsArgs)) shareArguments(args, uint32_t(argc));
      return p->fn(*this, args, argc, p->info);
    }
    case Kind::CaseLambda:
      return applyOwning(selectCaseLambda(fn, argc), argv, argc);
    case Kind::Closure: {
      LambdaNode* l = fn.as<Closure>()->code;
      alignas(16) char store[kFrameStoreBytes];
      Frame* f = frameForOutsideCall(fn, store);
      f->small = uint16_t(bindClosureArgs(*this, fn, f, argv, argc));
      if (--stepsLeft <= 0) safePoint();
      // A body such as `(+ x k)` needs no eval activation of its own; one that binds variables
      // gets one that owns the frame, so that what its variables own dies with it.
      Node* body = l->body;
      if (body->op() == Op::App || body->op() == Op::Const || body->op() == Op::Global) {
        Value r = evalSimple(*this, body, f);
        if (f->small) finishOwnedFrame(f, r);
        return r;
      }
      return evalOwning(body, f);
    }
    case Kind::Continuation: {
      auto* k = fn.as<Continuation>();
      if (!k->valid)
        throwError("error", "continuation invoked after its extent ended (Purple supports escaping continuations only)");
      Value* shared = static_cast<Value*>(gcAlloc(size_t(argc > 0 ? argc : 1) * sizeof(Value)));
      for (int i = 0; i < argc; i++) shared[i] = shareValue(argv[i]);
      throw ContinuationInvoked{k->id, Root(makeValues(shared, size_t(argc)))};
    }
    case Kind::Parameter: {
      auto* p = fn.as<Parameter>();
      if (argc == 0) return p->value;
      // through the converter, as parameterize does: the current ports accept only ports
      p->value = p->converter.isFalse() ? shareValue(argv[0]) : apply(p->converter, argv, 1);
      return Value::unspecified();
    }
    default:
      return applyExtension(fn, argv, argc);
  }
}

}  // namespace purple
