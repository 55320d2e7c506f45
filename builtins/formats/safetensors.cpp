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
#include "builtins/formats/json_nesting.hpp"
#include "builtins/formats/mapped_file.hpp"
#include "builtins/nn/value.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <algorithm>
#include <unordered_set>
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
// The most dimensions a tensor may have. The format sets none; LibTorch's kernels and NumPy
// (32 before 2.0, 64 since) stop far below the 100,000 a hostile file claimed.
constexpr size_t kMaxRank = 64;
// The header's deepest nesting: the header object, a tensor's object, its shape array. Checked
// on the raw text before parsing, so no nesting depth reaches the JSON parser.
constexpr int kMaxNesting = 3;

struct TensorSpec {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

struct Header {
  Json json;
  uint64_t dataStart;
  std::vector<TensorSpec> tensors;                                 // in the header's order
  std::vector<std::pair<std::string, std::string>> metadata;       // __metadata__, in its order
  bool hasMetadata = false;
};

void checkNesting(std::string_view text) {
  size_t at = jsonNestingPast(text, kMaxNesting);
  if (at != std::string_view::npos)
    fail("corrupt header: JSON nested deeper than the format's " + std::to_string(kMaxNesting) + " levels (at byte " + std::to_string(at) + ")");
}

// The header as the format's rules say it must be: a JSON object of tensors (dtype, shape,
// data_offsets) and an optional __metadata__ map of strings to strings; each name once; the
// tensors' byte ranges tiling the data exactly, with no gap between them and nothing after the
// last (a gap can hide anything: a hostile file hid a pickle there).
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
  checkNesting(text);
  // Duplicate keys: JSON parsers keep the first or the last, so two readers could see two files.
  std::vector<std::unordered_set<std::string>> keys;
  std::string duplicate;
  auto callback = [&](int, nlohmann::detail::parse_event_t event, Json& parsed) {
    using E = nlohmann::detail::parse_event_t;
    if (event == E::object_start) keys.emplace_back();
    else if (event == E::object_end && !keys.empty()) keys.pop_back();
    else if (event == E::key && !keys.empty() && parsed.is_string()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  try {
    h.json = Json::parse(text.begin(), text.end(), callback);
  } catch (const std::exception& e) {
    fail(std::string("corrupt header: ") + e.what());
  }
  if (!duplicate.empty()) fail("corrupt header: the name \"" + duplicate + "\" appears twice");
  if (!h.json.is_object()) fail("corrupt header: not a JSON object");
  uint64_t dataSize = f.size() - h.dataStart;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, info] : h.json.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail("corrupt header: __metadata__ must map strings to strings, and it is not an object");
      for (auto& [k, v] : info.items()) {
        if (!v.is_string()) fail("corrupt header: __metadata__ must map strings to strings, and \"" + k + "\" maps to " + std::string(v.type_name()));
        h.metadata.emplace_back(k, v.get<std::string>());
      }
      h.hasMetadata = true;
      continue;
    }
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      fail("corrupt header: tensor \"" + name + "\" lacks dtype, shape or data_offsets");
    auto& offs = info["data_offsets"];
    auto& shapeJ = info["shape"];
    if (!info["dtype"].is_string() || !shapeJ.is_array() || !offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() ||
        !offs[1].is_number_unsigned())
      fail("corrupt header: tensor \"" + name + "\" is malformed");
    TensorSpec t;
    t.name = name;
    t.dtype = dtypeOf(info["dtype"].get<std::string>(), name);
    if (shapeJ.size() > kMaxRank)
      fail("corrupt header: tensor \"" + name + "\" has " + std::to_string(shapeJ.size()) + " dimensions, more than the " + std::to_string(kMaxRank) +
           " Purple reads");
    int64_t numel = 1;
    for (auto& d : shapeJ) {
      if (!d.is_number_unsigned()) fail("corrupt header: tensor \"" + name + "\" has a bad shape");
      uint64_t x = d.get<uint64_t>();
      if (x > uint64_t(INT64_MAX) || __builtin_mul_overflow(numel, int64_t(x), &numel)) fail("corrupt header: tensor \"" + name + "\" is too big");
      t.shape.push_back(int64_t(x));
    }
    checkShapeFits(t.shape);
    t.begin = offs[0].get<uint64_t>(), t.end = offs[1].get<uint64_t>();
    if (t.begin > t.end || t.end > dataSize)
      fail("tensor \"" + name + "\" lies outside the file (bytes " + std::to_string(t.begin) + " to " + std::to_string(t.end) + " of " +
           std::to_string(dataSize) + "; truncated?)");
    uint64_t bytes;
    if (__builtin_mul_overflow(uint64_t(numel), uint64_t(c10::elementSize(t.dtype)), &bytes) || t.end - t.begin != bytes)
      fail("tensor \"" + name + "\" has " + std::to_string(t.end - t.begin) + " bytes for " + std::to_string(numel) + " elements of " +
           c10::toString(t.dtype));
    ranges.emplace_back(t.begin, t.end);
    h.tensors.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (auto& [b, e] : ranges) {
    if (b < at) fail("corrupt header: two tensors overlap (at data byte " + std::to_string(b) + ")");
    if (b > at) fail("corrupt header: " + std::to_string(b - at) + " bytes at data byte " + std::to_string(at) + " belong to no tensor (a gap between tensors)");
    at = e;
  }
  if (at != dataSize)
    fail("corrupt file: " + std::to_string(dataSize - at) + " bytes after the last tensor (the data is " + std::to_string(dataSize) +
         " bytes, the tensors end at " + std::to_string(at) + ")");
  return h;
}

Value loadSafetensors(Interp& in, const std::string& path, std::optional<at::Device> device) {
  auto file = MappedFile::open(path);
  Header h = readHeader(*file);
  Value table = makeHashTable(HashEquiv::Equal, h.tensors.size());
  for (auto& spec : h.tensors) {
    c10::Storage s = MappedFile::storage(file, h.dataStart + spec.begin, spec.end - spec.begin, c10::elementSize(spec.dtype));
    if (spec.dtype == at::kBool) checkBoolBytes(s.data_ptr().get(), s.nbytes());
    at::Tensor t = at::empty({0}, at::TensorOptions().dtype(spec.dtype));
    t.set_(s, 0, spec.shape, c10::contiguous_strides(spec.shape));
    if (device && !device->is_cpu()) t = t.to(*device);
    hashTablePut(in, table, makeString(spec.name), wrapTensor(t));
  }
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
            if (!h.hasMetadata) return Value::f();
            Value table = makeHashTable(HashEquiv::Equal);
            for (auto& [k, v] : h.metadata) hashTablePut(in, table, makeString(k), makeString(v));
            return table;
          } catch (const PurpleException&) {
            throw;
          } catch (...) {
            rethrowFileError("safetensors-metadata", path);
          }
        },
        "The __metadata__ of a .safetensors file as a hash table of strings, or #f when it has none. The whole header "
        "is checked as load-safetensors checks it: a malformed one raises a file-error.");
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
