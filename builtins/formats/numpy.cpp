// NumPy's files: .npy (one array: a magic string, a Python-dict header with descr, fortran_order
// and shape, then the bytes) and .npz (a zip of .npy files, as np.savez writes; np.savez_compressed's
// deflated entries are read too).
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/formats/atomic_file.hpp"
#include "builtins/formats/format_error.hpp"
#include "builtins/formats/mapped_file.hpp"
#include "builtins/formats/numpy.hpp"
#include "builtins/formats/zip.hpp"
#include "builtins/nn/value.hpp"
#include "interp/memory/tensor_value.hpp"
#include <cctype>
#include <cstring>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace formats {
[[noreturn]] void rethrowFileError(const std::string& who, const std::string& path);   // serialize.cpp
void refuseSafetensorsPath(const std::string& who, const std::string& path);          // serialize.cpp
}

namespace {

using namespace formats;

struct NpyHeader {
  at::ScalarType dtype;
  bool bigEndian = false, fortran = false, wideUnsigned = false;
  std::vector<int64_t> shape;
  size_t dataOffset = 0;
};

// NumPy's own limit on a header (np.load's max_header_size): longer ones are refused unread.
constexpr size_t kMaxNpyHeader = 10000;

// The header as NumPy reads it (ast.literal_eval, then checks): a Python dict literal with exactly
// the keys 'descr' (a string: structured dtypes are not read), 'fortran_order' (True or False)
// and 'shape' (a tuple of non-negative ints), each once. Anything else is refused, so Purple never
// reads a file differently from NumPy.
class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view h, bool py2Ints) : h_(h), py2Ints_(py2Ints) {}

  void parse(NpyHeader& out) {
    space();
    expect('{', "the header is not a dict");
    bool descr = false, fortran = false, shape = false;
    for (;;) {
      space();
      if (peek() == '}') break;
      std::string key = string("a key");
      space();
      expect(':', "a key without a value");
      space();
      if (key == "descr") {
        once(descr, key);
        if (peek() == '[') fail("structured .npy arrays are not supported");
        std::string d = string("descr");
        if (!numpyDescrToDtype(d, out.dtype, out.bigEndian, out.wideUnsigned)) fail("NumPy dtype " + d + " has no tensor equivalent");
      } else if (key == "fortran_order") {
        once(fortran, key);
        if (word("True")) out.fortran = true;
        else if (word("False")) out.fortran = false;
        else bad("fortran_order is not a boolean (True or False)");
      } else if (key == "shape") {
        once(shape, key);
        out.shape = tuple();
      } else {
        bad("unexpected key '" + key + "' (NumPy allows exactly descr, fortran_order and shape)");
      }
      space();
      if (peek() == ',') {
        pos_++;
        continue;
      }
      space();
      if (peek() != '}') bad("expected , or }");
    }
    pos_++;
    if (!descr || !fortran || !shape)
      bad(std::string("missing key ") + (!descr ? "descr" : !fortran ? "fortran_order" : "shape") + " (NumPy requires descr, fortran_order and shape)");
    space();
    if (pos_ != h_.size()) bad("text after the dict");
  }

 private:
  [[noreturn]] void bad(const std::string& why) const { fail("corrupt .npy header: " + why + " (at character " + std::to_string(pos_) + ")"); }
  char peek() const { return pos_ < h_.size() ? h_[pos_] : '\0'; }
  void space() {
    while (pos_ < h_.size() && (h_[pos_] == ' ' || h_[pos_] == '\t' || h_[pos_] == '\n' || h_[pos_] == '\r')) pos_++;
  }
  void expect(char c, const char* why) {
    if (peek() != c) bad(why);
    pos_++;
  }
  void once(bool& seen, const std::string& key) {
    if (seen) bad("the key '" + key + "' appears twice");
    seen = true;
  }
  bool word(const char* w) {
    size_t n = std::strlen(w);
    if (h_.compare(pos_, n, w) != 0) return false;
    char after = pos_ + n < h_.size() ? h_[pos_ + n] : ' ';
    if (std::isalnum(uint8_t(after)) || after == '_') return false;
    pos_ += n;
    return true;
  }
  std::string string(const char* what) {
    char q = peek();
    if (q != '\'' && q != '"') bad(std::string(what) + " is not a string");
    size_t end = h_.find(q, pos_ + 1);
    if (end == std::string_view::npos) bad(std::string(what) + " is an unterminated string");
    std::string s(h_.substr(pos_ + 1, end - pos_ - 1));
    if (s.find('\\') != std::string::npos || s.find('\n') != std::string::npos) bad(std::string(what) + " has an escape");
    pos_ = end + 1;
    return s;
  }
  std::vector<int64_t> tuple() {
    expect('(', "shape is not a tuple");
    std::vector<int64_t> dims;
    bool comma = false;
    for (;;) {
      space();
      if (peek() == ')') break;
      size_t b = pos_;
      while (pos_ < h_.size() && h_[pos_] >= '0' && h_[pos_] <= '9') pos_++;
      if (pos_ == b) bad(peek() == '-' ? "shape has a negative dimension" : "shape holds something other than non-negative ints");
      if (pos_ - b > 18) bad("shape has a dimension too large");
      dims.push_back(std::stoll(std::string(h_.substr(b, pos_ - b))));
      if (py2Ints_ && (peek() == 'L' || peek() == 'l')) pos_++;   // Python 2 longs, as NumPy's _filter_header allows
      if (dims.size() > 64) bad("shape has more than 64 dimensions");
      space();
      if (peek() == ',') {
        pos_++;
        comma = true;
        continue;
      }
      space();
      if (peek() != ')') bad("shape is not a tuple of ints");
    }
    pos_++;
    if (dims.size() == 1 && !comma) bad("shape is (n), an int in parentheses, not a tuple");
    return dims;
  }

  std::string_view h_;
  size_t pos_ = 0;
  bool py2Ints_;
};

NpyHeader parseNpy(std::string_view b) {
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) fail("not a .npy file (no \\x93NUMPY magic)");
  uint8_t major = uint8_t(b[6]);
  size_t lenBytes = major == 1 ? 2 : major == 2 || major == 3 ? 4 : 0;
  if (!lenBytes) fail(".npy format version " + std::to_string(major) + " is not supported");
  if (b.size() < 8 + lenBytes) fail("truncated .npy header");
  size_t n = 0;
  for (size_t i = lenBytes; i-- > 0;) n = n << 8 | uint8_t(b[8 + i]);
  if (n > b.size() - 8 - lenBytes) fail("truncated .npy header");
  if (n > kMaxNpyHeader)
    fail(".npy header of " + std::to_string(n) + " characters, more than NumPy's limit of " + std::to_string(kMaxNpyHeader) + " (np.load refuses it too)");
  std::string_view h = b.substr(8 + lenBytes, n);
  NpyHeader out;
  out.dataOffset = 8 + lenBytes + n;
  NpyHeaderParser(h, major <= 2).parse(out);
  return out;
}

at::Tensor npyTensor(std::string_view bytes) {
  NpyHeader h = parseNpy(bytes);
  return tensorFromNumpyBytes(bytes.substr(h.dataOffset), h.shape, h.dtype, h.fortran, h.bigEndian, h.wideUnsigned);
}

std::string npyBytes(const at::Tensor& t0) {
  at::Tensor t = t0.detach().to(at::kCPU).contiguous();
  std::string shape = "(";
  for (int64_t k = 0; k < t.dim(); k++) shape += (k ? ", " : "") + std::to_string(t.size(k));
  shape += t.dim() == 1 ? ",)" : ")";
  std::string header = "{'descr': '" + dtypeToNumpyDescr(t.scalar_type()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  bool v2 = header.size() > 60000;
  size_t prefix = v2 ? 12 : 10;
  // Spaces and a final newline put the data at a multiple of 64 bytes, as NumPy does.
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + char(v2 ? 2 : 1) + char(0);
  for (size_t i = 0; i < prefix - 8; i++) out += char(uint8_t(header.size() >> (8 * i)));
  out += header;
  out.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
  return out;
}

template <class F>
auto guarded(const char* who, const std::string& path, F f) {
  try {
    return f();
  } catch (const PurpleException&) {
    throw;
  } catch (...) {
    rethrowFileError(who, path);
  }
}

}  // namespace

void registerNumpy(Registry& r) {
  r.def("load-npy", "(path)",
        [](std::string path) {
          requireFileAccess("load-npy");
          return guarded("load-npy", path, [&] {
            auto f = MappedFile::open(path);
            return npyTensor(f->view(0, f->size()));
          });
        },
        "Reads a NumPy .npy file (np.save) as a tensor of the same shape and dtype (float16/32/64, int8/16/32/64, "
        "uint8, bool, complex64/128; C or Fortran order; either byte order).");
  sandbox(r, "load-npy", Needs::Files, "files: reads a .npy file");
  r.def("save-npy", "(tensor path)",
        [](const at::Tensor& t, std::string path) {
          refuseSafetensorsPath("save-npy", path);
          guarded("save-npy", path, [&] {
            std::string bytes = npyBytes(t);
            AtomicWriter out(path, "save-npy");
            out.write(bytes.data(), bytes.size());
            out.commit();
            return 0;
          });
        },
        "Writes TENSOR to PATH as a NumPy .npy file, atomically: np.load(PATH) reads it. (NumPy has no bfloat16: "
        "convert such tensors first.)");
  sandbox(r, "save-npy", Needs::Files, "files: writes a .npy file");
  r.def("load-npz", "(path)",
        [](Interp& in, std::string path) {
          requireFileAccess("load-npz");
          return guarded("load-npz", path, [&] {
            auto f = MappedFile::open(path);
            ZipReader zip(f);
            Value table = makeHashTable(HashEquiv::Equal, zip.entries().size());
            for (auto& e : zip.entries()) {
              std::string name = e.name;
              if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0) continue;
              std::string bytes = zip.read(e);
              try {
                hashTablePut(in, table, makeString(name.substr(0, name.size() - 4)), wrapTensor(npyTensor(bytes)));
              } catch (const FormatError& err) {
                fail(name + ": " + err.what());
              }
            }
            return table;
          });
        },
        "Reads a NumPy .npz archive (np.savez or np.savez_compressed) as a hash table of name -> tensor.");
  sandbox(r, "load-npz", Needs::Files, "files: reads a .npz file");
  r.def("save-npz", "(arrays path :key (compressed #f))",
        [](Value arrays, std::string path, bool compressed) {
          auto entries = isModule(arrays) ? moduleStateDict(*moduleArg(arrays, "save-npz", 1)) : stateDictFromValue(arrays, "save-npz");
          refuseSafetensorsPath("save-npz", path);
          guarded("save-npz", path, [&] {
            AtomicWriter out(path, "save-npz");
            ZipWriter zip([&](const void* p, size_t n) { out.write(p, n); });
            for (auto& [name, t] : entries) {
              std::string bytes = npyBytes(t);
              zip.add(name + ".npy", bytes.data(), bytes.size(), compressed);
            }
            zip.finish();
            out.commit();
            return 0;
          });
        },
        "Writes ARRAYS (a hash table or alist of name -> tensor, or a module's state dict) to PATH as a NumPy .npz "
        "archive, atomically: np.load(PATH)[name] reads each. :compressed #t deflates each array, as "
        "np.savez_compressed does.");
  sandbox(r, "save-npz", Needs::Files, "files: writes a .npz file");
}

}  // namespace purple
