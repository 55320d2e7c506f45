// syntax-rules: pattern matching with ellipses (nested, in the middle of lists, in vectors),
// literals, `_`, custom ellipsis and (... ...) escapes. Hygiene: every identifier a template
// introduces is renamed to a fresh alias per expansion; the analyzer resolves an alias in the
// scope where the macro was defined, unless the expansion itself binds it.
#include "interp/language/analyzer.hpp"
#include "interp/language/equality.hpp"
#include "interp/language/printer.hpp"
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace purple {

namespace {

struct Match {
  bool sequence = false;
  Value value;
  std::vector<Match> items;
};

using Bindings = std::map<uintptr_t, Match>;   // pattern variable (by identity) -> match

// Pairs along the cdrs of x, or SIZE_MAX when they come back in a cycle.
size_t pairCount(Value x) {
  if (isCircularList(x)) return SIZE_MAX;
  size_t n = 0;
  for (; isPair(x); x = cdr(x)) n++;
  return n;
}

// Patterns and templates are walked recursively: a deeply nested (or cyclic) one ends in a
// Purple error, not a crash.
void checkNesting() {
  if (stackNearlyFull()) throwError("recursion-error", "syntax-rules: pattern or template nested too deeply");
}

struct Expander {
  Value ellipsis;
  Value literals;
  Scope* defScope;
  void* defSpace = nullptr;   // the macro's namespace: its free identifiers mean what they mean there
  Value macroName;
  Value form;
  std::vector<std::pair<Value, Value>, traceable_allocator<std::pair<Value, Value>>> renames;

  [[noreturn]] void fail(const std::string& msg) {
    throwError("syntax-error", toWriteString(macroName) + ": " + msg, listFromArray(&form, 1));
  }

  bool ellipsisIsLiteral = false;   // (syntax-rules ... (...) ...): no ellipsis at all

  bool isEllipsis(Value x) const {
    if (ellipsisIsLiteral) return false;
    return isIdentifier(x) && (x == ellipsis || baseSymbol(x) == baseSymbol(ellipsis));
  }
  bool isLiteral(Value x) const {
    for (Value p = literals; isPair(p); p = cdr(p))
      if (car(p) == x || baseSymbol(car(p)) == baseSymbol(x)) return true;
    return false;
  }

  void patternVars(Value pat, std::vector<Value>& out) const {
    checkNesting();
    if (isIdentifier(pat)) {
      if (!isEllipsis(pat) && !isLiteral(pat) && baseSymbol(pat) != intern("_")) out.push_back(pat);
    } else if (isPair(pat)) {
      patternVars(car(pat), out);
      patternVars(cdr(pat), out);
    } else if (pat.is(Kind::Vector)) {
      auto* v = pat.as<Vector>();
      for (uint32_t i = 0; i < v->extra; i++) patternVars(v->items[i], out);
    }
  }

  static Value vectorToList(Value v) {
    auto* vec = v.as<Vector>();
    return listFromArray(vec->items, vec->extra);
  }

  bool match(Value pat, Value x, Bindings& b) {
    checkNesting();
    if (isIdentifier(pat)) {
      if (isLiteral(pat)) return isIdentifier(x) && baseSymbol(x) == baseSymbol(pat);
      if (baseSymbol(pat) == intern("_")) return true;
      Match m;
      m.value = x;
      b[pat.bits] = std::move(m);
      return true;
    }
    if (isPair(pat)) {
      if (isPair(cdr(pat)) && isEllipsis(cadr(pat))) {
        Value rest = cddr(pat);
        size_t minRest = pairCount(rest);
        if (minRest == SIZE_MAX) fail("circular pattern");
        size_t available = pairCount(x);
        if (available == SIZE_MAX || available < minRest) return false;
        size_t k = available - minRest;
        std::vector<Value> vars;
        patternVars(car(pat), vars);
        std::vector<Match> seqs(vars.size());
        for (auto& s : seqs) s.sequence = true;
        Value p = x;
        for (size_t i = 0; i < k; i++, p = cdr(p)) {
          Bindings sub;
          if (!match(car(pat), car(p), sub)) return false;
          for (size_t v = 0; v < vars.size(); v++) seqs[v].items.push_back(std::move(sub[vars[v].bits]));
        }
        for (size_t v = 0; v < vars.size(); v++) b[vars[v].bits] = std::move(seqs[v]);
        return match(rest, p, b);
      }
      if (!isPair(x)) return false;
      return match(car(pat), car(x), b) && match(cdr(pat), cdr(x), b);
    }
    if (pat.isNil()) return x.isNil();
    if (pat.is(Kind::Vector)) return x.is(Kind::Vector) && match(vectorToList(pat), vectorToList(x), b);
    return equalValues(pat, x);
  }

  Value rename(Value id) {
    for (auto& r : renames)
      if (r.first == id) return r.second;
    auto* a = allocObject<Alias>(Kind::Alias);
    a->symbol = id;
    a->scope = defScope;
    a->space = defSpace;
    renames.push_back({id, Value(a)});
    return Value(a);
  }

  // Variables of `tmpl` bound to sequences at this level: they drive an ellipsis.
  void sequenceVars(Value tmpl, const Bindings& b, std::vector<Value>& out) const {
    checkNesting();
    if (isIdentifier(tmpl)) {
      auto it = b.find(tmpl.bits);
      if (it != b.end() && it->second.sequence) {
        for (Value v : out)
          if (v == tmpl) return;
        out.push_back(tmpl);
      }
    } else if (isPair(tmpl)) {
      sequenceVars(car(tmpl), b, out);
      sequenceVars(cdr(tmpl), b, out);
    } else if (tmpl.is(Kind::Vector)) {
      auto* v = tmpl.as<Vector>();
      for (uint32_t i = 0; i < v->extra; i++) sequenceVars(v->items[i], b, out);
    }
  }

  // Instantiates `sub` once per element of the sequences it uses, `depth` ellipses deep.
  void expandEllipsis(Value sub, const Bindings& b, int depth, std::vector<Value, traceable_allocator<Value>>& out) {
    std::vector<Value> vars;
    sequenceVars(sub, b, vars);
    if (vars.empty()) fail("no pattern variable before ... in template");
    size_t n = SIZE_MAX;
    for (Value v : vars) {
      size_t len = b.at(v.bits).items.size();
      if (n == SIZE_MAX) n = len;
      else if (len != n) fail("pattern variables under the same ... matched different lengths");
    }
    for (size_t i = 0; i < n; i++) {
      Bindings inner = b;
      for (Value v : vars) inner[v.bits] = b.at(v.bits).items[i];
      if (depth > 1) expandEllipsis(sub, inner, depth - 1, out);
      else out.push_back(instantiate(sub, inner, false));
    }
  }

  Value instantiate(Value t, const Bindings& b, bool escaped) {
    checkNesting();
    if (isIdentifier(t)) {
      auto it = b.find(t.bits);
      if (it != b.end()) {
        if (it->second.sequence) fail("pattern variable " + toWriteString(baseSymbol(t)) + " used without ...");
        return it->second.value;
      }
      return rename(t);
    }
    if (isPair(t)) {
      if (!escaped && isEllipsis(car(t)) && isPair(cdr(t))) return instantiate(cadr(t), b, true);
      if (!escaped && isPair(cdr(t)) && isEllipsis(cadr(t))) {
        int depth = 1;
        Value rest = cddr(t);
        while (isPair(rest) && isEllipsis(car(rest))) {
          if (++depth > 1000) fail("too many ellipses in a row (or a circular template)");
          rest = cdr(rest);
        }
        std::vector<Value, traceable_allocator<Value>> items;
        expandEllipsis(car(t), b, depth, items);
        Value tail = instantiate(rest, b, escaped);
        return listFromArray(items.data(), items.size(), tail);
      }
      Value a = instantiate(car(t), b, escaped);
      Value d = instantiate(cdr(t), b, escaped);
      return cons(a, d);
    }
    if (t.is(Kind::Vector)) {
      Value l = instantiate(vectorToList(t), b, escaped);
      size_t n = listLength(l);
      Value v = makeVector(n);
      size_t i = 0;
      for (Value p = l; isPair(p); p = cdr(p)) v.as<Vector>()->items[i++] = car(p);
      return v;
    }
    return t;
  }
};

}  // namespace

Value expandSyntaxRules(Value spec, Value form, Scope* defScope, void* defSpace, Value macroName) {
  Expander e;
  e.defScope = defScope;
  e.defSpace = defSpace;
  e.macroName = macroName;
  e.form = form;
  e.ellipsis = intern("...");
  Value rest = cdr(spec);
  if (isPair(rest) && isIdentifier(car(rest))) {
    e.ellipsis = car(rest);
    rest = cdr(rest);
  }
  if (!isPair(rest) || !isList(car(rest))) e.fail("bad syntax-rules: expected a literals list");
  if (!isList(cdr(rest))) e.fail("bad syntax-rules: the rules must form a list");
  e.literals = car(rest);
  for (Value p = e.literals; isPair(p); p = cdr(p))
    if (baseSymbol(car(p)) == baseSymbol(e.ellipsis)) e.ellipsisIsLiteral = true;
  for (Value rules = cdr(rest); isPair(rules); rules = cdr(rules)) {
    Value rule = car(rules);
    if (!isPair(rule) || !isPair(cdr(rule)) || !isPair(car(rule))) e.fail("bad syntax-rules rule");
    Bindings b;
    if (e.match(cdr(car(rule)), cdr(form), b)) return e.instantiate(cadr(rule), b, false);
  }
  e.fail("no syntax-rules pattern matches");   // the form follows, as the irritant
}

// ---- aliases: the identifiers an expansion renames, and macros ----

namespace {

inline bool isContainer(Value v) { return isPair(v) || v.is(Kind::Vector); }

using ValueStack = std::vector<Value, traceable_allocator<Value>>;

inline void pushChildren(Value v, ValueStack& stack) {
  if (isPair(v)) {
    stack.push_back(cdr(v));
    stack.push_back(car(v));
  } else {
    auto* vec = v.as<Vector>();
    for (uint32_t i = vec->extra; i-- > 0;) stack.push_back(vec->items[i]);
  }
}

// Whether an alias is reachable from x. Quoted data may be cyclic ('#0=(1 . #0#)) or a
// million elements long, so the walk keeps its own stack; past a few thousand objects it also
// remembers what it has seen, so that a cycle ends it.
bool containsAlias(Value x) {
  ValueStack stack{x};
  std::unordered_set<const Object*> seen;
  size_t visits = 0;
  constexpr size_t kUntracked = 4096;   // small data: no set needed
  while (!stack.empty()) {
    Value v = stack.back();
    stack.pop_back();
    if (v.is(Kind::Alias)) return true;
    if (!isContainer(v)) continue;
    if (++visits > kUntracked && !seen.insert(v.obj()).second) continue;
    pushChildren(v, stack);
  }
  return false;
}

// A copy of the pairs and vectors reachable from x with every alias replaced by its symbol;
// sharing and cycles are kept (each object is copied once).
Value copyWithoutAliases(Value x) {
  std::unordered_map<const Object*, Value> copies;
  ValueStack originals, made, stack{x};
  while (!stack.empty()) {
    Value v = stack.back();
    stack.pop_back();
    if (!isContainer(v) || copies.count(v.obj())) continue;
    Value c = isPair(v) ? cons(Value::nil(), Value::nil()) : makeVector(v.as<Vector>()->extra);
    copies.emplace(v.obj(), c);
    originals.push_back(v);
    made.push_back(c);
    pushChildren(v, stack);
  }
  auto image = [&](Value v) {
    if (v.is(Kind::Alias)) return baseSymbol(v);
    return isContainer(v) ? copies.at(v.obj()) : v;
  };
  for (size_t i = 0; i < originals.size(); i++) {
    Value o = originals[i], c = made[i];
    if (isPair(o)) {
      c.as<Pair>()->car = image(car(o));
      c.as<Pair>()->cdr = image(cdr(o));
    } else {
      auto* from = o.as<Vector>();
      for (uint32_t k = 0; k < from->extra; k++) c.as<Vector>()->items[k] = image(from->items[k]);
    }
  }
  return image(x);
}

}  // namespace

Value stripSyntax(Value x) {
  if (x.is(Kind::Alias)) return baseSymbol(x);
  if (!isContainer(x) || !containsAlias(x)) return x;
  return copyWithoutAliases(x);
}

Value baseSymbol(Value id) {
  while (id.is(Kind::Alias)) id = id.as<Alias>()->symbol;
  return id;
}

Value makeMacro(Value transformer, Scope* scope, void* space, Value name, bool procedural) {
  auto* m = static_cast<Macro*>(gcAlloc(sizeof(Macro)));
  m->kind = Kind::Macro;
  m->flags = procedural ? 1 : 0;
  m->small = 0;
  m->extra = 0;
  m->transformer = transformer;
  m->scope = scope;
  m->name = name;
  m->space = space;
  return Value(m);
}

}  // namespace purple
