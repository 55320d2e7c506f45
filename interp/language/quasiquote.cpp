// quasiquote: a template becomes calls of the originals of cons, list, append and
// list->vector (kept in the interpreter's state, immune to a user's redefinition), which the
// analyzer then compiles like any other form.
#include "interp/core/interp_state.hpp"
#include "interp/language/analyzer.hpp"
#include <array>

namespace purple {

namespace {

Value quoted(Value v) { return listFromArray(std::array<Value, 2>{intern("quote"), v}.data(), 2); }

Value list3(Value a, Value b, Value c) { return listFromArray(std::array<Value, 3>{a, b, c}.data(), 3); }

Value expand(Interp& in, Value x, int depth, const KeywordTest& isKeyword) {
  if (stackNearlyFull()) throwError("recursion-error", "quasiquote template nested too deeply");
  State& st = *in.st;
  if (x.is(Kind::Vector)) {
    auto* v = x.as<Vector>();
    Value asList = listFromArray(v->items, v->extra);
    return listFromArray(std::array<Value, 2>{st.primListToVector, expand(in, asList, depth, isKeyword)}.data(), 2);
  }
  if (!isPair(x)) return quoted(stripSyntax(x));
  Value head = car(x);
  if (isKeyword(head, "unquote") && isPair(cdr(x)) && cddr(x).isNil()) {
    if (depth == 1) return cadr(x);
    return list3(st.primList, quoted(intern("unquote")), expand(in, cadr(x), depth - 1, isKeyword));
  }
  if (isKeyword(head, "quasiquote") && isPair(cdr(x)) && cddr(x).isNil())
    return list3(st.primList, quoted(intern("quasiquote")), expand(in, cadr(x), depth + 1, isKeyword));
  if (isPair(head) && isKeyword(car(head), "unquote-splicing") && isPair(cdr(head))) {
    Value rest = expand(in, cdr(x), depth, isKeyword);
    if (depth == 1) return list3(st.primAppend, cadr(head), rest);
    Value inner = list3(st.primList, quoted(intern("unquote-splicing")), expand(in, cadr(head), depth - 1, isKeyword));
    return list3(st.primCons, inner, rest);
  }
  Value first = expand(in, head, depth, isKeyword);   // the head first, as written
  return list3(st.primCons, first, expand(in, cdr(x), depth, isKeyword));
}

}  // namespace

Value expandQuasiquote(Interp& in, Value templ, const KeywordTest& isKeyword) {
  return expand(in, templ, 1, isKeyword);
}

}  // namespace purple
