// Builtins called from the evaluator (eval_internal.hpp): their arguments evaluated, those read
// from variables lent to a builtin that keeps none of them and marked shared for one that may
// keep them, and the values in flight they were given freed when they return
// (interp/language/ownership.hpp). The inline builtins' general case is here too.
#include "interp/language/eval_internal.hpp"
#include "interp/language/borrowing_calls.hpp"
#include "interp/language/ownership.hpp"
#include "interp/language/tensor_origins.hpp"
#include "interp/language/bind.hpp"
#include "interp/core/gc.hpp"

namespace purple {

namespace {
// After a builtin that keeps none of its arguments returned `result`: the strings that calls of
// kPrimFreshString builtins made for it (bits of `fresh`) are garbage now, unless returned, and
// their memory is taken back at once. `(string->symbol (string-append "k" (number->string i)))`
// otherwise leaves two strings per call for the next collection to find: the heap fills faster,
// and each collection marks every live object again. Reference counting frees them here too.
inline void freeDeadStrings(Value* argv, uint32_t argc, uint32_t fresh, Value result) {
  for (uint32_t i = 0; fresh && i < argc; i++)
    if (argBit(fresh, i) && argv[i] != result && argv[i].is(Kind::String)) freeDeadString(argv[i]);
}
}  // namespace

// A builtin with an InlineBuiltin on what inlinePrimitive declined (generic numbers, tensors, errors),
// in its own call record (PrimitiveFrame) and polling for interrupts as every builtin call does.
// LENT: the arguments read from variables without marking them shared (lentToBuiltin).
__attribute__((noinline)) Value callInlineBuiltin(Interp& in, AppNode* app, Value fn, Value* argv, uint32_t argc,
                                                  uint32_t lent) {
  auto* p = fn.as<Primitive>();
  Value r;
  if (argc == 2 && p->small <= uint16_t(InlineBuiltin::NumEq) &&
      flonumArithmetic(InlineBuiltin(p->small), argv[0], argv[1], &r)) {
    in.poll();
    return r;
  }
  PrimitiveFrame frame(in, app, fn);
  in.poll();
  if (!(p->flags & kPrimBorrowsArgs)) {
    shareArguments(argv, argc);
    return p->fn(in, argv, int(argc), p->info);
  }
  r = p->fn(in, argv, int(argc), p->info);
  bool fresh = p->flags & kPrimReturnsFresh;
  if (soleOwnedCellsExist() || (fresh && isTensor(r))) finishBorrowingCall(argv, argc, lent, r, fresh);
  return r;
}

namespace {
// A temporary the evaluator alone holds may be overwritten by an elementwise builtin: its
// storage is its own (no view shares it), autograd does not track it, and it is floating point
// (the in-place variants keep the dtype, as the builtins do for floating input).
inline bool canOverwriteTemporary(const at::Tensor& t) {
  return t.defined() && t.use_count() == 1 && t.has_storage() && t.storage().use_count() == 1 &&
         !t.requires_grad() && !t.is_inference() && t.is_floating_point() && t.is_non_overlapping_and_dense();
}

// The cells in flight among ARGV (sole-owned and not lent: LENT), when any cell may be owned.
inline uint32_t cellsInFlight(const Value* argv, uint32_t argc, uint32_t lent) {
  if (!soleOwnedCellsExist()) return 0;
  uint32_t bits = 0;
  for (uint32_t i = 0; i < argc && i < 32; i++)
    if (!argBit(lent, i) && isSoleOwned(argv[i])) bits |= 1u << i;
  return bits;
}

// A primitive call, with its result boxed (a Value) or, for a tensor-returning primitive,
// unboxed. When the primitive keeps none of its arguments, those read from variables are lent
// to it (ownership.hpp), and the cells in flight it was given die as soon as it returns:
// `(tensor-sum (tensor-relu (+ (* x 2) 1)))` frees each intermediate tensor right away, as
// Python's reference counting would, and tensor-returning ones never get a GC cell at all. A
// primitive that may keep its arguments gets them marked shared.
template <bool Unboxed>
std::conditional_t<Unboxed, at::Tensor, Value> primitiveApp(Interp& in, AppNode* app, Value fn, Frame* env) {
  // Nested primitive calls recurse here without a new eval activation: guard the C++ stack.
  if (reinterpret_cast<char*>(__builtin_frame_address(0)) < in.stackLimit) throwRecursionError(in);
  auto* p = fn.as<Primitive>();
  uint32_t argc = app->argc;
  Value argvBuf[kFrameStoreSlots];
  Value* argv = argc <= kFrameStoreSlots ? argvBuf : static_cast<Value*>(gcAlloc(argc * sizeof(Value)));
  ScratchTensors scratch;
  bool borrows = p->flags & kPrimBorrowsArgs;
  uint32_t freshStrings = 0, scratchMask = 0, lent = borrows ? app->borrowArgMask : 0;
  bool track = borrows && app->appArgMask;
  for (uint32_t i = 0; i < argc; i++) {
    Node* a = app->args[i];
    if (argBit(lent, i)) {
      argv[i] = env->slots[static_cast<LocalNode*>(a)->index];
      continue;
    }
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
          continue;
        }
        if (g.is(Kind::Primitive) && (g.obj()->flags & kPrimFreshString)) {
          argv[i] = primitiveApp<false>(in, inner, g, env);
          freshStrings |= 1u << i;
          continue;
        }
      }
      if (Value m; moduleCallee(inner->fn, env, &m)) {   // `(tensor-relu (conv1 x))`
        argv[i] = evalModuleCall(in, inner, m, env, nullptr);
        continue;
      }
    }
    argv[i] = evalSimple(in, a, env);
  }
  uint32_t inflight = 0;
  if constexpr (!Unboxed) {
    // Code that has made no sole-owned cell yet (plain Lisp) has nothing in flight, lent or
    // marked: the call as it was before ownership, unless its result may be the first owned.
    constexpr uint32_t kOwningList = kPrimMakesList | kPrimReturnsFreshList;
    if (__builtin_expect(!scratchMask && !(p->flags & kOwningList) && !soleOwnedCellsExist(), 1)) {
      Value quick;
      if (p->small && !freshStrings) {
        auto op = InlineBuiltin(p->small);
        if (op > InlineBuiltin::NumEq) in.poll();   // as applyInline
        if (inlinePrimitive(op, argc, argv, &quick)) return quick;
      }
      PrimitiveFrame frame(in, app, fn);
      in.poll();
      Value result = p->fn(in, argv, int(argc), p->info);
      if ((p->flags & kPrimReturnsFresh) && isTensor(result)) {
        if (borrows) finishBorrowingCall(argv, argc, lent, result, true);
        else if (!isOneOf(result, argv, argc)) markSoleOwned(result);
      }
      if (freshStrings) freeDeadStrings(argv, argc, freshStrings, result);
      return result;
    }
    if (p->flags & kPrimMakesList) {
      PrimitiveFrame frame(in, app, fn);
      in.poll();
      return makeOwningList(argv, argc);
    }
  }
  if (borrows) inflight = cellsInFlight(argv, argc, lent);
  else shareArguments(argv, argc);
  if constexpr (!Unboxed) {
    // Not with cells that die with this call (scratch) or after it (in flight).
    Value quick;
    if (p->small && !(inflight | freshStrings | scratchMask)) {
      auto op = InlineBuiltin(p->small);
      if (op > InlineBuiltin::NumEq) in.poll();   // as applyInline
      if (inlinePrimitive(op, argc, argv, &quick)) {
        if (lent && soleOwnedCellsExist()) finishBorrowingCall(argv, argc, lent, quick, false);
        return quick;
      }
    }
  }
  PrimitiveFrame frame(in, app, fn);
  in.poll();
  // `(tensor-relu (conv1 x))` on a temporary nobody else holds (a scratch tensor, or a cell in
  // flight, released here and its tensor given a new cell below): in place, as the builtin's
  // in-place twin (relu_).
  if ((scratchMask | inflight) == 1 && argc == 1 && p->info->inPlace && canOverwriteTemporary(tensorOf(argv[0]))) {
    at::Tensor t;
    if (inflight) {
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
      Value result = wrapTensor(std::move(t));
      markSoleOwned(result);
      return result;
    }
  }
  if constexpr (Unboxed) {
    at::Tensor result = p->info->tensorInvoke(in, argv, int(argc), p->info);
    if (in.limits.maxTensorBytes > 0) checkTensorBudget(result);
    if (recordingTensorOrigins()) noteUnboxedTensorSite(app, result);
    if (inflight || (lent && soleOwnedCellsExist())) finishBorrowingCall(argv, argc, lent, Value::unspecified(), false);
    if (freshStrings) freeDeadStrings(argv, argc, freshStrings, Value::unspecified());
    return result;
  } else {
    Value result = p->fn(in, argv, int(argc), p->info);
    // A builtin that returns its argument (`(tensor-uniform! (tensor-empty 1))`) may return a
    // stack cell, which dies with this call: its tensor gets a cell of its own.
    for (uint32_t i = 0; scratchMask && i < argc; i++)
      if (argBit(scratchMask, i) && argv[i] == result) {
        result = wrapTensor(std::move(tensorOf(result)));
        break;
      }
    bool fresh = p->flags & kPrimReturnsFresh;
    // (Before the first sole-owned cell nothing is in flight or marked: only a fresh tensor
    // result, the first such cell, needs the call.)
    if (borrows && (soleOwnedCellsExist() || (fresh && isTensor(result))))
      finishBorrowingCall(argv, argc, lent, result, fresh);
    else if (fresh && isTensor(result) && !isOneOf(result, argv, argc)) markSoleOwned(result);
    if ((p->flags & kPrimReturnsFreshList) && isPair(result)) ownFreshList(result, argv, argc);
    if (freshStrings) freeDeadStrings(argv, argc, freshStrings, result);
    return result;
  }
}
}  // namespace

Value callPrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env) {
  return primitiveApp<false>(in, app, fn, env);
}

at::Tensor callTensorPrimitiveApp(Interp& in, AppNode* app, Value fn, Frame* env) {
  return primitiveApp<true>(in, app, fn, env);
}

}  // namespace purple
