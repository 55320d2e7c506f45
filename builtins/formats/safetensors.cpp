// safetensors (HuggingFace's format): an 8-byte little-endian header length, a JSON header naming
// each tensor's dtype, shape and byte range, then the bytes. Loading maps the file and makes each
// tensor a view of the mapping -- no copy, and pages are read only when touched -- so a 1 GB file
// loads in milliseconds without doubling resident memory (copy-on-write: writing to a loaded
// tensor never changes the file). Writing lays tensors out as the reference implementation does
// (larger dtypes first, then by name), with metadata, atomically.
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/formats/atomic_file.hpp"
#include "builtins/formats/format_error.hpp"
#include "builtins/formats/mapped_file.hpp"
#include "builtins/nn/value.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <algorithm>
#include <torch/version.h>
#include <nlohmann/json.hpp>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace formats {
[[noreturn]] void rethrowFileError(const std::string& who, const std::string& path);   // serialize.cpp
}

namespace {

using namespace formats;
using Json = nlohmann::ordered_json;

struct SafetensorsDtype {
  const char* name;
  at::ScalarType type;
};
const SafetensorsDtype kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat},       {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort},       {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool},
    {"C64", at::kComplexFloat},
};

at::ScalarType dtypeOf(const std::string& name, const std::string& tensor) {
  for (auto& d : kDtypes)
    if (name == d.name) return d.type;
  fail("tensor \"" + tensor + "\" has dtype " + name + ", which LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
       std::to_string(TORCH_VERSION_MINOR) + " has no equivalent for");
}

const char* nameOf(at::ScalarType t) {
  for (auto& d : kDtypes)
    if (t == d.type) return d.name;
  fail(std::string("safetensors has no dtype for ") + c10::toString(t));
}

constexpr uint64_t kMaxHeader = 100 * 1000 * 1000;   // the reference implementation's limit

struct Header {
  Json json;
  uint64_t dataStart;
};

Header readHeader(const MappedFile& f) {
  if (f.size() < 8) fail("not a safetensors file (shorter than its 8-byte header length)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | f.data()[i];
  if (n > kMaxHeader) fail("not a safetensors file, or corrupt: its header claims " + std::to_string(n) + " bytes");
  if (n > f.size() - 8) fail("truncated: the header needs " + std::to_string(n) + " bytes, the file has " + std::to_string(f.size() - 8));
  Header h;
  h.dataStart = 8 + n;
  std::string_view text = f.view(8, n);
  if (text.empty() || text[0] != '{') fail("not a safetensors file (the header is not a JSON object)");
  try {
    h.json = Json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    fail(std::string("corrupt header: ") + e.what());
  }
  if (!h.json.is_object()) fail("corrupt header: not a JSON object");
  return h;
}

Value loadSafetensors(Interp& in, const std::string& path, std::optional<at::Device> device) {
  auto file = MappedFile::open(path);
  Header h = readHeader(*file);
  uint64_t dataSize = file->size() - h.dataStart;
  Value table = makeHashTable(HashEquiv::Equal, h.json.size());
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, info] : h.json.items()) {
    if (name == "__metadata__") continue;
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      fail("corrupt header: tensor \"" + name + "\" lacks dtype, shape or data_offsets");
    auto& offs = info["data_offsets"];
    auto& shapeJ = info["shape"];
    if (!info["dtype"].is_string() || !shapeJ.is_array() || !offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() ||
        !offs[1].is_number_unsigned())
      fail("corrupt header: tensor \"" + name + "\" is malformed");
    at::ScalarType dtype = dtypeOf(info["dtype"].get<std::string>(), name);
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (auto& d : shapeJ) {
      if (!d.is_number_unsigned()) fail("corrupt header: tensor \"" + name + "\" has a bad shape");
      int64_t x = int64_t(d.get<uint64_t>());
      if (x < 0 || __builtin_mul_overflow(numel, x, &numel)) fail("corrupt header: tensor \"" + name + "\" is too big");
      shape.push_back(x);
    }
    uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end || end > dataSize)
      fail("tensor \"" + name + "\" lies outside the file (bytes " + std::to_string(begin) + " to " + std::to_string(end) + " of " +
           std::to_string(dataSize) + "; truncated?)");
    if (end - begin != uint64_t(numel) * c10::elementSize(dtype))
      fail("tensor \"" + name + "\" has " + std::to_string(end - begin) + " bytes for " + std::to_string(numel) + " elements of " +
           c10::toString(dtype));
    ranges.emplace_back(begin, end);
    c10::Storage s = MappedFile::storage(file, h.dataStart + begin, end - begin, c10::elementSize(dtype));
    at::Tensor t = at::empty({0}, at::TensorOptions().dtype(dtype));
    t.set_(s, 0, shape, c10::contiguous_strides(shape));
    if (device && !device->is_cpu()) t = t.to(*device);
    hashTablePut(in, table, makeString(name), wrapTensor(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); i++)
    if (ranges[i].first < ranges[i - 1].second) fail("corrupt header: two tensors overlap");
  return table;
}

std::vector<std::pair<std::string, at::Tensor>> namedTensors(Value v, const char* who) {
  if (isModule(v)) return moduleStateDict(*moduleArg(v, who, 1));
  return stateDictFromValue(v, who);
}

void saveSafetensors(Value tensors, const std::string& path, Value metadata, const char* who) {
  auto entries = namedTensors(tensors, who);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    size_t x = a.second.element_size(), y = b.second.element_size();
    return x != y ? x > y : a.first < b.first;
  });
  Json header = Json::object();
  if (!metadata.isMissing() && !metadata.isFalse()) {
    Json meta = Json::object();
    auto put = [&](Value k, Value v) {
      if (!(isString(k) || k.is(Kind::Symbol)) || !isString(v))
        throwError("type-error", std::string(who) + ": :metadata maps strings to strings, got " + toWriteString(k) + " -> " + toWriteString(v));
      meta[isString(k) ? std::string(stringView(k)) : std::string(symbolName(k))] = std::string(stringView(v));
    };
    if (isHashTable(metadata)) {
      auto* ht = metadata.as<HashTable>();
      for (uint32_t i = 0; i < ht->entryUsed; i++)
        if (!ht->entries[2 * i].isUnbound()) put(ht->entries[2 * i], ht->entries[2 * i + 1]);
    } else {
      for (Value p = metadata; isPair(p); p = cdr(p)) {
        if (!isPair(car(p))) throwTypeError(who, 3, "a hash table or alist of strings for :metadata", metadata);
        put(car(car(p)), cdr(car(p)));
      }
    }
    header["__metadata__"] = meta;
  }
  std::vector<at::Tensor> data;
  uint64_t offset = 0;
  for (auto& [name, t0] : entries) {
    if (name == "__metadata__") throwError("value-error", std::string(who) + ": a tensor cannot be named __metadata__");
    at::Tensor t = t0.detach().to(at::kCPU).contiguous();
    uint64_t n = t.nbytes();
    header[name] = {{"dtype", nameOf(t.scalar_type())}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(t);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  AtomicWriter out(path, who);
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (auto& t : data) out.write(t.data_ptr(), t.nbytes());
  out.commit();
}

}  // namespace

void registerSafetensors(Registry& r) {
  r.def("load-safetensors", "(path :key device)",
        [](Interp& in, std::string path, std::optional<at::Device> device) {
          requireFileAccess("load-safetensors");
          try {
            return loadSafetensors(in, path, device);
          } catch (const PurpleException&) {
            throw;
          } catch (...) {
            rethrowFileError("load-safetensors", path);
          }
        },
        "Reads a .safetensors file (HuggingFace's format) as a hash table of name -> tensor, in the file's order. The "
        "file is memory-mapped and the tensors are views of it: nothing is copied, and only the pages used are read "
        "(writing to a loaded tensor changes private pages, never the file). :device moves them. Every dtype LibTorch "
        "has: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL C64.");
  sandbox(r, "load-safetensors", Needs::Files, "files: reads a .safetensors file");
  r.def("safetensors-metadata", "(path)",
        [](Interp& in, std::string path) -> Value {
          requireFileAccess("safetensors-metadata");
          try {
            auto file = MappedFile::open(path);
            Header h = readHeader(*file);
            if (!h.json.contains("__metadata__")) return Value::f();
            Value table = makeHashTable(HashEquiv::Equal);
            for (auto& [k, v] : h.json["__metadata__"].items())
              hashTablePut(in, table, makeString(k), makeString(v.is_string() ? v.get<std::string>() : v.dump()));
            return table;
          } catch (const PurpleException&) {
            throw;
          } catch (...) {
            rethrowFileError("safetensors-metadata", path);
          }
        },
        "The __metadata__ of a .safetensors file as a hash table of strings, or #f when it has none.");
  sandbox(r, "safetensors-metadata", Needs::Files, "files: reads a .safetensors header");
  r.def("save-safetensors", "(tensors path :key metadata)",
        [](Value tensors, std::string path, Value metadata) {
          try {
            saveSafetensors(tensors, path, metadata, "save-safetensors");
          } catch (const PurpleException&) {
            throw;
          } catch (...) {
            rethrowFileError("save-safetensors", path);
          }
        },
        "Writes TENSORS -- a hash table or alist of name -> tensor, or a module (its state dict) -- to PATH in the "
        "safetensors format, atomically, with :metadata (a hash table or alist of string -> string) as __metadata__. "
        "Python reads it with safetensors.torch.load_file. Tensors are written contiguous and on the CPU.");
  sandbox(r, "save-safetensors", Needs::Files, "files: writes a .safetensors file");
}

}  // namespace purple
