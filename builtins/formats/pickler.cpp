#include "builtins/formats/pickler.hpp"
#include "builtins/formats/format_error.hpp"
#include "interp/core/interp.hpp"
#include <cstring>
#include <unordered_map>

namespace purple::formats {

namespace {

class Writer {
 public:
  explicit Writer(const StorageIdFn& ids) : ids_(ids) {}
  std::string out;
  // keyed by address, holding each object so that no later temporary can reuse its address
  std::unordered_map<const PyObject*, std::pair<uint32_t, PyRef>> memo_;

  void op(uint8_t c) { out.push_back(char(c)); }
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; i++) out.push_back(char(uint8_t(v >> (8 * i))));
  }
  void text(const std::string& s) {   // BINUNICODE
    op('X');
    le(s.size(), 4);
    out += s;
  }
  void global(const char* module, const char* name) {
    op('c');
    out += module;
    out += '\n';
    out += name;
    out += '\n';
  }
  void integer(int64_t i) {
    if (i >= 0 && i < 256) op('K'), le(uint64_t(i), 1);
    else if (i >= 0 && i < 65536) op('M'), le(uint64_t(i), 2);
    else if (i >= INT32_MIN && i <= INT32_MAX) op('J'), le(uint64_t(uint32_t(int32_t(i))), 4);
    else {
      std::string b;
      for (int k = 0; k < 8; k++) b.push_back(char(uint8_t(uint64_t(i) >> (8 * k))));
      while (b.size() > 1 && ((b.back() == 0 && !(uint8_t(b[b.size() - 2]) & 0x80)) ||
                              (uint8_t(b.back()) == 0xFF && (uint8_t(b[b.size() - 2]) & 0x80))))
        b.pop_back();
      longBytes(b);
    }
  }
  void longBytes(const std::string& b) {
    if (b.size() < 256) op(0x8a), le(b.size(), 1);
    else op(0x8b), le(b.size(), 4);
    out += b;
  }
  void emptyOrderedDict() {
    global("collections", "OrderedDict");
    op(')');
    op('R');
  }

  // Containers reached again (shared structure) are memo GETs of their first writing.
  void write(const PyRef& o, int depth) {
    bool shareable = o->type == PyType::List || o->type == PyType::Tuple || o->type == PyType::Dict;
    if (shareable) {
      auto it = memo_.find(o.get());
      if (it != memo_.end()) {
        uint32_t index = it->second.first;
        if (index < 256) op('h'), le(index, 1);   // BINGET
        else op('j'), le(index, 4);               // LONG_BINGET
        return;
      }
    }
    writeNew(o, depth);
    if (shareable) {
      uint32_t index = uint32_t(memo_.size());
      if (index < 256) op('q'), le(index, 1);   // BINPUT
      else op('r'), le(index, 4);               // LONG_BINPUT
      memo_.emplace(o.get(), std::make_pair(index, o));
    }
  }

  void writeNew(const PyRef& o, int depth) {
    // a small host thread stack, or AddressSanitizer's frames, end sooner than 10,000 levels
    if (depth > 10000 || stackNearlyFull()) fail("data nested too deeply (past 10000 levels, or past what this thread's stack holds) or circular");
    switch (o->type) {
      case PyType::None: return op('N');
      case PyType::Bool: return op(o->flag ? 0x88 : 0x89);
      case PyType::Int: return integer(o->integer);
      case PyType::Long: return longBytes(o->text);
      case PyType::Float: {
        op('G');
        uint64_t bits;
        std::memcpy(&bits, &o->real, 8);
        for (int i = 7; i >= 0; i--) out.push_back(char(uint8_t(bits >> (8 * i))));
        return;
      }
      case PyType::Complex:
        global("__builtin__", "complex");
        write(PyObject::floating(o->real), depth + 1);
        write(PyObject::floating(o->imag), depth + 1);
        op(0x86), op('R');
        return;
      case PyType::Str: return text(o->text);
      case PyType::Bytes: {   // protocol 2: _codecs.encode(latin-1 text, 'latin1')
        global("_codecs", "encode");
        std::string s;
        for (unsigned char c : o->text) {
          if (c < 0x80) s += char(c);
          else s += char(0xC0 | c >> 6), s += char(0x80 | (c & 0x3F));
        }
        text(s);
        text("latin1");
        op(0x86), op('R');
        return;
      }
      case PyType::List: case PyType::Set:
        op(']');
        items(o->items, depth, 'e');
        return;
      case PyType::Tuple: case PyType::Size: {
        if (o->type == PyType::Size) global("torch", "Size");
        size_t n = o->items.size();
        if (n == 0) op(')');
        else if (n <= 3) {
          for (auto& x : o->items) write(x, depth + 1);
          op(uint8_t(0x84 + n));
        } else {
          op('(');
          for (auto& x : o->items) write(x, depth + 1);
          op('t');
        }
        if (o->type == PyType::Size) op(0x85), op('R');
        return;
      }
      case PyType::Dict:
        if (o->flag) emptyOrderedDict();
        else op('}');
        for (size_t i = 0; i < o->entries.size(); i += 1000) {
          op('(');
          for (size_t k = i; k < o->entries.size() && k < i + 1000; k++) write(o->entries[k].first, depth + 1), write(o->entries[k].second, depth + 1);
          op('u');
        }
        return;
      case PyType::Tensor: return tensor(*o);
      case PyType::Dtype: return global("torch", torchDtypeName(o->dtype));
      case PyType::Device:
        global("torch", "device");
        text(o->device.str());
        op(0x85), op('R');
        return;
      default: fail("cannot write a " + pyTypeName(*o) + " to a pickle");
    }
  }

  void items(const std::vector<PyRef>& xs, int depth, uint8_t batchOp) {
    for (size_t i = 0; i < xs.size(); i += 1000) {
      op('(');
      for (size_t k = i; k < xs.size() && k < i + 1000; k++) write(xs[k], depth + 1);
      op(batchOp);
    }
  }

  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict()),
  // wrapped in _rebuild_parameter for a Parameter.
  void tensor(const PyObject& o) {
    const at::Tensor& t = o.tensor;
    if (!t.defined()) fail("cannot save a tensor that was freed");
    if (t.layout() != c10::kStrided) fail("cannot save a sparse tensor (convert it with tensor-to-dense first)");
    if (t.is_quantized()) fail("cannot save a quantized tensor");
    if (o.flag) global("torch._utils", "_rebuild_parameter");
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    PyRef pid = ids_(t);
    writePersistentId(*pid);
    integer(t.storage_offset());
    write(sizes(t.sizes()), 1);
    write(sizes(t.strides()), 1);
    op(!o.flag && t.requires_grad() ? 0x88 : 0x89);
    emptyOrderedDict();
    op('t');
    op('R');
    if (o.flag) {
      op(t.requires_grad() ? 0x88 : 0x89);
      emptyOrderedDict();
      op(0x87);
      op('R');
    }
  }

  void writePersistentId(const PyObject& pid) {
    // ('storage', torch.FloatStorage, key, location, numel)
    op('(');
    text(pid.items[0]->text);
    global("torch", pid.items[1]->text.c_str());
    text(pid.items[2]->text);
    text(pid.items[3]->text);
    integer(pid.items[4]->integer);
    op('t');
    op('Q');
  }

  static PyRef sizes(at::IntArrayRef xs) {
    PyRef t = PyObject::tuple({});
    for (int64_t x : xs) t->items.push_back(PyObject::integer_(x));
    return t;
  }

 private:
  const StorageIdFn& ids_;
};

}  // namespace

std::string pickle(const PyRef& root, const StorageIdFn& storageId) {
  Writer w(storageId);
  w.op(0x80);
  w.op(2);
  w.write(root, 0);
  w.op('.');
  return std::move(w.out);
}

}  // namespace purple::formats
