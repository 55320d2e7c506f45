// Purple's value representation: one machine word per value.
//
//   ...xxx1  fixnum (63-bit signed, value << 1 | 1)
//   ...x000  pointer to a GC-allocated Object whose first field is its Kind
//   ...x010  other immediates: (), #t, #f, unspecified, eof, default (missing argument)
//   ...x110  character (code point << 3 | 6)
//
// This header is LibTorch-free on purpose: the reader, printer and evaluator do not pay for
// LibTorch's headers. The tensor cell's at::Tensor is reached through tensor_value.hpp.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace purple {

enum class Kind : uint8_t {
  Pair, Symbol, String, Vector, Bytevector, Flonum, Bignum, Ratnum,
  Closure, Primitive, Continuation, Parameter, CaseLambda,
  HashTable, Record, RecordType, Promise, ErrorObject, Port, MultipleValues,
  Environment, Macro, Alias, GlobalCell, EofObject,
  Tensor, Module, Optimizer, Foreign, Node, Frame, Box, Compnum,
};

struct Object {
  Kind kind;
  uint8_t flags;    // per-kind bits (symbol: keyword; string: immutable; ...)
  uint16_t small;   // per-kind small field
  uint32_t extra;   // per-kind 32-bit field
};

class Value {
 public:
  uintptr_t bits;

  constexpr Value() : bits(kUnspecifiedBits) {}
  constexpr explicit Value(uintptr_t b, int) : bits(b) {}
  Value(const Object* o) : bits(reinterpret_cast<uintptr_t>(o)) {}

  static constexpr uintptr_t kNilBits = (0 << 3) | 2;
  static constexpr uintptr_t kTrueBits = (1 << 3) | 2;
  static constexpr uintptr_t kFalseBits = (2 << 3) | 2;
  static constexpr uintptr_t kUnspecifiedBits = (3 << 3) | 2;
  static constexpr uintptr_t kEofBits = (4 << 3) | 2;
  static constexpr uintptr_t kDefaultBits = (5 << 3) | 2;   // "argument not supplied"
  static constexpr uintptr_t kUnboundBits = (6 << 3) | 2;   // global with no value yet

  static constexpr int64_t kFixnumMax = (int64_t(1) << 61) - 1;
  static constexpr int64_t kFixnumMin = -(int64_t(1) << 61);

  static constexpr Value nil() { return Value(kNilBits, 0); }
  static constexpr Value t() { return Value(kTrueBits, 0); }
  static constexpr Value f() { return Value(kFalseBits, 0); }
  static constexpr Value boolean(bool b) { return b ? t() : f(); }
  static constexpr Value unspecified() { return Value(kUnspecifiedBits, 0); }
  static constexpr Value eof() { return Value(kEofBits, 0); }
  static constexpr Value missing() { return Value(kDefaultBits, 0); }
  static constexpr Value unbound() { return Value(kUnboundBits, 0); }
  static constexpr Value fixnum(int64_t i) { return Value((uintptr_t(i) << 1) | 1, 0); }
  static constexpr Value character(uint32_t c) { return Value((uintptr_t(c) << 3) | 6, 0); }
  static constexpr bool fitsFixnum(int64_t i) { return i >= kFixnumMin && i <= kFixnumMax; }

  bool isFixnum() const { return bits & 1; }
  bool isObject() const { return (bits & 7) == 0 && bits != 0; }
  bool isChar() const { return (bits & 7) == 6; }
  bool isNil() const { return bits == kNilBits; }
  bool isFalse() const { return bits == kFalseBits; }
  bool isTrue() const { return bits != kFalseBits; }   // Scheme truthiness
  bool isBool() const { return bits == kTrueBits || bits == kFalseBits; }
  bool isUnspecified() const { return bits == kUnspecifiedBits; }
  bool isEof() const { return bits == kEofBits; }
  bool isMissing() const { return bits == kDefaultBits; }
  bool isUnbound() const { return bits == kUnboundBits; }

  int64_t fixnum() const { return int64_t(bits) >> 1; }
  uint32_t character() const { return uint32_t(bits >> 3); }
  Object* obj() const { return reinterpret_cast<Object*>(bits); }
  template <class T> T* as() const { return reinterpret_cast<T*>(bits); }
  bool is(Kind k) const { return isObject() && obj()->kind == k; }

  bool operator==(Value o) const { return bits == o.bits; }
  bool operator!=(Value o) const { return bits != o.bits; }
};
static_assert(sizeof(Value) == sizeof(void*), "Value is one machine word");

// ---- object layouts -------------------------------------------------------------------------

struct Pair : Object { Value car, cdr; };

struct Symbol : Object {          // flags & 1: keyword (:name); name excludes the colon
  uint32_t hash;
  uint32_t length;
  char name[1];
  std::string_view view() const { return {name, length}; }
};

struct String : Object {          // UTF-8; extra = byte length; small unused
  char* data;                     // separate buffer so string-set! can resize
  uint32_t capacity;
  uint32_t charCount;             // == byte length when all ASCII (O(1) indexing)
  uint32_t length() const { return extra; }
  std::string_view view() const { return {data, extra}; }
  bool isAscii() const { return charCount == extra; }
};

struct Vector : Object {          // extra = length
  Value items[1];
};

struct Bytevector : Object {      // extra = length
  uint8_t bytes[1];
};

struct Flonum : Object { double value; };

struct Bignum : Object {          // immutable; small = sign (0 positive, 1 negative); extra = limbs
  uint64_t limbs[1];
};

struct Ratnum : Object { Value num, den; };   // den > 1, gcd(num, den) = 1; exact integers
struct Compnum : Object { Value re, im; };    // rectangular; im is never an exact 0

struct Box : Object { Value value; };

struct MultipleValues : Object {  // extra = count (never 1)
  Value items[1];
};

// Ownership marks (interp/language/ownership.hpp tells the whole story). A tensor cell marked
// kTensorSoleOwner has one owner: a variable, or the evaluator while the cell is in flight from
// the call that made it to the code that uses it; a variable that owns its cell frees it when it
// dies or is overwritten, as reference counting would. A list may own tensors too: its first
// pair marked kListSoleOwner, its other pairs kListPair, and the tensors it owns
// kTensorHeldByList; it frees them when it dies. Every read that may keep a value marks it shared
// first (shareValue): a tensor unmarked, a list unmarked with the tensors it owned. A shared
// value waits for the collector.
constexpr uint8_t kTensorSoleOwner = 1;
constexpr uint8_t kTensorHeldByList = 2;
constexpr uint8_t kListSoleOwner = 1;   // (on a pair)
constexpr uint8_t kListPair = 4;        // (on a pair)
// Set once the first cell is marked sole-owned (markSoleOwned, memory/tensor_value.hpp), and
// every other mark comes after one: until then no value carries a mark, and the evaluator takes
// its plain walk, which tracks no ownership (language/ownership.hpp). Hidden: libpurple's own
// code reads it on every eval and closure call, and a hidden symbol is one load, not two through
// the GOT (code outside libpurple has no use for it).
extern std::atomic<bool> gSoleOwnedCellsMade __attribute__((visibility("hidden")));
inline bool soleOwnedCellsExist() { return gSoleOwnedCellsMade.load(std::memory_order_relaxed); }
inline bool isSoleOwnedTensor(Value v) {
  return v.isObject() && __builtin_expect(v.obj()->flags == kTensorSoleOwner, 0) && v.obj()->kind == Kind::Tensor;
}
// A sole-owned tensor, or the first pair of a sole-owned list.
inline bool isSoleOwned(Value v) {
  return v.isObject() && __builtin_expect(v.obj()->flags == kTensorSoleOwner, 0) &&
         (v.obj()->kind == Kind::Tensor || v.obj()->kind == Kind::Pair);
}
// Any ownership mark on a tensor or a pair.
__attribute__((always_inline)) inline bool hasOwnershipMark(Value v) {
  return v.isObject() && __builtin_expect(v.obj()->flags != 0, 0) &&
         (v.obj()->kind == Kind::Tensor || v.obj()->kind == Kind::Pair);
}
void shareMarked(Value v);   // objects.cpp: the list's pairs from V on, and the tensors they owned
// (Always inline: the evaluator reads every variable through it, and in its large walk gcc
// otherwise makes it a call, with the registers that call costs.)
__attribute__((always_inline)) inline Value shareValue(Value v) {
  if (hasOwnershipMark(v)) shareMarked(v);
  return v;
}

struct GlobalCell : Object {      // one per (interpreter, symbol); the analyzer links to it
  Value value;
  Value name;                     // symbol
  Value doc;                      // docstring or #f
};

class Interp;
struct Frame;
struct LambdaNode;

struct Closure : Object {
  LambdaNode* code;
  Frame* env;
  Value name;                     // symbol or #f, for backtraces
};

struct PrimitiveInfo;             // builtin metadata (bind.hpp)
using PrimFn = Value (*)(Interp&, Value* argv, int argc, PrimitiveInfo* info);

struct Primitive : Object {       // flags: see PrimitiveFlags
  PrimFn fn;
  PrimitiveInfo* info;
};
// Primitive::small: arithmetic the evaluator does inline when both arguments are fixnums
// (the builtin is still called for anything else, and when the name is rebound).
enum class InlineOp : uint16_t { None = 0, Add, Sub, Mul, Lt, Gt, Le, Ge, NumEq };
enum PrimitiveFlags : uint8_t {
  kPrimReturnsFresh = 1,          // result, when a tensor, is a new cell nobody else holds
  kPrimBorrowsArgs = 2,           // keeps no reference to its argument cells after returning
  kPrimUnboxedTensor = 4,         // returns at::Tensor; info->tensorInvoke gives it without a cell
  kPrimFreshString = 8,           // returns a string this call made, which nobody else holds
  // A builtin that takes Values only to read tensors and numbers from them (a layer's functional
  // form, `(max-pool2d x 2)`, or an in-place op returning its argument): it keeps no argument
  // cell, and a tensor it returns is new, or one of its arguments.
  kPrimTensorFunction = kPrimReturnsFresh | kPrimBorrowsArgs,
  // Returns, when a list, a new one whose tensors are new cells nobody else holds (tensor-split,
  // a batch from a data loader): the evaluator gives them to the list (ownFreshList).
  kPrimReturnsFreshList = 16,
  kPrimMakesList = 32,            // `list`: the evaluator builds the list itself (makeOwningList)
};

struct CaseLambda : Object {      // extra = clause count
  Value name;
  Value clauses[1];               // closures
};

struct Parameter : Object {
  Value value;                    // global (outermost) value
  Value converter;                // procedure or #f
};

struct Promise : Object {         // flags & 1: forced
  Value value;                    // result, or thunk closure when not forced
  Value isStream;                 // delay-force chains
};

struct ErrorObject : Object {
  Value who;                      // symbol or string naming the procedure that failed, or #f
  Value errorKind;                // symbol: error, read-error, file-error, type-error, tensor-error...
  Value message;                  // string
  Value irritants;                // list
  Value backtrace;                // list of strings, innermost first
  Value payload;                  // for non-error raises wrapped for the host; else #f
};

struct RecordType : Object {      // extra = field count
  Value name;                     // symbol
  Value fields;                   // vector of symbols
  Value printer;                  // #f, or a procedure giving the text display and write show
};

struct Record : Object {          // extra = field count
  RecordType* type;
  Value fields[1];
};

struct Alias : Object {           // an identifier renamed by a syntax-rules expansion
  Value symbol;                   // the original symbol (or alias, for nested expansions)
  void* scope;                    // analyzer scope where the macro was defined (may be null)
  void* space;                    // the namespace the macro was defined in (null: the current one)
};

struct Macro : Object {           // flags & 1: procedural (define-macro); else syntax-rules
  Value transformer;              // procedure (define-macro) or syntax-rules spec
  void* scope;                    // definition scope (analyzer), for hygiene
  Value name;
  void* space;                    // the namespace it was defined in: a library's, or null (the user's)
};

struct Environment : Object {     // first-class environment (for eval / interaction-environment)
  Interp* interp;
  void* space;                    // its namespace; null: the user's global environment
};

struct Continuation : Object {    // escape-only continuation
  uint64_t id;
  int64_t windDepth;
  bool valid;
};

struct EofObject : Object {};

// Any host C++ object: the GC runs its destructor through `destroy`. Tensors, modules and
// optimizers are specialisations of the same mechanism.
// Foreign::flags & kForeignCallable: applying the object calls it with ordinary arguments (a
// Python callable), so `procedure?` is true and map, for-each, sort ... accept it.
constexpr uint8_t kForeignCallable = 2;
struct Foreign : Object {
  void* ptr;
  void (*destroy)(void*);
  Value typeName;                 // symbol
  Value methods;                  // hash table of name -> procedure, or #f
};

// ---- predicates and accessors ----------------------------------------------------------------

inline bool isPair(Value v) { return v.is(Kind::Pair); }
inline bool isSymbol(Value v) { return v.is(Kind::Symbol) && !(v.obj()->flags & 1); }
inline bool isKeyword(Value v) { return v.is(Kind::Symbol) && (v.obj()->flags & 1); }
inline bool isString(Value v) { return v.is(Kind::String); }
inline bool isFlonum(Value v) { return v.is(Kind::Flonum); }
inline bool isBignum(Value v) { return v.is(Kind::Bignum); }
inline bool isRatnum(Value v) { return v.is(Kind::Ratnum); }
inline bool isExactInteger(Value v) { return v.isFixnum() || isBignum(v); }
inline bool isExactRational(Value v) { return isExactInteger(v) || isRatnum(v); }
inline bool isCompnum(Value v) { return v.is(Kind::Compnum); }
inline bool isRealNumber(Value v) { return v.isFixnum() || isFlonum(v) || isBignum(v) || isRatnum(v); }
inline bool isNumber(Value v) { return isRealNumber(v) || isCompnum(v); }
inline bool isTensor(Value v) { return v.is(Kind::Tensor); }
inline bool isProcedure(Value v) {
  if (!v.isObject()) return false;
  switch (v.obj()->kind) {
    case Kind::Closure: case Kind::Primitive: case Kind::Continuation: case Kind::Parameter:
    case Kind::CaseLambda: case Kind::Module: return true;
    case Kind::Foreign: return v.obj()->flags & kForeignCallable;
    default: return false;
  }
}
inline bool isList(Value v);

inline Value car(Value v) { return v.as<Pair>()->car; }
inline Value cdr(Value v) { return v.as<Pair>()->cdr; }
inline Value cadr(Value v) { return car(cdr(v)); }
inline Value cddr(Value v) { return cdr(cdr(v)); }
inline Value caddr(Value v) { return car(cddr(v)); }
inline Value cdddr(Value v) { return cdr(cddr(v)); }
inline double flonumValue(Value v) { return v.as<Flonum>()->value; }
inline std::string_view symbolName(Value v) { return v.as<Symbol>()->view(); }
inline std::string_view stringView(Value v) { return v.as<String>()->view(); }

// ---- allocation (gc.cpp) -----------------------------------------------------------------------

void* gcAlloc(size_t bytes);          // scanned for pointers
void* gcAllocAtomic(size_t bytes);    // never scanned (strings, doubles)
void* gcAllocRoot(size_t bytes);      // uncollectable and scanned: a root until gcFreeRoot
void gcFreeRoot(void* p);
// Scanned memory that is never freed (builtin metadata made once per process), cut from shared
// uncollectable chunks: the collector pushes every live uncollectable object at the start of
// each mark, and more than a thousand of them make it mark serially and regrow its mark stack.
void* gcAllocImmortalRoot(size_t bytes);

// A GC object of type T (scanned for pointers) with its header set; `bytes` covers any
// variable-length tail.
template <class T>
T* allocObject(Kind kind, size_t bytes = sizeof(T)) {
  auto* o = static_cast<T*>(gcAlloc(bytes));
  o->kind = kind;
  o->flags = 0;
  o->small = 0;
  o->extra = 0;
  return o;
}

Value cons(Value a, Value d);
Value makeFlonum(double d);
Value makeBignumFromInt64(int64_t i);   // beyond the fixnum range
inline Value makeInteger(int64_t i) {   // fixnum or bignum
  return __builtin_expect(Value::fitsFixnum(i), 1) ? Value::fixnum(i) : makeBignumFromInt64(i);
}
Value makeString(std::string_view utf8);
Value makeStringFill(size_t chars, uint32_t fill);
// One new string holding the N strings' text in order (the caller checked that each is a
// string): one allocation, and the character counts are added, not recounted.
Value concatStrings(const Value* strings, size_t n);
// Takes a dead string's memory back at once, for the next string of its size or for the
// collector. Only for a string nobody can reach any more: the evaluator's temporaries (the result
// of a kPrimFreshString builtin passed straight to one that keeps no reference to it).
void freeDeadString(Value s);
Value makeVector(size_t n, Value fill = Value::unspecified());
Value makeBytevector(size_t n, uint8_t fill = 0);
Value makeBox(Value v);
Value makeValues(const Value* items, size_t n);   // n == 1 returns the item
Value makeError(Value kind, std::string_view message, Value irritants);
Value makeForeign(void* ptr, void (*destroy)(void*), Value typeName);

// Symbols and keywords are interned process-wide (like the GC itself, a shared service).
Value intern(std::string_view name);
Value internKeyword(std::string_view nameWithoutColon);
Value gensym(std::string_view prefix);
inline bool isGensym(Value v) { return isSymbol(v) && v.obj()->small == 1; }   // uninterned: made by gensym

Value listFromArray(const Value* items, size_t n, Value tail = Value::nil());
size_t listLength(Value list);        // -1 (SIZE_MAX) for improper or circular lists
inline bool isList(Value v) { return listLength(v) != SIZE_MAX; }
bool isCircularList(Value v);         // its cdrs come back to a pair (improper tails are fine)
Value reverseList(Value list);

// UTF-8 helpers (strings.cpp)
void appendUtf8(std::string& out, uint32_t cp);
uint32_t decodeUtf8(const char*& p, const char* end);   // advances p; U+FFFD on bad input
size_t utf8Offset(const String* s, size_t charIndex);   // byte offset of char index

}  // namespace purple
