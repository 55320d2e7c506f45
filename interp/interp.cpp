// Interp: construction (builtins, prelude), globals, top-level evaluation, raise, backtraces.
#include "interp/interp.hpp"
#include "interp/interp_state.hpp"
#include "interp/node.hpp"
#include "interp/reader.hpp"
#include "interp/printer.hpp"
#include "interp/port.hpp"
#include "interp/gc.hpp"
#include "interp/cpu_allocator.hpp"
#include "builtins/builtins.hpp"
#include <gc/gc.h>
#include <pthread.h>
#include <fstream>
#include <sstream>

namespace purple {

struct PreludeSource { const char* name; const char* text; };
extern const PreludeSource kPreludeSources[];
extern const std::size_t kPreludeSourceCount;

namespace {
thread_local Interp* tCurrent = nullptr;
thread_local char* tStackLimit = nullptr;
}  // namespace

Value (*Interp::extensionApplyHook)(Interp&, Value, const Value*, int) = nullptr;

Interp* Interp::current() { return tCurrent; }
InterpScope::InterpScope(Interp* i) : prev_(tCurrent) { tCurrent = i; }
InterpScope::~InterpScope() { tCurrent = prev_; }

Interp::Interp() {
  gcInit();
  gcRegisterCurrentThread();
  installCpuAllocator();
  st = static_cast<State*>(gcAllocRoot(sizeof(State)));
  Value* fields = reinterpret_cast<Value*>(st);
  for (size_t i = 0; i < sizeof(State) / sizeof(Value); i++) fields[i] = Value::f();
  st->handlers = Value::nil();
  st->libraries = Value::nil();
  globals_ = new GlobalMap();
  callStack = static_cast<CallRecord*>(std::calloc(size_t(kMaxDepthCap) + 2, sizeof(CallRecord)));
  if (!callStack) throw std::bad_alloc();
  InterpScope scope(this);
  ensureStackLimit();
  st->outputPort = makeConsoleOutputPort(stdout);
  st->errorPort = makeConsoleOutputPort(stderr);
  st->inputPort = makeConsoleInputPort(stdin);
  registerAllBuiltins(*this);
  st->primCons = lookupGlobal("cons");
  st->primList = lookupGlobal("list");
  st->primAppend = lookupGlobal("append");
  st->primListToVector = lookupGlobal("list->vector");
  const char* features[] = {"r7rs", "exact-closed", "exact-complex-free", "ratios", "full-unicode",
                            "purple", "libtorch", "posix", "linux", "x86-64", "swank-free"};
  st->features = Value::nil();
  for (const char* f : features) st->features = cons(intern(f), st->features);
  for (size_t i = 0; i < kPreludeSourceCount; i++)
    evalString(kPreludeSources[i].text, std::string("prelude/") + kPreludeSources[i].name);
}

Interp::~Interp() {
  for (auto& f : onDestroy) f(*this);
  // Drop every root this interpreter holds so a final collection can free its objects
  // (and run the finalizers of its tensors).
  for (auto& kv : *globals_) kv.second->value = Value::unbound();
  delete globals_;
  Value* fields = reinterpret_cast<Value*>(st);
  for (size_t i = 0; i < sizeof(State) / sizeof(Value); i++) fields[i] = Value::f();
  gcFreeRoot(st);
  std::free(callStack);
}

namespace {
// The lowest address the C++ code of this thread may reach before "recursion too deep".
char* threadStackLimit() {
  if (tStackLimit == nullptr) {
    pthread_attr_t attr;
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &addr, &size);
      pthread_attr_destroy(&attr);
    }
    // Keep 256 KB for the C++ code (LibTorch included) that runs below the deepest eval.
    size_t margin = 256 * 1024;
    if (addr && size > 2 * margin) tStackLimit = static_cast<char*>(addr) + margin;
    else tStackLimit = reinterpret_cast<char*>(__builtin_frame_address(0)) - 4 * 1024 * 1024;
  }
  return tStackLimit;
}
}  // namespace

void setCurrentThreadStackLimit(char* lowest) { tStackLimit = lowest; }

bool stackNearlyFull() { return reinterpret_cast<char*>(__builtin_frame_address(0)) < threadStackLimit(); }

void Interp::ensureStackLimit() {
  stackLimit = threadStackLimit();
  if (limits.maxDepth > kMaxDepthCap) limits.maxDepth = kMaxDepthCap;
}

void Interp::resetBudgets() {
  stepBudgetLeft = limits.maxSteps;
  hasDeadline = limits.maxSeconds > 0;
  if (hasDeadline)
    deadline = std::chrono::steady_clock::now() +
               std::chrono::microseconds(int64_t(limits.maxSeconds * 1e6));
  stepsLeft = 1;   // check at the first call
}

// ---- globals ---------------------------------------------------------------------------------

GlobalCell* Interp::globalCell(Value symbol) {
  symbol = symbol.is(Kind::Alias) ? Value(symbol.as<Alias>()->symbol) : symbol;
  auto it = globals_->find(symbol.obj());
  if (it != globals_->end()) return it->second;
  auto* cell = allocObject<GlobalCell>(Kind::GlobalCell);
  cell->value = Value::unbound();
  cell->name = symbol;
  cell->doc = Value::f();
  globals_->emplace(symbol.obj(), cell);
  return cell;
}

GlobalCell* Interp::findGlobal(Value symbol) const {
  auto it = globals_->find(symbol.obj());
  return it == globals_->end() ? nullptr : it->second;
}

void Interp::defineGlobal(std::string_view name, Value v, Value doc) {
  GlobalCell* c = globalCell(intern(name));
  c->value = v;
  if (!doc.isFalse()) c->doc = doc;
}

Value Interp::lookupGlobal(std::string_view name) const {
  GlobalCell* c = findGlobal(intern(name));
  return c ? shareValue(c->value) : Value::unbound();
}

// ---- evaluation ------------------------------------------------------------------------------

Value Interp::evalForm(Value form, PositionTable* positions) {
  InterpScope scope(this);
  if (depth == 0) ensureStackLimit();
  uint32_t frameSize = 0;
  Node* node = analyzeToplevel(*this, form, positions, &frameSize);
  auto* f = static_cast<Frame*>(gcAlloc(sizeof(Frame) + frameSize * sizeof(Value)));
  f->kind = Kind::Frame;
  f->extra = frameSize;
  f->parent = nullptr;
  for (uint32_t i = 0; i < frameSize; i++) f->slots[i] = Value::unbound();
  return eval(node, f);
}

Value Interp::evalString(std::string_view text, std::string_view sourceName) {
  InterpScope scope(this);
  Value source = makeString(sourceName);
  Value result = Value::unspecified();
  // Read and run one form at a time: a definition (or a macro) is in effect for the forms
  // after it, and a read error late in a file does not stop the forms before it.
  PositionTable positions;
  Reader r(text, source, &positions);
  Value form;
  while (true) {
    positions.clear();
    if (!r.read(form)) break;
    result = evalForm(form, &positions);
  }
  return result;
}

void requireFileAccess(std::string_view who) {
  Interp* in = Interp::current();
  if (in && !in->limits.allowFiles)
    throwError("file-error", std::string(who) + ": file access is disabled in this interpreter");
}

Value Interp::loadFile(const std::string& path) {
  if (!limits.allowFiles) throwError("file-error", "load: file access is disabled in this interpreter");
  std::ifstream in(path, std::ios::binary);
  if (!in) throwError("file-error", "cannot open file: " + path, listFromArray(nullptr, 0));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() >= 2 && text[0] == '#' && text[1] == '!') {
    // a #! line: blank it out, keeping line numbers right
    size_t nl = text.find('\n');
    text.replace(0, nl == std::string::npos ? text.size() : nl, "");
  }
  Value saved = st->currentFile;
  st->currentFile = makeString(path);
  struct Restore {
    State* st;
    Value v;
    ~Restore() { st->currentFile = v; }
  } restore{st, saved};
  return evalString(text, path);
}

std::string Interp::resolveRelative(const std::string& path, const SourcePos& from) {
  if (!path.empty() && path[0] == '/') return path;
  std::string base;
  if (isString(from.file)) base = std::string(stringView(from.file));
  else if (isString(st->currentFile)) base = std::string(stringView(st->currentFile));
  size_t slash = base.rfind('/');
  if (slash == std::string::npos) return path;
  std::string candidate = base.substr(0, slash + 1) + path;
  if (std::ifstream(candidate).good()) return candidate;
  return path;
}

Value Interp::applyExtension(Value fn, const Value* argv, int argc) {
  if (extensionApplyHook) return extensionApplyHook(*this, fn, argv, argc);
  throwError("type-error", "attempt to call a non-procedure: " + toWriteString(fn), listFromArray(&fn, 1));
}

// ---- raise -----------------------------------------------------------------------------------

namespace {
struct HandlerRestore {
  State* st;
  Value saved;
  ~HandlerRestore() { st->handlers = saved; }
};
}  // namespace

void Interp::raise(Value payload, bool continuable) {
  if (payload.is(Kind::ErrorObject) && payload.as<ErrorObject>()->backtrace.isNil())
    payload.as<ErrorObject>()->backtrace = backtrace();
  Value h = st->handlers;
  if (isPair(h) && !car(h).isFalse()) {
    Value handler = car(h);
    {
      HandlerRestore restore{st, h};
      st->handlers = cdr(h);
      Value result = apply(handler, {payload});
      if (continuable) {
        // only reached through raiseContinuable's path below; kept for completeness
        (void)result;
      }
      // A handler returned from a non-continuable raise: a secondary error, raised where the
      // handler ran (the outer handlers see it).
      Value err = makeError(intern("error"), "exception handler returned from a non-continuable raise",
                            listFromArray(&payload, 1));
      raise(err, false);
    }
  }
  PurpleException e(payload, continuable);
  e.setOffered(true);
  throw e;
}

Value Interp::raiseContinuable(Value payload) {
  Value h = st->handlers;
  if (isPair(h) && !car(h).isFalse()) {
    HandlerRestore restore{st, h};
    st->handlers = cdr(h);
    return apply(car(h), {payload});
  }
  PurpleException e(payload, true);
  e.setOffered(true);
  throw e;
}

// ---- backtraces and error reports ------------------------------------------------------------

static std::string formatPos(const SourcePos& p) {
  if (p.line <= 0) return "";
  std::string file = isString(p.file) ? std::string(stringView(p.file)) : "<input>";
  return file + ":" + std::to_string(p.line) + ":" + std::to_string(p.col);
}

Value Interp::backtrace() const {
  Value frames = Value::nil();
  int64_t shown = 0;
  std::string last;
  // collect innermost first: walk from the outermost and cons
  for (int64_t i = 1; i <= depth; i++) {
    const CallRecord& r = callStack[i];
    if (!r.node || r.node->op() != Op::App) continue;
    auto* app = static_cast<AppNode*>(r.node);
    std::string where = formatPos(app->pos);
    std::string name = r.proc.isFalse() ? std::string("?") : describeProcedure(r.proc);
    std::string line = "  in " + name + (where.empty() ? "" : " at " + where);
    if (line == last) continue;
    last = line;
    frames = cons(makeString(line), frames);
    shown++;
  }
  // keep the innermost 30 frames
  Value out = Value::nil();
  int64_t n = 0;
  Value rev = Value::nil();
  for (Value p = frames; isPair(p) && n < 30; p = cdr(p), n++) rev = cons(car(p), rev);
  if (shown > 30) rev = cons(makeString("  ... " + std::to_string(shown - 30) + " more frames"), rev);
  for (Value p = rev; isPair(p); p = cdr(p)) out = cons(car(p), out);
  return out;
}

std::string Interp::formatError(Value payload) const {
  std::string out;
  Value trace = Value::nil();
  if (payload.is(Kind::ErrorObject)) {
    auto* e = payload.as<ErrorObject>();
    out = "Error: " + errorMessage(payload);
    trace = e->backtrace;
  } else {
    out = "Error: uncaught exception: " + toWriteString(payload);
  }
  for (Value p = trace; isPair(p); p = cdr(p)) {
    out += "\n";
    out += stringView(car(p));
  }
  return out;
}

Value Interp::currentOutputPort() { return st->outputPort.is(Kind::Parameter) ? st->outputPort.as<Parameter>()->value : st->outputPort; }
Value Interp::currentErrorPort() { return st->errorPort.is(Kind::Parameter) ? st->errorPort.as<Parameter>()->value : st->errorPort; }
Value Interp::currentInputPort() { return st->inputPort.is(Kind::Parameter) ? st->inputPort.as<Parameter>()->value : st->inputPort; }

}  // namespace purple
