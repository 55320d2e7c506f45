// Visiting the children of a node, for the analyses that walk a node tree after the analyzer
// built it (let_release.cpp, ownership.cpp). F(child, inLambda) gets each direct child, with
// inLambda true for the defaults and body of a Lambda node: those run in a frame one level out
// from the node's own, so a LocalNode there counts its depth from that new frame. Absent
// children (an `if` without an else, a lambda parameter without a default) are skipped.
#pragma once
#include "interp/language/node.hpp"

namespace purple {

template <class F> void forEachChild(Node* n, F&& visit) {
  auto f = [&visit](Node* child, bool inLambda) {
    if (child) visit(child, inLambda);
  };
  switch (n->op()) {
    case Op::Const: case Op::Local0: case Op::Local1: case Op::LocalN: case Op::LocalChecked:
    case Op::Global: case Op::Reraise:
      return;
    case Op::SetLocal:
      f(static_cast<SetLocalNode*>(n)->value, false);
      return;
    case Op::SetGlobal: case Op::DefineGlobal:
      f(static_cast<SetGlobalNode*>(n)->value, false);
      return;
    case Op::If: {
      auto* i = static_cast<IfNode*>(n);
      f(i->test, false);
      f(i->then, false);
      f(i->otherwise, false);
      return;
    }
    case Op::Seq: case Op::And: case Op::Or: {
      auto* s = static_cast<SeqNode*>(n);
      for (uint32_t i = 0; i < s->count; i++) f(s->items[i], false);
      return;
    }
    case Op::Lambda: {
      auto* l = static_cast<LambdaNode*>(n);
      for (uint32_t i = 0; l->defaults && i < l->nOptional + l->nKeys; i++)
        f(l->defaults[i], true);
      f(l->body, true);
      return;
    }
    case Op::App: {
      auto* a = static_cast<AppNode*>(n);
      f(a->fn, false);
      for (uint32_t i = 0; i < a->argc; i++) f(a->args[i], false);
      return;
    }
    case Op::Let: {
      auto* l = static_cast<LetNode*>(n);
      for (uint32_t i = 0; i < l->count; i++) f(l->inits[i], false);
      f(l->body, false);
      return;
    }
    case Op::Case: {
      auto* c = static_cast<CaseNode*>(n);
      f(c->key, false);
      for (uint32_t i = 0; i < c->count; i++) f(c->bodies[i], false);
      f(c->otherwise, false);
      return;
    }
    case Op::Guard: {
      auto* g = static_cast<GuardNode*>(n);
      f(g->body, false);
      f(g->handler, false);
      return;
    }
  }
}

}  // namespace purple
