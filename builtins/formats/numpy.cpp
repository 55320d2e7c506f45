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

// The value after 'KEY': in the header dict.
std::string_view headerValue(std::string_view h, const char* key) {
  std::string k = std::string("'") + key + "'";
  size_t p = h.find(k);
  if (p == std::string_view::npos) fail(std::string("corrupt .npy header: no ") + key);
  p = h.find(':', p + k.size());
  if (p == std::string_view::npos) fail("corrupt .npy header");
  p++;
  while (p < h.size() && h[p] == ' ') p++;
  return h.substr(p);
}

NpyHeader parseNpy(std::string_view b) {
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) fail("not a .npy file (no \\x93NUMPY magic)");
  uint8_t major = uint8_t(b[6]);
  size_t lenBytes = major == 1 ? 2 : major == 2 || major == 3 ? 4 : 0;
  if (!lenBytes) fail(".npy format version " + std::to_string(major) + " is not supported");
  if (b.size() < 8 + lenBytes) fail("truncated .npy header");
  size_t n = 0;
  for (size_t i = lenBytes; i-- > 0;) n = n << 8 | uint8_t(b[8 + i]);
  if (n > b.size() - 8 - lenBytes) fail("truncated .npy header");
  std::string_view h = b.substr(8 + lenBytes, n);
  NpyHeader out;
  out.dataOffset = 8 + lenBytes + n;
  std::string_view d = headerValue(h, "descr");
  if (d.empty() || d[0] != '\'') fail("structured .npy arrays are not supported");
  size_t q = d.find('\'', 1);
  if (q == std::string_view::npos) fail("corrupt .npy header");
  std::string descr(d.substr(1, q - 1));
  if (!numpyDescrToDtype(descr, out.dtype, out.bigEndian, out.wideUnsigned)) fail("NumPy dtype " + descr + " has no tensor equivalent");
  out.fortran = headerValue(h, "fortran_order").substr(0, 4) == "True";
  std::string_view s = headerValue(h, "shape");
  if (s.empty() || s[0] != '(') fail("corrupt .npy header: bad shape");
  size_t close = s.find(')');
  if (close == std::string_view::npos) fail("corrupt .npy header: bad shape");
  std::string dims(s.substr(1, close - 1));
  for (size_t p = 0; p < dims.size();) {
    while (p < dims.size() && (dims[p] == ' ' || dims[p] == ',')) p++;
    if (p >= dims.size()) break;
    size_t e = p;
    while (e < dims.size() && dims[e] >= '0' && dims[e] <= '9') e++;
    if (e == p || e - p > 18) fail("corrupt .npy header: bad shape");
    out.shape.push_back(std::stoll(dims.substr(p, e - p)));
    p = e;
  }
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
