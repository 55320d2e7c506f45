// Modules defined in Purple: `make-module` (and the `define-module` form of prelude/30-nn.purple
// that expands into it). Each is a torch::nn::Module whose parameters, buffers and submodules are
// registered with LibTorch, so parameters, module-to, train/eval, state dicts and optimizers treat
// it exactly like a built-in layer; its forward is a Purple procedure, kept alive by a Root (the
// collector cannot see inside LibTorch's objects).
//
// A forward procedure that refers to its own module through a captured variable makes a cycle
// the collector cannot break (module -> root -> closure -> module); refer to globals, or use
// (current-module), instead.
#include <torch/nn/module.h>
#include "builtins/nn/value.hpp"
#include "builtins/builtins.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <sstream>

namespace purple {

namespace {

using torch::nn::Module;
using ModulePtr = std::shared_ptr<Module>;

// The modules whose Purple forward is running on this thread, innermost last.
thread_local std::vector<Module*> tRunning;

struct RunningGuard {
  explicit RunningGuard(Module* m) { tRunning.push_back(m); }
  ~RunningGuard() { tRunning.pop_back(); }
};

struct PurpleModule : Module, ModuleForward {
  explicit PurpleModule(std::string name) : Module(name), tname(std::move(name)) {}
  std::string tname;
  std::string detail;     // shown in the summary: Lambda(tensor-relu)
  Root forwardProc;       // unset: a container without forward
  std::vector<std::pair<std::string, Root>> methods;   // define-module's method clauses, in order
  std::string typeName() const override { return tname; }
  std::vector<std::string> methodNames() const override {
    std::vector<std::string> names;
    for (const auto& m : methods) names.push_back(m.first);
    return names;
  }
  bool callMethod(Interp& in, const std::string& name, const Value* argv, int argc, Value& result) override {
    for (const auto& m : methods)
      if (m.first == name) {
        RunningGuard g(this);
        result = in.apply(m.second.get(), argv, argc);
        return true;
      }
    return false;
  }
  void pretty_print(std::ostream& s) const override { s << tname << detail; }
  Value forward(Interp& in, const Value* argv, int argc) override {
    if (!forwardProc) throwError("type-error", tname + ": this module has no forward procedure");
    RunningGuard g(this);
    return in.apply(forwardProc.get(), argv, argc);
  }
  bool forwardBorrows() const override { return bool(forwardProc); }
  bool returnsNewValues() const override { return false; }   // whatever the procedure returns
  Value forwardBorrowing(Interp& in, const Value* argv, int argc) override {
    RunningGuard g(this);
    return in.applyOwning(forwardProc.get(), argv, argc);
  }
};

// A plain container of numbered children (PyTorch's ModuleList): no forward.
struct ModuleListModule : Module {
  ModuleListModule() : Module("ModuleList") {}
  void pretty_print(std::ostream& s) const override { s << "ModuleList"; }
};

std::string keyName(Value k, const char* who) {
  if (isString(k)) return std::string(stringView(k));
  if (k.is(Kind::Symbol)) return std::string(symbolName(k));
  throwError("type-error", std::string(who) + ": names must be strings or symbols, got " + toWriteString(k));
}

template <class F>
void forEachEntry(Value alist, const char* who, const char* what, F f) {
  if (alist.isMissing() || alist.isFalse()) return;
  if (!isList(alist)) throwError("type-error", std::string(who) + ": " + what + " must be an alist of (name . value), got " + toWriteString(alist));
  for (Value p = alist; isPair(p); p = cdr(p)) {
    Value e = car(p);
    if (!isPair(e)) throwError("type-error", std::string(who) + ": " + what + " entries must be (name . value) pairs, got " + toWriteString(e));
    f(keyName(car(e), who), cdr(e));
  }
}

ModulePtr childModule(Value v, const std::string& name, const char* who) {
  if (stackNearlyFull()) throwError("recursion-error", std::string(who) + ": submodules nested too deeply (or circular)");
  if (isModule(v)) return moduleArg(v, who, 1);
  if (isProcedure(v)) return procedureModule(v);
  if (isList(v) && !v.isNil()) {
    auto list = std::make_shared<ModuleListModule>();
    int k = 0;
    for (Value p = v; isPair(p); p = cdr(p), k++) list->register_module(std::to_string(k), childModule(car(p), name, who));
    return list;
  }
  throwError("type-error", std::string(who) + ": submodule \"" + name + "\" must be a module, a procedure or a list of modules, got " +
                               toWriteString(v));
}

std::string procedureLabel(Value proc) {
  if (proc.is(Kind::Primitive)) return primitiveName(proc);
  if (proc.is(Kind::Closure)) {
    Value n = proc.as<Closure>()->name;
    if (n.is(Kind::Symbol)) return std::string(symbolName(n));
  }
  return "lambda";
}

}  // namespace

std::shared_ptr<Module> procedureModule(Value proc) {
  auto m = std::make_shared<PurpleModule>("Lambda");
  m->detail = "(" + procedureLabel(proc) + ")";
  m->forwardProc = Root(proc);
  return m;
}

void registerNnDefine(Registry& r) {
  r.def("make-module", "(:key (name \"Module\") submodules parameters buffers forward methods)",
        [](std::string name, Value subs, Value params, Value bufs, Value forward, Value methods) -> Value {
          const char* who = "make-module";
          auto m = std::make_shared<PurpleModule>(name);
          forEachEntry(params, who, "parameters", [&](const std::string& n, Value t) {
            const at::Tensor& x = tensorArg(t, who, 1);
            if (!x.is_leaf())
              throwError("value-error", std::string(who) + ": parameter \"" + n +
                                            "\" must be a leaf tensor (one not computed from tensors that require gradients); "
                                            "use (tensor-detach t)");
            m->register_parameter(n, x, /*requires_grad=*/true);
          });
          forEachEntry(bufs, who, "buffers", [&](const std::string& n, Value t) { m->register_buffer(n, tensorArg(t, who, 1)); });
          forEachEntry(subs, who, "submodules", [&](const std::string& n, Value v) { m->register_module(n, childModule(v, n, who)); });
          if (!forward.isMissing() && !forward.isFalse()) {
            if (!isProcedure(forward)) throwTypeError(who, 5, "a procedure", forward);
            m->forwardProc = Root(forward);
          }
          forEachEntry(methods, who, "methods", [&](const std::string& n, Value proc) {
            if (!isProcedure(proc)) throwError("type-error", std::string(who) + ": method \"" + n + "\" must be a procedure, got " + toWriteString(proc));
            if (n == "forward") throwError("value-error", std::string(who) + ": forward is given by :forward, not as a method");
            for (const auto& e : m->methods)
              if (e.first == n) throwError("value-error", std::string(who) + ": two methods named " + n);
            m->methods.emplace_back(n, Root(proc));
          });
          return wrapModule(m);
        },
        "Makes a module from Purple parts: (make-module :name \"MLP\" :submodules (list (cons \"l1\" l1) ...) "
        ":parameters (list (cons \"scale\" t) ...) :buffers (list ...) :forward (lambda (x) ...) :methods (list (cons "
        "\"encode\" proc) ...)). Parameters (leaf "
        "tensors; they are made to require gradients), buffers and submodules are registered under their names, so "
        "parameters, state-dict, module-to and optimizers see them; a submodule may also be a procedure or a list of "
        "modules (registered as a ModuleList). The tensors given are the module's own: the forward procedure can use "
        "them directly. define-module is the usual way to write this.");

  r.def("module-set-submodule!", "(m name child)",
        [](ModuleRef m, Value nameValue, Value child) {
          const char* who = "module-set-submodule!";
          std::string name = keyName(nameValue, who);
          if (name.empty() || name.find('.') != std::string::npos)
            throwError("value-error", std::string(who) + ": a child's name is one non-empty part without dots, got \"" + name + "\"");
          bool present = m.ptr->named_children().contains(name);
          if (child.isFalse()) {
            if (present) m.ptr->unregister_module(name);
            return;
          }
          ModulePtr c = childModule(child, name, who);
          for (const auto& sub : c->modules())
            if (sub.get() == m.ptr.get()) throwError("value-error", std::string(who) + ": a module cannot contain itself");
          if (present) m.ptr->replace_module(name, c);
          else m.ptr->register_module(name, c);
        },
        "Registers CHILD (a module, a procedure or a list of modules) as M's submodule NAME after M was made, "
        "replacing one of that name, or removes it when CHILD is #f (setattr and delattr on a torch.nn.Module). "
        "Parameters, state-dict, module-to and optimizers made afterwards see the change; M's forward sees only what "
        "its own procedure refers to (adapters such as (purple text)'s LoRA keep CHILD there too).");

  r.def("%as-parameter", "(t)",
        [](const at::Tensor& t) {
          at::Tensor p = t.detach();
          p.set_requires_grad(true);
          return p;
        },
        "Internal (define-module): a leaf tensor sharing T's storage, requiring gradients.");

  r.def("current-module", "()",
        []() -> Value {
          if (tRunning.empty()) return Value::f();
          return wrapModule(tRunning.back()->shared_from_this());
        },
        "The module whose Purple forward or method is running (innermost), or #f: lets a define-module forward ask "
        "(module-training? (current-module)).");

  r.def("module-call", "(module method . args)",
        [](Interp& in, ModuleRef m, Value method, RestArgs args) -> Value {
          std::string name = keyName(method, "module-call");
          std::vector<Value, traceable_allocator<Value>> argv;
          for (Value p = args.list; isPair(p); p = cdr(p)) argv.push_back(car(p));
          if (name == "forward") return callModule(in, m.ptr, argv.data(), int(argv.size()));
          auto* f = dynamic_cast<ModuleForward*>(m.ptr.get());
          Value result;
          if (f && f->callMethod(in, name, argv.data(), int(argv.size()), result)) return result;
          std::string known = "forward";
          if (f)
            for (const auto& n : f->methodNames()) known += ", " + n;
          throwError("value-error", "module-call: " + moduleTypeName(*m.ptr) + " has no method " + name + " (it has " + known + ")");
        },
        "Calls METHOD (a symbol or string) of MODULE on ARGS: 'forward, a method clause of define-module, or a "
        "method of a TorchScript module. (module-call vae 'encode x) is what (vae-encode vae x) does.");

  r.def("module-methods", "(module)",
        [](ModuleRef m) -> Value {
          auto* f = dynamic_cast<ModuleForward*>(m.ptr.get());
          Value l = Value::nil();
          if (f) {
            auto names = f->methodNames();
            for (size_t i = names.size(); i-- > 0;) l = cons(intern(names[i]), l);
          }
          return cons(intern("forward"), l);
        },
        "The names of MODULE's methods, forward first: (forward encode decode) for a define-module with method "
        "clauses encode and decode.");
}

}  // namespace purple
