// Purple's embedding API: run Purple code inside a C++ program, pass values and tensors in and
// out, expose C++ functions and objects to Purple, and sandbox untrusted scripts.
//
//   #include <purple/purple.hpp>
//   purple::Interpreter interp;
//   interp.define("square", [](double x) { return x * x; }, "X squared.");
//   double y = interp.eval("(square 3)").to<double>();   // 9
//
// docs/embedding.md is the guide. The classes live in purple::embed and are named purple::X
// (Interpreter, Value, Error, Exit, Options, Limits, TypeBuilder) through using-declarations.
//
// Thread rules: an Interpreter, and the Values it returns, are used by one thread at a time.
// Interpreter::interrupt() may be called from any thread (and from a signal handler).
#pragma once

#include "purple/purple.h"

#include <ATen/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iosfwd>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace purple::embed {

class Interpreter;
class Value;

namespace detail {
using Word = std::uintptr_t;   // a Purple value; the collector sees it only on a stack
struct Impl;                   // one interpreter's state (api.cpp)
struct Call;                   // the native call in progress (api.cpp)
}  // namespace detail

// ---- values -------------------------------------------------------------------------------

// A Purple value held by the host. While a Value exists, the object it refers to stays alive
// (it is a root for the garbage collector); copies share the root.
class Value {
 public:
  Value();   // the unspecified value

  // Makes a Purple value from a C++ one with the conversions native functions use: integers,
  // floating point, bool, strings, at::Tensor (shared, not copied), std::vector (a list),
  // std::optional (#f when empty), std::tuple / std::pair (a list), Value.
  template <class T> static Value from(T&& x);
  static Value symbol(std::string_view name);
  static Value list(const std::vector<Value>& items);
  static Value nil();                 // the empty list
  static Value boolean(bool b);
  // A tensor made from a DLPack tensor, sharing its memory; takes ownership of `t` (its deleter
  // runs when Purple no longer needs the memory, or at once if the conversion fails).
  static Value fromDLPack(DLManagedTensor* t);

  bool isUnspecified() const;
  bool isNil() const;                 // the empty list '()
  bool isBool() const;
  bool isTrue() const;                // Scheme truth: everything except #f
  bool isFalse() const;
  bool isInteger() const;             // exact integer (any size)
  bool isReal() const;                // any real number (exact or inexact)
  bool isNumber() const;
  bool isString() const;
  bool isSymbol() const;
  bool isChar() const;
  bool isPair() const;
  bool isList() const;                // proper list, including '()
  bool isVector() const;
  bool isProcedure() const;
  bool isTensor() const;
  bool isError() const;               // an error object (from `error` or a failing builtin)
  bool isObject() const;              // a host object (Interpreter::defineType / wrap)
  bool isEof() const;
  // True when the value converts with to<T>() without an error.
  template <class T> bool is() const;

  // Converts to T with the rules native function arguments follow; throws purple::Error
  // (kind "type-error") when the value does not convert. to<Value>() is the value itself.
  template <class T> T to() const;
  // The host object of type T inside this value, or nullptr.
  template <class T> T* object() const;
  // The tensor inside a tensor value, sharing storage (throws purple::Error otherwise).
  at::Tensor tensor() const;
  // A DLPack view of a tensor value sharing its memory; the caller calls ->deleter(result).
  DLManagedTensor* toDLPack() const;

  std::string str() const;            // as `display` prints it
  std::string repr() const;           // as `write` prints it
  std::string typeName() const;       // "integer", "string", "pair", "tensor", a host type name ...

  // Elements of a list or vector (throws purple::Error for other values).
  std::vector<Value> elements() const;
  std::size_t size() const;           // length of a list, vector or string (characters)
  Value operator[](std::size_t i) const;   // element of a list or vector

  bool same(const Value& other) const;     // eqv?
  bool equals(const Value& other) const;   // equal?

  // Internal: the raw word (valid while this Value lives) and construction from one.
  detail::Word word() const { return bits_; }
  static Value fromWord(detail::Word w);

 private:
  detail::Word bits_;
  std::shared_ptr<void> root_;        // an uncollectable cell holding bits_, for heap objects
};

std::ostream& operator<<(std::ostream& os, const Value& v);   // repr()

// ---- errors -------------------------------------------------------------------------------

// Every failure of an API call: a Purple error that was not caught, a budget that ran out, an
// interrupt, a C++ exception from a native function or from LibTorch. Nothing else escapes.
class Error : public std::runtime_error {
 public:
  Error(std::string kind, std::string message, std::vector<Value> irritants = {},
        std::vector<std::string> backtrace = {}, Value payload = Value());
  // The error kind: "error" (from `error`), "type-error", "arity-error", "unbound-variable",
  // "file-error", "read-error", "tensor-error", "memory-error", "recursion-error",
  // "interrupt", "step-limit", "time-limit", "exit", "raise" (a non-error object was raised) ...
  const std::string& kind() const { return kind_; }
  const std::string& message() const { return message_; }             // without irritants
  const std::vector<Value>& irritants() const { return irritants_; }
  std::vector<std::string> irritantStrings() const;                    // their written forms
  const std::vector<std::string>& backtrace() const { return backtrace_; }   // innermost first
  // What was raised: the error object, or the object given to `raise`.
  const Value& payload() const { return payload_; }
  // True for "interrupt", "step-limit" and "time-limit": stops that Purple code cannot catch.
  bool isInterrupt() const;
  // Message, irritants and backtrace, as the `purple` command prints an uncaught error.
  std::string report() const;

  // Internal: the exception as it was inside the interpreter, so that an Error passing back
  // through a native function into Purple is the same Purple exception again.
  std::exception_ptr original;

 private:
  std::string kind_, message_;
  std::vector<Value> irritants_;
  std::vector<std::string> backtrace_;
  Value payload_;
};

// Thrown when Purple code calls (exit CODE) (only possible when Limits::allowProcess is true).
// The host decides what exiting means; nothing has called std::exit.
class Exit : public Error {
 public:
  explicit Exit(int code);
  int code() const { return code_; }

 private:
  int code_;
};

// ---- options ------------------------------------------------------------------------------

struct Limits {
  bool allowFiles = true;           // open-*-file, load, include, import, save/load of state ...
  bool allowProcess = true;         // exit, command-line, stdin, process-wide settings (docs/embedding.md)
  bool allowEnvironment = true;     // get-environment-variable(s)
  int64_t maxSteps = 0;             // procedure calls per API call (eval/load/call); 0: unlimited
  double maxSeconds = 0;            // wall-clock seconds per API call; 0: unlimited
  int64_t maxTensorBytes = 0;       // live tensor storage (process-wide count); 0: unlimited
  int64_t maxDepth = 0;             // nested calls; 0: the default (400000, less on small stacks)

  // Files, processes and environment off; the budgets are left for the host to choose.
  static Limits sandbox() {
    Limits l;
    l.allowFiles = l.allowProcess = l.allowEnvironment = false;
    return l;
  }
};

// Receives what Purple writes to a port; an empty string means the port was flushed
// (flush-output, or the end of an API call's output), so a host that buffers can pass it on.
using OutputCallback = std::function<void(std::string_view)>;

struct Options {
  Limits limits;
  // Where Purple's current output and error ports write. A callback wins over a stream;
  // with neither, the process's stdout / stderr.
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  OutputCallback onOutput;
  OutputCallback onError;
  // Text that `read`, `read-line` ... read from the current input port; std::nullopt: stdin.
  std::optional<std::string> input;
  std::vector<std::string> libraryPath;   // directories `import` searches
  std::vector<std::string> commandLine;   // what (command-line) returns
};

// Process-wide cap on the garbage-collected heap (pairs, vectors, strings) and the buffers of
// string and bytevector ports (not tensor storage), for hosts running untrusted code:
// allocations past it fail with a "memory-error". 0: none.
void setHeapLimit(std::size_t bytes);

// ---- front ends: the process ---------------------------------------------------------------
// What a program built around an interpreter (the `purple` command, the Jupyter kernel) needs.

// "Purple 0.1.0 (LibTorch 1.13.0, CUDA not available)".
std::string versionLine();
// Runs `body` on the calling thread switched to a stack of `bytes` (mapped, committed only as
// it is used) and returns its result; exceptions from `body` come back out. Purple's deep
// recursion then reaches its depth limit long before the stack runs out. The calling thread
// keeps its malloc arena (for the main thread, glibc's main arena, the cheapest for LibTorch).
// Without the mapping (no memory), `body` runs on the thread's own stack.
int runOnLargeStack(const std::function<int()>& body, std::size_t bytes = std::size_t(1) << 30);
// Replaces the file at `path` by `bytes` as Purple's own saves do: a crash at any moment leaves
// the old file or the new one (a temporary beside it, fsync'd, renamed over it, the directory
// fsync'd), and temporaries that killed writers left are removed. Throws Error ("file-error").
void saveFile(const std::string& path, std::string_view bytes);
// Full collections, each followed by the finalizers it made ready, until one makes none ready
// (a finalizer that drops a C++ object can free what it held only at the next collection), then
// the tensors still alive: at exit, after the interpreters are gone, both are 0 unless something
// leaked. `collections` says how many it took.
struct TensorCensus {
  int64_t liveTensors = 0;
  int64_t bytes = 0;
  int collections = 0;
};
TensorCensus collectGarbage();

// ---- front ends: input ---------------------------------------------------------------------

// Where one top-level form of the code given to Interpreter::evalForms was.
struct FormSource {
  std::size_t begin = 0, end = 0;   // byte offsets of the form in the code
  int line = 1, column = 1;         // of its first character (lines counted from firstLine)
};

// Whether text typed so far is a whole input: every datum closed (complete), more lines could
// finish it (incomplete), or it is malformed in a way more text cannot fix (invalid; evaluating
// it reports the read error).
enum class InputStatus { complete, incomplete, invalid };
struct InputCheck {
  InputStatus status = InputStatus::complete;
  int openLists = 0;                // lists still open at the end, for indenting the next line
};

// Names completing the identifier that ends at a cursor, and the bytes of the code they replace.
struct Completions {
  std::vector<std::string> matches;   // sorted, without duplicates
  std::size_t begin = 0, end = 0;
};

// ---- front ends: rich display --------------------------------------------------------------

// One representation of a value for display (prelude/38-display.purple, docs/jupyter.md).
struct Representation {
  std::string mimeType;       // "text/plain", "text/html", "text/markdown", "image/png", "image/svg+xml" ...
  std::string data;           // the text, or the bytes of a binary format
  bool binary = false;        // data are bytes (a bytevector in Purple: image/png ...)
  int width = 0, height = 0;  // the size to show a picture at, in pixels; 0: its own
};
using MimeBundle = std::vector<Representation>;
// What (show x) calls: the representations, the display's id ("" or the :id given) and whether
// this replaces the display with that id.
using DisplayHandler = std::function<void(const MimeBundle& bundle, const std::string& displayId, bool update)>;

// ---- conversions (internal) ---------------------------------------------------------------

namespace detail {

// Registers the calling thread with the garbage collector for the scope when it is not
// registered already (a thread that allocates Purple objects must be).
bool enterThread();
void leaveThread(bool entered);
struct ThreadScope {
  bool entered = enterThread();
  ThreadScope() = default;
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;
  ~ThreadScope() { leaveThread(entered); }
};

// Purple -> C++, each through the builtins' own conversion rules (interp/language/bind.hpp). `call` is
// the native call whose argument `index` is converted (for error messages), or nullptr.
int64_t toInt64(Call* call, Word w, int index);
uint64_t toUInt64(Call* call, Word w, int index);
double toDouble(Call* call, Word w, int index);
bool toBool(Word w);
std::string toString(Call* call, Word w, int index);
at::Tensor toTensor(Call* call, Word w, int index);
bool isAbsent(Word w);                                   // #f or a missing optional argument
bool isMissing(Word w);                                  // a missing optional argument
void forEachItem(Call* call, Word w, int index, const std::function<void(Word)>& f);   // list or vector
[[noreturn]] void rangeError(Call* call, Word w, int index, const char* type);
[[noreturn]] void typeError(Call* call, Word w, int index, const std::string& expected);

// C++ -> Purple.
Word fromInt64(int64_t i);
Word fromUInt64(uint64_t u);
Word fromDouble(double d);
Word fromBool(bool b);
Word fromString(std::string_view s);
Word fromTensor(at::Tensor t);
Word nilWord();
Word unspecifiedWord();
Word consWord(Word car, Word cdr);

// Host objects: a Foreign cell owning an ObjectBox, destroyed by the collector.
struct ObjectBox {
  virtual ~ObjectBox() = default;
  void* object = nullptr;
  const std::type_info* type = nullptr;
  bool shared = false;
};
template <class T> struct OwnedBox final : ObjectBox {
  T value;
  template <class... A> explicit OwnedBox(A&&... a) : value(std::forward<A>(a)...) {
    object = &value;
    type = &typeid(T);
  }
};
template <class T> struct SharedBox final : ObjectBox {
  std::shared_ptr<T> ptr;
  explicit SharedBox(std::shared_ptr<T> p) : ptr(std::move(p)) {
    object = ptr.get();
    type = &typeid(T);
    shared = true;
  }
};
Word wrapObject(Impl* impl, ObjectBox* box);             // takes ownership of box
ObjectBox* objectBox(Word w);                            // nullptr unless a host object
Impl* callImpl(Call* call);
std::string typeNameOf(Impl* impl, const std::type_info& t);

template <class T> struct IsVector : std::false_type {};
template <class T, class A> struct IsVector<std::vector<T, A>> : std::true_type {};
template <class T> struct IsOptional : std::false_type {};
template <class T> struct IsOptional<std::optional<T>> : std::true_type {};
template <class T> struct IsSharedPtr : std::false_type {};
template <class T> struct IsSharedPtr<std::shared_ptr<T>> : std::true_type {};
template <class T> struct IsTupleLike : std::false_type {};
template <class... T> struct IsTupleLike<std::tuple<T...>> : std::true_type {};
template <class A, class B> struct IsTupleLike<std::pair<A, B>> : std::true_type {};

template <class T>
constexpr bool isHostObjectType =
    std::is_class_v<T> && !std::is_same_v<T, std::string> && !std::is_same_v<T, std::string_view> &&
    !std::is_same_v<T, at::Tensor> && !std::is_same_v<T, Value> && !IsVector<T>::value &&
    !IsOptional<T>::value && !IsSharedPtr<T>::value && !IsTupleLike<T>::value;

template <class T> T& hostObject(Call* call, Word w, int index) {
  ObjectBox* b = objectBox(w);
  if (!b || *b->type != typeid(T)) typeError(call, w, index, "a " + typeNameOf(call ? callImpl(call) : nullptr, typeid(T)));
  return *static_cast<T*>(b->object);
}

// Conv<T>::from(call, word, index) converts a Purple value to a C++ parameter of type T;
// Conv<T>::to(impl, x) converts a C++ result to a Purple value.
template <class T, class Enable = void> struct Conv {
  static_assert(isHostObjectType<T>,
                "purple: unsupported type in a conversion; use integers, floating point, bool, std::string, "
                "at::Tensor, purple::Value, std::vector, std::optional, or a class type exposed as a host object");
  static T& from(Call* c, Word w, int i) { return hostObject<T>(c, w, i); }
  template <class U> static Word to(Impl* impl, U&& x) {
    return wrapObject(impl, new OwnedBox<T>(std::forward<U>(x)));
  }
};
template <> struct Conv<Value> {
  static Value from(Call*, Word w, int) { return Value::fromWord(isMissing(w) ? unspecifiedWord() : w); }
  static Word to(Impl*, const Value& v) { return v.word(); }
};
template <> struct Conv<bool> {
  static bool from(Call*, Word w, int) { return toBool(w); }
  static Word to(Impl*, bool b) { return fromBool(b); }
};
template <class T>
struct Conv<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static T from(Call* c, Word w, int i) {
    if constexpr (std::is_signed_v<T>) {
      int64_t v = toInt64(c, w, i);
      if (v < int64_t(std::numeric_limits<T>::min()) || v > int64_t(std::numeric_limits<T>::max()))
        rangeError(c, w, i, typeid(T).name());
      return T(v);
    } else {
      uint64_t v = toUInt64(c, w, i);
      if (v > uint64_t(std::numeric_limits<T>::max())) rangeError(c, w, i, typeid(T).name());
      return T(v);
    }
  }
  static Word to(Impl*, T x) {
    if constexpr (std::is_signed_v<T>) return fromInt64(int64_t(x));
    else return fromUInt64(uint64_t(x));
  }
};
template <class T> struct Conv<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static T from(Call* c, Word w, int i) { return T(toDouble(c, w, i)); }
  static Word to(Impl*, T x) { return fromDouble(double(x)); }
};
template <> struct Conv<std::string> {
  static std::string from(Call* c, Word w, int i) { return toString(c, w, i); }
  static Word to(Impl*, std::string_view s) { return fromString(s); }
};
template <> struct Conv<std::string_view> {   // results only: a parameter would dangle
  static Word to(Impl*, std::string_view s) { return fromString(s); }
};
template <> struct Conv<const char*> {
  static Word to(Impl*, const char* s) { return fromString(s ? std::string_view(s) : std::string_view()); }
};
template <> struct Conv<char*> {
  static Word to(Impl*, const char* s) { return fromString(s ? std::string_view(s) : std::string_view()); }
};
template <> struct Conv<at::Tensor> {
  static at::Tensor from(Call* c, Word w, int i) { return toTensor(c, w, i); }
  static Word to(Impl*, at::Tensor t) { return fromTensor(std::move(t)); }
};
template <class T> struct Conv<std::optional<T>> {
  static std::optional<T> from(Call* c, Word w, int i) {
    if (isAbsent(w)) return std::nullopt;
    return std::optional<T>(Conv<T>::from(c, w, i));
  }
  static Word to(Impl* impl, const std::optional<T>& x) { return x ? Conv<T>::to(impl, *x) : fromBool(false); }
};
template <class T, class A> struct Conv<std::vector<T, A>> {
  static std::vector<T, A> from(Call* c, Word w, int i) {
    std::vector<T, A> out;
    forEachItem(c, w, i, [&](Word item) { out.push_back(Conv<T>::from(c, item, i)); });
    return out;
  }
  static Word to(Impl* impl, const std::vector<T, A>& xs) {
    Word r = nilWord();   // built from the end on the stack, where the collector sees it
    for (std::size_t k = xs.size(); k-- > 0;) {
      if constexpr (std::is_same_v<T, bool>) r = consWord(fromBool(bool(xs[k])), r);
      else r = consWord(Conv<T>::to(impl, xs[k]), r);
    }
    return r;
  }
};
template <class... T> struct Conv<std::tuple<T...>> {
  static Word to(Impl* impl, const std::tuple<T...>& t) { return build(impl, t, std::index_sequence_for<T...>{}); }
  template <std::size_t... I>
  static Word build(Impl* impl, const std::tuple<T...>& t, std::index_sequence<I...>) {
    Word r = nilWord();
    ((r = consWord(Conv<std::decay_t<std::tuple_element_t<sizeof...(T) - 1 - I, std::tuple<T...>>>>::to(
                       impl, std::get<sizeof...(T) - 1 - I>(t)),
                   r)),
     ...);
    return r;
  }
};
template <class A, class B> struct Conv<std::pair<A, B>> {
  static Word to(Impl* impl, const std::pair<A, B>& p) {
    Word r = consWord(Conv<std::decay_t<B>>::to(impl, p.second), nilWord());
    return consWord(Conv<std::decay_t<A>>::to(impl, p.first), r);
  }
};
template <class T> struct Conv<std::shared_ptr<T>> {
  static std::shared_ptr<T> from(Call* c, Word w, int i) {
    ObjectBox* b = objectBox(w);
    if (!b || *b->type != typeid(T) || !b->shared)
      typeError(c, w, i, "a shared " + typeNameOf(c ? callImpl(c) : nullptr, typeid(T)));
    return static_cast<SharedBox<T>*>(b)->ptr;
  }
  static Word to(Impl* impl, std::shared_ptr<T> p) {
    if (!p) return fromBool(false);
    return wrapObject(impl, new SharedBox<T>(std::move(p)));
  }
};
// T* parameters: the host object, or nullptr for #f.
template <class T> struct Conv<T*, std::enable_if_t<std::is_class_v<T>>> {
  static T* from(Call* c, Word w, int i) {
    if (isAbsent(w)) return nullptr;
    return &hostObject<std::remove_const_t<T>>(c, w, i);
  }
};

// What a C++ parameter type A is converted as.
template <class A> using ParamConv = Conv<std::remove_cv_t<std::remove_reference_t<A>>>;
// Parameters of class type are taken by reference to the object inside the cell.
template <class A> decltype(auto) convertParam(Call* c, Word w, int i) {
  using D = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (std::is_pointer_v<D>) return Conv<D>::from(c, w, i);
  else return ParamConv<A>::from(c, w, i);
}

template <class A> constexpr bool keepsValue() {
  using D = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (std::is_same_v<D, Value>) return true;
  else if constexpr (IsOptional<D>::value) return keepsValue<typename D::value_type>();
  else if constexpr (IsVector<D>::value) return keepsValue<typename D::value_type>();
  else if constexpr (std::is_pointer_v<D> || IsSharedPtr<D>::value) return true;
  else return isHostObjectType<D>;
}

// Call signatures of callables.
template <class F> struct Signature : Signature<decltype(&F::operator())> {};
template <class C, class R, class... A> struct Signature<R (C::*)(A...) const> {
  using Result = R;
  using Args = std::tuple<A...>;
};
template <class C, class R, class... A> struct Signature<R (C::*)(A...)> {
  using Result = R;
  using Args = std::tuple<A...>;
};
template <class C, class R, class... A> struct Signature<R (C::*)(A...) const noexcept> {
  using Result = R;
  using Args = std::tuple<A...>;
};
template <class C, class R, class... A> struct Signature<R (C::*)(A...) noexcept> {
  using Result = R;
  using Args = std::tuple<A...>;
};
template <class R, class... A> struct Signature<R (*)(A...)> {
  using Result = R;
  using Args = std::tuple<A...>;
};
template <class R, class... A> struct Signature<R (*)(A...) noexcept> {
  using Result = R;
  using Args = std::tuple<A...>;
};
template <class R, class... A> struct Signature<R(A...)> : Signature<R (*)(A...)> {};

// A native function with its conversions, behind one virtual call.
struct NativeFn {
  virtual ~NativeFn() = default;
  virtual Word invoke(Call* call, const Word* args) = 0;
  int arity = 0;
};

template <class F, class R, class ArgsTuple> struct NativeFnImpl;
template <class F, class R, class... A> struct NativeFnImpl<F, R, std::tuple<A...>> final : NativeFn {
  F fn;
  explicit NativeFnImpl(F f) : fn(std::move(f)) { arity = int(sizeof...(A)); }
  Word invoke(Call* call, const Word* args) override { return run(call, args, std::index_sequence_for<A...>{}); }
  template <std::size_t... I> Word run(Call* call, const Word* args, std::index_sequence<I...>) {
    (void)args;
    if constexpr (std::is_void_v<R>) {
      std::invoke(fn, convertParam<A>(call, args[I], int(I))...);
      return unspecifiedWord();
    } else {
      return Conv<std::decay_t<R>>::to(callImpl(call), std::invoke(fn, convertParam<A>(call, args[I], int(I))...));
    }
  }
};

// Parameter names for a generated signature: trailing std::optional parameters are optional.
template <class... A> std::string makeSignature(const char* first = nullptr) {
  constexpr std::size_t n = sizeof...(A);
  constexpr bool optional[n + 1] = {IsOptional<std::remove_cv_t<std::remove_reference_t<A>>>::value..., false};
  std::size_t firstOptional = n;
  while (firstOptional > 0 && optional[firstOptional - 1]) firstOptional--;
  std::string s = "(";
  for (std::size_t k = 0; k < n; k++) {
    if (k) s += ' ';
    if (k == firstOptional) s += ":optional ";
    if (k == 0 && first) s += first;
    else s += "arg" + std::to_string(k + 1);
  }
  return s + ")";
}
template <class Tuple> struct SignatureOf;
template <class... A> struct SignatureOf<std::tuple<A...>> {
  static std::string make(const char* first = nullptr) { return makeSignature<A...>(first); }
  static constexpr bool keeps = (keepsValue<A>() || ... || false);
};

void defineNative(Impl* impl, std::string_view name, std::string_view signature, NativeFn* fn,
                  std::string_view doc, bool returnsTensor, bool keepsValues);
void defineObjectType(Impl* impl, const std::type_info& type, std::string_view name);
void addMethod(Impl* impl, const std::type_info& type, std::string_view method, std::string_view globalName);

}  // namespace detail

// ---- the interpreter ----------------------------------------------------------------------

template <class T> class TypeBuilder;

class Interpreter {
 public:
  explicit Interpreter(Options options = Options());
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Evaluates every form of `code` at top level; returns the last value.
  Value eval(std::string_view code, std::string_view sourceName = "<eval>");
  // Evaluates the file at `path`. The host chose the file, so this works even when
  // Limits::allowFiles is false (scripts still cannot load files then).
  Value load(const std::string& path);
  // Calls a Purple procedure (a global's name, or a Value) with C++ arguments converted.
  template <class... A> Value call(std::string_view name, A&&... args) {
    return callValue(get(name), {Value::from(std::forward<A>(args))...});
  }
  template <class... A> Value call(const Value& proc, A&&... args) {
    return callValue(proc, {Value::from(std::forward<A>(args))...});
  }
  Value callValue(const Value& proc, const std::vector<Value>& args);

  // Defines a global procedure NAME that calls `fn` (a function pointer, lambda or other
  // callable of fixed arity) with its arguments converted, and converts the result back.
  // Trailing std::optional parameters are optional in Purple. A C++ exception thrown by `fn`
  // becomes a Purple error (catchable with guard); `(help 'NAME)` shows `doc`.
  template <class F> void define(std::string_view name, F&& fn, std::string_view doc = "") {
    using S = detail::Signature<std::decay_t<F>>;
    defineWith<F>(name, detail::SignatureOf<typename S::Args>::make(), std::forward<F>(fn), doc);
  }
  // The same with an explicit signature, e.g. "(x y :optional z)", naming parameters in
  // error messages and help; it must have one name per C++ parameter.
  template <class F> void define(std::string_view name, std::string_view signature, F&& fn, std::string_view doc) {
    defineWith<F>(name, signature, std::forward<F>(fn), doc);
  }

  // Globals.
  template <class T> void set(std::string_view name, T&& value) {
    setValue(name, Value::from(std::forward<T>(value)));
  }
  void setValue(std::string_view name, const Value& value);
  Value get(std::string_view name);                  // throws Error ("unbound-variable")
  template <class T> T get(std::string_view name) { return get(name).to<T>(); }
  bool has(std::string_view name);

  // Host objects: a C++ type T exposed as a Purple type NAME. See TypeBuilder.
  template <class T> TypeBuilder<T> defineType(std::string_view name);
  // A Purple value owning `object` (moved in) or sharing it (std::shared_ptr<T>); the collector
  // runs its destructor once Purple and the host no longer hold it.
  template <class T> Value wrap(T&& object) {
    using D = std::decay_t<T>;
    detail::Word w;
    if constexpr (detail::IsSharedPtr<D>::value) w = detail::Conv<D>::to(impl_, std::forward<T>(object));
    else w = detail::wrapObject(impl_, new detail::OwnedBox<D>(std::forward<T>(object)));
    return Value::fromWord(w);
  }

  // Sandbox and budgets. The budgets (steps, seconds) are re-armed at each outermost
  // eval / load / call.
  Limits limits() const;
  void setLimits(const Limits& limits);
  // Stops the running evaluation at its next safe point (or, when none runs, the next one)
  // with an Error of kind "interrupt". Safe from any thread and from signal handlers.
  void interrupt();
  // Drops an interrupt request that no evaluation has received (a Ctrl-C that arrived just as
  // an evaluation ended), so that it does not stop the next one. Safe from any thread.
  void cancelInterrupt();

  // Front ends (REPL, notebook kernel): reads the whole of `code` first (a read error anywhere
  // in it runs nothing, as IPython does with a cell), then evaluates its forms one at a time.
  // After each form, `onResults` gets its values (none for an unspecified value, several for
  // (values a b)) and where the form was, before the next form runs, so a definition is in
  // effect for the forms after it and output appears form by form. Budgets are re-armed for
  // every form. The first error stops it (a purple::Error whose positions name `sourceName`,
  // lines counted from `firstLine`). Returns the last value.
  using FormCallback = std::function<void(const std::vector<Value>& results, const FormSource& where)>;
  Value evalForms(std::string_view code, std::string_view sourceName, const FormCallback& onResults = nullptr,
                  int firstLine = 1);
  // Whether `code` is complete input (see InputStatus).
  static InputCheck checkInput(std::string_view code);
  // Completion candidates for the identifier ending at byte `cursor` of `code`: bound global
  // names (procedures, syntax, variables; not the internal %names) and special forms.
  Completions complete(std::string_view code, std::size_t cursor);
  // The identifier around byte `cursor` of `code` (touching it on either side), or "".
  static std::string identifierAt(std::string_view code, std::size_t cursor);
  // The text (help 'NAME) prints: signature and docstring; std::nullopt when NAME is not bound
  // and is no special form.
  std::optional<std::string> documentation(std::string_view name);
  // The representations of `v` by Purple's display protocol (define-representation, tensors as
  // text and HTML, pictures as PNG ...): what a notebook shows for it. text/plain is always there.
  MimeBundle represent(const Value& v);
  // Where (show x) sends representations. `live`: the front end shows each display as it comes
  // and updates displays in place (a notebook); fit then shows its progress as one display it
  // updates. Without a handler, show prints the text/plain representation.
  void setDisplayHandler(DisplayHandler handler, bool live = false);

  // A REPL server on the Unix socket SOCKET_PATH (docs/attach.md): `purple --attach` and
  // AttachClient (purple/attach.hpp) connect to it, and their code runs on this interpreter's
  // thread at its safe points while the host evaluates, under this interpreter's limits; the
  // server's own thread never touches a Purple value. The socket is made mode 0600 and serves
  // only this process's user; it is removed when the interpreter is destroyed. The host chose
  // the path, so this works when Limits::allowFiles is false. Throws Error ("file-error") when
  // the path is taken by a live server or cannot be bound.
  void serveRepl(const std::string& socketPath);
  void stopServingRepl();
  // For a host whose interpreter is idle (a REPL waiting at its prompt): waits up to SECONDS
  // for clients' requests and runs them on the calling thread. Returns whether one ran.
  bool serveClients(double seconds);

  // Output and input.
  void setOutput(std::ostream& os);
  void setError(std::ostream& os);
  void setOutput(OutputCallback f);
  void setError(OutputCallback f);
  void setInput(std::string text);
  void flush();

  // Sends the current output and error ports to two callbacks for as long as it lives, then puts
  // back the ports it replaced (captures nest): a kernel captures each request's output this way.
  class OutputCapture {
   public:
    OutputCapture(Interpreter& interp, OutputCallback out, OutputCallback err);
    ~OutputCapture();
    OutputCapture(const OutputCapture&) = delete;
    OutputCapture& operator=(const OutputCapture&) = delete;

   private:
    Interpreter& interp_;
    Value savedOut_, savedErr_;
  };

  detail::Impl* impl() { return impl_; }

 private:
  template <class F> void defineWith(std::string_view name, std::string_view signature, F&& fn, std::string_view doc) {
    using D = std::decay_t<F>;
    using S = detail::Signature<D>;
    using R = std::decay_t<typename S::Result>;
    static_assert(!(std::is_lvalue_reference_v<typename S::Result> && detail::isHostObjectType<R>),
                  "purple: returning a reference to a host object would give Purple a copy; return void or a value");
    auto* native = new detail::NativeFnImpl<D, typename S::Result, typename S::Args>(std::forward<F>(fn));
    detail::defineNative(impl_, name, signature, native, doc, std::is_same_v<R, at::Tensor>,
                         detail::SignatureOf<typename S::Args>::keeps);
  }
  template <class T> friend class TypeBuilder;
  detail::Impl* impl_;
};

// Exposes the C++ type T to Purple under NAME:
//
//   interp.defineType<Counter>("counter")
//       .constructor<int64_t>("make-counter")        // (make-counter 5)
//       .method("inc!", &Counter::inc, "Adds N.")     // (counter-inc! c 2)  or  (c 'inc! 2)
//       .method("value", [](const Counter& c) { return c.n; });
//
// defineType defines the predicate `NAME?`. A method is a global procedure `NAME-METHOD` whose
// first argument is the object; it is also reachable by applying the object to the method's
// symbol. A native function returning T (by value) gives Purple a new object; a parameter of
// type T& (or const T&, or T* where #f is nullptr) receives the object itself.
template <class T> class TypeBuilder {
 public:
  TypeBuilder(Interpreter& interp, std::string name) : interp_(interp), name_(std::move(name)) {}

  template <class... A> TypeBuilder& constructor(std::string_view procName, std::string_view doc = "") {
    interp_.define(procName, [](A... a) { return T(std::move(a)...); }, doc);
    return *this;
  }
  // `f` is a member function pointer of T, or a callable whose first parameter is T& / const T&.
  template <class F> TypeBuilder& method(std::string_view method, F f, std::string_view doc = "") {
    std::string global = name_ + "-" + std::string(method);
    if constexpr (std::is_member_function_pointer_v<F>) {
      using S = detail::Signature<F>;
      defineMember<F, typename S::Result>(global, f, doc, static_cast<typename S::Args*>(nullptr));
    } else {
      using S = detail::Signature<std::decay_t<F>>;
      interp_.defineWith<F>(global, detail::SignatureOf<typename S::Args>::make("self"), std::move(f), doc);
    }
    detail::addMethod(interp_.impl_, typeid(T), method, global);
    return *this;
  }
  const std::string& name() const { return name_; }

 private:
  template <class F, class R, class... A> void defineMember(const std::string& global, F f, std::string_view doc,
                                                            std::tuple<A...>*) {
    static_assert(!(std::is_lvalue_reference_v<R> && detail::isHostObjectType<std::decay_t<R>>),
                  "purple: a method returning a reference to a host object would give Purple a copy; return void");
    auto adapter = [f](T& self, A... a) -> R { return (self.*f)(std::forward<A>(a)...); };
    interp_.defineWith<decltype(adapter)>(global, detail::makeSignature<T&, A...>("self"), std::move(adapter), doc);
  }
  Interpreter& interp_;
  std::string name_;
};

template <class T> TypeBuilder<T> Interpreter::defineType(std::string_view name) {
  detail::defineObjectType(impl_, typeid(T), name);
  return TypeBuilder<T>(*this, std::string(name));
}

// ---- Value templates ----------------------------------------------------------------------

template <class T> Value Value::from(T&& x) {
  using D = std::decay_t<T>;
  detail::ThreadScope thread;
  if constexpr (std::is_same_v<D, Value>) return x;
  else if constexpr (std::is_array_v<std::remove_reference_t<T>> || std::is_same_v<D, const char*> || std::is_same_v<D, char*>)
    return fromWord(detail::fromString(std::string_view(x)));
  else return fromWord(detail::Conv<D>::to(nullptr, std::forward<T>(x)));
}

template <class T> T Value::to() const {
  using D = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<D, Value>) return *this;
  else if constexpr (std::is_pointer_v<D>) return detail::Conv<D>::from(nullptr, bits_, 0);
  else if constexpr (detail::isHostObjectType<D>) return detail::hostObject<D>(nullptr, bits_, 0);
  else return detail::Conv<D>::from(nullptr, bits_, 0);
}

template <class T> bool Value::is() const {
  try {
    (void)to<T>();
    return true;
  } catch (const Error&) {
    return false;
  }
}

template <class T> T* Value::object() const {
  detail::ObjectBox* b = detail::objectBox(bits_);
  return b && *b->type == typeid(T) ? static_cast<T*>(b->object) : nullptr;
}

}  // namespace purple::embed

// The public names. libpurple's own sources define PURPLE_IMPLEMENTATION: there, purple::Value
// is the interpreter's one-word value and these classes are reached as purple::embed::X.
#ifndef PURPLE_IMPLEMENTATION
namespace purple {
using embed::Error;
using embed::Exit;
using embed::Interpreter;
using embed::Limits;
using embed::Options;
using embed::OutputCallback;
using embed::setHeapLimit;
using embed::TypeBuilder;
using embed::Value;
// front ends
using embed::collectGarbage;
using embed::Completions;
using embed::FormSource;
using embed::InputCheck;
using embed::InputStatus;
using embed::DisplayHandler;
using embed::MimeBundle;
using embed::Representation;
using embed::runOnLargeStack;
using embed::saveFile;
using embed::TensorCensus;
using embed::versionLine;
}  // namespace purple
#endif
