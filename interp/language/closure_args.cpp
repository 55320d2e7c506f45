// Binding a closure's arguments to its parameters when the call is not the common case
// (exactly the required arguments, which eval.cpp binds inline): optional, keyword and rest
// parameters, defaults evaluated in the new frame, and the arity and keyword errors.
#include "interp/language/eval_internal.hpp"
#include "interp/language/printer.hpp"
#include <string>

namespace purple {

namespace {

bool isDeclaredKey(LambdaNode* l, Value v) {
  if (!isKeyword(v)) return false;
  for (uint32_t k = 0; k < l->nKeys; k++)
    if (l->keyNames[k] == v) return true;
  return false;
}

[[noreturn]] void closureArity(Value proc, int argc) {
  auto* l = proc.as<Closure>()->code;
  std::string expected = std::to_string(l->nRequired);
  if (l->hasRest) expected = "at least " + expected;
  else if (l->nOptional) expected += " to " + std::to_string(l->nRequired + l->nOptional);
  throwArityError(describeProcedure(proc), argc, expected);
}

}  // namespace

std::string describeProcedure(Value proc) {
  if (proc.is(Kind::Closure)) {
    Value n = proc.as<Closure>()->name;
    return isSymbol(n) ? std::string(symbolName(n)) : "anonymous procedure";
  }
  if (proc.is(Kind::Primitive)) return primitiveName(proc);
  return toWriteString(proc);
}

// Fills the frame of a call to closure `proc`: positional, optional, keyword and rest
// parameters, then defaults (evaluated in the new frame, so they may use earlier parameters).
uint32_t bindGeneralArgs(Interp& in, Value proc, Frame* f, const Value* argv, int argc) {
  LambdaNode* l = proc.as<Closure>()->code;
  uint32_t nreq = l->nRequired;
  if (!l->nOptional && !l->nKeys && !l->hasRest) closureArity(proc, argc);
  if (uint32_t(argc) < nreq) closureArity(proc, argc);
  for (uint32_t i = 0; i < nreq; i++) f->slots[i] = argv[i];
  int i = int(nreq);
  uint32_t slot = nreq;
  for (uint32_t k = 0; k < l->nOptional; k++, slot++) {
    if (i < argc && !isDeclaredKey(l, argv[i])) {
      // an unknown keyword followed by a value where keywords are expected: a misspelt option
      if (l->nKeys && !l->hasRest && isKeyword(argv[i]) && i + 1 < argc)
        throwError("arity-error", describeProcedure(proc) + ": unknown keyword argument " + toWriteString(argv[i]));
      f->slots[slot] = argv[i++];
    } else {
      f->slots[slot] = Value::missing();
    }
  }
  uint32_t keyBase = slot;
  for (uint32_t k = 0; k < l->nKeys; k++) f->slots[keyBase + k] = Value::missing();
  uint32_t restSlot = keyBase + l->nKeys;
  if (l->hasRest) {   // the list keeps its elements: marked shared, as a list builder's are
    for (int k = i; k < argc; k++) shareValue(argv[k]);
    f->slots[restSlot] = listFromArray(argv + i, size_t(argc - i));
  }
  if (l->nKeys) {
    for (int a = i; a < argc; a += 2) {
      Value key = argv[a];
      uint32_t k = 0;
      while (k < l->nKeys && l->keyNames[k] != key) k++;
      if (k == l->nKeys) {
        if (l->hasRest) continue;
        throwError("arity-error", describeProcedure(proc) + ": unknown keyword argument " + toWriteString(key));
      }
      if (a + 1 >= argc)
        throwError("arity-error", describeProcedure(proc) + ": keyword " + toWriteString(key) + " needs a value");
      if (!f->slots[keyBase + k].isMissing())
        throwError("arity-error", describeProcedure(proc) + ": keyword " + toWriteString(key) + " given twice");
      f->slots[keyBase + k] = argv[a + 1];
    }
  } else if (!l->hasRest && i < argc) {
    closureArity(proc, argc);
  }
  for (uint32_t s = restSlot + (l->hasRest ? 1 : 0); s < l->frameSize; s++) f->slots[s] = Value::unbound();
  uint32_t nDefaults = l->nOptional + l->nKeys;
  uint32_t defaulted = 0;
  for (uint32_t d = 0; d < nDefaults; d++) {
    Value& v = f->slots[nreq + d];
    if (!v.isMissing()) continue;
    v = l->defaults && l->defaults[d] ? in.eval(l->defaults[d], f) : Value::f();
    if (isSoleOwned(v)) {   // `:key (h (tensor-zeros 4))`: the parameter owns it
      if (nreq + d < 16) defaulted |= 1u << (nreq + d);
      else v = shareValue(v);
    }
  }
  return defaulted;
}

}  // namespace purple
