// Control: apply, map, for-each, values, call/cc (escaping), dynamic-wind, exceptions, eval,
// parameters, promises, case-lambda.
#include "builtins/builtins.hpp"
#include "interp/language/ownership.hpp"
#include "builtins/core/checks.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/language/node.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_scope.hpp"
#include <gc/gc_allocator.h>

namespace purple {

using data::ListBuilder;

namespace {

using ValueVec = std::vector<Value, traceable_allocator<Value>>;

struct HandlerRestore {
  State* st;
  Value saved;
  ~HandlerRestore() { st->handlers = saved; }
};

// apply keeps none of its arguments (it is kPrimBorrowsArgs): a closure's parameters borrow
// them, a builtin gets them as any call gives them (applyOwning), and anything else that may keep
// them (a module with hooks, a continuation) gets them marked shared. Its result may be a value
// in flight, which the evaluator takes on (interp/language/ownership.hpp).
Value applyPrim(Interp& in, Value* a, int n, PrimitiveInfo* info) {
  checkArity(info, n);
  ValueVec args(a + 1, a + n - 1);
  Value last = a[n - 1];
  if (!isList(last)) throwTypeError("apply", n, "a list", last);
  for (Value p = last; isPair(p); p = cdr(p)) args.push_back(car(p));
  Value proc = a[0];
  if (!proc.is(Kind::Closure) && !proc.is(Kind::CaseLambda) && !proc.is(Kind::Primitive))
    for (Value& v : args) shareValue(v);
  return in.applyOwning(proc, args.data(), int(args.size()));
}

// Required argument count of a procedure, or -1 when unknown.
int requiredArity(Value fn) {
  if (fn.is(Kind::Closure)) {
    LambdaNode* l = fn.as<Closure>()->code;
    return l->hasRest || l->nOptional || l->nKeys ? -1 : int(l->nRequired);
  }
  if (fn.is(Kind::Primitive)) {
    PrimitiveInfo* info = fn.as<Primitive>()->info;
    return info->hasRest || info->nOptional || info->nKeys ? -1 : info->nRequired;
  }
  return -1;
}

// map / for-each over something that is not a list (a data loader, a stream ...): the
// global procedure %iterator turns it into a thunk that yields items until the eof object.
// A procedure of two arguments receives a two-element item (inputs and targets) spread out.
Value mapIterable(Interp& in, Value fn, Value collection, PrimitiveInfo* info, bool collect) {
  Value iteratorMaker = in.lookupGlobal("%iterator");
  if (iteratorMaker.isUnbound()) throwTypeError(info->name, 2, "a list", collection);
  Value next = in.apply(iteratorMaker, &collection, 1);
  bool spread = requiredArity(fn) == 2;
  ListBuilder results;
  while (true) {
    // A batch from a data loader comes as a new list owning its tensors (ownership.hpp): FN
    // borrows it, or the tensors spread from it, and it dies when FN returns, as Python's loop
    // variable lets a batch go when the next one comes.
    Value item = in.applyOwning(next, nullptr, 0);
    if (item.isEof()) break;
    Value args[2] = {item, Value::unspecified()};
    int argc = 1;
    if (spread && isPair(item) && isPair(cdr(item)) && cddr(item).isNil()) {
      args[0] = car(item);
      args[1] = cadr(item);
      argc = 2;
    }
    if (collect) results.add(in.apply(fn, args, argc));
    else applyForEffect(in, fn, args, argc);
    if (isSoleOwned(item)) releaseOwned(item);
  }
  return collect ? results.head : Value::unspecified();
}

// map and for-each over one or more lists; stops at the shortest (SRFI-1).
Value mapLike(Interp& in, Value* a, int n, PrimitiveInfo* info, bool collect) {
  checkArity(info, n);
  Value fn = a[0];
  if (!isProcedure(fn)) throwTypeError(info->name, 1, "a procedure", fn);
  if (n == 2 && !isPair(a[1]) && !a[1].isNil()) return mapIterable(in, fn, a[1], info, collect);
  if (n == 2) {
    ListBuilder results;
    for (Value p = a[1]; isPair(p); p = cdr(p)) {
      Value x = car(p);
      if (collect) results.add(in.apply(fn, &x, 1));
      else applyForEffect(in, fn, &x, 1);
    }
    return collect ? results.head : Value::unspecified();
  }
  ValueVec lists(a + 1, a + n);
  ValueVec args(size_t(n - 1));
  ListBuilder results;
  while (true) {
    for (size_t i = 0; i < lists.size(); i++) {
      if (!isPair(lists[i])) return collect ? results.head : Value::unspecified();
      args[i] = car(lists[i]);
      lists[i] = cdr(lists[i]);
    }
    if (collect) results.add(in.apply(fn, args.data(), int(args.size())));
    else applyForEffect(in, fn, args.data(), int(args.size()));
  }
}

Value errorObjectField(Value e, int which) {
  if (!e.is(Kind::ErrorObject)) return which == 0 ? makeString("") : Value::nil();
  auto* err = e.as<ErrorObject>();
  return which == 0 ? err->message : err->irritants;
}

bool errorKindIs(Value e, const char* kind) {
  return e.is(Kind::ErrorObject) && e.as<ErrorObject>()->errorKind == intern(kind);
}

Value makeParameter(Interp& in, Value value, Value converter) {
  auto* p = allocObject<Parameter>(Kind::Parameter);
  p->converter = converter;
  p->value = converter.isFalse() ? value : in.apply(converter, &value, 1);
  return Value(p);
}

Value makePromise(Value value, bool forced, bool lazy) {
  auto* p = static_cast<Promise*>(gcAlloc(sizeof(Promise)));
  p->kind = Kind::Promise;
  p->flags = forced ? 1 : 0;
  p->small = 0;
  p->extra = 0;
  p->value = value;
  p->isStream = Value::boolean(lazy);
  return Value(p);
}

// R7RS force with delay-force chains iteratively (constant space for lazy streams).
Value force(Interp& in, Value v) {
  if (!v.is(Kind::Promise)) return v;
  auto* p = v.as<Promise>();
  while (!(p->flags & 1)) {
    Value thunk = p->value;
    Value r = in.apply(thunk, nullptr, 0);
    if (p->flags & 1) break;   // forced re-entrantly
    if (p->isStream.isTrue() && r.is(Kind::Promise)) {
      auto* q = r.as<Promise>();
      p->flags = q->flags;
      p->value = q->value;
      p->isStream = q->isStream;
      q->flags = p->flags;
    } else {
      p->flags |= 1;
      p->value = r;
    }
  }
  return p->value;
}

}  // namespace

void registerControl(Registry& r) {
  r.defRaw("apply", "(proc arg :rest args)", applyPrim,
           "Calls PROC with the ARGs followed by the elements of the last argument, a list.", kPrimBorrowsArgs);
  r.defRaw("map", "(proc list :rest lists)",
           [](Interp& in, Value* a, int n, PrimitiveInfo* info) { return mapLike(in, a, n, info, true); },
           "Applies PROC elementwise to the LISTs and returns the list of results; stops at the shortest list.");
  r.defRaw("for-each", "(proc list :rest lists)",
           [](Interp& in, Value* a, int n, PrimitiveInfo* info) { return mapLike(in, a, n, info, false); },
           "Applies PROC elementwise to the LISTs for its effect, in order. Data loaders are visited batch by batch.");
  r.defRaw("values", "(:rest objects)",
           [](Interp&, Value* a, int n, PrimitiveInfo*) { return makeValues(a, size_t(n)); },
           "Returns its arguments as multiple values.");
  r.def("call-with-values", "(producer consumer)", [](Interp& in, Procedure producer, Procedure consumer) {
    Value v = in.apply(producer.value, nullptr, 0);
    if (v.is(Kind::MultipleValues)) {
      auto* m = v.as<MultipleValues>();
      return in.apply(consumer.value, m->items, int(m->extra));
    }
    return in.apply(consumer.value, &v, 1);
  }, "Calls PRODUCER with no arguments and passes its values to CONSUMER.");
  r.def("call-with-current-continuation", "(proc)", [](Interp& in, Procedure proc) {
    auto* k = allocObject<Continuation>(Kind::Continuation);
    k->id = in.nextContinuationId++;
    k->valid = true;
    Value kv(k);
    Value savedHandlers = in.st->handlers;
    try {
      Value result = callWithEscape(in, proc.value, kv);
      k->valid = false;
      return result;
    } catch (ContinuationInvoked& c) {
      if (c.id != k->id) throw;
      k->valid = false;
      in.st->handlers = savedHandlers;
      return c.values.get();
    }
  }, "Calls PROC with the current continuation, an escape procedure: calling it returns its arguments "
     "from this call. Purple's continuations escape only (they cannot re-enter a finished call).");
  r.alias("call/cc", "call-with-current-continuation");
  r.def("dynamic-wind", "(before thunk after)", [](Interp& in, Procedure before, Procedure thunk, Procedure after) {
    in.apply(before.value, nullptr, 0);
    Value result;
    try {
      result = in.apply(thunk.value, nullptr, 0);
    } catch (const PurpleInterrupt&) {
      // An interrupt or exhausted budget must reach the host: AFTER runs, but whatever it
      // does (loop until the budget stops it again, escape, raise) cannot cancel the stop.
      try {
        in.apply(after.value, nullptr, 0);
      } catch (...) {
      }
      throw;
    } catch (...) {
      in.apply(after.value, nullptr, 0);
      throw;
    }
    in.apply(after.value, nullptr, 0);
    return result;
  }, "Calls BEFORE, THUNK and AFTER; AFTER runs however THUNK is left (return, error or escape).");

  // ---- exceptions ----
  r.def("with-exception-handler", "(handler thunk)", [](Interp& in, Procedure handler, Procedure thunk) {
    Value saved = in.st->handlers;
    HandlerRestore restore{in.st, saved};
    in.st->handlers = cons(handler.value, saved);
    try {
      return in.apply(thunk.value, nullptr, 0);
    } catch (const PurpleInterrupt&) {
      throw;
    } catch (const PurpleException& e) {
      if (e.offered()) throw;
      // An error signalled by a builtin reached here without meeting a handler: raise it as
      // if from here, which offers it to this handler (in the outer context) and the outer ones.
      in.st->handlers = cons(handler.value, saved);
      in.raise(e.payload(), false);
    }
  }, "Installs HANDLER for the dynamic extent of calling THUNK. A handler that returns from a "
     "non-continuable raise causes a secondary error.");
  r.def("raise", "(obj)", [](Interp& in, Value obj) -> Value { in.raise(obj, false); },
        "Raises OBJ as an exception (non-continuable).");
  r.def("raise-continuable", "(obj)", [](Interp& in, Value obj) { return in.raiseContinuable(obj); },
        "Raises OBJ; the value the handler returns is returned from raise-continuable.");
  r.defRaw("error", "(message :rest irritants)", [](Interp& in, Value* a, int n, PrimitiveInfo* info) -> Value {
    checkArity(info, n);
    Value msg = a[0];
    Value who = Value::f();
    // (error 'who "message" ...) as many Schemes accept
    if (isSymbol(msg) && n > 1 && isString(a[1])) {
      who = msg;
      msg = a[1];
      a++;
      n--;
    }
    std::string text = isString(msg) ? std::string(stringView(msg)) : toDisplayString(msg);
    if (!who.isFalse()) text = std::string(symbolName(who)) + ": " + text;
    Value err = makeError(intern("error"), text, listFromArray(a + 1, size_t(n - 1)));
    err.as<ErrorObject>()->who = who;
    err.as<ErrorObject>()->message = isString(msg) && who.isFalse() ? msg : makeString(text);
    in.raise(err, false);
  }, "Raises an error object with MESSAGE (a string) and IRRITANTS.");
  r.def("error-object?", "(obj)", [](Value v) { return v.is(Kind::ErrorObject); },
        "True if OBJ is an error object (made by error or by a failing builtin).");
  r.def("error-object-message", "(err)", [](Value e) { return errorObjectField(e, 0); },
        "The message of the error object ERR.");
  r.def("error-object-irritants", "(err)", [](Value e) { return errorObjectField(e, 1); },
        "The irritants of the error object ERR.");
  r.def("error-object-kind", "(err)", [](Value e) { return e.is(Kind::ErrorObject) ? e.as<ErrorObject>()->errorKind : Value::f(); },
        "The kind of error: error, type-error, arity-error, read-error, file-error, tensor-error, ...");
  r.def("error-object-backtrace", "(err)", [](Value e) { return e.is(Kind::ErrorObject) ? e.as<ErrorObject>()->backtrace : Value::nil(); },
        "The Purple backtrace captured when ERR was raised: a list of strings, innermost first.");
  r.def("read-error?", "(obj)", [](Value v) { return errorKindIs(v, "read-error"); }, "True for errors raised by the reader.");
  r.def("file-error?", "(obj)", [](Value v) { return errorKindIs(v, "file-error"); }, "True for errors about files.");
  r.def("condition/report-string", "(err)", [](Value e) { return makeString(errorMessage(e)); },
        "The message and irritants of ERR as one string.");

  // ---- evaluation ----
  r.def("eval", "(expr :optional env)", [](Interp& in, Value expr, Value env) {
    if (env.isMissing() || env.isFalse()) return in.evalForm(expr);
    if (!env.is(Kind::Environment)) throwTypeError("eval", 2, "an environment", env);
    return in.evalFormIn(env.as<Environment>()->space, expr);
  }, "Evaluates EXPR at top level: in ENV when given (from environment), else in the global environment.");
  auto globalEnv = [](Interp& in, RestArgs) {
    auto* e = allocObject<Environment>(Kind::Environment);
    e->interp = &in;
    e->space = nullptr;
    return Value(e);
  };
  r.def("interaction-environment", "(:rest ignored)", globalEnv, "The global environment, for eval.");
  r.def("scheme-report-environment", "(:rest version)", globalEnv, "The global environment, for eval.");
  r.def("null-environment", "(:rest version)", globalEnv, "The global environment, for eval.");
  r.def("environment", "(:rest import-sets)", [](Interp& in, RestArgs sets) {
    Value list = sets.list;
    auto* e = allocObject<Environment>(Kind::Environment);
    e->interp = &in;
    e->space = in.makeNamespace(list);
    return Value(e);
  }, "A fresh environment holding the bindings of the IMPORT-SETS (quoted, as in import), for eval: "
     "(eval '(f 1) (environment '(mylib) '(scheme base))). The standard libraries are always visible in it; "
     "definitions evaluated in it stay in it.");
  r.def("procedure?", "(obj)", [](Value v) { return isProcedure(v); }, "True if OBJ can be called.");

  // ---- parameters ----
  r.def("make-parameter", "(value :optional converter)", [](Interp& in, Value value, Value converter) {
    return makeParameter(in, value, converter.isMissing() ? Value::f() : converter);
  }, "A parameter object holding VALUE (passed through CONVERTER when given). Call it with no "
     "arguments to read it; parameterize rebinds it for a dynamic extent.");
  r.def("%parameter-convert", "(param value)", [](Interp& in, Value p, Value v) {
    if (!p.is(Kind::Parameter)) throwTypeError("parameterize", 1, "a parameter", p);
    Value c = p.as<Parameter>()->converter;
    return c.isFalse() ? v : in.apply(c, &v, 1);
  }, "Internal: applies a parameter's converter (used by parameterize).");
  r.def("%parameter-swap!", "(param value)", [](Value p, Value v) {
    if (!p.is(Kind::Parameter)) throwTypeError("parameterize", 1, "a parameter", p);
    Value old = p.as<Parameter>()->value;
    p.as<Parameter>()->value = v;
    return old;
  }, "Internal: sets a parameter's value and returns the previous one (used by parameterize).");

  // ---- promises ----
  r.def("%make-promise", "(thunk lazy)", [](Value thunk, bool lazy) { return makePromise(thunk, false, lazy); },
        "Internal: a promise that calls THUNK when forced (delay and delay-force expand to it).");
  r.def("make-promise", "(obj)", [](Value v) { return v.is(Kind::Promise) ? v : makePromise(v, true, false); },
        "A promise already forced to OBJ (or OBJ itself if it is a promise).");
  r.def("promise?", "(obj)", [](Value v) { return v.is(Kind::Promise); }, "True if OBJ is a promise.");
  r.def("force", "(promise)", [](Interp& in, Value v) { return force(in, v); },
        "The value of PROMISE, computing it the first time.");

  // ---- case-lambda ----
  r.def("%make-case-lambda", "(name :rest clauses)", [](Value name, RestArgs clauses) {
    size_t n = listLength(clauses.list);
    auto* cl = static_cast<CaseLambda*>(gcAlloc(sizeof(CaseLambda) + n * sizeof(Value)));
    cl->kind = Kind::CaseLambda;
    cl->flags = 0;
    cl->small = 0;
    cl->extra = uint32_t(n);
    cl->name = name;
    size_t i = 0;
    for (Value p = clauses.list; isPair(p); p = cdr(p)) {
      if (!car(p).is(Kind::Closure)) throwTypeError("case-lambda", int(i + 2), "a lambda", car(p));
      cl->clauses[i++] = car(p);
    }
    return Value(cl);
  }, "Internal: a procedure that dispatches on argument count to CLAUSES (case-lambda expands to it).");

  // ---- tensor scopes ----
  r.def("%with-tensor-scope", "(thunk)", [](Interp& in, Procedure thunk) {
    openTensorScope();
    Value result;
    try {
      result = in.apply(thunk.value, nullptr, 0);
    } catch (...) {
      closeTensorScope(Value::nil());
      throw;
    }
    closeTensorScope(result);
    return result;
  }, "Internal: calls THUNK and then frees every tensor it created that is not part of its result.");
}

}  // namespace purple
