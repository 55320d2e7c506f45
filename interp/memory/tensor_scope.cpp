#include "interp/memory/tensor_scope.hpp"
#include "interp/memory/tensor_value.hpp"
#include "interp/core/gc.hpp"
#include <atomic>
#include <unordered_set>

namespace purple {

namespace {
// Per thread: a GC root holding the open scopes, innermost first, each a list of cells.
// Every new tensor and every set! of a tensor asks whether a scope is open; the process-wide
// count answers "no" without touching thread-local storage. The thread_local keeps the default
// (dynamic) TLS model: an initial-exec one marks all of libpurple's TLS (2.5 KB) as static, and
// glibc then refuses to dlopen libpurple into a running process such as Python ("cannot
// allocate memory in static TLS block").
std::atomic<int> gOpenScopes{0};
thread_local Value* tScopes = nullptr;

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

bool tensorScopeOpen() {
  return gOpenScopes.load(std::memory_order_relaxed) != 0 && tScopes && isPair(*tScopes);
}

void noteTensorCreated(Value tensor) {
  if (!tensorScopeOpen()) return;
  Value& top = tScopes->as<Pair>()->car;
  top = cons(tensor, top);
}

void openTensorScope() {
  Value* s = scopes();
  *s = cons(Value::nil(), *s);
  gOpenScopes.fetch_add(1, std::memory_order_relaxed);
}

void closeTensorScope(Value keep) {
  Value* s = scopes();
  if (!isPair(*s)) return;
  Value cells = car(*s);
  *s = cdr(*s);
  gOpenScopes.fetch_sub(1, std::memory_order_relaxed);
  std::unordered_set<const Object*> kept;
  reachableTensors(keep, kept, 0);
  for (Value p = cells; isPair(p); p = cdr(p)) {
    Value t = car(p);
    if (kept.count(t.obj())) noteTensorCreated(t);   // survives into the enclosing scope
    else releaseTensor(t);
  }
}

}  // namespace purple
