// Small helpers shared by the data-type builtins (lists, strings, chars, vectors, hash tables):
// argument checks that raise Purple errors naming the procedure and argument, and GC-visible
// scratch arrays.
#pragma once
#include "interp/language/bind.hpp"
#include "interp/core/error.hpp"
#include "interp/core/value.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace purple {
namespace data {

// Bit in String::flags marking a literal (immutable) string, as value.hpp describes.
constexpr uint8_t kStringImmutable = 1;

// `index` counts arguments from 0, as bind.hpp's slots do.
[[noreturn]] inline void typeError(std::string_view who, int index, std::string_view expected, Value got) {
  throwTypeError(who, index + 1, expected, got);
}

[[noreturn]] inline void rangeError(std::string_view who, int index, Value got, std::string_view what) {
  throwError("range-error",
             std::string(who) + ": argument " + std::to_string(index + 1) + " is out of range (" +
                 std::string(what) + "):",
             cons(got, Value::nil()));
}

[[noreturn]] inline void badList(std::string_view who, int index, Value got) {
  typeError(who, index, "a proper list", got);
}

// Scratch space the collector scans: a conservative pointer to it lives on the C stack for as
// long as the caller needs it. Memory comes back zeroed (GC_MALLOC clears).
inline Value* gcValues(size_t n) {
  return static_cast<Value*>(gcAlloc((n ? n : 1) * sizeof(Value)));
}

// An exact non-negative index argument (fixnum), or a type error.
inline int64_t indexArg(std::string_view who, int index, Value v) {
  if (!v.isFixnum() || v.fixnum() < 0) typeError(who, index, "a non-negative exact integer", v);
  return v.fixnum();
}

// Optional [start [end]] arguments over a sequence of length `len`: missing or #f means the
// default. Checks 0 <= start <= end <= len.
struct Range { size_t start, end; };
inline Range rangeArgs(std::string_view who, int startIndex, Value start, Value end, size_t len) {
  size_t s = 0, e = len;
  if (!start.isMissing() && !start.isFalse()) {
    s = size_t(indexArg(who, startIndex, start));
    if (s > len) rangeError(who, startIndex, start, "start beyond the end, length " + std::to_string(len));
  }
  if (!end.isMissing() && !end.isFalse()) {
    e = size_t(indexArg(who, startIndex + 1, end));
    if (e > len) rangeError(who, startIndex + 1, end, "end beyond the length " + std::to_string(len));
    if (e < s) rangeError(who, startIndex + 1, end, "end before start");
  }
  return {s, e};
}

inline String* stringArg(std::string_view who, int index, Value v) {
  if (!isString(v)) typeError(who, index, "a string", v);
  return v.as<String>();
}
inline Vector* vectorArg(std::string_view who, int index, Value v) {
  if (!v.is(Kind::Vector)) typeError(who, index, "a vector", v);
  return v.as<Vector>();
}
inline Bytevector* bytevectorArg(std::string_view who, int index, Value v) {
  if (!v.is(Kind::Bytevector)) typeError(who, index, "a bytevector", v);
  return v.as<Bytevector>();
}
inline uint32_t charArg(std::string_view who, int index, Value v) {
  if (!v.isChar()) typeError(who, index, "a character", v);
  return v.character();
}
inline Value procArg(std::string_view who, int index, Value v) {
  if (!isProcedure(v)) typeError(who, index, "a procedure", v);
  return v;
}
inline void checkMutableString(std::string_view who, int index, Value v) {
  if (v.obj()->flags & kStringImmutable) typeError(who, index, "a mutable string (literals are immutable)", v);
}

// Floyd's cycle check for a loop that walks a list one pair at a time without knowing its length
// first (memq stops at the first match, so it must not measure the whole list): `step(p)` with
// each pair moved to returns true once the cdrs have come back around. A slow cursor advances
// every other step; on a finite list it always lags behind, so only a cycle can meet it.
class CycleCheck {
 public:
  explicit CycleCheck(Value list) : slow_(list) {}
  bool step(Value p) {
    if (odd_) slow_ = cdr(slow_);
    odd_ = !odd_;
    return p == slow_;
  }

 private:
  Value slow_;
  bool odd_ = false;
};

// Length of a proper list, or a type error naming the argument (also for circular lists).
inline size_t listArg(std::string_view who, int index, Value v) {
  size_t n = listLength(v);
  if (n == SIZE_MAX) badList(who, index, v);
  return n;
}

}  // namespace data
}  // namespace purple

namespace purple {
namespace data {

// Stable merge sort of items[0..n) by the Purple predicate LESS (a procedure of two arguments).
// items must be GC-visible (gcValues or a vector's slots); on an error raised by LESS the array
// holds a permutation of its input. Implemented in builtins/core/lists.cpp.
void stableSort(Interp& in, Value* items, size_t n, Value less, std::string_view who);

// True when V is the builtin named NAME (not a user procedure that happens to share the name).
inline bool isBuiltin(Value v, std::string_view name) {
  return v.is(Kind::Primitive) && v.as<Primitive>()->info && v.as<Primitive>()->info->name == name;
}

// Builds a list front to back. The head lives in a local Value (the C stack is scanned), and
// each new pair is reachable from it before the next allocation.
struct ListBuilder {
  Value head = Value::nil();
  Value tail = Value::nil();
  uint64_t count = 0;
  void add(Value v) {
    pollEvery(++count);   // a copy of a list of a hundred million elements takes seconds
    Value p = cons(v, Value::nil());
    if (tail.isNil()) head = p;
    else tail.as<Pair>()->cdr = p;
    tail = p;
  }
  // Ends the list with REST (shared, not copied): for append.
  Value finish(Value rest = Value::nil()) {
    if (tail.isNil()) return rest;
    tail.as<Pair>()->cdr = rest;
    return head;
  }
};

}  // namespace data
}  // namespace purple
