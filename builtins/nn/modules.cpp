// nn modules: the module value kind, calling a module (hooks, error paths), `sequential`,
// `forward`, linear, flatten and identity. The layer families are in their own files (conv.cpp,
// pooling.cpp, normalization.cpp, ... see layer.hpp), the module API (parameters, state dicts,
// summaries) in module_api.cpp, hooks in hooks.cpp; registerNnModules registers them all.
//
// Names shared by a module constructor and a functional op follow one rule: when the first
// argument is a tensor the call is functional (torch.nn.functional.NAME; for activations, dropout
// and flatten, `(f x args ...)` equals `((f args ...) x)`), otherwise it makes a module:
//   (conv2d 3 16 3)            a Conv2d module      (conv2d x weight bias :stride 2)  functional
//   (max-pool2d 2)             a MaxPool2d module   (max-pool2d x 2)                  functional
//   (relu)                     a ReLU module        (relu x)                          applies it
//   (softmax -1)               a Softmax module     (softmax x -1)                    applies it
//
// State dicts are alists ("name" . tensor) in PyTorch's order, so names and order match
// Python's `model.state_dict()` for the same architecture; load-state-dict! also takes a hash
// table or a file path.
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"
#include "interp/language/ownership.hpp"
#include "interp/core/gc.hpp"
#include "interp/language/borrowing_calls.hpp"
#include "interp/language/printer.hpp"
#include "interp/language/sampling_profiler.hpp"
#include "interp/memory/tensor_value.hpp"
#include <memory>
#include <mutex>
#include <unordered_map>

namespace purple {

using namespace nnlayer;

// ---- the module value --------------------------------------------------------------------------

namespace {
// A module's parameters live in LibTorch, not in tensor cells, so the collector never heard of
// them: 40 Linear(4096, 4096) made and dropped in a loop (64 MB each) peaked at 2.9 GB, since
// nothing in the loop allocated enough to start a collection. Each module charges its storage
// (chargeHeldStorage) the first time it becomes a value, once however many values wrap it, and
// the charge ends when the C++ module is gone. Submodules charged on their own are not counted
// again in their parent.
struct HeldModule {
  std::weak_ptr<Module> alive;
  int64_t bytes;
};
std::mutex gHeldLock;
std::unordered_map<const Module*, HeldModule>* gHeld = new std::unordered_map<const Module*, HeldModule>();

int64_t storageBytes(const at::Tensor& t) { return t.defined() ? int64_t(t.numel()) * int64_t(t.element_size()) : 0; }

// gHeldLock held.
int64_t unchargedBytes(const Module& m) {
  int64_t bytes = 0;
  for (const auto& p : m.parameters(false)) bytes += storageBytes(p);
  for (const auto& b : m.buffers(false)) bytes += storageBytes(b);
  for (const auto& c : m.children()) {
    auto it = gHeld->find(c.get());
    if (it == gHeld->end() || it->second.alive.expired()) bytes += unchargedBytes(*c);
  }
  return bytes;
}

void chargeModule(const ModulePtr& m) {
  int64_t bytes = 0, stale = 0;
  {
    std::lock_guard<std::mutex> lock(gHeldLock);
    auto it = gHeld->find(m.get());
    if (it != gHeld->end()) {
      if (!it->second.alive.expired()) return;
      stale = it->second.bytes;   // a dead module's address, reused
      gHeld->erase(it);
    }
    bytes = unchargedBytes(*m);
    gHeld->emplace(m.get(), HeldModule{m, bytes});
  }
  unchargeHeldStorage(stale);
  chargeHeldStorage(bytes);   // outside the lock: it may collect, and module finalizers take it
}

// After a module died: ends the charges of every charged module that is gone (its submodules
// die with it, long after their own values were collected).
void releaseDeadModules() {
  int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(gHeldLock);
    for (auto it = gHeld->begin(); it != gHeld->end();) {
      if (it->second.alive.expired()) {
        bytes += it->second.bytes;
        it = gHeld->erase(it);
      } else {
        ++it;
      }
    }
  }
  unchargeHeldStorage(bytes);
}

void finalizeModule(void* obj, void*) {
  auto* cell = static_cast<ModuleObj*>(obj);
  bool last = cell->module && cell->module.use_count() == 1;
  cell->module.~shared_ptr<Module>();
  if (last) releaseDeadModules();
}
}  // namespace

Value wrapModule(ModulePtr m) {
  if (m) chargeModule(m);
  auto* cell = static_cast<ModuleObj*>(gcAllocAtomic(sizeof(ModuleObj)));
  cell->kind = Kind::Module;
  cell->flags = 0;
  cell->small = 0;
  cell->extra = 0;
  new (&cell->module) ModulePtr(std::move(m));
  gcRegisterFinalizer(cell, finalizeModule, nullptr);
  return Value(cell);
}

bool isModule(Value v) { return v.is(Kind::Module); }

at::Tensor ModuleForward::tensorForward(const at::Tensor&) {
  throwError("internal-error", typeName() + ": no tensor fast path");
}

const ModulePtr& moduleArg(Value v, std::string_view who, int argIndex) {
  if (!isModule(v)) throwTypeError(who, argIndex, "a module", v);
  const ModulePtr& m = v.as<ModuleObj>()->module;
  if (!m) throwError("type-error", std::string(who) + ": the module was already released");
  return m;
}

std::string moduleTypeName(const Module& m) {
  if (auto* f = dynamic_cast<const ModuleForward*>(&m)) return f->typeName();
  std::string n = m.name();
  if (n.rfind("torch::nn::", 0) == 0) n = n.substr(11);
  if (n.size() > 4 && n.compare(n.size() - 4, 4, "Impl") == 0) n.resize(n.size() - 4);
  return n;
}

// ---- calling modules: the running stack and error paths -------------------------------------------

namespace {

// The modules whose forward is running on this thread, outermost first: what an error's module
// path is read from.
thread_local std::vector<Module*> tCalls;
// The error object that last got its module path (compared, never dereferenced): an error passes
// through every enclosing call, and only the innermost, which knows the whole path, names it.
thread_local const void* tNamedError = nullptr;

struct CallFrame {
  explicit CallFrame(Module* m) { tCalls.push_back(m); }
  ~CallFrame() { tCalls.pop_back(); }
};

// The dotted path of the innermost running module below the outermost one ("encoder.layers.0");
// "" when the innermost is the outermost. A module called that is not a descendant of its caller
// (a global module used inside a forward) starts the path again.
std::string runningPath() {
  std::string path;
  for (size_t k = 1; k < tCalls.size(); k++) {
    if (tCalls[k] == tCalls[k - 1]) continue;
    std::string name;
    for (const auto& c : tCalls[k - 1]->named_modules("", /*include_self=*/false))
      if (c.value().get() == tCalls[k]) {
        name = c.key();
        break;
      }
    path = name.empty() ? std::string() : (path.empty() ? name : path + "." + name);
  }
  return path;
}

// A module's name on a profile's stack (interp/language/sampling_profiler.hpp): its path below
// the module called outside it, when it is one of that one's descendants, else a path of its own.
ModuleFrameName profiledModuleName(Value module, Value parent, const std::string& parentPath) {
  const ModulePtr& m = module.as<ModuleObj>()->module;
  if (!m) return {"module", "#<module (released)>"};
  std::string type = moduleTypeName(*m);
  if (parent.is(Kind::Module) && parent.as<ModuleObj>()->module) {
    const ModulePtr& p = parent.as<ModuleObj>()->module;
    if (p.get() == m.get()) return {parentPath, parentPath};
    for (const auto& c : p->named_modules("", /*include_self=*/false))
      if (c.value().get() == m.get()) {
        std::string path = parentPath + "." + c.key();
        return {path, path + " (" + type + ")"};
      }
  }
  return {type, type};
}

[[noreturn]] void throwModuleError(const char* kind, const std::string& typeName, const std::string& message) {
  std::string path = runningPath();
  std::string text = path.empty() ? typeName + ": " + message : "in module " + path + " (" + typeName + "): " + message;
  try {
    throwError(kind, text);
  } catch (const PurpleException& e) {
    tNamedError = e.payload().isObject() ? e.payload().obj() : nullptr;
    throw;
  }
}

// A Purple error passing out of a submodule's forward: the innermost call adds the path.
void nameError(const PurpleException& e, const std::string& typeName) {
  if (dynamic_cast<const PurpleInterrupt*>(&e)) return;
  Value p = e.payload();
  if (!p.is(Kind::ErrorObject) || tNamedError == p.obj()) return;
  tNamedError = p.obj();
  std::string path = runningPath();
  if (path.empty()) return;
  auto* err = p.as<ErrorObject>();
  std::string msg = isString(err->message) ? std::string(stringView(err->message)) : toDisplayString(err->message);
  err->message = makeString("in module " + path + " (" + typeName + "): " + msg);
}

template <class Body>
auto runNamed(Module* m, ModuleForward* f, Body body) -> decltype(body()) {
  CallFrame frame(m);
  try {
    return body();
  } catch (const PurpleException& e) {
    nameError(e, f->typeName());
    throw;
  } catch (const ContinuationInvoked&) {
    throw;
  } catch (const c10::Error& e) {
    throwModuleError("tensor-error", f->typeName(), trimMessage(e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    gcCollectNow();
    throwModuleError("memory-error", f->typeName(), "out of memory");
  } catch (const std::exception& e) {
    throwModuleError("error", f->typeName(), trimMessage(e.what()));
  }
}

}  // namespace

Value callModule(Interp& in, const ModulePtr& m, const Value* argv, int argc) {
  ModulePtr keep = m;   // the cell may become garbage while its forward runs
  auto* f = dynamic_cast<ModuleForward*>(keep.get());
  if (!f) throwError("type-error", "module " + moduleTypeName(*keep) + " has no forward that Purple can call");
  return runNamed(keep.get(), f, [&]() -> Value {
    if (f->hooks) return forwardWithHooks(in, keep, *f, argv, argc);
    return f->forward(in, argv, argc);
  });
}

at::Tensor callModuleTensor(const ModulePtr& m, const at::Tensor& x) {
  auto* f = dynamic_cast<ModuleForward*>(m.get());
  if (!f) throwError("type-error", "module " + moduleTypeName(*m) + " has no forward that Purple can call");
  if (f->hasTensorForward() && !f->hooks) return runNamed(m.get(), f, [&] { return f->tensorForward(x); });
  Interp* in = Interp::current();
  if (!in) throwError("internal-error", f->typeName() + ": called outside an interpreter");
  Value arg = wrapTensor(x);
  Value r = callModule(*in, m, &arg, 1);
  if (!isTensor(r) || !tensorOf(r).defined())
    throwError("type-error", f->typeName() + ": forward returned " + toWriteString(r) + " where a tensor was expected");
  return tensorOf(r);
}

at::Tensor runModuleBody(Module& m, const std::function<at::Tensor()>& body) {
  auto* f = dynamic_cast<ModuleForward*>(&m);
  if (!f) throwError("type-error", "module " + moduleTypeName(m) + " is not a Purple module");
  return runNamed(&m, f, body);
}

ForwardArgs splitForwardArgs(const Value* argv, int argc, const std::string& who,
                             std::initializer_list<const char*> allowed) {
  ForwardArgs r;
  int i = 0;
  while (i < argc && !isKeyword(argv[i])) r.positional.push_back(argv[i++]);
  while (i < argc) {
    if (!isKeyword(argv[i]))
      throwError("arity-error", who + ": unexpected argument " + toWriteString(argv[i]) + " after keywords");
    std::string k(symbolName(argv[i]));
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) {
      std::string known;
      for (const char* a : allowed) known += std::string(known.empty() ? ":" : " :") + a;
      throwError("arity-error", who + ": unknown keyword :" + k + " (known: " + (known.empty() ? "none" : known) + ")");
    }
    if (i + 1 >= argc) throwError("arity-error", who + ": keyword :" + k + " needs a value");
    r.keys.emplace_back(k, argv[i + 1]);
    i += 2;
  }
  return r;
}

Value ForwardArgs::key(std::string_view name) const {
  for (auto& kv : keys)
    if (kv.first == name) return kv.second;
  return Value::missing();
}

namespace {

// ---- sequential --------------------------------------------------------------------------------

struct SequentialModule : Module, ModuleForward {
  SequentialModule() : Module("Sequential") {}
  std::vector<std::pair<std::string, ModulePtr>> items;   // also registered as children
  bool allTensor = true;
  std::string typeName() const override { return "Sequential"; }
  void pretty_print(std::ostream& s) const override { s << "Sequential"; }

  void add(const std::string& name, ModulePtr m) {
    register_module(name, m);
    auto* f = dynamic_cast<ModuleForward*>(m.get());
    allTensor = allTensor && f && f->hasTensorForward();
    items.emplace_back(name, std::move(m));
  }

  bool hasTensorForward() const override { return allTensor; }
  at::Tensor tensorForward(const at::Tensor& x) override {
    at::Tensor t = x;
    for (auto& item : items) t = callModuleTensor(item.second, t);
    return t;
  }
  // It keeps none of its arguments when none of its items does (asked at every call: a hook may
  // come on an item at any time).
  bool forwardBorrows() const override {
    for (const auto& item : items) {
      auto* f = dynamic_cast<ModuleForward*>(item.second.get());
      if (!f || !f->forwardBorrows() || moduleHasHooks(*item.second)) return false;
    }
    return true;
  }

  // Item M on ARG: a new cell for T (MADE), or the previous item's result. An item that keeps no
  // argument borrows it, and it dies when the item returns, unless returned, as an intermediate
  // does in Python (interp/language/ownership.hpp): a cell made here, or a result that came in
  // flight; a shared result is left to the collector.
  static Value callItem(Interp& in, const ModulePtr& m, Value arg, bool made) {
    auto* f = dynamic_cast<ModuleForward*>(m.get());
    if (!f || !f->forwardBorrows() || moduleHasHooks(*m)) {
      Value shared = shareValue(arg);
      return callModule(in, m, &shared, 1);
    }
    if (made) markSoleOwned(arg);
    Value r = runNamed(m.get(), f, [&]() -> Value { return f->forwardBorrowing(in, &arg, 1); });
    if (r != arg && isSoleOwned(arg)) releaseOwned(arg, &r, 1);
    return r;
  }

  Value forward(Interp& in, const Value* argv, int argc) override {
    if (items.empty()) {
      if (argc != 1) throwError("arity-error", "Sequential: an empty sequential takes 1 argument");
      return argv[0];
    }
    at::Tensor t;
    bool haveT = false;
    Value v = Value::unspecified();
    size_t i = 0;
    if (argc == 1 && isTensor(argv[0])) {
      t = tensorIn(argv[0], "Sequential", 1);
      haveT = true;
    } else {
      v = callModule(in, items[0].second, argv, argc);   // (the caller's arguments: shared or lent)
      i = 1;
      if (isTensor(v) && tensorOf(v).defined()) t = tensorOf(v), haveT = true;
    }
    bool vIsT = !haveT || i == 1;   // v holds t (so it can be returned as is)
    if (i == 0) vIsT = false;
    for (; i < items.size(); i++) {
      auto* f = dynamic_cast<ModuleForward*>(items[i].second.get());
      if (haveT && f && f->hasTensorForward() && !f->hooks) {
        t = callModuleTensor(items[i].second, t);
        vIsT = false;
        continue;
      }
      bool made = haveT && !vIsT;
      v = callItem(in, items[i].second, made ? wrapTensor(t) : v, made);
      haveT = isTensor(v) && tensorOf(v).defined();
      if (haveT) t = tensorOf(v);
      vIsT = true;
    }
    if (!haveT) return v;
    return vIsT ? v : wrapTensor(t);
  }
};

// ---- the apply hook: (model x) --------------------------------------------------------------------

Value (*gPreviousApplyHook)(Interp&, Value, const Value*, int) = nullptr;

Value moduleApplyHook(Interp& in, Value fn, const Value* argv, int argc) {
  if (isModule(fn)) return callModule(in, moduleArg(fn, "apply", 0), argv, argc);
  if (gPreviousApplyHook) return gPreviousApplyHook(in, fn, argv, argc);
  throwError("type-error", "attempt to call a non-procedure:", listFromArray(&fn, 1));
}

// A one-tensor layer (LibTorch's, a function layer, a sequential of them) takes its argument's
// tensor and wraps its result in a new cell, or returns the argument cell itself; a
// define-module forward's parameters borrow their arguments (ModuleForward::forwardBorrows).
// Neither keeps an argument cell. Hooks see the arguments and may keep them: a module with hooks
// does not borrow.
bool moduleBorrowsArguments(Value fn) {
  if (!isModule(fn)) return false;
  const ModulePtr& m = moduleArg(fn, "apply", 0);
  auto* f = dynamic_cast<ModuleForward*>(m.get());
  return f && f->forwardBorrows() && !moduleHasHooks(*m);
}

// Calls a module moduleBorrowsArguments accepted, as callModule would (its errors name it).
Value callBorrowingModuleNow(Interp& in, Value fn, const Value* argv, int argc, bool* fresh) {
  ModulePtr keep = moduleArg(fn, "apply", 0);   // the cell may become garbage while its forward runs
  auto* f = dynamic_cast<ModuleForward*>(keep.get());
  *fresh = f->returnsNewValues();
  return runNamed(keep.get(), f, [&]() -> Value { return f->forwardBorrowing(in, argv, argc); });
}

}  // namespace

void registerNnModules(Registry& r) {
  setModuleFrameNamer(profiledModuleName);
  static bool hooked = false;
  if (!hooked) {
    hooked = true;
    gPreviousApplyHook = Interp::extensionApplyHook;
    Interp::extensionApplyHook = &moduleApplyHook;
    moduleCallBorrowsArguments = &moduleBorrowsArguments;
    callBorrowingModule = &callBorrowingModuleNow;
  }

  r.def("linear", "(in-features out-features :key (bias #t))",
        [](int64_t in, int64_t out, bool bias) {
          return makeLayer<torch::nn::LinearImpl>("Linear", torch::nn::LinearOptions(in, out).bias(bias));
        },
        "A fully connected layer y = x W^T + b (torch.nn.Linear): weight (OUT-FEATURES x IN-FEATURES), "
        "bias (OUT-FEATURES) unless :bias #f. Apply it with (forward m x) or (m x).");

  r.def("flatten", "(:optional a :key (start-dim 1) (end-dim -1))",
        [](Value a, int64_t start, int64_t end) -> Value {
          if (isTensor(a)) return wrapTensor(tensorArg(a, "flatten", 1).flatten(start, end));
          if (!a.isMissing()) throwTypeError("flatten", 1, "a tensor (or nothing, for the module)", a);
          return makeLayer<torch::nn::FlattenImpl>("Flatten", torch::nn::FlattenOptions().start_dim(start).end_dim(end));
        },
        "(flatten :start-dim 1 :end-dim -1) makes a Flatten module (torch.nn.Flatten: keeps the batch dimension); "
        "(flatten x) applies it to X. tensor-flatten flattens from dimension 0.", kPrimTensorFunction);

  r.def("sequential", "(. modules)",
        [](RestArgs rest) -> Value {
          auto seq = std::make_shared<SequentialModule>();
          int64_t k = 0;
          for (Value p = rest.list; isPair(p); p = cdr(p), k++) {
            Value x = car(p);
            std::string name = std::to_string(k);
            if (isPair(x) && (isString(car(x)) || x.is(Kind::Symbol)) && (isModule(cdr(x)) || isProcedure(cdr(x)))) {
              name = nameOf(car(x));
              x = cdr(x);
            }
            if (isModule(x)) seq->add(name, moduleArg(x, "sequential", int(k + 1)));
            else if (isProcedure(x)) seq->add(name, procedureModule(x));
            else throwTypeError("sequential", int(k + 1), "a module, a procedure or a (name . module) pair", x);
          }
          return wrapModule(seq);
        },
        "Composes MODULES in order: the output of each is the input of the next (torch.nn.Sequential). An item may "
        "be a module, a (name . module) pair (named child), or a procedure of one argument (a parameterless step). "
        "Children are named \"0\", \"1\" ... so parameter names match PyTorch's.");

  r.def("forward", "(model . args)",
        [](Interp& in, Value model, RestArgs rest) -> Value {
          std::vector<Value, traceable_allocator<Value>> args;
          for (Value p = rest.list; isPair(p); p = cdr(p)) args.push_back(car(p));
          if (isModule(model)) return callModule(in, moduleArg(model, "forward", 1), args.data(), int(args.size()));
          if (isProcedure(model)) return in.apply(model, args.data(), int(args.size()));
          throwTypeError("forward", 1, "a module", model);
        },
        "Runs MODEL's forward on ARGS: (forward model x). Applying a module directly, (model x), is the same.");

  r.def("module?", "(x)", [](Value x) { return isModule(x); }, "True when X is an nn module.");
  r.def("module=?", "(a b)",
        [](ModuleRef a, ModuleRef b) { return a.ptr.get() == b.ptr.get(); },
        "True when A and B are the same module (two values may hold one module, e.g. a child fetched twice).");
  r.def("module-type", "(m)", [](ModuleRef m) { return moduleTypeName(*m.ptr); },
        "The type name of module M, as PyTorch names its class: \"Linear\", \"LSTM\", \"Sequential\", a "
        "define-module name ...");

  registerConvolutions(r);
  registerPooling(r);
  registerNormalization(r);
  registerDropout(r);
  registerActivations(r);
  registerEmbeddings(r);
  registerRecurrent(r);
  registerTransformers(r);
  registerResampling(r);
  registerDistances(r);
  registerModuleApi(r);
  registerInit(r);
}

}  // namespace purple
