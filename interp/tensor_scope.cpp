#include "interp/tensor_scope.hpp"
#include "interp/tensor_value.hpp"
#include "interp/gc.hpp"
#include <unordered_set>

namespace purple {

namespace {
// Per thread: a GC root holding the open scopes, innermost first, each a list of cells.
// Initial-exec: read on every set! of a tensor; one word fits the surplus static TLS that
// glibc keeps even when an embedder dlopens libpurple.
thread_local Value* tScopes __attribute__((tls_model("initial-exec"))) = nullptr;

Value* scopes() {
  if (!tScopes) {
    tScopes = static_cast<Value*>(gcAllocRoot(sizeof(Value)));
    *tScopes = Value::nil();
  }
  return tScopes;
}

void reachableTensors(Value v, std::unordered_set<const Object*>& out, int depth) {
  if (depth > 10000 || !v.isObject()) return;
  switch (v.obj()->kind) {
    case Kind::Tensor: out.insert(v.obj()); return;
    case Kind::Pair:
      for (; isPair(v); v = cdr(v)) reachableTensors(car(v), out, depth + 1);
      reachableTensors(v, out, depth + 1);
      return;
    case Kind::Vector: {
      auto* vec = v.as<Vector>();
      for (uint32_t i = 0; i < vec->extra; i++) reachableTensors(vec->items[i], out, depth + 1);
      return;
    }
    case Kind::MultipleValues: {
      auto* m = v.as<MultipleValues>();
      for (uint32_t i = 0; i < m->extra; i++) reachableTensors(m->items[i], out, depth + 1);
      return;
    }
    default: return;
  }
}
}  // namespace

bool tensorScopeOpen() { return tScopes && isPair(*tScopes); }

void noteTensorCreated(Value tensor) {
  if (!tScopes || !isPair(*tScopes)) return;
  Value& top = tScopes->as<Pair>()->car;
  top = cons(tensor, top);
}

void openTensorScope() {
  Value* s = scopes();
  *s = cons(Value::nil(), *s);
}

void closeTensorScope(Value keep) {
  Value* s = scopes();
  if (!isPair(*s)) return;
  Value cells = car(*s);
  *s = cdr(*s);
  std::unordered_set<const Object*> kept;
  reachableTensors(keep, kept, 0);
  for (Value p = cells; isPair(p); p = cdr(p)) {
    Value t = car(p);
    if (kept.count(t.obj())) noteTensorCreated(t);   // survives into the enclosing scope
    else releaseTensor(t);
  }
}

}  // namespace purple
