// Ownership of tensor cells: the analysis that says which slots can own and which arguments can
// be lent, and the steps the evaluator takes when an owner dies (ownership.hpp).
#include "interp/language/ownership.hpp"
#include "interp/language/node_walk.hpp"

namespace purple {

namespace {

// What the code of one frame does with the frame's slots (the first 32).
struct SlotUses {
  uint32_t captured = 0;   // referred to, or assigned, inside a lambda made in the frame
  uint32_t assigned = 0;   // assigned (set!, an internal define) by the frame's own code
};

inline uint32_t slotBit(uint32_t slot) { return slot < 32 ? 1u << slot : 0; }

// LEVEL: how many lambdas lie between N and the frame. A variable node counts its depth from
// where it runs, so one at depth LEVEL names a slot of the frame.
void scanSlotUses(Node* n, uint32_t level, SlotUses& u) {
  switch (n->op()) {
    case Op::Local0: case Op::Local1: case Op::LocalN: case Op::LocalChecked: {
      auto* l = static_cast<LocalNode*>(n);
      if (level > 0 && l->depth == level) u.captured |= slotBit(l->index);
      return;
    }
    case Op::SetLocal: {
      auto* s = static_cast<SetLocalNode*>(n);
      if (s->depth == level) (level > 0 ? u.captured : u.assigned) |= slotBit(s->index);
      break;
    }
    default: break;
  }
  forEachChild(n, [&](Node* child, bool inLambda) { scanSlotUses(child, level + (inLambda ? 1 : 0), u); });
}

// Does N, run in the frame, assign slot SLOT? (A lambda inside cannot: SLOT is ownable.)
bool assignsSlot(Node* n, uint32_t slot) {
  if (n->op() == Op::Lambda) return false;
  if (n->op() == Op::SetLocal) {
    auto* s = static_cast<SetLocalNode*>(n);
    if (s->depth == 0 && s->index == slot) return true;
  }
  bool found = false;
  forEachChild(n, [&](Node* child, bool) { found = found || assignsSlot(child, slot); });
  return found;
}

// An argument may be lent when it is a variable of this frame in an ownable slot, and no other
// part of the call assigns that variable: an assignment frees the cell the slot owned, while the
// call still holds it in its arguments (`(f a (begin (set! a b) 0))`).
uint32_t lendableArguments(AppNode* a, uint16_t ownable, uint32_t assigned) {
  uint32_t mask = 0;
  for (uint32_t i = 0; i < a->argc && i < 32; i++) {
    Node* x = a->args[i];
    if (x->op() != Op::Local0) continue;
    uint32_t slot = static_cast<LocalNode*>(x)->index;
    if (slot >= kOwnerSlots || !((ownable >> slot) & 1)) continue;
    bool ok = true;
    if (assigned & slotBit(slot)) {
      ok = !assignsSlot(a->fn, slot);
      for (uint32_t j = 0; ok && j < a->argc; j++) ok = j == i || !assignsSlot(a->args[j], slot);
    }
    if (ok) mask |= 1u << i;
  }
  return mask;
}

void markLendableArguments(Node* n, uint16_t ownable, uint32_t assigned) {
  if (n->op() == Op::Lambda) return;   // its calls run in its own frame, marked when it was analyzed
  if (n->op() == Op::App) {
    auto* a = static_cast<AppNode*>(n);
    a->borrowArgMask = lendableArguments(a, ownable, assigned);
  }
  forEachChild(n, [&](Node* child, bool) { markLendableArguments(child, ownable, assigned); });
}

// The frame's variables (the first 32) that N reads, outside the lambdas in it.
uint32_t slotsRead(Node* n) {
  if (n->op() == Op::Lambda) return 0;
  if (n->op() == Op::Local0) return slotBit(static_cast<LocalNode*>(n)->index);
  uint32_t read = 0;
  forEachChild(n, [&](Node* child, bool) { read |= slotsRead(child); });
  return read;
}

// Marks the assignments that run while an earlier argument of an enclosing call, already
// evaluated and held in that call's arguments, read the variable (HELD): what the variable owns
// may be in those arguments (the variable's tensor, or a tensor of a list it owns), so the
// assignment must not free it (kSetLocalKeepsOld).
void markHeldAssignments(Node* n, uint32_t held) {
  switch (n->op()) {
    case Op::Lambda: return;
    case Op::SetLocal: {
      auto* s = static_cast<SetLocalNode*>(n);
      if (s->depth == 0 && (held & slotBit(s->index))) s->flags |= kSetLocalKeepsOld;
      break;
    }
    case Op::App: {
      auto* a = static_cast<AppNode*>(n);
      markHeldAssignments(a->fn, held);
      uint32_t seen = held | slotsRead(a->fn);
      for (uint32_t i = 0; i < a->argc; i++) {
        markHeldAssignments(a->args[i], seen);
        if (i + 1 < a->argc) seen |= slotsRead(a->args[i]);
      }
      return;
    }
    default: break;
  }
  forEachChild(n, [&](Node* child, bool) { markHeldAssignments(child, held); });
}

uint16_t ownableOf(const SlotUses& u, uint32_t frameSize) {
  uint32_t slots = frameSize < kOwnerSlots ? (1u << frameSize) - 1 : (1u << kOwnerSlots) - 1;
  return uint16_t(slots & ~u.captured);
}

}  // namespace

void analyzeOwnership(LambdaNode* lambda) {
  SlotUses u;
  forEachChild(lambda, [&](Node* child, bool) { scanSlotUses(child, 0, u); });
  lambda->ownableSlots = ownableOf(u, lambda->frameSize);
  forEachChild(lambda, [&](Node* child, bool) {
    markLendableArguments(child, lambda->ownableSlots, u.assigned);
    if (u.assigned) markHeldAssignments(child, 0);
  });
}

uint16_t analyzeToplevelOwnership(Node* form, uint32_t frameSize) {
  SlotUses u;
  scanSlotUses(form, 0, u);
  uint16_t ownable = ownableOf(u, frameSize);
  markLendableArguments(form, ownable, u.assigned);
  if (u.assigned) markHeldAssignments(form, 0);
  return ownable;
}

namespace {
uint32_t timesIn(Value v, const Value* values, uint32_t n) {
  uint32_t times = 0;
  for (uint32_t i = 0; i < n; i++) times += values[i] == v;
  return times;
}
}  // namespace

void releaseOwned(Value v, const Value* keep, uint32_t nkeep) {
  if (v.obj()->kind == Kind::Tensor) {
    releaseTensor(v);
    return;
  }
  for (Value p = v; isPair(p) && (p.obj()->flags & (kListSoleOwner | kListPair)); p = cdr(p)) {
    p.obj()->flags = 0;
    Value x = car(p);
    if (!x.isObject() || x.obj()->kind != Kind::Tensor || x.obj()->flags != kTensorHeldByList) continue;
    uint32_t kept = keep ? timesIn(x, keep, nkeep) : 0;
    if (kept == 0) releaseTensor(x);
    else x.obj()->flags = kept == 1 ? kTensorSoleOwner : 0;   // passed on: one owner, or shared
  }
}

namespace {
// Marks the proper list L a sole-owned list, owning the tensors already marked kTensorHeldByList.
void markOwningList(Value l) {
  markSoleOwned(l);   // (sets the mark on the first pair, as on a tensor cell)
  for (Value p = cdr(l); isPair(p); p = cdr(p)) p.obj()->flags = kListPair;
}
}  // namespace

void ownFreshList(Value result, const Value* argv, uint32_t argc) {
  if (!isPair(result) || result.obj()->flags || timesIn(result, argv, argc)) return;   // (not new)
  constexpr uint32_t kMostElements = 1u << 16;
  bool owns = false;
  uint32_t n = 0;
  Value p = result;
  for (; isPair(p) && n < kMostElements; p = cdr(p), n++) {
    Value x = car(p);
    if (isPair(x) && x.obj()->flags) return;   // a list inside another's: not new
    if (x.isObject() && x.obj()->kind == Kind::Tensor && x.obj()->flags == 0 && !timesIn(x, argv, argc)) owns = true;
  }
  if (!p.isNil() || !owns) return;   // improper, very long, or nothing to own
  for (p = result; isPair(p); p = cdr(p)) {
    Value x = car(p);
    if (x.isObject() && x.obj()->kind == Kind::Tensor && x.obj()->flags == 0 && !timesIn(x, argv, argc))
      x.obj()->flags = kTensorHeldByList;
  }
  markOwningList(result);
}

Value makeOwningList(Value* argv, uint32_t argc) {
  bool owns = false;
  for (uint32_t i = 0; i < argc; i++) {
    if (isSoleOwnedTensor(argv[i])) {
      argv[i].obj()->flags = kTensorHeldByList;
      owns = true;
    } else {
      shareValue(argv[i]);
    }
  }
  Value l = listFromArray(argv, argc);
  if (owns) markOwningList(l);
  return l;
}

void finishOwnedFrame(Frame* f, Value result) {
  uint32_t bits = f->small & f->extra;
  if (!bits) return;
  f->small = uint16_t(f->small & ~f->extra);
  do {
    uint32_t s = uint32_t(__builtin_ctz(bits));
    bits &= bits - 1;
    Value v = f->slots[s];
    if (v != result && isSoleOwned(v)) releaseOwned(v, &result, 1);
  } while (bits);
}

uint32_t retireOwnedFrame(Frame* old, Value* next, uint32_t argc) {
  uint32_t bits = old->small & old->extra;
  old->small = uint16_t(old->small & ~old->extra);
  uint32_t moved = 0;
  while (bits) {
    uint32_t s = uint32_t(__builtin_ctz(bits));
    bits &= bits - 1;
    Value v = old->slots[s];
    if (!isSoleOwned(v)) continue;
    uint32_t passed = 0, times = 0;
    for (uint32_t j = 0; j < argc; j++)
      if (next[j] == v) {
        passed |= j < 32 ? 1u << j : 0;
        times++;
      }
    if (times == 0) releaseOwned(v, next, argc);   // (a list's tensor passed on stays)
    else if (times == 1 && passed) moved |= passed;
    else shareValue(v);   // two parameters would both own it
  }
  return moved;
}

void finishBorrowingCall(Value* argv, uint32_t argc, uint32_t lent, Value result, bool fresh) {
  bool returnsArgument = false;
  for (uint32_t i = 0; i < argc; i++) {
    Value v = argv[i];
    bool wasLent = i < 32 && ((lent >> i) & 1);
    if (v == result) {
      returnsArgument = true;
      if (wasLent) result = shareValue(result);   // its variable still holds it
      continue;
    }
    if (!wasLent && isSoleOwned(v)) releaseOwned(v, &result, 1);   // (car of a list in flight: kept)
  }
  if (fresh && !returnsArgument && isTensor(result) && result.obj()->flags == 0) markSoleOwned(result);
}

}  // namespace purple
