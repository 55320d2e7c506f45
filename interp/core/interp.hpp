// The interpreter's internal state. The public embedding class purple::Interpreter
// (include/purple/purple.hpp) wraps one of these; builtins receive it as `Interp&`.
#pragma once
#include "interp/core/value.hpp"
#include "interp/core/error.hpp"
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>
#include <gc/gc_allocator.h>

namespace purple {

struct Node;
class AttachServer;
struct LambdaNode;
struct Scope;
struct SourcePos { Value file; int line = 0; int col = 0; };   // file: string or #f
std::string sourcePosText(const SourcePos& p);                   // "file:line:col", or "" when unknown

// Where a piece of code came from: the reader records positions of pairs in this table while
// one form is read, and the analyzer consults it while the same form is compiled.
using PositionTable = std::unordered_map<const Object*, SourcePos>;

// small: the slots (below 16) that own the tensor cell or list they hold; extra: the slots whose
// values die with the frame (LambdaNode::ownableSlots). interp/language/ownership.hpp.
struct Frame : Object {
  Frame* parent;
  Value slots[1];
};
// The frame an activation that owns none "owns": nothing (small = 0), so the evaluator tests
// ownedEnv->small without a null test first. (Hidden, as gSoleOwnedCellsMade: no GOT load.)
extern Frame gNoOwnedFrame __attribute__((visibility("hidden")));

struct Limits {
  bool allowFiles = true;         // open-*-file, load, delete-file ...
  bool allowProcess = true;       // exit, system, command-line
  bool allowEnvironment = true;   // get-environment-variable(s)
  int64_t maxSteps = 0;           // 0: unlimited
  double maxSeconds = 0;          // 0: unlimited
  int64_t maxTensorBytes = 0;     // 0: unlimited
  int64_t maxDepth = 400000;      // nested evaluations before "recursion too deep"
};

// Throws a file-error naming WHO when the interpreter running on this thread may not touch
// files (Limits::allowFiles). Every builtin that opens, probes, writes or renames a path calls it.
void requireFileAccess(std::string_view who);
// The text of a library file built into Purple (lib/ in the source tree), for a path
// "purple-lib:purple/vision.sld"; nullptr for any other path (library.cpp).
const char* embeddedLibrarySource(std::string_view path);
// The same for the process and its global settings (Limits::allowProcess): exit, the command
// line, standard input, and every setting shared by all interpreters and the host (LibTorch's
// default dtype and thread count, the global random generator, print options, ...).
void requireProcessAccess(std::string_view who);

// True when the calling thread's C++ stack is within the safety margin that "recursion too deep"
// keeps: recursive C++ code that a script can drive arbitrarily deep (printing, reading nested
// data) checks it, so a host thread's small stack ends in a Purple error, not a crash.
bool stackNearlyFull();
// For a builtin whose own loop can run long (building a list of a hundred million elements, a
// big-number power, parsing a huge numeral): polls the interpreter running on this thread
// (interrupt, time budget) once every 65536 iterations.
void pollCurrentInterp();
inline void pollEvery(uint64_t iteration) {
  if ((iteration & 0xFFFF) == 0xFFFF) pollCurrentInterp();
}

// For a thread that runs on a stack it switched to itself: the lowest address its C++ code may
// reach (the default comes from the thread's pthread attributes).
void setCurrentThreadStackLimit(char* lowest);
// The lowest address the calling thread's C++ code may reach (the limit "recursion too deep" uses).
char* currentThreadStackLimit();

std::string primitiveName(Value prim);

class Interp {
 public:
  Interp();
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  // ---- evaluation ----
  Value evalString(std::string_view text, std::string_view sourceName = "<string>");
  Value evalForm(Value form, PositionTable* positions = nullptr);
  Value loadFile(const std::string& path);
  Value apply(Value proc, const Value* argv, int argc) { return shareValue(applyOwning(proc, argv, argc)); }
  Value apply(Value proc, std::initializer_list<Value> args) {
    return apply(proc, args.begin(), int(args.size()));
  }
  // The tree walker (eval.cpp). Its result may be a tensor cell in flight, which the code using
  // it must own or mark shared (language/ownership.hpp); code outside the evaluator calls
  // evalForm or apply, whose results are shared.
  // (The plain walk goes on as the owning one itself when cells are owned, so the test sits once
  // in its prologue, not at each call site; it reads no owned frame, hence null, which costs the
  // callers no register.)
  Value eval(Node* node, Frame* env) { return evalActivation<false>(node, env, nullptr); }
  // eval on a frame whose ownership passes to the walk: what its ownable slots own dies when the
  // walk returns (apply's closure frames, a top-level form's frame).
  Value evalOwning(Node* node, Frame* env) { return evalActivation<true>(node, env, env); }
  // apply, for the evaluator and the few builtins that own what a call returns (fold,
  // for-each): the result may be a cell in flight.
  Value applyOwning(Value proc, const Value* argv, int argc);

  // ---- globals ----
  // Names resolve in the current namespace: the user's global environment, or, while a
  // library's body is evaluated, that library's own (library.cpp). A library's namespace sees
  // its definitions and imports, then the system namespace: the builtins, the prelude and the
  // standard libraries as they were at start-up.
  GlobalCell* globalCell(Value symbol);             // created unbound on first use
  GlobalCell* definitionCell(Value symbol);         // for define: never the system's cell from a library
  GlobalCell* findGlobal(Value symbol) const;       // nullptr if never mentioned
  void defineGlobal(std::string_view name, Value v, Value doc = Value::f());
  Value lookupGlobal(std::string_view name) const;  // unbound() if absent
  // f(name, cell) for every name of the current namespace (a library's: its own and imported ones)
  template <class F> void forEachGlobal(F f) const {
    for (auto& kv : *globals_) f(Value(const_cast<Object*>(kv.first)), kv.second);
  }

  // ---- errors and dynamic state ----
  [[noreturn]] void raise(Value payload, bool continuable = false);
  Value raiseContinuable(Value payload);
  Value backtrace() const;                          // list of strings, innermost first
  std::string formatError(Value payload) const;     // message, position, backtrace
  void checkInterrupt();                            // throws PurpleInterrupt when asked
  // Safe from any thread and from a signal handler.
  void requestInterrupt() {
    interruptRequested_.store(true, std::memory_order_relaxed);
    attention.store(true, std::memory_order_release);
  }
  // The check every primitive call makes: one relaxed load, so that a loop of long tensor
  // operations stops at the next operation, not 1024 closure calls later.
  void poll() {
    if (__builtin_expect(attention.load(std::memory_order_relaxed), 0)) attend();
  }

  // ---- output ----
  Value currentOutputPort();
  Value currentErrorPort();
  Value currentInputPort();

  // ---- configuration ----
  Limits limits;
  std::vector<std::string> commandLine;
  std::vector<std::string> libraryPath;            // for define-library / import
  static Interp* current();                         // the interpreter running on this thread

  // State the evaluator and builtins share. Kept in GC-visible memory (see gc rules).
  struct State;
  State* st;

  // ---- evaluator internals (public for eval.cpp / analyzer.cpp helpers) ----
  // One per eval activation and per primitive call in progress, for backtraces. A tail call
  // replaces `node`/`proc`; `userCall`/`userProc` keep the last call this activation made from
  // code outside the prelude, so a chain of tail calls into library code still shows the
  // user's line. The collector scans the records in use (gc.cpp, scanCallRecords).
  struct CallRecord { Node* node; Value proc; Node* userCall; Value userProc; };
  CallRecord* callStack;
  int64_t depth = 0;
  char* stackLimit = nullptr;     // below this address: "recursion too deep"
  std::atomic<bool> interruptRequested_{false};
  std::atomic<bool> deadlinePassed{false};   // set by the deadline watchdog (watchdog.cpp)
  std::atomic<bool> attention{false};        // an interrupt or a passed deadline waits: see poll()
  void attend();                   // throws for what `attention` was raised for, else clears it
  std::atomic<int> pendingWork{0};       // set by other threads/GC: poll at safe points
  // Work another thread hands to this interpreter's thread: an attached client's request
  // (interp/language/attach_server.hpp). requestWork raises pendingWork and attention; attend()
  // then calls the hook with atSafePoint false (it may only raise a stop there, or ask for a
  // safe point soon), and safePoint() with true (the work runs there).
  static void (*pendingWorkHook)(Interp&, bool atSafePoint);
  void requestWork() {
    pendingWork.store(1, std::memory_order_seq_cst);
    attention.store(true, std::memory_order_seq_cst);
  }
  AttachServer* attachServer = nullptr;  // the REPL server serving this interpreter, if any
  int64_t stepsLeft = 1024;        // closure calls until the next safe point
  int64_t stepBudgetLeft = 0;      // for limits.maxSteps
  static constexpr int64_t kMaxDepthCap = 1000000;
  void ensureStackLimit();         // computes stackLimit for the calling thread
  void resetBudgets();             // re-arms step and time budgets from `limits`
  // Applying values that are not closures or primitives (nn modules, host objects).
  Value applyExtension(Value fn, const Value* argv, int argc);
  static Value (*extensionApplyHook)(Interp&, Value fn, const Value* argv, int argc);
  std::chrono::steady_clock::time_point deadline;
  bool hasDeadline = false;
  bool deadlineArmed = false;      // the watchdog holds a deadline for this interpreter
  uint64_t nextContinuationId = 1;
  bool loadingPrelude = false;     // the analyzer marks calls it compiles meanwhile (kAppInPrelude)

  void safePoint();               // run finalizers / collect when tensor memory asks for it
  template <bool kOwning>
  Value evalActivation(Node* node, Frame* env, Frame* ownedEnv);   // (eval.cpp instantiates both)
  // Called first when this interpreter is destroyed: an optional library (the Python bridge)
  // drops what it holds for it.
  std::vector<std::function<void(Interp&)>> onDestroy;
  // The generator of `random` (builtins/core/numbers.cpp), made on first use. Each interpreter
  // has its own, so that a sandboxed script's random-seed! cannot make another interpreter's
  // draws on the same thread predictable.
  std::shared_ptr<void> randomGenerator;

  // ---- libraries (library.cpp) ----
  bool libraryAvailable(Value name);
  void importLibrary(Value importSet);
  void defineLibrary(Value form, PositionTable* positions);
  bool libraryLoaded(Value name) const;
  // The cell library NAME exports as ID, loading the library (not importing it) if needed;
  // nullptr when it exports no such name. For help on names of libraries not yet imported.
  GlobalCell* libraryExportCell(Value name, Value id);
  std::string resolveRelative(const std::string& path, const SourcePos& from);
  // A namespace's nodes and buckets are collectable memory, reached from the map itself, which
  // lives in one uncollectable block (makeGlobalMap): one root per namespace. With a root per
  // node (traceable_allocator) a fresh interpreter held 3,000 of them, and the collector, which
  // pushes every live uncollectable object before marking, marked serially and regrew its mark
  // stack in each of a program's first collections. So a GlobalMap lives only where
  // makeGlobalMap put it: held by value in malloc'ed memory, its nodes would be collected.
  using GlobalMap = std::unordered_map<const Object*, GlobalCell*, std::hash<const Object*>,
                                       std::equal_to<const Object*>,
                                       gc_allocator<std::pair<const Object* const, GlobalCell*>>>;
  static GlobalMap* makeGlobalMap(const GlobalMap* copyOf = nullptr);
  static void freeGlobalMap(GlobalMap* map);
  // Runs LOAD in the user's namespace and adds what it defines to the system namespace (an
  // optional standard library, (purple python), loaded on first import).
  void loadIntoSystem(void (*load)(Interp&));
  // A namespace: an opaque handle (a macro or an alias records the one it was defined in).
  using Namespace = void*;
  Namespace currentNamespace() const { return globals_ == userGlobals_ ? nullptr : globals_; }
  GlobalCell* globalCellIn(Namespace ns, Value symbol);   // ns null: the current one
  // A fresh namespace holding the bindings of IMPORT-SETS (a list), for (environment ...).
  Namespace makeNamespace(Value importSets);
  Value evalFormIn(Namespace ns, Value form);        // ns null: the user's global environment
  void sealSystemNamespace();                        // start-up is over: what libraries see

 private:
  GlobalMap* globals_;                 // the current namespace
  GlobalMap* userGlobals_;             // the user's: REPL, load, eval, scripts
  GlobalMap* systemGlobals_ = nullptr; // builtins, prelude, standard libraries (after start-up)
  std::vector<GlobalMap*> libraryNamespaces_;
  GlobalMap* newNamespace();
  friend struct Analyzer;
  friend struct NamespaceSwitch;
};

// (purple python): the Python bridge, a plugin loaded on first import (python_library.cpp).
// Throws a Purple error saying why when Purple was built or installed without it.
void importPythonLibrary(Interp& in);
bool pythonLibraryAvailable(std::string* whyNot = nullptr);

// RAII: marks `interp` as the one running on this thread (for builtins that need it from
// callbacks), restoring the previous one on exit.
class InterpScope {
 public:
  explicit InterpScope(Interp* i);
  ~InterpScope();
 private:
  Interp* prev_;
};

}  // namespace purple
