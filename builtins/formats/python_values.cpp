#include "builtins/formats/python_values.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/nn/value.hpp"
#include "interp/language/bind.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <gc/gc_allocator.h>
#include <unordered_map>
#include <unordered_set>

namespace purple::formats {

namespace {

constexpr int kMaxDepth = 10000;
using ValueVector = std::vector<Value, traceable_allocator<Value>>;

[[noreturn]] void tooDeep(const std::string& who) {
  throwError(who == "torch-load" ? "file-error" : "value-error", who + ": data nested too deeply (past " + std::to_string(kMaxDepth) + " levels, or past what this thread's stack holds) or circular");
}

// The conversions recurse once per level: past kMaxDepth, or nearer the end of this thread's
// stack than the evaluator goes, the data is refused. The stack check is what holds on a
// host's small thread stack, and under AddressSanitizer, whose frames made 10,000 levels
// overflow the main thread's 8 MB (fuzz-zip's first crash).
bool tooDeepHere(int depth) { return depth > kMaxDepth || stackNearlyFull(); }

Value integerFromLE(const std::string& b) {
  Value v = Value::fixnum(0);
  for (size_t i = b.size(); i-- > 0;) v = numAdd(numShift(v, 8), Value::fixnum(uint8_t(b[i])));
  if (!b.empty() && (uint8_t(b.back()) & 0x80)) v = numSub(v, numShift(Value::fixnum(1), int64_t(8 * b.size())));
  return v;
}

// Little-endian two's complement bytes of a bignum, with room for the sign bit.
std::string leBytesOf(Value big) {
  auto* b = big.as<Bignum>();
  std::string mag;
  for (uint32_t i = 0; i < b->extra; i++)
    for (int k = 0; k < 8; k++) mag.push_back(char(uint8_t(b->limbs[i] >> (8 * k))));
  while (mag.size() > 1 && mag.back() == 0) mag.pop_back();
  mag.push_back(0);
  if (b->small) {
    unsigned carry = 1;
    for (auto& c : mag) {
      unsigned x = unsigned(uint8_t(~uint8_t(c))) + carry;
      c = char(uint8_t(x));
      carry = x >> 8;
    }
    while (mag.size() > 1 && uint8_t(mag.back()) == 0xFF && (uint8_t(mag[mag.size() - 2]) & 0x80)) mag.pop_back();
  } else {
    while (mag.size() > 1 && mag.back() == 0 && !(uint8_t(mag[mag.size() - 2]) & 0x80)) mag.pop_back();
  }
  return mag;
}

// Converts a pickle's object graph. One Purple object per Python object: a list referenced ten
// times (DUP, or the memo's GET) is converted once and shared ten times, as in Python, so a
// "billion laughs" pickle (ten nested lists of ten references each: 10^9 leaves in a few hundred
// bytes) stays a few hundred objects. The work is bounded too: every edge followed counts, and
// there are never more edges than the reader made (its own work is bounded by the file's size).
class Converter {
 public:
  Value convert(const PyRef& o, int depth) {
    if (tooDeepHere(depth)) tooDeep("torch-load");
    if (++work_ > kMaxWork)
      throwError("file-error", "torch-load: the data holds more than " + std::to_string(kMaxWork) + " references: refusing a probable memory bomb");
    const PyObject* key = o.get();
    auto it = done_.find(key);
    if (it != done_.end()) return it->second;
    if (!busy_.insert(key).second) tooDeep("torch-load");   // a list that holds itself
    Value v = make(o, depth);
    busy_.erase(key);
    done_.emplace(key, v);
    return v;
  }

 private:
  static constexpr uint64_t kMaxWork = uint64_t(1) << 28;
  Value make(const PyRef& o, int depth);
  using Memo = std::unordered_map<const PyObject*, Value, std::hash<const PyObject*>, std::equal_to<const PyObject*>,
                                  traceable_allocator<std::pair<const PyObject* const, Value>>>;
  Memo done_;   // traceable: the collector sees the Values it holds
  std::unordered_set<const PyObject*> busy_;
  uint64_t work_ = 0;
};

Value Converter::make(const PyRef& o, int depth) {
  Interp& in = *Interp::current();
  switch (o->type) {
    case PyType::None: return Value::unspecified();
    case PyType::Bool: return Value::boolean(o->flag);
    case PyType::Int: return makeInteger(o->integer);
    case PyType::Long: return integerFromLE(o->text);
    case PyType::Float: return makeFlonum(o->real);
    case PyType::Complex: return makeRectangular(makeFlonum(o->real), makeFlonum(o->imag));
    case PyType::Str: return makeString(o->text);
    case PyType::Bytes: {
      Value bv = makeBytevector(o->text.size());
      if (!o->text.empty()) std::memcpy(bv.as<Bytevector>()->bytes, o->text.data(), o->text.size());
      return bv;
    }
    case PyType::List: case PyType::Set: case PyType::Size: {
      ValueVector xs;
      for (auto& x : o->items) xs.push_back(convert(x, depth + 1));
      return listFromArray(xs.data(), xs.size());
    }
    case PyType::Tuple: {
      ValueVector xs;
      for (auto& x : o->items) xs.push_back(convert(x, depth + 1));
      Value vec = makeVector(xs.size());
      for (size_t k = 0; k < xs.size(); k++) vec.as<Vector>()->items[k] = xs[k];
      return vec;
    }
    case PyType::Dict: {
      Value h = makeHashTable(HashEquiv::Equal, o->entries.size());
      for (auto& [k, v] : o->entries) {
        Value key = convert(k, depth + 1);
        Value val = convert(v, depth + 1);
        hashTablePut(in, h, key, val);
      }
      return h;
    }
    case PyType::Tensor: return wrapTensor(o->tensor);
    case PyType::Storage: {
      at::Tensor t = at::empty({0}, at::TensorOptions().dtype(o->dtype).device(o->device));
      t.set_(o->storage, 0, {int64_t(o->storage.nbytes() / c10::elementSize(o->dtype))}, {1});
      return wrapTensor(t);
    }
    case PyType::StorageType: case PyType::Dtype: return scalarTypeToValue(o->dtype);
    case PyType::Device: return makeString(o->device.str());
    case PyType::Global: return makeString(o->text);
    case PyType::Object: {
      Value h = makeHashTable(HashEquiv::Equal, 4);
      hashTablePut(in, h, makeString("__class__"), makeString(o->text));
      if (!o->items.empty()) hashTablePut(in, h, makeString("__args__"), convert(o->items[0], depth + 1));
      if (o->items.size() > 1) hashTablePut(in, h, makeString("__state__"), convert(o->items[1], depth + 1));
      if (o->items.size() > 2) {
        ValueVector xs;
        for (size_t k = 2; k < o->items.size(); k++) xs.push_back(convert(o->items[k], depth + 1));
        hashTablePut(in, h, makeString("__items__"), listFromArray(xs.data(), xs.size()));
      }
      if (!o->entries.empty()) {
        Value d = makeHashTable(HashEquiv::Equal, o->entries.size());
        for (auto& [k, v] : o->entries) {
          Value key = convert(k, depth + 1);
          Value val = convert(v, depth + 1);
          hashTablePut(in, d, key, val);
        }
        hashTablePut(in, h, makeString("__dict_items__"), d);
      }
      return h;
    }
  }
  return Value::unspecified();
}

bool isNamedAlist(Value v) {
  if (!isPair(v)) return false;
  for (Value p = v; isPair(p); p = cdr(p)) {
    if (!isPair(car(p))) return false;
    Value k = car(car(p));
    if (!isString(k) && !k.is(Kind::Symbol)) return false;
  }
  return isList(v);
}

// Purple values to Python objects. A list, vector or hash table reached twice becomes one Python
// object reached twice, which the pickler writes once (memo GET/PUT): saving what a shared
// structure loaded with torch-load keeps its size, instead of expanding every reference.
struct Backer {
  const std::string& who;
  std::unordered_map<uint64_t, PyRef> memo;
  PyRef back(Value v, int depth) {
    if (!v.isObject() || !(isPair(v) || v.is(Kind::Vector) || isHashTable(v))) return convert(v, depth);
    auto it = memo.find(v.bits);
    if (it != memo.end()) return it->second;
    PyRef o = convert(v, depth);
    memo.emplace(v.bits, o);
    return o;
  }
  PyRef convert(Value v, int depth) {
  if (tooDeepHere(depth)) tooDeep(who);
  if (v.isUnspecified()) return PyObject::none();
  if (v.isBool()) return PyObject::boolean(v.isTrue());
  if (v.isFixnum()) return PyObject::integer_(v.fixnum());
  if (isBignum(v)) {
    auto o = PyObject::make(PyType::Long);
    o->text = leBytesOf(v);
    return o;
  }
  if (isFlonum(v)) return PyObject::floating(flonumValue(v));
  if (isRatnum(v)) return PyObject::floating(toDouble(v));
  if (isCompnum(v)) {
    auto c = PyObject::make(PyType::Complex);
    c->real = toDouble(v.as<Compnum>()->re);
    c->imag = toDouble(v.as<Compnum>()->im);
    return c;
  }
  if (isString(v)) return PyObject::str(std::string(stringView(v)));
  if (v.is(Kind::Symbol)) return PyObject::str(std::string(symbolName(v)));
  if (v.isChar()) {
    std::string s;
    appendUtf8(s, v.character());
    return PyObject::str(s);
  }
  if (v.is(Kind::Bytevector)) {
    auto* b = v.as<Bytevector>();
    return PyObject::bytes(std::string(reinterpret_cast<const char*>(b->bytes), b->extra));
  }
  if (isTensor(v)) {
    const at::Tensor& t = tensorArg(v, who, 1);
    return PyObject::tensorOf(t);
  }
  if (isHashTable(v)) {
    auto* h = v.as<HashTable>();
    PyRef d = PyObject::dict();
    for (uint32_t i = 0; i < h->entryUsed; i++)
      if (!h->entries[2 * i].isUnbound()) d->entries.emplace_back(back(h->entries[2 * i], depth + 1), back(h->entries[2 * i + 1], depth + 1));
    return d;
  }
  if (isNamedAlist(v)) {
    PyRef d = PyObject::dict();
    for (Value p = v; isPair(p); p = cdr(p)) d->entries.emplace_back(back(car(car(p)), depth + 1), back(cdr(car(p)), depth + 1));
    return d;
  }
  if (v.isNil() || isList(v)) {
    PyRef l = PyObject::list({});
    for (Value p = v; isPair(p); p = cdr(p)) l->items.push_back(back(car(p), depth + 1));
    return l;
  }
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    PyRef t = PyObject::tuple({});
    for (uint32_t k = 0; k < vec->extra; k++) t->items.push_back(back(vec->items[k], depth + 1));
    return t;
  }
  if (isModule(v)) throwError("type-error", who + ": cannot save a module itself; save its state: (state-dict m)");
  if (isOptimizer(v)) throwError("type-error", who + ": cannot save an optimizer itself; save its state: (optimizer-state-dict opt)");
  throwError("type-error", who + ": cannot save " + toWriteString(v) +
                               " (tensors, numbers, booleans, strings, bytevectors, lists, vectors, hash tables, alists and "
                               "the unspecified value, which is None, can be saved)");
}
};

}  // namespace

Value toPurple(const PyRef& o) { return Converter().convert(o, 0); }
PyRef toPython(Value v, const std::string& who) { return Backer{who, {}}.back(v, 0); }

}  // namespace purple::formats
