// The embedding API (include/purple/purple.hpp) over the interpreter's internals. Every entry
// point runs inside an Entry: the calling thread is registered with the collector for the call,
// the interpreter is marked current, budgets are armed at the outermost call, and every exception
// is turned into a purple::Error before it reaches the host.
#define PURPLE_IMPLEMENTATION
#include "purple/purple.hpp"

#include "builtins/core/hashtable.hpp"
#include "interp/language/bind.hpp"
#include "interp/memory/cpu_allocator.hpp"
#include "interp/platform/torch_compat.hpp"
#include "interp/language/equality.hpp"
#include "interp/core/gc.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/language/numbers.hpp"
#include "interp/core/port.hpp"
#include "interp/language/printer.hpp"
#include "interp/limits/tensor_budget.hpp"
#include "interp/limits/tensor_time_budget.hpp"
#include "interp/memory/tensor_value.hpp"
#include "interp/api/api_internal.hpp"

#include <ATen/DLConvertor.h>
#include <c10/core/CPUAllocator.h>
#include <gc/gc.h>

#include <pthread.h>

#include <cmath>
#include <fstream>
#include <mutex>
#include <ostream>
#include <sstream>
#include <typeindex>
#include <unordered_map>

namespace purple {
namespace embed {

using PV = ::purple::Value;   // the interpreter's one-word value

namespace {

PV pv(detail::Word w) { return PV(w, 0); }

// A host thread that allocates Purple objects must be registered with the collector, and one
// that exits while registered would leave the collector scanning a dead stack: API calls
// register the calling thread for their duration when it was not registered already.
using ThreadGuard = detail::ThreadScope;

// Host type names, process-wide (a type is the same C++ type in every interpreter).
std::mutex gTypeMutex;
std::unordered_map<std::type_index, std::string>& typeNames() {
  static auto* m = new std::unordered_map<std::type_index, std::string>();
  return *m;
}

void destroyBox(void* p) { delete static_cast<detail::ObjectBox*>(p); }

}  // namespace

struct HostFnRecord;

namespace detail {

bool enterThread() {
  gcInit();
  if (GC_thread_is_registered()) return false;
  gcRegisterCurrentThread();
  return true;
}

void leaveThread(bool entered) {
  if (entered) gcUnregisterCurrentThread();
}

struct Impl {
  Interp* interp = nullptr;
  int active = 0;                                        // API calls in progress on this interpreter
  std::unordered_map<std::type_index, Root> methods;     // per host type: hash table name -> procedure
  // The host's native functions: destroyed with the interpreter. Their Purple procedures may
  // outlive it (another interpreter may hold one); `alive` lets them refuse to run then.
  std::vector<std::unique_ptr<NativeFn>> natives;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
};

struct Call {
  Interp* in;
  PrimitiveInfo* info;
  Impl* impl;
};

}  // namespace detail

// What a native function's procedure points at (its PrimitiveInfo's callable). Freed with the
// procedure's info when the collector finds the procedure unreachable (releaseHostFunction).
struct HostFnRecord {
  detail::NativeFn* fn;                 // owned by the interpreter (Impl::natives)
  detail::Impl* impl;
  std::shared_ptr<const bool> alive;    // false once the interpreter has been destroyed
};

namespace {

using detail::Impl;

std::string symbolOrString(PV v) {
  if (v.is(Kind::Symbol)) return std::string(symbolName(v));
  if (isString(v)) return std::string(stringView(v));
  return toDisplayString(v);
}

// A purple::Error describing a Purple exception payload (an error object or any raised value).
Error errorFromPayload(PV payload) {
  if (payload.is(Kind::ErrorObject)) {
    auto* e = payload.as<ErrorObject>();
    std::vector<Value> irritants;
    for (PV p = e->irritants; isPair(p); p = cdr(p)) irritants.push_back(Value::fromWord(car(p).bits));
    std::vector<std::string> trace;
    for (PV p = e->backtrace; isPair(p); p = cdr(p))
      if (isString(car(p))) trace.emplace_back(stringView(car(p)));
    std::string kind = e->errorKind.is(Kind::Symbol) ? std::string(symbolName(e->errorKind)) : "error";
    return Error(kind, symbolOrString(e->message), std::move(irritants), std::move(trace), Value::fromWord(payload.bits));
  }
  return Error("raise", "uncaught exception:", {Value::fromWord(payload.bits)}, {}, Value::fromWord(payload.bits));
}

// The error object a purple::Error stands for inside Purple.
PV payloadFromError(const Error& e) {
  if (!e.payload().isUnspecified()) return pv(e.payload().word());
  PV irritants = PV::nil();
  for (size_t k = e.irritants().size(); k-- > 0;) irritants = cons(pv(e.irritants()[k].word()), irritants);
  PV err = makeError(intern(e.kind()), e.message(), irritants);
  if (Interp* in = Interp::current()) err.as<ErrorObject>()->backtrace = in->backtrace();
  return err;
}

// Translates the exception being handled into a purple::Error (or Exit).
[[noreturn]] void throwAsError(Impl& im, bool outermost) {
  std::exception_ptr original = std::current_exception();
  auto withOriginal = [&](Error e) {
    e.original = original;
    return e;
  };
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const PurpleExit& e) {
    Exit x(e.code);
    x.original = original;
    throw x;
  } catch (const PurpleInterrupt& e) {
    // The request is consumed once the evaluation it stopped has returned to the host; until
    // then it stays set, so cleanup code (dynamic-wind exits) cannot run on indefinitely.
    if (outermost) im.interp->interruptRequested_.store(false);
    throw withOriginal(errorFromPayload(e.payload()));
  } catch (const PurpleException& e) {
    throw withOriginal(errorFromPayload(e.payload()));
  } catch (const ContinuationInvoked&) {
    throw withOriginal(Error("error", "a continuation was invoked outside its extent (Purple's continuations escape only)"));
  } catch (const c10::Error& e) {
    std::string m = e.what_without_backtrace();
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    throw withOriginal(Error("tensor-error", m));
  } catch (const std::bad_alloc&) {
    gcCollectNow();
    throw withOriginal(Error("memory-error", "out of memory"));
  } catch (const std::exception& e) {
    throw withOriginal(Error("error", e.what()));
  } catch (...) {
    throw withOriginal(Error("error", "unknown C++ exception"));
  }
}

void installTensorCap();

// One API call on an interpreter.
class Entry {
 public:
  explicit Entry(Impl& im) : im_(im), scope_(im.interp) {
    outermost_ = im.active++ == 0;
    if (outermost_) {
      im.interp->ensureStackLimit();   // this thread's stack, which may not be the last call's
      im.interp->resetBudgets();
      if (im.interp->hasDeadline) {
        installTensorCap();   // the allocator is where a tensor operation can be stopped
        tensorTimeBudget_ = beginTensorTimeBudget();
      }
    }
  }
  ~Entry() {
    if (tensorTimeBudget_) endTensorTimeBudget(tensorTimeBudget_);
    im_.active--;
  }
  bool outermost() const { return outermost_; }

 private:
  ThreadGuard thread_;
  Impl& im_;
  InterpScope scope_;
  bool outermost_ = false;
  uint64_t tensorTimeBudget_ = 0;
};

template <class F> Value guarded(Impl& im, F f) {
  Entry entry(im);
  try {
    PV v = f();
    return Value::fromWord(v.bits);
  } catch (...) {
    throwAsError(im, entry.outermost());
  }
}

// The builtin behind every native function: bind.hpp binds the arguments to the signature;
// the NativeFn converts them and calls the host's callable.
PV hostInvoke(Interp& in, PV* argv, int argc, PrimitiveInfo* info) {
  auto* rec = static_cast<HostFnRecord*>(info->callable);
  if (!rec || !*rec->alive) throwError("error", info->name + ": its interpreter has been destroyed");
  constexpr int kInline = 12;
  PV slotBuf[kInline + 1];
  PV* buffer = info->nParams < kInline ? slotBuf : static_cast<PV*>(gcAlloc((info->nParams + 1) * sizeof(PV)));
  PV* slots = bindArguments(in, argv, argc, info, buffer);
  detail::Word wordBuf[kInline + 1];
  std::unique_ptr<detail::Word[]> heapWords;
  detail::Word* words = wordBuf;
  if (info->nParams >= kInline) {
    heapWords.reset(new detail::Word[info->nParams + 1]);   // the slots keep the values alive
    words = heapWords.get();
  }
  for (int i = 0; i < info->nParams; i++) words[i] = slots[i].bits;
  detail::Call call{&in, info, rec->impl};
  try {
    return pv(rec->fn->invoke(&call, words));
  } catch (const PurpleException&) {
    throw;
  } catch (const ContinuationInvoked&) {
    throw;
  } catch (const PurpleExit&) {
    throw;
  } catch (const Error& e) {
    // An Error from a nested API call is the Purple exception it came from; one the host made
    // becomes an error object of its kind.
    if (e.original) std::rethrow_exception(e.original);
    throw PurpleException(payloadFromError(e));
  } catch (...) {
    try {
      rethrowForeign(info);
    } catch (const PurpleException&) {
      throw;
    } catch (...) {
      throwError("error", info->name + ": unknown C++ exception");
    }
  }
}

// Applying a host object to a method name: (obj 'method arg ...).
PV (*gPreviousApplyHook)(Interp&, PV, const PV*, int) = nullptr;

PV objectApplyHook(Interp& in, PV fn, const PV* argv, int argc) {
  if (fn.is(Kind::Foreign) && fn.as<Foreign>()->destroy == &destroyBox) {
    auto* f = fn.as<Foreign>();
    std::string type = f->typeName.is(Kind::Symbol) ? std::string(symbolName(f->typeName)) : "object";
    if (argc < 1 || !isSymbol(argv[0]))
      throwError("type-error", "a " + type + " is applied to a method name and arguments, as in (obj 'method arg ...)",
                 listFromArray(&fn, 1));
    PV method = isHashTable(f->methods) ? hashTableGet(in, f->methods, argv[0], PV::missing()) : PV::missing();
    if (method.isMissing())
      throwError("unbound-variable", type + " has no method " + std::string(symbolName(argv[0])), listFromArray(&fn, 1));
    PV buf[16];
    PV* args = argc <= 16 ? buf : static_cast<PV*>(gcAlloc(size_t(argc) * sizeof(PV)));
    args[0] = fn;
    for (int i = 1; i < argc; i++) args[i] = argv[i];
    return in.apply(method, args, argc);
  }
  if (gPreviousApplyHook) return gPreviousApplyHook(in, fn, argv, argc);
  throwError("type-error", "attempt to call a non-procedure:", listFromArray(&fn, 1));
}

// ---- tensor memory cap ---------------------------------------------------------------------
// wrapTensor enforces Limits::maxTensorBytes after an operation has produced its result; this
// allocator refuses, before any memory is touched, a single CPU allocation larger than the cap
// of the interpreter running on this thread, so one huge request cannot exhaust the machine.
// It is also where an operator in progress is stopped for the time budget or an interrupt
// (tensor_time_budget.hpp).
// It wraps Purple's caching allocator (cpu_allocator.cpp), so it must sit above it: a lower
// priority than that allocator's would leave it never called.

class CappedCPUAllocator final : public c10::Allocator {
 public:
  explicit CappedCPUAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t n) PURPLE_ALLOCATE_CONST override {
    check(n);
    return base_->allocate(n);
  }
  PURPLE_ALLOCATOR_COPY_DATA
  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }

 private:
  static void check(size_t n) {
    Interp* in = Interp::current();
    if (!in) return;
    checkTensorWorkAtAllocation(*in);
    int64_t cap = in->limits.maxTensorBytes;
    if (cap > 0 && n > uint64_t(cap))
      throwError("memory-error", "tensor memory budget exceeded (" + std::to_string(n) + " bytes asked, limit " +
                                     std::to_string(cap) + " bytes)");
  }
  c10::Allocator* base_;
};

constexpr uint8_t kCappedAllocatorPriority = 2;   // above the caching allocator's 1

void installTensorCap() {
  static std::once_flag once;
  std::call_once(once, [] {
    installCpuAllocator();   // first, so that the cap wraps it
    c10::SetCPUAllocator(new CappedCPUAllocator(c10::GetCPUAllocator()), kCappedAllocatorPriority);
  });
}

void applyLimits(Interp& in, const Limits& l) {
  in.limits.allowFiles = l.allowFiles;
  in.limits.allowProcess = l.allowProcess;
  in.limits.allowEnvironment = l.allowEnvironment;
  in.limits.maxSteps = l.maxSteps > 0 ? l.maxSteps : 0;
  in.limits.maxSeconds = l.maxSeconds > 0 ? l.maxSeconds : 0;
  in.limits.maxTensorBytes = l.maxTensorBytes > 0 ? l.maxTensorBytes : 0;
  in.limits.maxDepth = l.maxDepth > 0 ? std::min<int64_t>(l.maxDepth, Interp::kMaxDepthCap) : ::purple::Limits().maxDepth;
  if (l.maxTensorBytes > 0) {
    installTensorCap();
    openTensorAccount(in);
  }
}

void setPort(PV param, PV port) {
  if (param.is(Kind::Parameter)) param.as<Parameter>()->value = port;
}

OutputCallback streamSink(std::ostream& os) {
  return [&os](std::string_view s) { os.write(s.data(), std::streamsize(s.size())); };
}

}  // namespace

// For the API's other files (api_internal.hpp).
namespace detail {
Interp& interpOf(Impl* impl) { return *impl->interp; }
Value runGuarded(Impl* impl, const std::function<PV()>& f) { return guarded(*impl, f); }
}  // namespace detail

// ---- Value ---------------------------------------------------------------------------------

Value::Value() : bits_(PV::unspecified().bits) {}

Value Value::fromWord(detail::Word w) {
  Value v;
  v.bits_ = w;
  if (pv(w).isObject()) {
    ThreadGuard thread;
    auto* cell = static_cast<detail::Word*>(gcAllocRoot(sizeof(detail::Word)));
    *cell = w;
    v.root_ = std::shared_ptr<void>(cell, [](void* p) {
      ThreadGuard thread;
      gcFreeRoot(p);
    });
  }
  return v;
}

Value Value::symbol(std::string_view name) {
  ThreadGuard thread;
  return fromWord(intern(name).bits);
}
Value Value::nil() { return fromWord(PV::nil().bits); }
Value Value::boolean(bool b) { return fromWord(PV::boolean(b).bits); }
Value Value::list(const std::vector<Value>& items) {
  ThreadGuard thread;
  PV r = PV::nil();
  for (size_t k = items.size(); k-- > 0;) r = cons(pv(items[k].word()), r);
  return fromWord(r.bits);
}

Value Value::fromDLPack(DLManagedTensor* t) {
  if (!t) throw Error("type-error", "Value::fromDLPack: null tensor");
  at::Tensor x;
  try {
    x = at::fromDLPack(t);
  } catch (const c10::Error& e) {
    // fromDLPack takes ownership only once it has made the tensor.
    if (t->deleter) t->deleter(t);
    throw Error("tensor-error", e.what_without_backtrace());
  }
  ThreadGuard thread;
  return fromWord(wrapTensor(std::move(x)).bits);
}

bool Value::isUnspecified() const { return pv(bits_).isUnspecified(); }
bool Value::isNil() const { return pv(bits_).isNil(); }
bool Value::isBool() const { return pv(bits_).isBool(); }
bool Value::isTrue() const { return pv(bits_).isTrue(); }
bool Value::isFalse() const { return pv(bits_).isFalse(); }
bool Value::isInteger() const {
  PV v = pv(bits_);
  return isExactInteger(v) || (isFlonum(v) && std::isfinite(flonumValue(v)) && flonumValue(v) == std::floor(flonumValue(v)));
}
bool Value::isReal() const { return ::purple::isNumber(pv(bits_)); }
bool Value::isNumber() const { return ::purple::isNumber(pv(bits_)); }
bool Value::isString() const { return ::purple::isString(pv(bits_)); }
bool Value::isSymbol() const { return ::purple::isSymbol(pv(bits_)); }
bool Value::isChar() const { return pv(bits_).isChar(); }
bool Value::isPair() const { return ::purple::isPair(pv(bits_)); }
bool Value::isList() const { return ::purple::isList(pv(bits_)); }
bool Value::isVector() const { return pv(bits_).is(Kind::Vector); }
bool Value::isProcedure() const { return ::purple::isProcedure(pv(bits_)); }
bool Value::isTensor() const { return ::purple::isTensor(pv(bits_)); }
bool Value::isError() const { return pv(bits_).is(Kind::ErrorObject); }
bool Value::isObject() const { return detail::objectBox(bits_) != nullptr; }
bool Value::isEof() const { return pv(bits_).isEof(); }

at::Tensor Value::tensor() const { return detail::toTensor(nullptr, bits_, 0); }

DLManagedTensor* Value::toDLPack() const {
  at::Tensor t = tensor();
  try {
    return at::toDLPack(t);
  } catch (const c10::Error& e) {
    throw Error("tensor-error", e.what_without_backtrace());
  }
}

namespace {
// Printing outside an API call: its errors (data nested deeper than this thread's stack allows)
// reach the host as purple::Error.
template <class F> std::string printed(F f) {
  ThreadGuard thread;
  try {
    return f();
  } catch (const PurpleException& e) {
    throw errorFromPayload(e.payload());
  }
}
}  // namespace

std::string Value::str() const {
  return printed([&] { return toDisplayString(pv(bits_)); });
}
std::string Value::repr() const {
  return printed([&] { return toWriteString(pv(bits_)); });
}

std::string Value::typeName() const {
  PV v = pv(bits_);
  if (v.isUnspecified()) return "unspecified";
  if (v.isEof()) return "eof";
  if (!v.isObject()) return describeValueType(v);
  switch (v.obj()->kind) {
    case Kind::Closure: case Kind::Primitive: case Kind::CaseLambda: case Kind::Continuation: case Kind::Parameter:
      return "procedure";
    case Kind::HashTable: return "hash-table";
    case Kind::Record: {
      PV n = v.as<Record>()->type->name;
      return n.is(Kind::Symbol) ? std::string(symbolName(n)) : "record";
    }
    case Kind::ErrorObject: return "error";
    case Kind::Bytevector: return "bytevector";
    case Kind::Port: return "port";
    case Kind::Promise: return "promise";
    case Kind::Module: return "module";
    case Kind::Optimizer: return "optimizer";
    case Kind::Foreign: {
      PV n = v.as<Foreign>()->typeName;
      return n.is(Kind::Symbol) ? std::string(symbolName(n)) : "object";
    }
    default: return describeValueType(v);
  }
}

std::vector<Value> Value::elements() const {
  std::vector<Value> out;
  detail::forEachItem(nullptr, bits_, 0, [&](detail::Word w) { out.push_back(fromWord(w)); });
  return out;
}

std::size_t Value::size() const {
  PV v = pv(bits_);
  if (v.is(Kind::Vector)) return v.as<Vector>()->extra;
  if (::purple::isString(v)) return v.as<String>()->charCount;
  size_t n = listLength(v);
  if (n == SIZE_MAX) throw Error("type-error", "Value::size: not a list, vector or string: " + repr());
  return n;
}

Value Value::operator[](std::size_t i) const {
  PV v = pv(bits_);
  if (v.is(Kind::Vector)) {
    if (i >= v.as<Vector>()->extra) throw Error("range-error", "Value::operator[]: index out of range");
    return fromWord(v.as<Vector>()->items[i].bits);
  }
  PV p = v;
  for (; ::purple::isPair(p) && i > 0; i--) p = cdr(p);
  if (!::purple::isPair(p)) throw Error("range-error", "Value::operator[]: index out of range or not a list");
  return fromWord(car(p).bits);
}

bool Value::same(const Value& other) const { return eqv(pv(bits_), pv(other.bits_)); }
bool Value::equals(const Value& other) const { return equalValues(pv(bits_), pv(other.bits_)); }

std::ostream& operator<<(std::ostream& os, const Value& v) { return os << v.repr(); }

// ---- Error ---------------------------------------------------------------------------------

namespace {
std::string joinWhat(const std::string& message, const std::vector<Value>& irritants) {
  std::string s = message;
  for (const Value& v : irritants) {
    try {
      s += " " + v.repr();
    } catch (const Error&) {
      s += " #<unprintable>";
    }
  }
  return s;
}
}  // namespace

Error::Error(std::string kind, std::string message, std::vector<Value> irritants, std::vector<std::string> backtrace,
             Value payload)
    : std::runtime_error(joinWhat(message, irritants)),
      kind_(std::move(kind)),
      message_(std::move(message)),
      irritants_(std::move(irritants)),
      backtrace_(std::move(backtrace)),
      payload_(std::move(payload)) {}

std::vector<std::string> Error::irritantStrings() const {
  std::vector<std::string> out;
  for (const Value& v : irritants_) out.push_back(v.repr());
  return out;
}

bool Error::isInterrupt() const { return kind_ == "interrupt" || kind_ == "step-limit" || kind_ == "time-limit"; }

std::string Error::report() const {
  std::string s = "Error: " + std::string(what());
  for (const std::string& line : backtrace_) s += "\n" + line;
  return s;
}

Exit::Exit(int code) : Error("exit", "exit called with code " + std::to_string(code)), code_(code) {}

void setHeapLimit(std::size_t bytes) { gcSetHeapLimit(bytes); }

// ---- conversions ---------------------------------------------------------------------------

namespace detail {

namespace {
// For conversions outside a native call (Value::to): errors name the API, not a builtin.
PrimitiveInfo* toInfo() {
  static PrimitiveInfo* info = [] {
    auto* i = new PrimitiveInfo();
    i->name = "purple::Value::to";
    return i;
  }();
  return info;
}

// Runs a bind.hpp conversion; outside a native call its Purple error becomes a purple::Error.
template <class F> auto convert(Call* call, F f) -> decltype(f(call ? call->info : toInfo())) {
  if (call) return f(call->info);
  try {
    return f(toInfo());
  } catch (const PurpleException& e) {
    throw errorFromPayload(e.payload());
  }
}
}  // namespace

int64_t toInt64(Call* call, Word w, int index) {
  return convert(call, [&](PrimitiveInfo* info) {
    PV v = pv(w);
    if (v.isMissing()) throwConversionError(info, index, "an integer", v);
    return v.isFixnum() ? v.fixnum() : integerValue(v, info, index);
  });
}

uint64_t toUInt64(Call* call, Word w, int index) {
  PV v = pv(w);
  if (isBignum(v) && v.obj()->small == 0 && v.obj()->extra == 1) return v.as<Bignum>()->limbs[0];
  int64_t i = toInt64(call, w, index);
  if (i < 0) rangeError(call, w, index, "an unsigned integer");
  return uint64_t(i);
}

double toDouble(Call* call, Word w, int index) {
  return convert(call, [&](PrimitiveInfo* info) {
    PV v = pv(w);
    if (v.isMissing()) throwConversionError(info, index, "a real number", v);
    return isFlonum(v) ? flonumValue(v) : realValue(v, info, index);
  });
}

bool toBool(Word w) { return !pv(w).isMissing() && pv(w).isTrue(); }

std::string toString(Call* call, Word w, int index) {
  return convert(call, [&](PrimitiveInfo* info) {
    PV v = pv(w);
    if (isString(v)) return std::string(stringView(v));
    if (v.is(Kind::Symbol)) return std::string(symbolName(v));
    throwConversionError(info, index, "a string", v);
  });
}

at::Tensor toTensor(Call* call, Word w, int index) {
  return convert(call, [&](PrimitiveInfo* info) {
    PV v = pv(w);
    if (!isTensor(v)) throwConversionError(info, index, "a tensor", v);
    const at::Tensor& t = tensorOf(v);
    if (!t.defined())
      throwError("tensor-error", info->name + ": argument " + std::to_string(index + 1) + " is a tensor that was already freed");
    return t;
  });
}

bool isAbsent(Word w) { return pv(w).isMissing() || pv(w).isFalse(); }
bool isMissing(Word w) { return pv(w).isMissing(); }

void forEachItem(Call* call, Word w, int index, const std::function<void(Word)>& f) {
  PV v = pv(w);
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) f(vec->items[k].bits);
    return;
  }
  if (!isList(v)) typeError(call, w, index, "a list");
  for (PV p = v; isPair(p); p = cdr(p)) f(car(p).bits);
}

void rangeError(Call* call, Word w, int index, const char* type) {
  typeError(call, w, index, std::string("an integer in the range of ") + type);
}

void typeError(Call* call, Word w, int index, const std::string& expected) {
  convert(call, [&](PrimitiveInfo* info) -> int { throwConversionError(info, index, expected, pv(w)); });
  std::abort();   // not reached: convert throws
}

Word fromInt64(int64_t i) {
  ThreadGuard thread;
  return makeInteger(i).bits;
}
Word fromUInt64(uint64_t u) {
  ThreadGuard thread;
  return u <= uint64_t(PV::kFixnumMax) ? PV::fixnum(int64_t(u)).bits : bignumFromUint64(u).bits;
}
Word fromDouble(double d) {
  ThreadGuard thread;
  return makeFlonum(d).bits;
}
Word fromBool(bool b) { return PV::boolean(b).bits; }
Word fromString(std::string_view s) {
  ThreadGuard thread;
  return makeString(s).bits;
}
Word fromTensor(at::Tensor t) {
  ThreadGuard thread;
  return wrapTensor(std::move(t)).bits;
}
Word nilWord() { return PV::nil().bits; }
Word unspecifiedWord() { return PV::unspecified().bits; }
Word consWord(Word a, Word d) {
  ThreadGuard thread;
  return cons(pv(a), pv(d)).bits;
}

Word wrapObject(Impl* impl, ObjectBox* box) {
  std::unique_ptr<ObjectBox> owned(box);
  ThreadGuard thread;
  std::string name = typeNameOf(nullptr, *box->type);
  PV methods = PV::f();
  if (impl) {
    auto it = impl->methods.find(std::type_index(*box->type));
    if (it != impl->methods.end()) methods = it->second.get();
  }
  PV v = makeForeign(owned.release(), &destroyBox, intern(name));
  v.as<Foreign>()->methods = methods;
  return v.bits;
}

ObjectBox* objectBox(Word w) {
  PV v = pv(w);
  if (!v.is(Kind::Foreign)) return nullptr;
  auto* f = v.as<Foreign>();
  if (f->destroy != &destroyBox || !f->ptr) return nullptr;
  return static_cast<ObjectBox*>(f->ptr);
}

Impl* callImpl(Call* call) { return call ? call->impl : nullptr; }

std::string typeNameOf(Impl*, const std::type_info& t) {
  std::lock_guard<std::mutex> lock(gTypeMutex);
  auto it = typeNames().find(std::type_index(t));
  return it == typeNames().end() ? std::string("object") : it->second;
}

namespace {
struct TypePredicate final : NativeFn {
  std::type_index type;
  explicit TypePredicate(const std::type_info& t) : type(t) { arity = 1; }
  Word invoke(Call*, const Word* args) override {
    ObjectBox* b = objectBox(args[0]);
    return fromBool(b && std::type_index(*b->type) == type);
  }
};
}  // namespace

namespace {
// A native function's procedure is garbage: its info and record go with it.
void releaseHostFunction(void* primitive, void*) {
  PrimitiveInfo* info = static_cast<Primitive*>(primitive)->info;
  delete static_cast<HostFnRecord*>(info->callable);
  Registry::releaseHostInfo(info);
}
}  // namespace

void defineNative(Impl* impl, std::string_view name, std::string_view signature, NativeFn* fn, std::string_view doc,
                  bool returnsTensor, bool keepsValues) {
  std::unique_ptr<NativeFn> owned(fn);
  guarded(*impl, [&]() -> PV {
    Interp& in = *impl->interp;
    uint8_t flags = 0;
    if (returnsTensor) flags |= kPrimReturnsFresh;
    if (!keepsValues) flags |= kPrimBorrowsArgs;
    GlobalCell* cell = in.globalCell(intern(name));
    PV previous = cell->value, previousDoc = cell->doc;
    Registry r(in, "host");
    PrimitiveInfo* info = r.defHost(name, signature, &hostInvoke, doc, flags);   // a malformed signature throws here
    gcRegisterFinalizer(cell->value.obj(), &releaseHostFunction, nullptr);
    if (info->nParams != owned->arity) {
      cell->value = previous;
      cell->doc = previousDoc;
      throw Error("arity-error", "define " + std::string(name) + ": the signature " + std::string(signature) + " names " +
                                     std::to_string(info->nParams) + " parameters but the C++ function takes " +
                                     std::to_string(owned->arity));
    }
    info->callable = new HostFnRecord{owned.get(), impl, impl->alive};
    impl->natives.push_back(std::move(owned));
    return PV::unspecified();
  });
}

void defineObjectType(Impl* impl, const std::type_info& type, std::string_view name) {
  {
    std::lock_guard<std::mutex> lock(gTypeMutex);
    typeNames()[std::type_index(type)] = std::string(name);
  }
  guarded(*impl, [&]() -> PV {
    auto it = impl->methods.find(std::type_index(type));
    if (it == impl->methods.end()) impl->methods.emplace(std::type_index(type), Root(makeHashTable(HashEquiv::Eq)));
    return PV::unspecified();
  });
  defineNative(impl, std::string(name) + "?", "(obj)", new TypePredicate(type),
               "True if OBJ is a " + std::string(name) + " (a host object).", false, true);
}

void addMethod(Impl* impl, const std::type_info& type, std::string_view method, std::string_view globalName) {
  guarded(*impl, [&]() -> PV {
    auto it = impl->methods.find(std::type_index(type));
    if (it == impl->methods.end()) throw Error("error", "addMethod: type not defined with defineType");
    hashTablePut(*impl->interp, it->second.get(), intern(method), impl->interp->lookupGlobal(globalName));
    return PV::unspecified();
  });
}

}  // namespace detail

// ---- Interpreter ---------------------------------------------------------------------------

namespace {
// Loading the prelude nests the reader, analyzer and evaluator deeper than most scripts do: on
// a thread with less stack than this left, the interpreter is made on a stack of its own
// (runOnLargeStack), so that a host's thread pool with small stacks (musl's 128 KB) can make
// one. Evaluation later runs on the host's stack, within its limit ("recursion too deep").
constexpr std::size_t kStackForConstruction = 2 * 1024 * 1024;
// Below this much free stack, evaluation and the LibTorch calls under it would not fit beside the
// safety margin: the constructor refuses instead of letting a later call overflow.
constexpr std::size_t kSmallestFreeStack = 64 * 1024;

Interp* makeInterp() {
  char* here = static_cast<char*>(__builtin_frame_address(0));
  char* limit = currentThreadStackLimit();
  if (here > limit && std::size_t(here - limit) >= kStackForConstruction) return new Interp();
  pthread_attr_t attr;
  void* low = nullptr;
  std::size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &low, &size);
    pthread_attr_destroy(&attr);
  }
  std::size_t free = low && here > static_cast<char*>(low) ? std::size_t(here - static_cast<char*>(low)) : 0;
  if (low && free < kSmallestFreeStack)
    throw Error("error", "could not create the interpreter: this thread's stack is " + std::to_string(size / 1024) +
                             " KB with " + std::to_string(free / 1024) + " KB free below the caller (thread-local storage " +
                             "and the caller's frames take the rest), and Purple needs " +
                             std::to_string(kSmallestFreeStack / 1024) + " KB free");
  Interp* made = nullptr;
  std::exception_ptr failure;
  runOnLargeStack(
      [&] {
        try {
          made = new Interp();
        } catch (...) {
          failure = std::current_exception();
        }
        return 0;
      },
      std::size_t(64) << 20);
  if (failure) std::rethrow_exception(failure);
  return made;
}
}  // namespace

Interpreter::Interpreter(Options options) : impl_(new detail::Impl()) {
  ThreadGuard thread;
  try {
    impl_->interp = makeInterp();
  } catch (const Error&) {
    delete impl_;
    throw;
  } catch (...) {
    delete impl_;
    throw Error("error", "could not create the interpreter");
  }
  {
    static std::once_flag hookOnce;
    std::call_once(hookOnce, [] {
      gPreviousApplyHook = Interp::extensionApplyHook;
      Interp::extensionApplyHook = &objectApplyHook;
    });
  }
  Interp& in = *impl_->interp;
  applyLimits(in, options.limits);
  in.libraryPath = options.libraryPath;
  in.commandLine = options.commandLine;
  if (options.onOutput) setOutput(std::move(options.onOutput));
  else if (options.out) setOutput(*options.out);
  if (options.onError) setError(std::move(options.onError));
  else if (options.err) setError(*options.err);
  if (options.input) setInput(std::move(*options.input));
}

Interpreter::~Interpreter() {
  ThreadGuard thread;
  try {
    flush();
  } catch (...) {
  }
  *impl_->alive = false;   // procedures that outlive it refuse to run (their records stay)
  impl_->natives.clear();
  impl_->methods.clear();
  delete impl_->interp;
  delete impl_;
  // Objects only this interpreter held (tensors, host objects) are destroyed now, not at some
  // later collection.
  gcCollectNow();
}

Value Interpreter::eval(std::string_view code, std::string_view sourceName) {
  return guarded(*impl_, [&] { return impl_->interp->evalString(code, sourceName); });
}

Value Interpreter::load(const std::string& path) {
  return guarded(*impl_, [&]() -> PV {
    Interp& in = *impl_->interp;
    std::string text = readWholeFile(path, "load");   // a directory is an error, not empty
    if (text.size() >= 2 && text[0] == '#' && text[1] == '!') {
      size_t nl = text.find('\n');
      text.replace(0, nl == std::string::npos ? text.size() : nl, "");
    }
    PV saved = in.st->currentFile;
    in.st->currentFile = makeString(path);
    struct Restore {
      Interp& in;
      PV v;
      ~Restore() { in.st->currentFile = v; }
    } restore{in, saved};
    return in.evalString(text, path);
  });
}

Value Interpreter::callValue(const Value& proc, const std::vector<Value>& args) {
  return guarded(*impl_, [&]() -> PV {
    size_t n = args.size();
    PV buf[16];
    PV* argv = n <= 16 ? buf : static_cast<PV*>(gcAlloc(n * sizeof(PV)));
    for (size_t i = 0; i < n; i++) argv[i] = pv(args[i].word());
    return impl_->interp->apply(pv(proc.word()), argv, int(n));
  });
}

void Interpreter::setValue(std::string_view name, const Value& value) {
  guarded(*impl_, [&]() -> PV {
    impl_->interp->defineGlobal(name, pv(value.word()));
    return PV::unspecified();
  });
}

Value Interpreter::get(std::string_view name) {
  return guarded(*impl_, [&]() -> PV {
    PV v = impl_->interp->lookupGlobal(name);
    if (v.isUnbound()) throwError("unbound-variable", "unbound variable: " + std::string(name));
    return v;
  });
}

bool Interpreter::has(std::string_view name) {
  return guarded(*impl_, [&] { return PV::boolean(!impl_->interp->lookupGlobal(name).isUnbound()); }).isTrue();
}

Limits Interpreter::limits() const {
  const ::purple::Limits& in = impl_->interp->limits;
  Limits l;
  l.allowFiles = in.allowFiles;
  l.allowProcess = in.allowProcess;
  l.allowEnvironment = in.allowEnvironment;
  l.maxSteps = in.maxSteps;
  l.maxSeconds = in.maxSeconds;
  l.maxTensorBytes = in.maxTensorBytes;
  l.maxDepth = in.maxDepth;
  return l;
}

void Interpreter::setLimits(const Limits& limits) {
  applyLimits(*impl_->interp, limits);
  // Inside a native function the new budgets take effect now; otherwise at the next call.
  if (impl_->active > 0) impl_->interp->resetBudgets();
}

void Interpreter::interrupt() { impl_->interp->requestInterrupt(); }

void Interpreter::setOutput(std::ostream& os) { setOutput(streamSink(os)); }
void Interpreter::setError(std::ostream& os) { setError(streamSink(os)); }

void Interpreter::setOutput(OutputCallback f) {
  guarded(*impl_, [&] {
    setPort(impl_->interp->st->outputPort, makeCallbackOutputPort(std::move(f)));
    return PV::unspecified();
  });
}

void Interpreter::setError(OutputCallback f) {
  guarded(*impl_, [&] {
    setPort(impl_->interp->st->errorPort, makeCallbackOutputPort(std::move(f)));
    return PV::unspecified();
  });
}

void Interpreter::setInput(std::string text) {
  guarded(*impl_, [&] {
    setPort(impl_->interp->st->inputPort, makeStringInputPort(text));
    return PV::unspecified();
  });
}

void Interpreter::flush() {
  guarded(*impl_, [&] {
    portFlush(impl_->interp->currentOutputPort());
    portFlush(impl_->interp->currentErrorPort());
    return PV::unspecified();
  });
}

}  // namespace embed
}  // namespace purple
