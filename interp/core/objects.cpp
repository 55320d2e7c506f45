// Constructors for the basic object kinds, the symbol table, and list/UTF-8 helpers.
#include "interp/core/value.hpp"
#include "interp/core/symbol_table.hpp"
#include "interp/core/interp.hpp"
#include "interp/core/gc.hpp"
#include "interp/core/error.hpp"
#include <string>
#include <gc/gc.h>
#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace purple {

namespace {
// Pairs and flonums are most of what list and arithmetic code allocates, so each thread takes
// them from the collector a block's worth at a time (GC_malloc_many: one call and one lock for a
// hundred objects) and hands them out from its own list: a load and a store each, where
// GC_MALLOC's path went through the collector's thread-local lookup, size class and kind every
// time. Both fit one 32-byte size class (a pair's 24 bytes and a flonum's 16, with the byte the
// collector adds for interior pointers), so one list serves both.
//
// The list hangs from a one-word uncollectable, scanned block, so the objects not handed out yet
// stay allocated through a collection (the collector would otherwise take them back and give
// them out twice). For that the list's objects must be scanned, so flonums are no longer
// pointer-free: a double is read as a pointer only if its bits are an address in the heap, which
// as a number is a subnormal below 1e-300. The objects come cleared but for their first word,
// the link, which the header overwrites.
//
// The list's root is a plain thread_local (no guard to test on each allocation); the owner below,
// made on the first refill, frees it when the thread ends.
thread_local void** tSmallList = nullptr;
struct SmallListOwner {
  bool armed = false;
  ~SmallListOwner() {
    if (tSmallList) gcFreeRoot(tSmallList);
    tSmallList = nullptr;
  }
};
thread_local SmallListOwner tSmallListOwner;
constexpr size_t kSmallBytes = sizeof(Pair);
static_assert(sizeof(Flonum) <= kSmallBytes, "a flonum fits the pairs' size class");

__attribute__((noinline)) void* refillSmall() {
  if (!tSmallList) {
    tSmallListOwner.armed = true;   // constructs it, so that its destructor runs at the thread's end
    tSmallList = static_cast<void**>(gcAllocRoot(sizeof(void*)));
  }
  void* batch = GC_malloc_many(kSmallBytes);
  if (!batch) throw std::bad_alloc();
  *tSmallList = GC_NEXT(batch);
  return batch;
}

inline void* allocSmall() {
  void** list = tSmallList;
  void* memory = list ? *list : nullptr;
  if (!memory) return refillSmall();
  *list = GC_NEXT(memory);
  return memory;
}
}  // namespace

void shareMarked(Value v) {
  if (v.obj()->kind == Kind::Tensor) {
    v.obj()->flags = 0;
    return;
  }
  // A list's pairs from V on: the tensors they own become shared with them (the pairs before V,
  // if V is a tail, keep what they own).
  for (Value p = v; isPair(p) && (p.obj()->flags & (kListSoleOwner | kListPair)); p = cdr(p)) {
    p.obj()->flags = 0;
    Value x = car(p);
    if (x.isObject() && x.obj()->kind == Kind::Tensor && x.obj()->flags == kTensorHeldByList) x.obj()->flags = 0;
  }
}

Value cons(Value a, Value d) {
  auto* p = static_cast<Pair*>(allocSmall());
  p->kind = Kind::Pair;
  p->flags = 0;
  p->small = 0;
  p->extra = 0;
  p->car = a;
  p->cdr = d;
  return Value(p);
}

Value makeFlonum(double d) {
  auto* f = static_cast<Flonum*>(allocSmall());
  f->kind = Kind::Flonum;
  f->flags = 0;
  f->small = 0;
  f->extra = 0;
  f->value = d;
  return Value(f);
}

// Lengths live in 32-bit header fields: anything longer is refused before it is allocated.
constexpr size_t kMaxObjectLength = UINT32_MAX - 1;

static void checkObjectLength(size_t n, const char* what) {
  if (n > kMaxObjectLength)
    throwError("range-error", std::string(what) + " too long (" + std::to_string(n) + "; the most is " +
                                  std::to_string(kMaxObjectLength) + ")");
}

// Text up to this many bytes (with its terminator) lives inside the string object: one
// allocation instead of two for the names, keys and numbers most strings are. The collector
// scans those few bytes as if they were words, which costs less than a second object.
// string-set! that outgrows it moves the text to a buffer of its own, as for any string.
constexpr size_t kInlineStringBytes = 40;

namespace {
// Inline strings the evaluator found dead (freeDeadString), kept per thread by size for the next
// string of that size, as CPython keeps free lists: taking one needs no lock (GC_FREE takes the
// collector's), and its memory is likely still in the cache. The slots are an uncollectable,
// scanned block, so a kept string stays allocated through collections.
struct DeadStrings {
  // Inline string objects are 25 to 64 bytes: three 16-byte size classes (32, 48, 64).
  static constexpr size_t kClasses = 3, kDepth = 16;
  Value* slots = nullptr;
  uint8_t count[kClasses] = {};
  ~DeadStrings() {
    if (slots) gcFreeRoot(slots);
  }
  static size_t sizeClass(size_t objectBytes) { return (objectBytes + 15) / 16 - 2; }
};
thread_local DeadStrings tDeadStrings;
}  // namespace

static String* allocString(size_t bytes, size_t chars) {
  checkObjectLength(bytes, "string");
  checkAllocationBudget("a string", bytes);
  String* s;
  if (bytes + 1 <= kInlineStringBytes) {
    DeadStrings& dead = tDeadStrings;
    size_t c = DeadStrings::sizeClass(sizeof(String) + bytes + 1);
    if (dead.count[c]) {
      Value& slot = dead.slots[c * DeadStrings::kDepth + --dead.count[c]];
      s = slot.as<String>();
      slot = Value();
      s->kind = Kind::String;
      s->flags = 0;
      s->small = 0;
      s->extra = 0;
    } else {
      s = allocObject<String>(Kind::String, sizeof(String) + bytes + 1);
    }
    s->data = reinterpret_cast<char*>(s + 1);
  } else {
    s = allocObject<String>(Kind::String);
    s->data = static_cast<char*>(gcAllocAtomic(bytes + 1));
  }
  s->capacity = uint32_t(bytes + 1);
  s->data[bytes] = '\0';
  s->extra = uint32_t(bytes);
  s->charCount = uint32_t(chars);
  return s;
}

void freeDeadString(Value v) {
  auto* s = v.as<String>();
  if (s->data == reinterpret_cast<char*>(s + 1)) {
    DeadStrings& dead = tDeadStrings;
    size_t c = DeadStrings::sizeClass(sizeof(String) + s->capacity);
    if (dead.count[c] < DeadStrings::kDepth) {
      if (!dead.slots) {
        dead.slots = static_cast<Value*>(gcAllocRoot(sizeof(Value) * DeadStrings::kClasses * DeadStrings::kDepth));
        std::fill(dead.slots, dead.slots + DeadStrings::kClasses * DeadStrings::kDepth, Value());
      }
      dead.slots[c * DeadStrings::kDepth + dead.count[c]++] = v;
      return;
    }
  } else {
    GC_FREE(s->data);
  }
  GC_FREE(s);
}

static size_t countChars(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) n++;
  return n;
}

Value makeString(std::string_view utf8) {
  String* s = allocString(utf8.size(), countChars(utf8));
  std::memcpy(s->data, utf8.data(), utf8.size());
  return Value(s);
}

Value concatStrings(const Value* strings, size_t n) {
  size_t bytes = 0, chars = 0;
  for (size_t i = 0; i < n; i++) {
    const String* part = strings[i].as<String>();
    bytes += part->extra;
    chars += part->charCount;
  }
  String* s = allocString(bytes, chars);
  char* out = s->data;
  for (size_t i = 0; i < n; i++) {
    const String* part = strings[i].as<String>();
    std::memcpy(out, part->data, part->extra);
    out += part->extra;
  }
  return Value(s);
}

Value makeStringFill(size_t chars, uint32_t fill) {
  std::string enc;
  appendUtf8(enc, fill);
  checkObjectLength(chars, "string");
  String* s = allocString(enc.size() * chars, chars);
  for (size_t i = 0; i < chars; i++) {
    std::memcpy(s->data + i * enc.size(), enc.data(), enc.size());
    pollEvery(i);   // two billion characters take seconds
  }
  return Value(s);
}

Value makeVector(size_t n, Value fill) {
  checkObjectLength(n, "vector");
  checkAllocationBudget("a vector", n * sizeof(Value));
  auto* v = allocObject<Vector>(Kind::Vector, sizeof(Vector) + (n ? n - 1 : 0) * sizeof(Value));
  v->extra = uint32_t(n);
  for (size_t i = 0; i < n; i++) {
    v->items[i] = fill;
    pollEvery(i);
  }
  return Value(v);
}

Value makeBytevector(size_t n, uint8_t fill) {
  checkObjectLength(n, "bytevector");
  checkAllocationBudget("a bytevector", n);
  auto* b = static_cast<Bytevector*>(gcAllocAtomic(sizeof(Bytevector) + n));
  b->kind = Kind::Bytevector;
  b->flags = 0;
  b->small = 0;
  b->extra = uint32_t(n);
  std::memset(b->bytes, fill, n);
  return Value(b);
}

Value makeBox(Value v) {
  auto* b = allocObject<Box>(Kind::Box);
  b->value = v;
  return Value(b);
}

Value makeValues(const Value* items, size_t n) {
  if (n == 1) return items[0];
  auto* m = allocObject<MultipleValues>(Kind::MultipleValues,
                                      sizeof(MultipleValues) + (n ? n - 1 : 0) * sizeof(Value));
  m->extra = uint32_t(n);
  for (size_t i = 0; i < n; i++) m->items[i] = items[i];
  return Value(m);
}

Value makeError(Value kind, std::string_view message, Value irritants) {
  auto* e = allocObject<ErrorObject>(Kind::ErrorObject);
  e->who = Value::f();
  e->errorKind = kind;
  e->message = makeString(message);
  e->irritants = irritants;
  e->backtrace = Value::nil();
  e->payload = Value::f();
  return Value(e);
}

static void destroyForeign(void* obj, void*) {
  auto* f = static_cast<Foreign*>(obj);
  if (f->destroy && f->ptr) f->destroy(f->ptr);
  f->ptr = nullptr;
}

Value makeForeign(void* ptr, void (*destroy)(void*), Value typeName) {
  auto* f = allocObject<Foreign>(Kind::Foreign);
  f->ptr = ptr;
  f->destroy = destroy;
  f->typeName = typeName;
  f->methods = Value::f();
  if (destroy) gcRegisterFinalizer(f, destroyForeign, nullptr);
  return Value(f);
}

// ---- symbols ----------------------------------------------------------------------------------
// Interned ones: interp/core/symbol_table.cpp.

namespace {
std::atomic<uint64_t> gGensymCounter{0};
}  // namespace

Value gensym(std::string_view prefix) {
  // Uninterned: a fresh object nobody can spell, so it never collides.
  std::string name = std::string(prefix) + std::to_string(++gGensymCounter);
  auto* s = static_cast<Symbol*>(gcAllocAtomic(sizeof(Symbol) + name.size()));
  s->kind = Kind::Symbol;
  s->flags = 0;
  s->small = 1;   // uninterned
  s->extra = 0;
  s->hash = symbolNameHash(name);
  s->length = uint32_t(name.size());
  std::memcpy(s->name, name.data(), name.size());
  s->name[name.size()] = '\0';
  return Value(s);
}

// ---- lists -----------------------------------------------------------------------------------

Value listFromArray(const Value* items, size_t n, Value tail) {
  Value r = tail;
  for (size_t i = n; i-- > 0;) {
    r = cons(items[i], r);
    pollEvery(i);   // building a list of a hundred million elements takes seconds
  }
  return r;
}

size_t listLength(Value list) {
  size_t n = 0;
  Value slow = list;
  while (true) {
    if (list.isNil()) return n;
    if (!isPair(list)) return SIZE_MAX;
    list = cdr(list);
    n++;
    if (list.isNil()) return n;
    if (!isPair(list)) return SIZE_MAX;
    list = cdr(list);
    n++;
    slow = cdr(slow);
    if (list == slow) return SIZE_MAX;   // circular
  }
}

bool isCircularList(Value v) {
  Value slow = v, fast = v;
  while (isPair(fast) && isPair(cdr(fast))) {
    fast = cddr(fast);
    slow = cdr(slow);
    if (fast == slow) return true;
  }
  return false;
}

Value reverseList(Value list) {
  Value r = Value::nil();
  uint64_t n = 0;
  for (; isPair(list); list = cdr(list)) {
    r = cons(car(list), r);
    pollEvery(++n);
  }
  return r;
}

// ---- UTF-8 -----------------------------------------------------------------------------------

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

uint32_t decodeUtf8(const char*& p, const char* end) {
  auto c = static_cast<unsigned char>(*p++);
  if (c < 0x80) return c;
  int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
  if (extra < 0) return 0xFFFD;
  uint32_t cp = c & (0x3F >> extra);
  for (int i = 0; i < extra; i++) {
    if (p >= end || (static_cast<unsigned char>(*p) & 0xC0) != 0x80) return 0xFFFD;
    cp = (cp << 6) | (static_cast<unsigned char>(*p++) & 0x3F);
  }
  return cp;
}

size_t utf8Offset(const String* s, size_t charIndex) {
  if (s->isAscii()) return charIndex;
  const char* p = s->data;
  const char* end = s->data + s->length();
  for (size_t i = 0; i < charIndex && p < end; i++) decodeUtf8(p, end);
  return size_t(p - s->data);
}

}  // namespace purple
