// Interp: construction (builtins, prelude), globals, top-level evaluation, raise, backtraces.
#include "interp/core/interp.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/language/node.hpp"
#include "interp/language/reader.hpp"
#include "interp/language/printer.hpp"
#include "interp/core/port.hpp"
#include "interp/core/gc.hpp"
#include "interp/memory/cpu_allocator.hpp"
#include "interp/limits/watchdog.hpp"
#include "interp/core/file_io.hpp"
#include "interp/limits/tensor_budget.hpp"
#include "builtins/builtins.hpp"
#include <gc/gc.h>
#include <pthread.h>
#include <algorithm>
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
  globals_ = userGlobals_ = makeGlobalMap();
  callStack = static_cast<CallRecord*>(std::calloc(size_t(kMaxDepthCap) + 2, sizeof(CallRecord)));
  if (!callStack) throw std::bad_alloc();
  gcAddGrowingRoots(callStack, &depth, sizeof(CallRecord));
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
  loadingPrelude = true;
  for (size_t i = 0; i < kPreludeSourceCount; i++)
    evalString(kPreludeSources[i].text, std::string("prelude/") + kPreludeSources[i].name);
  loadingPrelude = false;
  sealSystemNamespace();
}

Interp::GlobalMap* Interp::makeGlobalMap(const GlobalMap* copyOf) {
  void* memory = gcAllocRoot(sizeof(GlobalMap));
  try {
    return copyOf ? new (memory) GlobalMap(*copyOf) : new (memory) GlobalMap();
  } catch (...) {
    gcFreeRoot(memory);
    throw;
  }
}

void Interp::freeGlobalMap(GlobalMap* map) {
  map->~GlobalMap();
  gcFreeRoot(map);
}

Interp::~Interp() {
  if (deadlineArmed) disarmDeadline(this);
  for (auto& f : onDestroy) f(*this);
  closeTensorAccount(*this);   // tensors still charged to it keep it until they are freed
  // Drop every root this interpreter holds so a final collection can free its objects
  // (and run the finalizers of its tensors).
  for (GlobalMap* ns : libraryNamespaces_) {
    for (auto& kv : *ns) kv.second->value = Value::unbound();
    freeGlobalMap(ns);
  }
  for (auto& kv : *userGlobals_) kv.second->value = Value::unbound();
  freeGlobalMap(userGlobals_);
  if (systemGlobals_) freeGlobalMap(systemGlobals_);
  Value* fields = reinterpret_cast<Value*>(st);
  for (size_t i = 0; i < sizeof(State) / sizeof(Value); i++) fields[i] = Value::f();
  gcFreeRoot(st);
  gcRemoveGrowingRoots(callStack);
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
    // Keep 256 KB for the C++ code (LibTorch included) that runs below the deepest eval; on a
    // small stack, half of what is free below this frame. Free, not the size: glibc puts the
    // thread's static TLS at the top of its stack (LibTorch's takes about 110 KB), so a 192 KB
    // thread has under 80 KB to run on.
    size_t used = addr ? size_t(static_cast<char*>(addr) + size - reinterpret_cast<char*>(__builtin_frame_address(0))) : 0;
    size_t free = size > used ? size - used : 0;
    size_t margin = std::min<size_t>(256 * 1024, free / 2);
    if (addr && size > 0) tStackLimit = static_cast<char*>(addr) + margin;
    else tStackLimit = reinterpret_cast<char*>(__builtin_frame_address(0)) - 4 * 1024 * 1024;
  }
  return tStackLimit;
}
}  // namespace

void setCurrentThreadStackLimit(char* lowest) { tStackLimit = lowest; }

void pollCurrentInterp() {
  if (Interp* in = tCurrent) in->poll();
}

char* currentThreadStackLimit() { return threadStackLimit(); }

bool stackNearlyFull() { return reinterpret_cast<char*>(__builtin_frame_address(0)) < threadStackLimit(); }

void Interp::ensureStackLimit() {
  stackLimit = threadStackLimit();
  if (limits.maxDepth > kMaxDepthCap) limits.maxDepth = kMaxDepthCap;
}

void Interp::resetBudgets() {
  stepBudgetLeft = limits.maxSteps;
  hasDeadline = limits.maxSeconds > 0;
  if (hasDeadline) {
    deadline = std::chrono::steady_clock::now() +
               std::chrono::microseconds(int64_t(std::min(limits.maxSeconds, 1e9) * 1e6));
    armDeadline(this, deadline);
    deadlineArmed = true;
  } else if (deadlineArmed) {
    disarmDeadline(this);
    deadlineArmed = false;
  }
  deadlinePassed.store(false, std::memory_order_relaxed);
  attention.store(interruptRequested_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  stepsLeft = 1;   // check at the first call
}

// ---- globals ---------------------------------------------------------------------------------

GlobalCell* Interp::globalCellIn(Namespace ns, Value symbol) {
  GlobalMap* map = ns ? static_cast<GlobalMap*>(ns) : globals_;
  symbol = symbol.is(Kind::Alias) ? Value(symbol.as<Alias>()->symbol) : symbol;
  auto it = map->find(symbol.obj());
  if (it != map->end()) return it->second;
  if (map != userGlobals_ && systemGlobals_) {
    auto sys = systemGlobals_->find(symbol.obj());
    if (sys != systemGlobals_->end()) return sys->second;
  }
  auto* cell = allocObject<GlobalCell>(Kind::GlobalCell);
  cell->value = Value::unbound();
  cell->name = symbol;
  cell->doc = Value::f();
  map->emplace(symbol.obj(), cell);
  return cell;
}

GlobalCell* Interp::globalCell(Value symbol) { return globalCellIn(nullptr, symbol); }

GlobalCell* Interp::definitionCell(Value symbol) {
  symbol = symbol.is(Kind::Alias) ? Value(symbol.as<Alias>()->symbol) : symbol;
  auto it = globals_->find(symbol.obj());
  if (it != globals_->end()) return it->second;
  if (globals_ == userGlobals_) return globalCell(symbol);
  // a library's definition shadows a system name in that library only
  auto* cell = allocObject<GlobalCell>(Kind::GlobalCell);
  cell->value = Value::unbound();
  cell->name = symbol;
  cell->doc = Value::f();
  globals_->emplace(symbol.obj(), cell);
  return cell;
}

GlobalCell* Interp::findGlobal(Value symbol) const {
  auto it = globals_->find(symbol.obj());
  if (it != globals_->end()) return it->second;
  if (globals_ != userGlobals_ && systemGlobals_) {
    auto sys = systemGlobals_->find(symbol.obj());
    if (sys != systemGlobals_->end()) return sys->second;
  }
  return nullptr;
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
  uint16_t ownable = 0;
  Node* node = analyzeToplevel(*this, form, positions, &frameSize, &ownable);
  auto* f = static_cast<Frame*>(gcAlloc(sizeof(Frame) + frameSize * sizeof(Value)));
  f->kind = Kind::Frame;
  f->extra = ownable;
  f->parent = nullptr;
  for (uint32_t i = 0; i < frameSize; i++) f->slots[i] = Value::unbound();
  return shareValue(evalOwning(node, f));
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

void requireProcessAccess(std::string_view who) {
  Interp* in = Interp::current();
  if (in && !in->limits.allowProcess)
    throwError("error", std::string(who) + ": process access is disabled in this interpreter");
}

Value Interp::loadFile(const std::string& path) {
  const char* embedded = embeddedLibrarySource(path);   // a library built into Purple
  if (!embedded && !limits.allowFiles) throwError("file-error", "load: file access is disabled in this interpreter");
  std::string text = embedded ? std::string(embedded) : readWholeFile(path, "load");
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
  if (embeddedLibrarySource(candidate) || std::ifstream(candidate).good()) return candidate;
  return path;
}

Value Interp::applyExtension(Value fn, const Value* argv, int argc) {
  if (extensionApplyHook) return extensionApplyHook(*this, fn, argv, argc);
  throwError("type-error", "attempt to call a non-procedure:", listFromArray(&fn, 1));
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
  // Each handler runs with the handlers outside it installed. One that returns from a
  // non-continuable raise causes a secondary error, raised where the handler ran: the next
  // handler out receives it. A loop, not a recursion, so ten thousand nested handlers neither
  // exhaust the stack nor rebuild the backtrace once each; the secondary error is made once
  // and names the object first raised.
  HandlerRestore restore{st, st->handlers};
  Value secondary = Value::f();
  while (isPair(st->handlers) && !car(st->handlers).isFalse()) {
    Value handler = car(st->handlers);
    st->handlers = cdr(st->handlers);
    apply(handler, {payload});
    if (secondary.isFalse()) {
      secondary = makeError(intern("error"), "exception handler returned from a non-continuable raise",
                            listFromArray(&payload, 1));
      secondary.as<ErrorObject>()->backtrace =
          payload.is(Kind::ErrorObject) ? payload.as<ErrorObject>()->backtrace : backtrace();
    }
    payload = secondary;
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

std::string sourcePosText(const SourcePos& p) {
  if (p.line <= 0) return "";
  std::string file = isString(p.file) ? std::string(stringView(p.file)) : "<input>";
  return file + ":" + std::to_string(p.line) + ":" + std::to_string(p.col);
}

namespace {

// What a backtrace line calls the procedure of a call: the procedure called, or, before the
// call was made (its arguments were being evaluated), the name the call is written with.
std::string calleeName(const AppNode* app, Value proc) {
  if (!proc.isFalse()) return describeProcedure(proc);
  const Node* fn = app->fn;
  if (fn->op() == Op::Global) return std::string(symbolName(static_cast<const GlobalNode*>(fn)->cell->name));
  if (fn->op() == Op::Local0 || fn->op() == Op::Local1 || fn->op() == Op::LocalN || fn->op() == Op::LocalChecked) {
    Value name = static_cast<const LocalNode*>(fn)->name;
    if (isSymbol(name)) return std::string(symbolName(name));
  }
  if (fn->op() == Op::Lambda) return "anonymous procedure";
  return "?";
}

// `error` and `raise` are how an error is signalled: their frames are left out when the library
// signals (the user sees the call into the library), kept when the user's own code does (its line).
bool isRaiser(Value proc) {
  if (!proc.is(Kind::Primitive)) return false;
  std::string name = primitiveName(proc);
  return name == "error" || name == "raise" || name == "raise-continuable";
}

struct TraceLine {
  std::string text;
  bool user;          // written outside the prelude
};

TraceLine traceLine(const Node* node, Value proc) {
  auto* app = static_cast<const AppNode*>(node);
  std::string where = sourcePosText(app->pos);
  bool prelude = app->flags & kAppInPrelude;
  std::string text = "  in " + calleeName(app, proc) + (where.empty() ? "" : " at " + where);
  if (prelude) text += " [prelude]";
  return {text, !prelude && !where.empty()};
}

}  // namespace

Value Interp::backtrace() const {
  // Innermost first, from the top of the call records down: the first 30 distinct lines are
  // formatted, the frames below them only counted (by identity, without formatting), so an
  // error deep in a recursion costs little. When none of those 30 is the user's own code, the
  // innermost line that is follows them: the user always sees where their code was.
  constexpr size_t kShown = 30;
  std::vector<TraceLine> lines;
  bool userShown = false;
  TraceLine firstUserBelow;
  int64_t more = 0, moreBeforeUser = 0;
  const Node* previous = nullptr;
  auto add = [&](const Node* node, Value proc) {
    if (!node || node->op() != Op::App || (isRaiser(proc) && (node->flags & kAppInPrelude))) return;
    if (lines.size() < kShown) {
      TraceLine line = traceLine(node, proc);
      if (!lines.empty() && lines.back().text == line.text) return;
      userShown |= line.user;
      lines.push_back(std::move(line));
    } else if (node != previous) {
      more++;
      if (!userShown && firstUserBelow.text.empty() && !(node->flags & kAppInPrelude)) {
        TraceLine line = traceLine(node, proc);
        if (line.user) {
          firstUserBelow = line;
          moreBeforeUser = more - 1;
        }
      }
    }
    previous = node;
  };
  for (int64_t i = depth; i >= 1; i--) {
    const CallRecord& r = callStack[i];
    add(r.node, r.proc);
    if (r.userCall && r.userCall != r.node) add(r.userCall, r.userProc);
  }
  Value out = Value::nil();
  if (!firstUserBelow.text.empty()) {
    int64_t after = more - moreBeforeUser - 1;
    if (after > 0) out = cons(makeString("  ... " + std::to_string(after) + " more frames"), out);
    out = cons(makeString(firstUserBelow.text), out);
    if (moreBeforeUser > 0) out = cons(makeString("  ... " + std::to_string(moreBeforeUser) + " frames"), out);
  } else if (more > 0) {
    out = cons(makeString("  ... " + std::to_string(more) + " more frames"), out);
  }
  for (size_t k = lines.size(); k-- > 0;) out = cons(makeString(lines[k].text), out);
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
    out = "Error: uncaught exception: " + toWriteStringBounded(payload);
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
