// Encoding a batch in a data worker process and decoding it in the loader's process; the format
// is described in batch_transfer.hpp. Both sides are the same binary, so numbers are written in
// the machine's own byte order; flonums travel as their bits, so they come back exactly.
#include "builtins/data/batch_transfer.hpp"
#include "interp/language/numbers.hpp"
#include "interp/memory/tensor_value.hpp"
#include <ATen/ATen.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>

namespace purple {
namespace dataload {

namespace {

// Tags of the payload's value part.
enum Tag : uint8_t {
  TagNil = 'N', TagTrue = 'T', TagFalse = 'F', TagUnspecified = 'U', TagEof = 'O',
  TagFixnum = 'I', TagFlonum = 'D', TagOtherNumber = 'X', TagChar = 'C',
  TagString = 'S', TagSymbol = 'Y', TagKeyword = 'K', TagList = 'L', TagVector = 'V',
  TagBytevector = 'B', TagTensor = 'E',
};

constexpr size_t kMaxDepth = 10000;   // nesting of lists and vectors, so decoding cannot overflow the stack
constexpr size_t kAlign = 64;

template <class T> void put(std::string& out, T x) { out.append(reinterpret_cast<const char*>(&x), sizeof x); }
void putBytes(std::string& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.append(s);
}

struct Encoder {
  std::string values;
  std::vector<at::Tensor> tensors;

  void value(Value v, size_t depth) {
    if (depth > kMaxDepth) throw std::runtime_error("the batch is nested too deeply to send");
    if (v.isNil()) return put<uint8_t>(values, TagNil);
    if (v.isBool()) return put<uint8_t>(values, v.isFalse() ? TagFalse : TagTrue);
    if (v.isUnspecified()) return put<uint8_t>(values, TagUnspecified);
    if (v.isEof()) return put<uint8_t>(values, TagEof);
    if (v.isFixnum()) {
      put<uint8_t>(values, TagFixnum);
      return put<int64_t>(values, v.fixnum());
    }
    if (v.isChar()) {
      put<uint8_t>(values, TagChar);
      return put<uint32_t>(values, v.character());
    }
    if (isFlonum(v)) {
      put<uint8_t>(values, TagFlonum);
      return put<double>(values, flonumValue(v));
    }
    if (isNumber(v)) {   // bignums, exact rationals, complex numbers: their exact written form
      put<uint8_t>(values, TagOtherNumber);
      return putBytes(values, numberToString(v));
    }
    if (isString(v)) {
      put<uint8_t>(values, TagString);
      return putBytes(values, stringView(v));
    }
    if (isSymbol(v) || isKeyword(v)) {
      put<uint8_t>(values, isKeyword(v) ? TagKeyword : TagSymbol);
      return putBytes(values, symbolName(v));
    }
    if (isPair(v)) {
      if (isCircularList(v)) throw std::runtime_error("the batch holds a circular list");
      uint64_t n = 0;
      for (Value p = v; isPair(p); p = cdr(p)) n++;
      put<uint8_t>(values, TagList);
      put<uint64_t>(values, n);
      Value p = v;
      for (; isPair(p); p = cdr(p)) value(car(p), depth + 1);
      return value(p, depth + 1);   // the tail: () for a proper list
    }
    if (v.is(Kind::Vector)) {
      auto* vec = v.as<Vector>();
      put<uint8_t>(values, TagVector);
      put<uint64_t>(values, vec->extra);
      for (uint32_t i = 0; i < vec->extra; i++) value(vec->items[i], depth + 1);
      return;
    }
    if (v.is(Kind::Bytevector)) {
      auto* b = v.as<Bytevector>();
      put<uint8_t>(values, TagBytevector);
      return putBytes(values, std::string_view(reinterpret_cast<const char*>(b->bytes), b->extra));
    }
    if (isTensor(v)) {
      const at::Tensor& t = tensorArg(v, "data-loader", 1);   // a freed tensor is an error here
      if (t.layout() != at::kStrided) throw std::runtime_error("the batch holds a sparse tensor");
      put<uint8_t>(values, TagTensor);
      put<uint64_t>(values, tensors.size());
      tensors.push_back(t.detach().cpu().contiguous());
      return;
    }
    throw std::runtime_error("cannot send a " + std::string(kindName(v)) +
                             " back from a worker process: batches may hold tensors, numbers, strings, "
                             "symbols, characters, booleans, lists and vectors");
  }

  static const char* kindName(Value v) {
    if (isProcedure(v)) return "procedure";
    if (v.is(Kind::Record)) return "record";
    if (v.is(Kind::HashTable)) return "hash table";
    if (v.is(Kind::Port)) return "port";
    if (v.is(Kind::Module)) return "module";
    if (v.is(Kind::Foreign)) return "foreign object";
    return "value of this kind";
  }
};

// A memfd of BYTES bytes holding the tensors at OFFSETS.
int writeSharedMemory(const std::vector<at::Tensor>& tensors, const std::vector<uint64_t>& offsets, uint64_t bytes) {
  int fd = memfd_create("purple-batch", MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  if (ftruncate(fd, off_t(bytes)) != 0) {
    int e = errno;
    close(fd);
    throw std::runtime_error(std::string("cannot size the shared memory of a batch: ") + std::strerror(e));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int e = errno;
    close(fd);
    throw std::runtime_error(std::string("cannot map the shared memory of a batch: ") + std::strerror(e));
  }
  for (size_t i = 0; i < tensors.size(); i++)
    if (tensors[i].nbytes() > 0) std::memcpy(static_cast<char*>(base) + offsets[i], tensors[i].data_ptr(), tensors[i].nbytes());
  munmap(base, bytes);
  return fd;
}

struct Reader {
  std::string_view in;
  size_t pos = 0;
  template <class T> T get() {
    if (pos + sizeof(T) > in.size()) throw std::runtime_error("a worker's batch message is truncated");
    T x;
    std::memcpy(&x, in.data() + pos, sizeof x);
    pos += sizeof x;
    return x;
  }
  std::string_view bytes() {
    uint64_t n = get<uint64_t>();
    if (n > in.size() - pos) throw std::runtime_error("a worker's batch message is truncated");
    std::string_view s = in.substr(pos, n);
    pos += n;
    return s;
  }
};

// The mapping of one batch's tensors, unmapped when its last tensor goes.
struct Mapping {
  void* base = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (base) munmap(base, bytes);
  }
};

struct Decoder {
  Reader r;
  std::vector<at::Tensor> tensors;

  Value value(size_t depth) {
    if (depth > kMaxDepth) throw std::runtime_error("a worker's batch message is nested too deeply");
    switch (r.get<uint8_t>()) {
      case TagNil: return Value::nil();
      case TagTrue: return Value::t();
      case TagFalse: return Value::f();
      case TagUnspecified: return Value::unspecified();
      case TagEof: return Value::eof();
      case TagFixnum: return makeInteger(r.get<int64_t>());
      case TagChar: return Value::character(r.get<uint32_t>());
      case TagFlonum: return makeFlonum(r.get<double>());
      case TagOtherNumber: {
        std::optional<Value> n = parseNumber(r.bytes());
        if (!n) throw std::runtime_error("a worker's batch message holds a malformed number");
        return *n;
      }
      case TagString: return makeString(r.bytes());
      case TagSymbol: return intern(r.bytes());
      case TagKeyword: return internKeyword(r.bytes());
      case TagList: {
        uint64_t n = r.get<uint64_t>();
        if (n > r.in.size()) throw std::runtime_error("a worker's batch message is truncated");
        // Items first, consed in reverse at the end: locals and the collector-visible list only.
        Value items = Value::nil();
        for (uint64_t i = 0; i < n; i++) items = cons(value(depth + 1), items);
        Value result = value(depth + 1);   // the tail
        for (Value p = items; isPair(p); p = cdr(p)) result = cons(car(p), result);
        return result;
      }
      case TagVector: {
        uint64_t n = r.get<uint64_t>();
        if (n > r.in.size()) throw std::runtime_error("a worker's batch message is truncated");
        Value v = makeVector(n, Value::f());
        for (uint64_t i = 0; i < n; i++) {
          Value item = value(depth + 1);
          v.as<Vector>()->items[i] = item;
        }
        return v;
      }
      case TagBytevector: {
        std::string_view b = r.bytes();
        Value v = makeBytevector(b.size());
        if (!b.empty()) std::memcpy(v.as<Bytevector>()->bytes, b.data(), b.size());
        return v;
      }
      case TagTensor: {
        uint64_t k = r.get<uint64_t>();
        if (k >= tensors.size()) throw std::runtime_error("a worker's batch message names a missing tensor");
        return wrapTensor(tensors[k]);
      }
      default: throw std::runtime_error("a worker's batch message is malformed");
    }
  }
};

}  // namespace

int encodeBatch(Value batch, std::string& payload) {
  Encoder e;
  e.value(batch, 0);
  std::vector<uint64_t> offsets;
  uint64_t bytes = 0;
  payload.clear();
  put<uint64_t>(payload, e.tensors.size());
  for (const at::Tensor& t : e.tensors) {
    offsets.push_back(bytes);
    put<int8_t>(payload, int8_t(t.scalar_type()));
    put<uint64_t>(payload, uint64_t(t.dim()));
    for (int64_t d = 0; d < t.dim(); d++) put<int64_t>(payload, t.size(d));
    put<uint64_t>(payload, bytes);
    bytes += (t.nbytes() + kAlign - 1) / kAlign * kAlign;
  }
  put<uint64_t>(payload, bytes);
  payload += e.values;
  return bytes > 0 ? writeSharedMemory(e.tensors, offsets, bytes) : -1;
}

Value decodeBatch(std::string_view payload, int memfd) {
  std::shared_ptr<Mapping> mapping;
  Decoder d{Reader{payload}, {}};
  try {
    uint64_t count = d.r.get<uint64_t>();
    if (count > payload.size()) throw std::runtime_error("a worker's batch message is malformed");
    struct Entry { at::ScalarType dtype; std::vector<int64_t> sizes; uint64_t offset; };
    std::vector<Entry> entries;
    for (uint64_t i = 0; i < count; i++) {
      Entry e;
      int8_t dtype = d.r.get<int8_t>();
      if (dtype < 0 || dtype >= int8_t(at::ScalarType::NumOptions))
        throw std::runtime_error("a worker's batch message holds an unknown dtype");
      e.dtype = at::ScalarType(dtype);
      uint64_t dims = d.r.get<uint64_t>();
      if (dims > 64) throw std::runtime_error("a worker's batch message is malformed");
      for (uint64_t k = 0; k < dims; k++) e.sizes.push_back(d.r.get<int64_t>());
      e.offset = d.r.get<uint64_t>();
      entries.push_back(std::move(e));
    }
    uint64_t bytes = d.r.get<uint64_t>();
    if (bytes > 0) {
      if (memfd < 0) throw std::runtime_error("a worker's batch came without its shared memory");
      void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
      if (base == MAP_FAILED) throw std::runtime_error(std::string("cannot map a worker's batch: ") + std::strerror(errno));
      mapping = std::make_shared<Mapping>();
      mapping->base = base;
      mapping->bytes = bytes;
    }
    if (memfd >= 0) close(memfd);
    memfd = -1;
    for (const Entry& e : entries) {
      at::TensorOptions options = at::TensorOptions().dtype(e.dtype);
      int64_t numel = 1;
      for (int64_t s : e.sizes) numel *= s;
      uint64_t need = uint64_t(numel) * uint64_t(c10::elementSize(e.dtype));
      if (need == 0) {
        d.tensors.push_back(at::empty(e.sizes, options));
        continue;
      }
      if (!mapping || e.offset > bytes || need > bytes - e.offset)
        throw std::runtime_error("a worker's batch message points outside its shared memory");
      d.tensors.push_back(at::from_blob(static_cast<char*>(mapping->base) + e.offset, e.sizes,
                                        [mapping](void*) {}, options));
    }
    mapping.reset();   // the tensors' deleters hold it now
    return d.value(0);
  } catch (...) {
    if (memfd >= 0) close(memfd);
    throw;
  }
}

}  // namespace dataload
}  // namespace purple
