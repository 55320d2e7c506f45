// The analyzer: expands macros and turns a form into a node tree once, resolving each variable
// to a frame slot or a global cell. `let` variables are flattened into the enclosing lambda's
// frame (a frame is entered once per call, so a let inside it is too), and a lambda whose body
// creates no closure gets a frame on the C++ stack instead of the heap.
#include "interp/language/analyzer.hpp"
#include "interp/language/ownership.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/language/printer.hpp"
#include "interp/language/let_release.hpp"
#include <array>
#include <memory>
#include <unordered_map>
#include <unordered_set>

namespace purple {

namespace {

enum class Special {
  None, Quote, Quasiquote, Lambda, Define, Set, If, Begin, Let, LetStar, Letrec, LetrecStar,
  DefineSyntax, LetSyntax, LetrecSyntax, SyntaxRules, DefineMacro, And, Or, When, Unless, Cond,
  Case, Do, Guard, Include, CondExpand, Import, DefineLibrary, NamedLambda, Unquote,
  UnquoteSplicing, Else, Arrow,
};

struct SpecialName { const char* name; Special form; };
const SpecialName kSpecials[] = {
    {"quote", Special::Quote}, {"quasiquote", Special::Quasiquote}, {"lambda", Special::Lambda},
    {"define", Special::Define}, {"set!", Special::Set}, {"if", Special::If},
    {"begin", Special::Begin}, {"let", Special::Let}, {"let*", Special::LetStar},
    {"letrec", Special::Letrec}, {"letrec*", Special::LetrecStar},
    {"define-syntax", Special::DefineSyntax}, {"let-syntax", Special::LetSyntax},
    {"letrec-syntax", Special::LetrecSyntax}, {"syntax-rules", Special::SyntaxRules},
    {"define-macro", Special::DefineMacro}, {"and", Special::And}, {"or", Special::Or},
    {"when", Special::When}, {"unless", Special::Unless}, {"cond", Special::Cond},
    {"case", Special::Case}, {"do", Special::Do}, {"guard", Special::Guard},
    {"include", Special::Include}, {"include-ci", Special::Include},
    {"cond-expand", Special::CondExpand}, {"import", Special::Import},
    {"define-library", Special::DefineLibrary}, {"named-lambda", Special::NamedLambda},
    {"unquote", Special::Unquote}, {"unquote-splicing", Special::UnquoteSplicing},
};

}  // namespace

std::vector<std::string> specialFormNames() {
  std::vector<std::string> names;
  for (const auto& s : kSpecials) names.emplace_back(s.name);
  return names;
}

namespace {

Special specialOf(Value sym) {
  static std::unordered_map<const Object*, Special>* table = [] {
    auto* t = new std::unordered_map<const Object*, Special>();
    for (const auto& s : kSpecials) (*t)[intern(s.name).obj()] = s.form;
    return t;
  }();
  if (!sym.is(Kind::Symbol)) return Special::None;
  auto it = table->find(sym.obj());
  return it == table->end() ? Special::None : it->second;
}

struct Resolved {
  enum Kind { Local, Global, Macro, SpecialForm } kind;
  uint32_t depth = 0, slot = 0;
  bool checked = false;
  GlobalCell* cell = nullptr;
  Value macro;
  Special special = Special::None;
};

using ValueVec = std::vector<Value, traceable_allocator<Value>>;
// Nodes under construction are referenced only from here until their parent is built: the
// vector's storage must be visible to the collector.
using NodeVec = std::vector<Node*, traceable_allocator<Node*>>;

struct Analyzer {
  Interp& in;
  PositionTable* positions;
  SourcePos pos;                 // position of the innermost form with a known position
  int64_t nesting = 0;           // analyze calls in progress

  template <class T>
  T* node(Op op, size_t extraBytes = 0) {
    auto* n = static_cast<T*>(gcAlloc(sizeof(T) + extraBytes));
    n->kind = Kind::Node;
    n->flags = 0;
    n->small = uint16_t(op);
    n->extra = 0;
    return n;
  }

  [[noreturn]] void syntaxError(const std::string& message, Value form) { throwSyntaxError(pos, message, form); }

  void notePosition(Value form) {
    if (!positions || !isPair(form)) return;
    auto it = positions->find(form.obj());
    if (it != positions->end()) pos = it->second;
  }

  // ---- resolution ----

  // SPACE: the namespace a global name means (null: the current one); an alias brings its
  // macro's, so a library's exported macro refers to the library's names in its importer.
  Resolved resolve(Value id, Scope* scope, void* space = nullptr) {
    uint32_t depth = 0;
    for (Scope* s = scope; s; s = s->parent) {
      for (size_t i = s->vars.size(); i-- > 0;) {
        const Binding& b = s->vars[i];
        if (b.name == id) {
          Resolved r;
          if (!b.macro.isFalse()) {
            r.kind = Resolved::Macro;
            r.macro = b.macro;
            return r;
          }
          r.kind = Resolved::Local;
          r.depth = depth;
          r.slot = b.slot;
          r.checked = b.checked;
          return r;
        }
      }
      if (s->parent && s->parent->lambda != s->lambda) depth++;
    }
    if (id.is(Kind::Alias)) {
      // An identifier a macro introduced: it means what its name meant where the macro was
      // defined. That scope encloses this one (or is global when null).
      auto* a = id.as<Alias>();
      Scope* target = static_cast<Scope*>(a->scope);
      void* aliasSpace = a->space ? a->space : space;
      if (!target) return resolve(a->symbol, nullptr, aliasSpace);
      uint32_t d = 0;
      for (Scope* s = scope; s; s = s->parent) {
        if (s == target) {
          Resolved r = resolve(a->symbol, target);
          if (r.kind == Resolved::Local) r.depth += d;
          return r;
        }
        if (s->parent && s->parent->lambda != s->lambda) d++;
      }
      return resolve(a->symbol, nullptr, aliasSpace);
    }
    Resolved r;
    Special sp = specialOf(id);
    if (sp != Special::None && sp != Special::Unquote && sp != Special::UnquoteSplicing) {
      r.kind = Resolved::SpecialForm;
      r.special = sp;
      return r;
    }
    GlobalCell* cell = in.globalCellIn(space, id);
    if (cell->value.is(Kind::Macro)) {
      r.kind = Resolved::Macro;
      r.macro = cell->value;
      return r;
    }
    r.kind = Resolved::Global;
    r.cell = cell;
    return r;
  }

  // Is `id` the keyword `name` (else, =>, unquote ...) rather than a local variable?
  bool isKeywordNamed(Value id, Scope* scope, const char* name) {
    if (!isIdentifier(id) || baseSymbol(id) != intern(name)) return false;
    return resolve(id, scope).kind != Resolved::Local;
  }

  uint32_t newSlot(Scope* scope) { return scope->lambda->frameSize++; }

  void bind(Scope* scope, Value id, uint32_t slot, bool checked) {
    scope->vars.push_back(Binding{id, slot, checked, Value::f()});
  }

  // ---- expansion ----

  Value expandMacro(Value macro, Value form) {
    // An expansion is a step: a macro that expands forever in a body (which loops rather than
    // recursing) meets the interrupt and the step and time budgets.
    if (--in.stepsLeft <= 0) in.safePoint();
    auto* m = macro.as<Macro>();
    if (m->flags & 1) {
      Value args = stripSyntax(cdr(form));
      if (!isList(args)) syntaxError("improper macro call", form);
      ValueVec argv;
      for (Value p = args; isPair(p); p = cdr(p)) argv.push_back(car(p));
      notePosition(form);
      MacroCallPositionScope here(pos);
      return in.apply(m->transformer, argv.data(), int(argv.size()));
    }
    Scope* def = static_cast<Scope*>(m->scope);
    return expandSyntaxRules(m->transformer, form, def, m->space, m->name);
  }

  // ---- analysis ----

  Node* constant(Value v) {
    auto* n = node<ConstNode>(Op::Const);
    n->value = v;
    return n;
  }

  Node* variable(Value id, Scope* scope, Value form) {
    Resolved r = resolve(id, scope);
    switch (r.kind) {
      case Resolved::Local: {
        Op op = r.checked ? Op::LocalChecked : r.depth == 0 ? Op::Local0 : r.depth == 1 ? Op::Local1 : Op::LocalN;
        auto* n = node<LocalNode>(op);
        n->depth = r.depth;
        n->index = r.slot;
        n->name = baseSymbol(id);
        return n;
      }
      case Resolved::Global: {
        auto* n = node<GlobalNode>(Op::Global);
        n->cell = r.cell;
        n->pos = pos;   // for "unbound variable", which has no call record to point at the line
        return n;
      }
      default:
        syntaxError("bad use of syntax keyword " + toWriteString(baseSymbol(id)), form);
    }
  }

  Node* analyze(Value x, Scope* scope) {
    // A cyclic form (#0=(f #0#)) nests without end: the depth limit ends it long before the
    // stack would on a big stack.
    if (stackNearlyFull() || nesting >= in.limits.maxDepth)
      throwError("recursion-error", "expression nested too deeply to compile");
    // Compiling a big or cyclic form takes time too: deadlines and interrupts stop it (fuzz-eval
    // found a cyclic form whose compilation ran 5.9 s past a 2 s budget).
    in.poll();
    struct Nest {
      int64_t& n;
      ~Nest() { n--; }
    } nest{++nesting};
    if (isIdentifier(x)) {
      if (isKeyword(x)) return constant(x);
      return variable(x, scope, x);
    }
    if (!isPair(x)) {
      if (x.isNil()) syntaxError("empty combination () is not an expression; quote it: '()", x);
      return constant(x);
    }
    SourcePos saved = pos;
    notePosition(x);
    Node* n = analyzePair(x, scope);
    pos = saved;
    return n;
  }

  Node* analyzePair(Value x, Scope* scope) {
    Value head = car(x);
    if (isIdentifier(head) && !isKeyword(head)) {
      Resolved r = resolve(head, scope);
      if (r.kind == Resolved::Macro) return analyze(expandMacro(r.macro, x), scope);
      if (r.kind == Resolved::SpecialForm) return special(r.special, x, scope);
    }
    return application(x, scope);
  }

  Node* application(Value x, Scope* scope) {
    size_t argc = listLength(cdr(x));
    if (argc == SIZE_MAX) syntaxError("improper argument list in call", x);
    auto* n = node<AppNode>(Op::App, argc * sizeof(Node*));
    n->pos = pos;
    n->owner = scope->lambda ? scope->lambda->node : nullptr;
    if (in.loadingPrelude) n->flags |= kAppInPrelude;
    n->argc = uint32_t(argc);
    n->appArgMask = 0;
    n->tensorArgMask = 0;
    n->fn = analyze(car(x), scope);
    size_t i = 0;
    for (Value p = cdr(x); isPair(p); p = cdr(p), i++) {
      n->args[i] = analyze(car(p), scope);
      noteArgument(n, i);
    }
    bool simple = argc >= 1 && argc <= 3 && n->fn->op() == Op::Global;
    for (size_t k = 0; simple && k < argc; k++) simple = isSimpleOperand(n->args[k]);
    if (simple) n->flags |= kAppSimpleOperands;
    if ((n->shape = appShapeFor(n, &n->expected))) n->flags |= kAppShaped;
    return n;
  }

  static bool isSimpleOperand(Node* a) { return a->op() == Op::Const || a->op() == Op::Local0 || a->op() == Op::Local1; }

  // Marks argument i of a call when it is itself a call (appArgMask), and when that call names
  // a global bound, as the code is analyzed, to a tensor builtin (tensorArgMask: the evaluator
  // then checks the binding again before it passes the result on without a cell).
  static void noteArgument(AppNode* n, size_t i) {
    Node* a = n->args[i];
    if (a->op() != Op::App || i >= 32) return;
    n->appArgMask |= 1u << i;
    Node* fn = static_cast<AppNode*>(a)->fn;
    if (fn->op() != Op::Global) return;
    Value g = static_cast<GlobalNode*>(fn)->cell->value;
    if (g.is(Kind::Primitive) && (g.obj()->flags & kPrimUnboxedTensor)) n->tensorArgMask |= 1u << i;
  }

  Node* sequence(const ValueVec& forms, Scope* scope) {
    if (forms.empty()) return constant(Value::unspecified());
    if (forms.size() == 1) return analyze(forms[0], scope);
    auto* n = node<SeqNode>(Op::Seq, forms.size() * sizeof(Node*));
    n->count = uint32_t(forms.size());
    for (size_t i = 0; i < forms.size(); i++) n->items[i] = analyze(forms[i], scope);
    return n;
  }

  ValueVec listToVec(Value list, Value form, const char* what) {
    ValueVec out;
    if (!isList(list)) syntaxError(std::string("bad ") + what, form);
    for (Value p = list; isPair(p); p = cdr(p)) out.push_back(car(p));
    return out;
  }

  // A body: internal definitions (after expanding macros) become letrec*-style slots.
  Node* body(Value forms, Scope* scope, Value whole) {
    ValueVec pending = listToVec(forms, whole, "body");
    ValueVec exprs;                       // expanded forms in order
    std::vector<int> defineSlot;          // -1: expression, else the slot defined
    size_t qi = 0;
    std::vector<Value, traceable_allocator<Value>> queue(pending.begin(), pending.end());
    while (qi < queue.size()) {
      Value f = queue[qi++];
      bool handled = false;
      while (isPair(f) && isIdentifier(car(f))) {
        SourcePos saved = pos;
        notePosition(f);
        Resolved r = resolve(car(f), scope);
        if (r.kind == Resolved::Macro) {
          f = expandMacro(r.macro, f);
          pos = saved;
          continue;
        }
        if (r.kind == Resolved::SpecialForm && r.special == Special::Begin) {
          ValueVec inner = listToVec(cdr(f), f, "begin");
          queue.insert(queue.begin() + qi, inner.begin(), inner.end());
          handled = true;
        } else if (r.kind == Resolved::SpecialForm && r.special == Special::Define) {
          Value name, value;
          normalizeDefine(f, name, value);
          uint32_t slot = newSlot(scope);
          bind(scope, name, slot, true);
          exprs.push_back(cons(name, value));
          defineSlot.push_back(int(slot));
          handled = true;
        } else if (r.kind == Resolved::SpecialForm && r.special == Special::DefineSyntax) {
          if (listLength(f) != 3 || !isIdentifier(cadr(f))) syntaxError("bad define-syntax", f);
          Value m = macroFromSpec(caddr(f), scope, cadr(f), f);
          scope->vars.push_back(Binding{cadr(f), 0, false, m});
          handled = true;
        }
        pos = saved;
        break;
      }
      if (!handled) {
        exprs.push_back(f);
        defineSlot.push_back(-1);
      }
    }
    if (exprs.empty()) return constant(Value::unspecified());
    // Definitions that run no code, all before the first expression: their names are bound
    // before anything can read them.
    size_t firstExpr = 0;
    while (firstExpr < exprs.size() && defineSlot[firstExpr] >= 0) firstExpr++;
    bool unchecked = firstExpr > 0;
    for (size_t i = firstExpr; i < exprs.size() && unchecked; i++) unchecked = defineSlot[i] < 0;
    for (size_t i = 0; i < firstExpr && unchecked; i++)
      unchecked = specialOf(baseSymbol(car(exprs[i]))) == Special::None && initRunsNoCode(cdr(exprs[i]), scope);
    if (unchecked) {
      for (Binding& b : scope->vars)
        for (size_t i = 0; i < firstExpr; i++)
          if (b.macro.isFalse() && b.slot == uint32_t(defineSlot[i])) b.checked = false;
    }
    // Otherwise, with all the definitions before the first expression, the expressions still
    // run only after every definition's init has run (a continuation re-entering an init runs
    // the later inits again before them): their references need no check either; those in the
    // inits keep it.
    bool definitionsFirst = firstExpr > 0;
    for (size_t i = firstExpr; i < exprs.size() && definitionsFirst; i++) definitionsFirst = defineSlot[i] < 0;
    auto* seq = node<SeqNode>(Op::Seq, exprs.size() * sizeof(Node*));
    seq->count = uint32_t(exprs.size());
    for (size_t i = 0; i < exprs.size(); i++) {
      if (i == firstExpr && definitionsFirst && !unchecked) {
        for (Binding& b : scope->vars)
          for (size_t d = 0; d < firstExpr; d++)
            if (b.macro.isFalse() && b.slot == uint32_t(defineSlot[d])) b.checked = false;
      }
      if (defineSlot[i] >= 0) {
        auto* s = node<SetLocalNode>(Op::SetLocal);
        s->depth = 0;
        s->index = uint32_t(defineSlot[i]);
        s->value = analyzeNamed(cdr(exprs[i]), scope, car(exprs[i]));
        seq->items[i] = s;
      } else {
        seq->items[i] = analyze(exprs[i], scope);
      }
    }
    if (seq->count == 1) return seq->items[0];
    return seq;
  }

  // (define name value), (define (name . args) body...), (define ((curried a) b) ...)
  void normalizeDefine(Value f, Value& name, Value& value) {
    if (!isPair(cdr(f))) syntaxError("bad define", f);
    Value target = cadr(f);
    Value rest = cddr(f);
    while (isPair(target)) {   // procedure form, possibly curried
      Value lambda = cons(intern("lambda"), cons(cdr(target), rest));
      rest = cons(lambda, Value::nil());
      target = car(target);
    }
    if (!isIdentifier(target)) syntaxError("define: expected a name", f);
    name = target;
    if (rest.isNil()) value = Value::unspecified();
    else if (isPair(rest) && cdr(rest).isNil()) value = car(rest);
    else syntaxError("define: expected one value expression", f);
    if (isPair(value) || isIdentifier(value)) return;
    value = cons(intern("quote"), cons(value, Value::nil()));
  }

  // Analyzes a value that is being bound to `name`, so a lambda gets its name for backtraces.
  Node* analyzeNamed(Value x, Scope* scope, Value name) {
    Node* n = analyze(x, scope);
    if (n->op() == Op::Lambda && static_cast<LambdaNode*>(n)->name.isFalse())
      static_cast<LambdaNode*>(n)->name = baseSymbol(name);
    return n;
  }

  Value macroFromSpec(Value spec, Scope* scope, Value name, Value form) {
    if (isPair(spec) && isIdentifier(car(spec))) {
      Resolved r = resolve(car(spec), scope);
      if (r.kind == Resolved::SpecialForm && r.special == Special::SyntaxRules)
        return makeMacro(spec, scope, in.currentNamespace(), baseSymbol(name), false);
      if (r.kind == Resolved::Global && baseSymbol(car(spec)) == intern("er-macro-transformer"))
        syntaxError("er-macro-transformer is not supported; use syntax-rules or define-macro", form);
    }
    // Any other expression must evaluate to a procedure: a CL-style transformer of the form.
    if (scope && scope->parent) syntaxError("local transformers must be syntax-rules", form);
    Value proc = in.evalForm(spec);
    if (!isProcedure(proc)) syntaxError("define-syntax: expected syntax-rules or a procedure", form);
    Value wrapper = proc;   // receives the whole form's arguments like define-macro
    return makeMacro(wrapper, nullptr, in.currentNamespace(), baseSymbol(name), true);
  }

  // ---- lambda ----

  Node* lambda(Value params, Value bodyForms, Scope* scope, Value name, Value whole) {
    // A closure made here holds this frame and every frame it reaches.
    for (LambdaInfo* li = scope->lambda; li; li = li->parent) li->captured = true;
    LambdaInfo info;
    info.parent = scope->lambda;
    Scope inner;
    inner.parent = scope;
    inner.lambda = &info;
    auto* n = node<LambdaNode>(Op::Lambda);
    n->nRequired = n->nOptional = n->nKeys = 0;
    n->hasRest = false;
    n->keyNames = nullptr;
    n->defaults = nullptr;
    n->name = name.isFalse() ? name : baseSymbol(name);
    n->pos = pos;
    n->outer = scope->lambda ? scope->lambda->node : nullptr;
    info.node = n;
    enum { Req, Opt, Key, Rest } mode = Req;
    ValueVec defaults, keys;
    Value restName = Value::f();
    if (isCircularList(params)) syntaxError("circular parameter list", whole);
    Value p = params;
    for (; isPair(p); p = cdr(p)) {
      Value x = car(p);
      if (isKeyword(x)) {
        std::string_view k = symbolName(x);
        if (k == "optional") mode = Opt;
        else if (k == "key") mode = Key;
        else if (k == "rest") mode = Rest;
        else syntaxError("unknown lambda-list marker :" + std::string(k), whole);
        continue;
      }
      Value var = x, def = Value::missing();
      if (isPair(x) && (mode == Opt || mode == Key)) {
        var = car(x);
        def = isPair(cdr(x)) ? cadr(x) : Value::missing();
      }
      if (!isIdentifier(var)) syntaxError("bad parameter " + toWriteString(stripSyntax(x)), whole);
      for (const auto& b : inner.vars)
        if (b.name == var) syntaxError("duplicate parameter " + toWriteString(baseSymbol(var)), whole);
      if (mode == Rest) {
        restName = var;
        continue;
      }
      uint32_t slot = info.frameSize++;
      bind(&inner, var, slot, false);
      if (mode == Req) {
        if (n->nOptional || n->nKeys) syntaxError("required parameter after optional ones", whole);
        n->nRequired++;
      } else if (mode == Opt) {
        n->nOptional++;
        defaults.push_back(def);
      } else {
        n->nKeys++;
        keys.push_back(internKeyword(symbolName(baseSymbol(var))));
        defaults.push_back(def);
      }
    }
    if (!p.isNil()) {
      if (!isIdentifier(p)) syntaxError("bad rest parameter", whole);
      restName = p;
    }
    // slot layout: required, optional, keys, [rest]: keys were bound in order above, so the
    // rest slot comes last.
    if (!restName.isFalse()) {
      n->hasRest = true;
      uint32_t slot = info.frameSize++;
      bind(&inner, restName, slot, false);
    }
    if (!keys.empty()) {
      n->keyNames = static_cast<Value*>(gcAlloc(keys.size() * sizeof(Value)));
      for (size_t i = 0; i < keys.size(); i++) n->keyNames[i] = keys[i];
    }
    if (!defaults.empty()) {
      n->defaults = static_cast<Node**>(gcAlloc(defaults.size() * sizeof(Node*)));
      for (size_t i = 0; i < defaults.size(); i++)
        n->defaults[i] = defaults[i].isMissing() ? nullptr : analyze(defaults[i], &inner);
    }
    n->doc = Value::f();
    n->params = stripSyntax(params);
    if (isPair(bodyForms) && isString(car(bodyForms)) && isPair(cdr(bodyForms))) n->doc = car(bodyForms);
    n->body = body(bodyForms, &inner, whole);
    n->frameSize = info.frameSize;
    n->heapFrame = info.captured;
    n->directArity = directArityOf(n);
    analyzeOwnership(n);
    return n;
  }

  // ---- let family ----

  // Does evaluating X run no code of the program (a lambda, a constant, or a let/letrec of such
  // forms)? When every init of a letrec, or every internal definition before the body's first
  // expression, is so, no procedure can run before all the names are bound: their references
  // need no "used before its definition" check (Op::LocalChecked), and get the fast paths of
  // ordinary locals (shaped calls, simple operands). Judged on the form before analysis.
  bool initRunsNoCode(Value x, Scope* scope, int nest = 0) {
    if (!isPair(x)) return !isIdentifier(x) && !x.isNil();
    if (!isIdentifier(car(x)) || nest > 8) return false;
    Resolved r = resolve(car(x), scope);
    if (r.kind != Resolved::SpecialForm) return false;
    switch (r.special) {
      case Special::Lambda: case Special::Quote: return true;
      case Special::Let: case Special::LetStar: case Special::Letrec: case Special::LetrecStar: {
        // (let ((v init) ...) form): one body form; a bound name must not hide a special form
        if (!isPair(cdr(x)) || !isList(cadr(x)) || !isPair(cddr(x)) || !cdddr(x).isNil()) return false;
        for (Value p = cadr(x); isPair(p); p = cdr(p)) {
          Value b = car(p);
          if (!isPair(b) || !isIdentifier(car(b)) || specialOf(baseSymbol(car(b))) != Special::None) return false;
          if (!isPair(cdr(b)) || !cddr(b).isNil() || !initRunsNoCode(cadr(b), scope, nest + 1)) return false;
        }
        return initRunsNoCode(caddr(x), scope, nest + 1);
      }
      default: return false;
    }
  }

  bool namesHideSpecialForms(const ValueVec& names) {
    for (Value n : names)
      if (specialOf(baseSymbol(n)) != Special::None) return true;
    return false;
  }

  Node* letNode(const std::vector<uint32_t>& slots, const NodeVec& inits, Node* bodyNode) {
    auto* n = node<LetNode>(Op::Let);
    n->count = uint32_t(slots.size());
    n->slots = static_cast<uint32_t*>(gcAllocAtomic(slots.size() * sizeof(uint32_t) + 1));
    n->inits = static_cast<Node**>(gcAlloc(inits.size() * sizeof(Node*) + 1));
    for (size_t i = 0; i < slots.size(); i++) {
      n->slots[i] = slots[i];
      n->inits[i] = inits[i];
    }
    n->body = bodyNode;
    markReleasableLetSlots(n);
    return n;
  }

  void parseBindings(Value bindings, Value form, ValueVec& names, ValueVec& inits) {
    if (!isList(bindings)) syntaxError("bad bindings", form);
    for (Value p = bindings; isPair(p); p = cdr(p)) {
      Value b = car(p);
      if (isIdentifier(b)) {   // (let (x) ...) binds x unspecified, as some Schemes allow
        names.push_back(b);
        inits.push_back(Value::unspecified());
        continue;
      }
      if (!isPair(b) || !isIdentifier(car(b)) || !(cdr(b).isNil() || (isPair(cdr(b)) && cddr(b).isNil())))
        syntaxError("bad binding " + toWriteString(stripSyntax(b)), form);
      names.push_back(car(b));
      inits.push_back(cdr(b).isNil() ? Value::unspecified() : cadr(b));
    }
  }

  Node* let(Value x, Scope* scope) {
    if (!isPair(cdr(x))) syntaxError("bad let", x);
    if (isIdentifier(cadr(x))) return namedLet(x, scope);
    ValueVec names, inits;
    parseBindings(cadr(x), x, names, inits);
    std::vector<uint32_t> slots;
    NodeVec initNodes;
    for (size_t i = 0; i < names.size(); i++) initNodes.push_back(analyzeNamed(inits[i], scope, names[i]));
    Scope inner;
    inner.parent = scope;
    inner.lambda = scope->lambda;
    for (size_t i = 0; i < names.size(); i++) {
      for (size_t k = 0; k < i; k++)
        if (names[k] == names[i]) syntaxError("duplicate variable in let", x);
      uint32_t slot = newSlot(scope);
      slots.push_back(slot);
      bind(&inner, names[i], slot, false);
    }
    return letNode(slots, initNodes, body(cddr(x), &inner, x));
  }

  Node* letStar(Value x, Scope* scope) {
    if (!isPair(cdr(x))) syntaxError("bad let*", x);
    ValueVec names, inits;
    parseBindings(cadr(x), x, names, inits);
    // Each binding gets its own scope, so later inits see earlier names.
    std::vector<Scope*> scopes;
    std::vector<uint32_t> slots;
    NodeVec initNodes;
    Scope* current = scope;
    std::vector<std::unique_ptr<Scope>> owned;
    for (size_t i = 0; i < names.size(); i++) {
      initNodes.push_back(analyzeNamed(inits[i], current, names[i]));
      owned.push_back(std::make_unique<Scope>());
      Scope* s = owned.back().get();
      s->parent = current;
      s->lambda = scope->lambda;
      uint32_t slot = newSlot(scope);
      slots.push_back(slot);
      bind(s, names[i], slot, false);
      current = s;
    }
    Scope inner;
    inner.parent = current;
    inner.lambda = scope->lambda;
    return letNode(slots, initNodes, body(cddr(x), &inner, x));
  }

  Node* letrec(Value x, Scope* scope) {
    if (!isPair(cdr(x))) syntaxError("bad letrec", x);
    ValueVec names, inits;
    parseBindings(cadr(x), x, names, inits);
    Scope inner;
    inner.parent = scope;
    inner.lambda = scope->lambda;
    bool checked = namesHideSpecialForms(names);
    for (size_t i = 0; i < inits.size() && !checked; i++) checked = !initRunsNoCode(inits[i], scope);
    std::vector<uint32_t> slots;
    for (size_t i = 0; i < names.size(); i++) {
      uint32_t slot = newSlot(scope);
      slots.push_back(slot);
      bind(&inner, names[i], slot, checked);
    }
    NodeVec initNodes;
    for (size_t i = 0; i < names.size(); i++) initNodes.push_back(analyzeNamed(inits[i], &inner, names[i]));
    return letNode(slots, initNodes, body(cddr(x), &inner, x));
  }

  // (let loop ((v init) ...) body) => ((letrec ((loop (lambda (v ...) body))) loop) init ...)
  Node* namedLet(Value x, Scope* scope) {
    Value name = cadr(x);
    if (!isPair(cddr(x))) syntaxError("bad named let", x);
    ValueVec names, inits;
    parseBindings(caddr(x), x, names, inits);
    Scope inner;
    inner.parent = scope;
    inner.lambda = scope->lambda;
    uint32_t slot = newSlot(scope);
    // Unchecked: only the lambda's body sees the name, and it runs after the binding is made.
    bind(&inner, name, slot, false);
    Value params = listFromArray(names.data(), names.size());
    Node* fn = lambda(params, cdddr(x), &inner, name, x);
    auto* ref = node<LocalNode>(Op::Local0);
    ref->depth = 0;
    ref->index = slot;
    ref->name = baseSymbol(name);
    Node* binder = letNode({slot}, NodeVec{fn}, ref);
    auto* app = node<AppNode>(Op::App, inits.size() * sizeof(Node*));
    app->pos = pos;
    app->owner = scope->lambda ? scope->lambda->node : nullptr;
    if (in.loadingPrelude) app->flags |= kAppInPrelude;
    app->fn = binder;
    app->argc = uint32_t(inits.size());
    app->appArgMask = 0;
    app->tensorArgMask = 0;
    for (size_t i = 0; i < inits.size(); i++) {
      app->args[i] = analyze(inits[i], scope);
      noteArgument(app, i);
    }
    return app;
  }

  Node* letSyntax(Value x, Scope* scope, bool rec) {
    if (!isPair(cdr(x)) || !isList(cadr(x))) syntaxError("bad let-syntax", x);
    Scope inner;
    inner.parent = scope;
    inner.lambda = scope->lambda;
    for (Value p = cadr(x); isPair(p); p = cdr(p)) {
      Value b = car(p);
      if (!isPair(b) || !isIdentifier(car(b)) || !isPair(cdr(b))) syntaxError("bad let-syntax binding", x);
      Value m = macroFromSpec(cadr(b), rec ? &inner : scope, car(b), x);
      inner.vars.push_back(Binding{car(b), 0, false, m});
    }
    return body(cddr(x), &inner, x);
  }

  // ---- conditionals ----

  Node* ifNode(Node* test, Node* then, Node* otherwise) {
    auto* n = node<IfNode>(Op::If);
    n->test = test;
    n->then = then;
    n->otherwise = otherwise;
    return n;
  }

  Node* andOr(Value x, Scope* scope, Op op) {
    ValueVec items = listToVec(cdr(x), x, op == Op::And ? "and" : "or");
    if (items.empty()) return constant(Value::boolean(op == Op::And));
    if (items.size() == 1) return analyze(items[0], scope);
    auto* n = node<SeqNode>(op, items.size() * sizeof(Node*));
    n->count = uint32_t(items.size());
    for (size_t i = 0; i < items.size(); i++) n->items[i] = analyze(items[i], scope);
    return n;
  }

  Node* cond(Value clauses, Scope* scope, Value whole, Node* fallthrough) {
    if (clauses.isNil()) return fallthrough ? fallthrough : constant(Value::unspecified());
    if (!isPair(clauses)) syntaxError("bad cond", whole);
    Value clause = car(clauses);
    if (!isPair(clause)) syntaxError("bad cond clause " + toWriteString(stripSyntax(clause)), whole);
    SourcePos saved = pos;
    notePosition(clause);
    Node* result;
    if (isKeywordNamed(car(clause), scope, "else")) {
      if (!cdr(clauses).isNil()) syntaxError("else must be the last cond clause", whole);
      ValueVec forms = listToVec(cdr(clause), whole, "cond clause");
      result = sequence(forms, scope);
    } else if (isPair(cdr(clause)) && isKeywordNamed(cadr(clause), scope, "=>")) {
      // (test => receiver): keep the test's value in a fresh slot
      Scope inner;
      inner.parent = scope;
      inner.lambda = scope->lambda;
      uint32_t slot = newSlot(scope);
      Value tmp = gensym("cond-tmp");
      bind(&inner, tmp, slot, false);
      Node* test = analyze(car(clause), scope);
      if (!isPair(cddr(clause))) syntaxError("=> needs a receiver", whole);
      Value call = cons(caddr(clause), cons(tmp, Value::nil()));
      Node* then = analyze(call, &inner);
      Node* rest = cond(cdr(clauses), scope, whole, fallthrough);
      auto* ref = node<LocalNode>(Op::Local0);
      ref->depth = 0;
      ref->index = slot;
      ref->name = tmp;
      result = letNode({slot}, NodeVec{test}, ifNode(ref, then, rest));
    } else {
      Node* test = analyze(car(clause), scope);
      Node* rest = cond(cdr(clauses), scope, whole, fallthrough);
      if (cdr(clause).isNil()) {
        // (test) returns the test's value: (or test rest)
        auto* n = node<SeqNode>(Op::Or, 2 * sizeof(Node*));
        n->count = 2;
        n->items[0] = test;
        n->items[1] = rest;
        result = n;
      } else {
        ValueVec forms = listToVec(cdr(clause), whole, "cond clause");
        result = ifNode(test, sequence(forms, scope), rest);
      }
    }
    pos = saved;
    return result;
  }

  Node* caseForm(Value x, Scope* scope) {
    if (!isPair(cdr(x))) syntaxError("bad case", x);
    auto* n = node<CaseNode>(Op::Case);
    n->key = analyze(cadr(x), scope);
    Scope inner;
    inner.parent = scope;
    inner.lambda = scope->lambda;
    n->keySlot = newSlot(scope);
    Value keyVar = gensym("case-key");
    bind(&inner, keyVar, n->keySlot, false);
    ValueVec clauses = listToVec(cddr(x), x, "case");
    n->otherwise = nullptr;
    size_t count = clauses.size();
    if (count && isPair(clauses.back()) && isKeywordNamed(car(clauses.back()), scope, "else")) count--;
    n->count = uint32_t(count);
    n->data = static_cast<Value*>(gcAlloc(count * sizeof(Value) + 1));
    n->bodies = static_cast<Node**>(gcAlloc(count * sizeof(Node*) + 1));
    auto clauseBody = [&](Value forms) -> Node* {
      if (isPair(forms) && isKeywordNamed(car(forms), scope, "=>")) {
        if (!isPair(cdr(forms))) syntaxError("=> needs a receiver", x);
        return analyze(cons(cadr(forms), cons(keyVar, Value::nil())), &inner);
      }
      return sequence(listToVec(forms, x, "case clause"), &inner);
    };
    for (size_t i = 0; i < clauses.size(); i++) {
      Value c = clauses[i];
      if (!isPair(c)) syntaxError("bad case clause", x);
      if (i == count) {
        n->otherwise = clauseBody(cdr(c));
        break;
      }
      if (!isList(car(c))) syntaxError("case clause data must be a list", x);
      n->data[i] = stripSyntax(car(c));
      n->bodies[i] = clauseBody(cdr(c));
    }
    return n;
  }

  // (do ((var init step)...) (test res...) body...) as a named let
  Node* doForm(Value x, Scope* scope) {
    if (listLength(x) < 3 || !isList(cadr(x)) || !isPair(caddr(x))) syntaxError("bad do", x);
    Value loop = gensym("do-loop");
    ValueVec bindings, steps;
    for (Value p = cadr(x); isPair(p); p = cdr(p)) {
      Value spec = car(p);
      if (!isPair(spec) || !isIdentifier(car(spec)) || !isPair(cdr(spec))) syntaxError("bad do binding", x);
      bindings.push_back(cons(car(spec), cons(cadr(spec), Value::nil())));
      steps.push_back(isPair(cddr(spec)) ? caddr(spec) : car(spec));
    }
    Value test = car(caddr(x));
    Value results = cdr(caddr(x));
    Value again = cons(loop, listFromArray(steps.data(), steps.size()));
    Value bodyForms = cdddr(x);
    Value sym_begin = intern("begin"), sym_if = intern("if");
    Value loopBody = cons(sym_begin, listFromArray(nullptr, 0, cons(again, Value::nil())));
    if (!bodyForms.isNil()) {
      ValueVec b = listToVec(bodyForms, x, "do body");
      b.push_back(again);
      loopBody = cons(sym_begin, listFromArray(b.data(), b.size()));
    }
    Value done = results.isNil() ? Value(cons(sym_if, cons(Value::f(), cons(Value::f(), Value::nil()))))
                                 : cons(sym_begin, results);
    Value ifForm = listFromArray(std::array<Value, 4>{sym_if, test, done, loopBody}.data(), 4);
    Value named = listFromArray(std::array<Value, 4>{intern("let"), loop, listFromArray(bindings.data(), bindings.size()), ifForm}.data(), 4);
    return analyze(named, scope);
  }

  Node* guard(Value x, Scope* scope) {
    // (guard (var clause...) body...)
    if (!isPair(cdr(x)) || !isPair(cadr(x)) || !isIdentifier(car(cadr(x)))) syntaxError("bad guard", x);
    auto* n = node<GuardNode>(Op::Guard);
    n->body = body(cddr(x), scope, x);
    Scope inner;
    inner.parent = scope;
    inner.lambda = scope->lambda;
    n->slot = newSlot(scope);
    bind(&inner, car(cadr(x)), n->slot, false);
    auto* reraise = node<ReraiseNode>(Op::Reraise);
    reraise->slot = n->slot;
    n->handler = cond(cdr(cadr(x)), &inner, x, reraise);
    return n;
  }

  // ---- special forms ----

  Node* special(Special sp, Value x, Scope* scope) {
    size_t len = listLength(x);
    if (len == SIZE_MAX) syntaxError("improper special form", x);
    switch (sp) {
      case Special::Quote:
        if (len != 2) syntaxError("quote takes one datum", x);
        return constant(stripSyntax(cadr(x)));
      case Special::Quasiquote:
        if (len != 2) syntaxError("quasiquote takes one template", x);
        return analyze(expandQuasiquote(in, cadr(x), [&](Value id, const char* name) { return isKeywordNamed(id, scope, name); }),
                       scope);
      case Special::Lambda:
        if (len < 3) syntaxError("lambda needs parameters and a body", x);
        return lambda(cadr(x), cddr(x), scope, Value::f(), x);
      case Special::NamedLambda:
        if (len < 3 || !isPair(cadr(x))) syntaxError("bad named-lambda", x);
        return lambda(cdr(cadr(x)), cddr(x), scope, car(cadr(x)), x);
      case Special::Define: {
        Value name, value;
        normalizeDefine(x, name, value);
        if (scope->parent) syntaxError("define is only allowed at the start of a body or at top level", x);
        auto* n = node<SetGlobalNode>(Op::DefineGlobal);
        n->cell = in.definitionCell(baseSymbol(name));
        n->value = analyzeNamed(value, scope, name);
        return n;
      }
      case Special::Set: {
        if (len != 3 || !isIdentifier(cadr(x))) syntaxError("set! takes a variable and a value", x);
        Resolved r = resolve(cadr(x), scope);
        Node* value = analyze(caddr(x), scope);
        if (r.kind == Resolved::Local) {
          auto* n = node<SetLocalNode>(Op::SetLocal);
          n->depth = r.depth;
          n->index = r.slot;
          n->value = value;
          return n;
        }
        if (r.kind != Resolved::Global) syntaxError("set!: cannot assign a syntax keyword", x);
        auto* n = node<SetGlobalNode>(Op::SetGlobal);
        n->cell = r.cell;
        n->value = value;
        return n;
      }
      case Special::If:
        if (len != 3 && len != 4) syntaxError("if takes a test, a consequent and an optional alternative", x);
        return ifNode(analyze(cadr(x), scope), analyze(caddr(x), scope),
                      len == 4 ? analyze(car(cdddr(x)), scope) : constant(Value::unspecified()));
      case Special::Begin:
        if (len == 1) return constant(Value::unspecified());
        return sequence(listToVec(cdr(x), x, "begin"), scope);
      case Special::Let: return let(x, scope);
      case Special::LetStar: return letStar(x, scope);
      case Special::Letrec: case Special::LetrecStar: return letrec(x, scope);
      case Special::DefineSyntax: {
        if (len != 3 || !isIdentifier(cadr(x))) syntaxError("bad define-syntax", x);
        if (scope->parent) syntaxError("define-syntax here is only allowed at the start of a body", x);
        Value m = macroFromSpec(caddr(x), scope->parent ? scope : nullptr, cadr(x), x);
        in.definitionCell(baseSymbol(cadr(x)))->value = m;
        return constant(Value::unspecified());
      }
      case Special::DefineMacro: {
        // (define-macro (name . params) body...) or (define-macro name (lambda ...))
        if (len < 3) syntaxError("bad define-macro", x);
        Value target = cadr(x);
        Value name, proc;
        if (isPair(target)) {
          name = car(target);
          proc = in.evalForm(cons(intern("lambda"), cons(cdr(target), cddr(x))));
        } else {
          name = target;
          proc = in.evalForm(caddr(x));
        }
        if (!isIdentifier(name) || !isProcedure(proc)) syntaxError("bad define-macro", x);
        in.definitionCell(baseSymbol(name))->value = makeMacro(proc, nullptr, in.currentNamespace(), baseSymbol(name), true);
        return constant(Value::unspecified());
      }
      case Special::LetSyntax: return letSyntax(x, scope, false);
      case Special::LetrecSyntax: return letSyntax(x, scope, true);
      case Special::SyntaxRules: syntaxError("syntax-rules outside define-syntax", x);
      case Special::And: return andOr(x, scope, Op::And);
      case Special::Or: return andOr(x, scope, Op::Or);
      case Special::When: case Special::Unless: {
        if (len < 2) syntaxError("when/unless needs a test", x);
        Node* test = analyze(cadr(x), scope);
        Node* b = sequence(listToVec(cddr(x), x, "body"), scope);
        Node* none = constant(Value::unspecified());
        return sp == Special::When ? ifNode(test, b, none) : ifNode(test, none, b);
      }
      case Special::Cond: return cond(cdr(x), scope, x, nullptr);
      case Special::Case: return caseForm(x, scope);
      case Special::Do: return doForm(x, scope);
      case Special::Guard: return guard(x, scope);
      case Special::Include: return analyze(expandInclude(in, x, pos, positions), scope);
      case Special::CondExpand: return analyze(expandCondExpand(in, x, pos), scope);
      case Special::Import:
        for (Value p = cdr(x); isPair(p); p = cdr(p)) in.importLibrary(stripSyntax(car(p)));
        return constant(Value::unspecified());
      case Special::DefineLibrary:
        if (scope->parent) syntaxError("define-library must be at top level", x);
        in.defineLibrary(stripSyntax(x), positions);
        return constant(Value::unspecified());
      case Special::Else: case Special::Arrow: case Special::Unquote: case Special::UnquoteSplicing:
      case Special::None:
        break;
    }
    syntaxError("bad syntax", x);
  }
};

}  // namespace

Node* analyzeToplevel(Interp& in, Value form, PositionTable* positions, uint32_t* frameSize, uint16_t* ownable) {
  SourcePos start{Value::f(), 0, 0};
  if (positions && form.is(Kind::Symbol)) {   // a variable alone: the reader recorded where
    auto it = positions->find(form.obj());
    if (it != positions->end()) start = it->second;
  }
  Analyzer a{in, positions, start};
  LambdaInfo top;
  Scope scope;
  scope.lambda = &top;
  Node* n = a.analyze(form, &scope);
  *frameSize = top.frameSize;
  uint16_t slots = analyzeToplevelOwnership(n, top.frameSize);
  if (ownable) *ownable = slots;
  return n;
}

}  // namespace purple
