// The byte format of codec.hpp: a version byte, then one tagged item. Integers are little-endian;
// lists are written as a count, the elements and the tail (so long lists need no recursion);
// a cycle through cdrs is caught by a tortoise-and-hare walk, deep nesting by the stack check.
#include "builtins/distributed/codec.hpp"
#include "builtins/core/hashtable.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <gc/gc_allocator.h>
#include <cstring>
#include <vector>

namespace purple::dist {

namespace {

constexpr uint8_t kVersion = 1;

enum Tag : uint8_t {
  TNil = 1, TTrue, TFalse, TUnspecified, TEof, TFixnum, TExactText, TFlonum, TChar, TString, TSymbol, TKeyword,
  TList, TVector, TBytevector, THashTable, TTensor,
};

class Writer {
 public:
  explicit Writer(std::string_view who) : who_(who) {}
  std::string out;

  void byte(uint8_t b) { out.push_back(char(b)); }
  void u64(uint64_t x) {
    for (int k = 0; k < 8; k++) out.push_back(char((x >> (8 * k)) & 0xff));
  }
  void bytes(const void* p, size_t n) {
    u64(n);
    out.append(static_cast<const char*>(p), n);
  }

  void value(Value v) {
    if (stackNearlyFull()) throwError("value-error", std::string(who_) + ": the data is nested too deeply to send");
    if (v.isNil()) return byte(TNil);
    if (v.isBool()) return byte(v.isTrue() ? TTrue : TFalse);
    if (v.isUnspecified()) return byte(TUnspecified);
    if (v.isEof()) return byte(TEof);
    if (v.isFixnum()) {
      byte(TFixnum);
      return u64(uint64_t(v.fixnum()));
    }
    if (v.isChar()) {
      byte(TChar);
      return u64(v.character());
    }
    if (isFlonum(v)) {
      byte(TFlonum);
      double d = flonumValue(v);
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      return u64(bits);
    }
    if (isNumber(v)) {   // bignums, exact rationals, complex numbers: their exact written form
      byte(TExactText);
      std::string s = numberToString(v);
      return bytes(s.data(), s.size());
    }
    if (isString(v)) {
      byte(TString);
      auto s = stringView(v);
      return bytes(s.data(), s.size());
    }
    if (v.is(Kind::Symbol)) {
      byte(isKeyword(v) ? TKeyword : TSymbol);
      auto s = symbolName(v);
      return bytes(s.data(), s.size());
    }
    if (isPair(v)) return list(v);
    if (v.is(Kind::Vector)) {
      auto* vec = v.as<Vector>();
      byte(TVector);
      u64(vec->extra);
      for (uint32_t k = 0; k < vec->extra; k++) value(vec->items[k]);
      return;
    }
    if (v.is(Kind::Bytevector)) {
      auto* bv = v.as<Bytevector>();
      byte(TBytevector);
      return bytes(bv->bytes, bv->extra);
    }
    if (isHashTable(v)) return table(v);
    if (isTensor(v)) return tensor(v);
    throwError("type-error", std::string(who_) + ": cannot send " + toWriteString(v) +
                                 " to other ranks (numbers, booleans, characters, strings, symbols, lists, vectors, "
                                 "bytevectors, hash tables and tensors can be sent)");
  }

 private:
  std::string_view who_;

  void list(Value v) {
    // count the pairs, stopping at a cycle
    size_t n = 0;
    Value slow = v, fast = v;
    for (;;) {
      if (!isPair(fast)) break;
      fast = cdr(fast), n++;
      if (!isPair(fast)) break;
      fast = cdr(fast), n++;
      slow = cdr(slow);
      if (fast == slow) throwError("value-error", std::string(who_) + ": cannot send a circular list");
    }
    byte(TList);
    u64(n);
    Value p = v;
    for (size_t k = 0; k < n; k++, p = cdr(p)) value(car(p));
    value(p);   // the tail: () for a proper list
  }

  void table(Value v) {
    auto* h = v.as<HashTable>();
    if (h->equiv() == HashEquiv::Custom)
      throwError("type-error", std::string(who_) + ": cannot send a hash table with a custom equivalence procedure");
    byte(THashTable);
    byte(uint8_t(h->equiv()));
    u64(h->count);
    for (uint32_t i = 0; i < h->entryUsed; i++) {
      if (h->entries[2 * i].isUnbound()) continue;
      value(h->entries[2 * i]);
      value(h->entries[2 * i + 1]);
    }
  }

  void tensor(Value v) {
    const at::Tensor& t = tensorArg(v, who_, 1);
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    byte(TTensor);
    byte(uint8_t(c.scalar_type()));
    byte(t.requires_grad() ? 1 : 0);
    u64(uint64_t(c.dim()));
    for (int64_t d = 0; d < c.dim(); d++) u64(uint64_t(c.size(d)));
    bytes(c.data_ptr(), size_t(c.numel()) * c.element_size());
  }
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n, std::string_view who) : p_(p), end_(p + n), who_(who) {}

  [[noreturn]] void corrupt() {
    throwError("value-error", std::string(who_) + ": the data received from another rank is not a Purple value "
                                                  "(a rank sent something else, or a different Purple version)");
  }
  uint8_t byte() {
    if (p_ >= end_) corrupt();
    return *p_++;
  }
  uint64_t u64() {
    if (end_ - p_ < 8) corrupt();
    uint64_t x = 0;
    for (int k = 0; k < 8; k++) x |= uint64_t(p_[k]) << (8 * k);
    p_ += 8;
    return x;
  }
  std::string_view bytes() {
    uint64_t n = u64();
    if (uint64_t(end_ - p_) < n) corrupt();
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  bool atEnd() const { return p_ == end_; }

  Value value() {
    if (stackNearlyFull()) corrupt();
    switch (byte()) {
      case TNil: return Value::nil();
      case TTrue: return Value::t();
      case TFalse: return Value::f();
      case TUnspecified: return Value::unspecified();
      case TEof: return Value::eof();
      case TFixnum: return makeInteger(int64_t(u64()));
      case TChar: return Value::character(uint32_t(u64()));
      case TFlonum: {
        uint64_t bits = u64();
        double d;
        std::memcpy(&d, &bits, 8);
        return makeFlonum(d);
      }
      case TExactText: {
        auto n = parseNumber(bytes());
        if (!n) corrupt();
        return *n;
      }
      case TString: return makeString(bytes());
      case TSymbol: return intern(bytes());
      case TKeyword: return internKeyword(bytes());
      case TList: {
        uint64_t n = u64();
        if (n > uint64_t(end_ - p_)) corrupt();
        std::vector<Value, traceable_allocator<Value>> items;
        items.reserve(n);
        for (uint64_t k = 0; k < n; k++) items.push_back(value());
        Value tail = value();
        return listFromArray(items.data(), items.size(), tail);
      }
      case TVector: {
        uint64_t n = u64();
        if (n > uint64_t(end_ - p_)) corrupt();
        Value vec = makeVector(n);
        for (uint64_t k = 0; k < n; k++) {
          Value x = value();
          vec.as<Vector>()->items[k] = x;
        }
        return vec;
      }
      case TBytevector: {
        auto s = bytes();
        Value bv = makeBytevector(s.size());
        std::memcpy(bv.as<Bytevector>()->bytes, s.data(), s.size());
        return bv;
      }
      case THashTable: {
        uint8_t equiv = byte();
        if (equiv >= uint8_t(HashEquiv::Custom)) corrupt();
        uint64_t n = u64();
        if (n > uint64_t(end_ - p_)) corrupt();
        Value table = makeHashTable(HashEquiv(equiv), n);
        Interp* in = Interp::current();
        for (uint64_t k = 0; k < n; k++) {
          Value key = value();
          Value val = value();
          hashTablePut(*in, table, key, val);
        }
        return table;
      }
      case TTensor: {
        int8_t dtype = int8_t(byte());
        if (dtype < 0 || dtype >= int8_t(at::ScalarType::NumOptions)) corrupt();
        bool grad = byte() != 0;
        uint64_t ndim = u64();
        if (ndim > 64) corrupt();
        std::vector<int64_t> shape;
        for (uint64_t d = 0; d < ndim; d++) shape.push_back(int64_t(u64()));
        at::Tensor t;
        try {
          t = at::empty(shape, at::TensorOptions().dtype(at::ScalarType(dtype)));
        } catch (const std::exception&) {
          corrupt();
        }
        auto data = bytes();
        if (data.size() != size_t(t.numel()) * t.element_size()) corrupt();
        std::memcpy(t.data_ptr(), data.data(), data.size());
        if (grad && t.is_floating_point()) t.set_requires_grad(true);
        return wrapTensor(std::move(t));
      }
      default: corrupt();
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  std::string_view who_;
};

}  // namespace

std::string encodeValue(Value v, std::string_view who) {
  Writer w(who);
  w.byte(kVersion);
  w.value(v);
  return std::move(w.out);
}

Value decodeValue(const uint8_t* data, size_t size, std::string_view who) {
  Reader r(data, size, who);
  if (r.byte() != kVersion) r.corrupt();
  Value v = r.value();
  if (!r.atEnd()) r.corrupt();
  return v;
}

}  // namespace purple::dist
