// Who owns a tensor cell, so that it is freed when its last reference dies, as reference
// counting would free it, and not at the next collection.
//
// A cell marked sole-owned (kTensorSoleOwner, value.hpp) has exactly one owner: a variable (a
// frame slot or a global cell), or the evaluator while the cell is in flight (a call's result on
// its way to the code that uses it). Besides its owner, only borrowers may refer to it: a call in
// progress that was given the cell read from its owner's variable without marking it shared. A
// borrower cannot keep the cell: everything that could (storing it, capturing it, returning it,
// passing it to a builtin that keeps its arguments, C++ that is not the evaluator) reads it
// through a path that marks it shared first (shareValue), and a shared cell is left to the
// collector for good. So when an owner dies, the cell dies with it:
//  - a frame slot owns the cell when its bit in Frame::small is set; the frame's death (its call
//    returns, or a tail call replaces it) frees the cells its ownable slots own, except the
//    result, which passes to the caller; a slot overwritten by set! frees the cell it owned;
//  - a cell in flight is freed when a builtin or module that borrows it returns, or when its value
//    is dropped; given to a closure, it becomes owned by the parameter.
// What makes a borrow safe is decided when the code is analyzed (analyzeOwnership): the slots no
// closure can reach (LambdaNode::ownableSlots), and which arguments of a call may be lent
// (AppNode::borrowArgMask). Nothing is proven about the procedures called: a redefined procedure
// is judged by what it does when it runs. docs/language.md ("When is a tensor freed?") tells it
// as users meet it.
#pragma once
#include "interp/core/interp.hpp"
#include "interp/language/node.hpp"
#include "interp/memory/tensor_value.hpp"

namespace purple {

// Only the first 16 slots of a frame can own a cell (Frame::small holds their bits).
constexpr uint32_t kOwnerSlots = 16;
inline uint32_t ownerBit(uint32_t slot) { return slot < kOwnerSlots ? 1u << slot : 0; }

// Analysis, run once a lambda has been analyzed: sets its ownableSlots, and the borrowArgMask of
// the calls that run in its frame (its body and parameter defaults, not the lambdas inside).
void analyzeOwnership(LambdaNode* lambda);
// The same for a top-level form, whose frame has FRAMESIZE slots and no LambdaNode: returns the
// frame's ownable slots.
uint16_t analyzeToplevelOwnership(Node* form, uint32_t frameSize);

// SetLocalNode::flags: the assignment runs while a call in progress may hold what the variable
// owned (an earlier argument of an enclosing call read the variable: `(f (car b) (begin (set!
// b x) 0))`): the old value is marked shared rather than freed.
constexpr uint8_t kSetLocalKeepsOld = 1;

// ---- at run time ----

// Frees what V, sole-owned (isSoleOwned), owns: its tensor, or the tensors a list owns, except
// those among KEEP[0..NKEEP), which stay alive, sole-owned and in flight: the value a dying
// frame returns, the arguments a tail call passes on, a builtin's result.
void releaseOwned(Value v, const Value* keep = nullptr, uint32_t nkeep = 0);

// The frame F dies (its call returns RESULT): what its ownable slots (Frame::extra) own is freed,
// except RESULT, which stays sole-owned, in flight to the caller. Out of line: the evaluator's
// returns test F->small first, which is zero in code without tensors.
void finishOwnedFrame(Frame* f, Value result);

// The frame OLD dies because a tail call binds the values NEXT: a cell an ownable slot of OLD
// owned and NEXT passes on once moves to the new frame (its bit in the result), one passed on
// twice becomes shared, the others are freed.
uint32_t retireOwnedFrame(Frame* old, Value* next, uint32_t argc);

// Stores V, a value in flight, in slot S of frame F: a sole-owned value becomes the slot's (or
// shared, past the slots that can own), any other is marked shared (a list's tensor read with
// car: the slot keeps it beyond the list), and what the slot owned before is freed, or marked
// shared when the assignment cannot know that nothing holds it (KEEPOLD: kSetLocalKeepsOld).
inline void storeInFlight(Frame* f, uint32_t s, Value v, bool keepOld = false) {
  if (!soleOwnedCellsExist()) {   // nothing is owned yet: a plain store
    f->slots[s] = v;
    return;
  }
  Value old = f->slots[s];
  uint32_t bit = ownerBit(s);
  if ((f->small & bit) && old != v && isSoleOwned(old)) {
    if (keepOld) shareValue(old);
    else releaseOwned(old, &v, 1);
  }
  if (isSoleOwned(v)) {
    if (bit) f->small = uint16_t(f->small | bit);
    else shareValue(v);
  } else {
    shareValue(v);
    f->small = uint16_t(f->small & ~bit);
  }
  f->slots[s] = v;
}

// The arguments ARGV[0..ARGC) of a closure call that are cells in flight: sole-owned, and not
// lent (bits of LENT) unless the frame that owned them died and passed them on (MOVED). One past
// the 32 a mask holds becomes shared.
inline uint32_t inFlightArguments(Value* argv, uint32_t argc, uint32_t lent, uint32_t moved) {
  if (!soleOwnedCellsExist()) return 0;
  uint32_t bits = 0;
  for (uint32_t i = 0; i < argc; i++) {
    Value v = argv[i];
    if (!isSoleOwned(v)) continue;
    if (i >= 32) {
      shareValue(v);
      continue;
    }
    if (((lent >> i) & 1) && !((moved >> i) & 1)) continue;
    bits |= 1u << i;
  }
  return bits;
}

// A builtin or a module that keeps none of its arguments returned RESULT on ARGV, of which LENT
// were read from variables without marking them shared: the values in flight among the others
// are dead now, unless returned; a lent value returned is marked shared (its owner still holds
// it). A fresh tensor result (FRESH: the callee says so) becomes sole-owned.
void finishBorrowingCall(Value* argv, uint32_t argc, uint32_t lent, Value result, bool fresh);

// RESULT, a new list a builtin made whose tensors nobody else holds (kPrimReturnsFreshList, a
// layer's (h c)), becomes a sole-owned list owning them, except tensors that are among ARGV (the
// builtin's arguments, which others may hold).
void ownFreshList(Value result, const Value* argv, uint32_t argc);

// `list` called by the evaluator on ARGV (kPrimMakesList): the tensors in flight among them are
// given to the new list, which owns them and is itself in flight; the rest are marked shared.
Value makeOwningList(Value* argv, uint32_t argc);

// Before a call of a builtin that may keep its arguments: a cell in flight among ARGV becomes
// shared, as the builtin may store it.
inline void shareArguments(Value* argv, uint32_t argc) {
  if (!soleOwnedCellsExist()) return;   // (no value has a mark before the first sole-owned cell)
  for (uint32_t i = 0; i < argc; i++) argv[i] = shareValue(argv[i]);
}

// For builtins that call a procedure and own what it returns (for-each, fold): a call whose
// result is dropped frees it when it is a cell in flight ...
inline void applyForEffect(Interp& in, Value proc, const Value* argv, int argc) {
  Value r = in.applyOwning(proc, argv, argc);
  if (isSoleOwned(r)) releaseOwned(r);
}
// ... and a call whose result replaces ACC, the result of the previous step (passed in ARGV, and
// so borrowed by PROC), frees ACC when the builtin owns it (OWNSACC: not its caller's initial
// value, which may be lent) and it was a value in flight still (fold's accumulator). OWNSACC is
// true after the first step.
inline Value applyReplacing(Interp& in, Value proc, const Value* argv, int argc, Value acc, bool& ownsAcc) {
  Value r = in.applyOwning(proc, argv, argc);
  if (ownsAcc && r != acc && isSoleOwned(acc)) releaseOwned(acc, &r, 1);
  ownsAcc = true;
  return r;
}

}  // namespace purple
