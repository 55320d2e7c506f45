// When is a let-bound tensor dead at the let's end? (let_release.hpp)
//
// The analyzer proves, for each variable of a let, that no reference to its cell can outlive the
// body's return:
//  - its init is a call of a builtin whose tensor result is a new cell (kPrimReturnsFresh), so
//    no other variable holds the same cell;
//  - every reference is an argument of a call of a global bound to a builtin that keeps no
//    reference to its argument cells (kPrimBorrowsArgs): such a builtin can return a new cell
//    sharing the tensor's storage (a view), never the cell itself;
//  - the variable is never assigned (set!) and no lambda refers to it (a closure could keep it);
//  - the body's tail positions call no closure, so evaluating the body as a non-tail call keeps
//    proper tail calls where they matter (a loop through this let would be a closure call).
// At run time the release is skipped when a global the proof used holds something else by then
// (a builtin rebound to a closure could keep its argument), and when the body returns the cell
// itself. An error leaves the tensor to the collector, as before.
#include "interp/language/let_release.hpp"
#include "interp/language/node_walk.hpp"
#include "interp/memory/tensor_value.hpp"
#include <algorithm>
#include <vector>

namespace purple {

namespace {

bool namesBorrowingBuiltin(GlobalCell* cell) {
  Value g = cell->value;
  return g.is(Kind::Primitive) && (g.obj()->flags & kPrimBorrowsArgs);
}

bool isLocalRef(Node* n) {
  Op op = n->op();
  return op == Op::Local0 || op == Op::Local1 || op == Op::LocalN || op == Op::LocalChecked;
}

// Walks a node tree looking at every use of (depth, slot): `depth` grows by one inside each
// nested lambda, whose frame sits above ours.
struct UseCheck {
  uint32_t slot;
  bool ok = true;
  std::vector<GlobalCell*> cells;

  bool refersTo(Node* n, uint32_t depth) const {
    if (!isLocalRef(n)) return false;
    auto* l = static_cast<LocalNode*>(n);
    return l->depth == depth && l->index == slot;
  }

  void walk(Node* n, uint32_t depth) {
    if (!ok) return;
    switch (n->op()) {
      case Op::Local0: case Op::Local1: case Op::LocalN: case Op::LocalChecked:
        if (refersTo(n, depth)) ok = false;   // a use other than a borrowing builtin's argument
        return;
      case Op::SetLocal: {
        auto* s = static_cast<SetLocalNode*>(n);
        if (s->depth == depth && s->index == slot) ok = false;
        break;
      }
      case Op::App: {
        auto* a = static_cast<AppNode*>(n);
        bool borrowing = depth == 0 && a->fn->op() == Op::Global &&
                         namesBorrowingBuiltin(static_cast<GlobalNode*>(a->fn)->cell);
        walk(a->fn, depth);
        for (uint32_t i = 0; i < a->argc; i++) {
          if (borrowing && refersTo(a->args[i], depth)) {
            GlobalCell* cell = static_cast<GlobalNode*>(a->fn)->cell;
            if (std::find(cells.begin(), cells.end(), cell) == cells.end()) cells.push_back(cell);
          } else {
            walk(a->args[i], depth);
          }
        }
        return;
      }
      default: break;
    }
    // Any use inside a lambda means a closure may keep the cell: its depth counts from there.
    forEachChild(n, [&](Node* child, bool inLambda) { walk(child, depth + (inLambda ? 1 : 0)); });
  }
};

// Can evaluating N as a tail call a closure? Only builtin calls, constants, variables and the
// forms that pass their tail on are sure not to.
bool tailCallsNoClosure(Node* n) {
  if (!n) return true;
  switch (n->op()) {
    case Op::Const: case Op::Global: case Op::Local0: case Op::Local1: case Op::LocalN: case Op::LocalChecked:
    case Op::Lambda: case Op::SetLocal: case Op::SetGlobal: case Op::DefineGlobal:
      return true;
    case Op::If: {
      auto* i = static_cast<IfNode*>(n);
      return tailCallsNoClosure(i->then) && tailCallsNoClosure(i->otherwise);
    }
    case Op::Seq: case Op::And: case Op::Or: {
      auto* s = static_cast<SeqNode*>(n);
      return s->count == 0 || tailCallsNoClosure(s->items[s->count - 1]);
    }
    case Op::Let:
      return tailCallsNoClosure(static_cast<LetNode*>(n)->body);
    case Op::Case: {
      auto* c = static_cast<CaseNode*>(n);
      for (uint32_t i = 0; i < c->count; i++)
        if (!tailCallsNoClosure(c->bodies[i])) return false;
      return tailCallsNoClosure(c->otherwise);
    }
    case Op::App: {
      auto* a = static_cast<AppNode*>(n);
      return a->fn->op() == Op::Global && static_cast<GlobalNode*>(a->fn)->cell->value.is(Kind::Primitive);
    }
    default:
      return false;
  }
}

}  // namespace

// The global a fresh-tensor init calls (`(tensor-randn ...)`), or nullptr.
GlobalCell* freshBuiltinCall(Node* init) {
  if (!init || init->op() != Op::App) return nullptr;
  Node* fn = static_cast<AppNode*>(init)->fn;
  if (fn->op() != Op::Global) return nullptr;
  GlobalCell* cell = static_cast<GlobalNode*>(fn)->cell;
  Value g = cell->value;
  return g.is(Kind::Primitive) && (g.obj()->flags & kPrimReturnsFresh) ? cell : nullptr;
}

void markReleasableLetSlots(LetNode* n) {
  n->releaseMask = 0;
  n->nGuardCells = 0;
  n->guardCells = nullptr;
  n->guardValues = nullptr;
  if (n->count == 0 || n->count > 32 || !tailCallsNoClosure(n->body)) return;
  std::vector<GlobalCell*> cells;
  for (uint32_t i = 0; i < n->count; i++) {
    GlobalCell* maker = freshBuiltinCall(n->inits[i]);
    if (!maker) continue;
    UseCheck check{n->slots[i], true, {}};
    for (uint32_t k = 0; k < n->count; k++) check.walk(n->inits[k], 0);   // letrec inits see the slots
    check.walk(n->body, 0);
    // A variable no builtin reads needs no release either (its value, if a fresh tensor, is
    // usually dropped by evalForEffect); only variables passed to borrowing builtins count.
    if (!check.ok || check.cells.empty()) continue;
    n->releaseMask |= 1u << i;
    check.cells.push_back(maker);
    for (GlobalCell* c : check.cells)
      if (std::find(cells.begin(), cells.end(), c) == cells.end()) cells.push_back(c);
  }
  if (!n->releaseMask) return;
  n->nGuardCells = uint32_t(cells.size());
  n->guardCells = static_cast<GlobalCell**>(gcAlloc(cells.size() * sizeof(GlobalCell*)));
  n->guardValues = static_cast<Value*>(gcAlloc(cells.size() * sizeof(Value)));
  for (size_t c = 0; c < cells.size(); c++) {
    n->guardCells[c] = cells[c];
    n->guardValues[c] = cells[c]->value;
  }
}

Value evalLetReleasing(Interp& in, LetNode* n, Frame* env) {
  Value result = in.eval(n->body, env);
  for (uint32_t c = 0; c < n->nGuardCells; c++)
    if (n->guardCells[c]->value != n->guardValues[c]) return result;
  for (uint32_t i = 0; i < n->count; i++) {
    if (!(n->releaseMask & (1u << i))) continue;
    Value v = env->slots[n->slots[i]];
    if (v != result && isTensor(v)) releaseTensor(v);
  }
  return result;
}

}  // namespace purple
