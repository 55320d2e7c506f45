#include "builtins/formats/torch_file.hpp"
#include "builtins/formats/atomic_file.hpp"
#include "builtins/formats/format_error.hpp"
#include "builtins/formats/mapped_file.hpp"
#include "builtins/formats/pickler.hpp"
#include "builtins/formats/unpickler.hpp"
#include "builtins/formats/zip.hpp"
#include <c10/core/CPUAllocator.h>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace purple::formats {

c10::Device defaultLocation(const std::string& location) {
  c10::Device d(c10::kCPU);
  try {
    d = c10::Device(location);
  } catch (const c10::Error&) {
    fail("tensors were saved on an unknown device \"" + location + "\"; pass :map-location \"cpu\"");
  }
  if (d.is_cuda() && (!at::hasCUDA() || d.index() >= int(at::detail::getCUDAHooks().getNumGPUs())))
    fail("tensors were saved on " + location + ", and " + (at::hasCUDA() ? "this machine has no such GPU" : "CUDA is not available here") +
         "; pass :map-location \"cpu\" (or a device that exists)");
  if (!d.is_cpu() && !d.is_cuda()) fail("tensors were saved on " + location + ", which Purple cannot use; pass :map-location \"cpu\"");
  return d;
}

namespace {

// The storage's bytes moved to DEVICE (once: tensors sharing it keep sharing).
c10::Storage onDevice(const c10::Storage& s, c10::Device device) {
  if (device.is_cpu()) return s;
  at::Tensor bytes = at::empty({0}, at::TensorOptions().dtype(at::kByte));
  bytes.set_(s, 0, {int64_t(s.nbytes())}, {1});
  return bytes.to(device).storage();
}

struct StoragePid {
  at::ScalarType dtype;
  std::string key, location;
  int64_t numel;
};

StoragePid parsePid(const PyRef& pid, size_t minItems) {
  if (pid->type != PyType::Tuple || pid->items.size() < minItems || pid->items[0]->type != PyType::Str || pid->items[0]->text != "storage")
    fail("malformed persistent id (expected ('storage', type, key, location, numel))");
  const auto& it = pid->items;
  if (it[1]->type != PyType::StorageType) fail("persistent id names a " + pyTypeName(*it[1]) + ", not a storage type");
  if (it[2]->type != PyType::Str && it[2]->type != PyType::Int) fail("malformed storage key");
  if (it[3]->type != PyType::Str) fail("malformed storage location");
  if (it[4]->type != PyType::Int || it[4]->integer < 0) fail("malformed storage size");
  return {it[1]->dtype, it[2]->type == PyType::Str ? it[2]->text : std::to_string(it[2]->integer), it[3]->text, it[4]->integer};
}

PyRef storageObject(c10::Storage s, at::ScalarType dtype, c10::Device device) {
  auto o = PyObject::make(PyType::Storage);
  o->storage = std::move(s);
  o->dtype = dtype;
  o->device = device;
  return o;
}

uint64_t byteSize(int64_t numel, at::ScalarType dtype) {
  uint64_t n;
  if (__builtin_mul_overflow(uint64_t(numel), uint64_t(c10::elementSize(dtype)), &n)) fail("storage size overflows");
  return n;
}

// The archive's one top-level folder ("archive/" for torch.save, the file's stem for older
// writers): every entry must be under it, as torch's reader assumes. An archive with two could
// be read as one file by one reader and as another by the next.
std::string topFolder(const ZipReader& zip) {
  std::string top;
  for (auto& e : zip.entries()) {
    size_t slash = e.name.find('/');
    if (slash == std::string::npos || slash == 0) fail("entry " + e.name + " is outside the archive's folder: not a torch.save file");
    std::string folder = e.name.substr(0, slash + 1);
    if (top.empty()) top = folder;
    else if (folder != top)
      fail("the archive has two top-level folders, " + top + " and " + folder + ": refusing an archive that readers may read differently");
  }
  return top;
}

// torch's `version` record: a decimal number from 1 to 10 (caffe2::serialize's supported range).
// torch refuses 2^64 (out of range) and -1 (too new once read unsigned), and so does Purple.
void checkVersion(const ZipReader& zip, const std::string& prefix) {
  const ZipReader::Entry* v = zip.find(prefix + "version");
  if (!v) v = zip.find(prefix + ".data/version");
  if (!v) fail("the archive has no version record: not a torch.save file (or a corrupt one)");
  if (v->size > 64) fail("the version record is " + std::to_string(v->size) + " bytes long: corrupt");
  std::string text = zip.read(*v);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  bool digits = !text.empty() && text.size() <= 19 && text.find_first_not_of("0123456789") == std::string::npos;
  uint64_t n = digits ? std::stoull(text) : 0;
  if (!digits || n < 1 || n > 10)
    fail("the version record says \"" + text.substr(0, 40) + "\"; torch.save archives have versions 1 to 10");
}

PyRef loadZip(const std::shared_ptr<MappedFile>& file, const TorchLoadOptions& opt) {
  ZipReader zip(file);
  std::string prefix = topFolder(zip);
  bool torchscript = false, numpy = false;
  for (auto& e : zip.entries()) {
    std::string rest = e.name.substr(prefix.size());
    if (rest == "constants.pkl" || rest.rfind("code/", 0) == 0 || rest.find("__torch__") != std::string::npos) torchscript = true;
    if (e.name.size() > 4 && e.name.compare(e.name.size() - 4, 4, ".npy") == 0) numpy = true;
  }
  // TorchScript archives hold code; torch.load hands them to TorchScript (CVE-2025-32434). Purple
  // refuses them in both modes instead of reading their data as inert tables.
  if (torchscript) fail("this is a TorchScript archive (torch.jit.save, with code under code/__torch__), not a torch.save file: load it with load-torchscript");
  const ZipReader::Entry* pkl = zip.find(prefix + "data.pkl");
  if (!pkl) {
    if (numpy) fail("this is a NumPy .npz archive: load it with load-npz");
    fail("a zip archive without a data.pkl record: not a torch.save file");
  }
  checkVersion(zip, prefix);
  if (const ZipReader::Entry* order = zip.find(prefix + "byteorder")) {
    std::string o = order->size <= 16 ? zip.read(*order) : "?";
    if (o == "big") fail("the tensors were saved big-endian (byteorder record \"big\"), which Purple does not read; re-save them on a little-endian machine");
    if (o != "little") fail("the byteorder record says \"" + o.substr(0, 16) + "\", neither little nor big: corrupt");
  }
  std::unordered_map<std::string, PyRef> storages;
  UnpickleOptions u;
  u.safe = opt.safe;
  u.persistentLoad = [&](const PyRef& pid) -> PyRef {
    StoragePid p = parsePid(pid, 5);
    auto it = storages.find(p.key);
    if (it != storages.end()) return it->second;
    const ZipReader::Entry* rec = zip.find(prefix + "data/" + p.key);
    if (!rec) fail("storage " + p.key + " is missing from the archive (truncated or corrupt)");
    uint64_t need = byteSize(p.numel, p.dtype);
    // Exactly: a record longer than its storage could hide data that another reader would see.
    if (rec->size != need)
      fail("storage " + p.key + " has " + std::to_string(rec->size) + " bytes, and its " + std::to_string(p.numel) + " elements of " +
           c10::toString(p.dtype) + " need exactly " + std::to_string(need) + " (corrupt)");
    c10::Device device = opt.mapLocation ? opt.mapLocation(p.location) : defaultLocation(p.location);
    c10::Storage s = zip.storage(*rec, c10::elementSize(p.dtype), opt.mmap && device.is_cpu());
    if (p.dtype == at::kBool) checkBoolBytes(s.data_ptr().get(), s.nbytes());   // once per storage, on the CPU
    PyRef o = storageObject(onDevice(s, device), p.dtype, device);
    storages.emplace(p.key, o);
    return o;
  };
  std::string bytes = zip.read(*pkl);
  return unpickle(bytes, u);
}

// The legacy format: magic number, protocol version, system info, the object (storages by
// persistent id), the list of storage keys, then each storage as an int64 element count and bytes.
PyRef loadLegacy(const std::shared_ptr<MappedFile>& file, const TorchLoadOptions& opt) {
  std::string_view all = file->view(0, file->size());
  size_t pos = 0, used = 0;
  UnpickleOptions plain;
  plain.safe = true;
  auto next = [&](const UnpickleOptions& u) {
    PyRef r = unpickle(all.substr(pos), u, &used);
    pos += used;
    return r;
  };
  PyRef magic = next(plain);
  static const char kMagic[] = "\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";   // 0x1950a86a20f9469cfc6c
  if (magic->type != PyType::Long || magic->text != std::string(kMagic, 10))
    fail("not a torch.save file (neither a zip archive nor the legacy format's magic number)");
  PyRef version = next(plain);
  if (version->type != PyType::Int || version->integer != 1001) fail("legacy format protocol " + std::to_string(version->integer) + " is not 1001");
  PyRef sysInfo = next(plain);
  if (sysInfo->type == PyType::Dict)
    for (auto& [k, v] : sysInfo->entries)
      if (k->type == PyType::Str && k->text == "little_endian" && v->type == PyType::Bool && !v->flag)
        fail("the file was written on a big-endian machine, which is not supported");
  struct Pending {
    PyRef storage;
    int64_t numel;
    c10::Device device;
  };
  std::map<std::string, Pending> storages;
  UnpickleOptions u;
  u.safe = opt.safe;
  u.persistentLoad = [&](const PyRef& pid) -> PyRef {
    StoragePid p = parsePid(pid, 5);
    if (pid->items.size() > 5 && pid->items[5]->type != PyType::None)
      fail("storage views from PyTorch before 1.0 are not supported (load and re-save the file with a newer PyTorch)");
    auto it = storages.find(p.key);
    if (it != storages.end()) return it->second.storage;
    uint64_t n = byteSize(p.numel, p.dtype);
    if (n > file->size()) fail("storage " + p.key + " claims " + std::to_string(n) + " bytes, more than the whole file (corrupt)");
    c10::Device device = opt.mapLocation ? opt.mapLocation(p.location) : defaultLocation(p.location);
    c10::Storage s(c10::Storage::use_byte_size_t(), size_t(n), c10::GetCPUAllocator(), true);
    PyRef o = storageObject(s, p.dtype, c10::Device(c10::kCPU));
    storages.emplace(p.key, Pending{o, p.numel, device});
    return o;
  };
  PyRef root = next(u);
  PyRef keys = next(plain);
  if (keys->type != PyType::List) fail("corrupt legacy file: the storage key list is missing");
  for (auto& k : keys->items) {
    std::string key = k->type == PyType::Str ? k->text : k->type == PyType::Int ? std::to_string(k->integer) : "";
    auto it = storages.find(key);
    if (it == storages.end()) fail("corrupt legacy file: storage " + key + " is listed but never used");
    if (all.size() - pos < 8) fail("truncated legacy file: storage " + key + " is missing");
    int64_t numel;
    std::memcpy(&numel, all.data() + pos, 8);
    pos += 8;
    if (numel != it->second.numel) fail("corrupt legacy file: storage " + key + " has the wrong size");
    c10::Storage& s = it->second.storage->storage;
    if (all.size() - pos < s.nbytes())
      fail("truncated legacy file: storage " + key + " needs " + std::to_string(s.nbytes()) + " bytes, " + std::to_string(all.size() - pos) + " remain");
    if (s.nbytes()) std::memcpy(s.data_ptr().get(), all.data() + pos, s.nbytes());
    if (it->second.storage->dtype == at::kBool) checkBoolBytes(s.data_ptr().get(), s.nbytes());
    pos += s.nbytes();
    it->second.numel = -1;   // filled
  }
  for (auto& [key, p] : storages)
    if (p.numel != -1) fail("corrupt legacy file: storage " + key + " has no data");
  // Tensors were built over CPU storages; move those that belong elsewhere, storage by storage.
  bool moves = false;
  for (auto& [key, p] : storages) moves |= !p.device.is_cpu();
  if (moves) {
    std::unordered_map<const void*, std::pair<c10::Storage, c10::Device>> moved;
    for (auto& [key, p] : storages)
      if (!p.device.is_cpu()) moved.emplace(p.storage->storage.unsafeGetStorageImpl(), std::make_pair(onDevice(p.storage->storage, p.device), p.device));
    std::vector<PyObject*> work{root.get()};
    std::unordered_set<const PyObject*> seen{root.get()};   // each object once: shared structure is not walked again
    while (!work.empty()) {
      PyObject* o = work.back();
      work.pop_back();
      if (o->type == PyType::Tensor && o->tensor.defined() && o->tensor.layout() == c10::kStrided) {
        auto it = moved.find(o->tensor.storage().unsafeGetStorageImpl());
        if (it != moved.end()) {
          at::Tensor t = at::empty({0}, o->tensor.options().device(it->second.second));
          t.set_(it->second.first, o->tensor.storage_offset(), o->tensor.sizes(), o->tensor.strides());
          t.requires_grad_(o->tensor.requires_grad());
          o->tensor = t;
        }
      }
      for (auto& x : o->items)
        if (seen.insert(x.get()).second) work.push_back(x.get());
      for (auto& e : o->entries)
        for (PyObject* x : {e.first.get(), e.second.get()})
          if (seen.insert(x).second) work.push_back(x);
    }
  }
  return root;
}

}  // namespace

PyRef loadTorchFile(const std::string& path, const TorchLoadOptions& opt) {
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  if (file->size() == 0) fail("the file is empty");
  if (ZipReader::looksLikeZip(*file)) return loadZip(file, opt);
  const uint8_t* d = file->data();
  if (file->size() >= 6 && std::memcmp(d, "\x93NUMPY", 6) == 0) fail("this is a NumPy .npy file: load it with load-npy");
  if (file->size() > 9 && d[8] == '{' && d[0] != 0x80) fail("this looks like a safetensors file: load it with load-safetensors");
  if (file->size() > 262 && std::memcmp(d + 257, "ustar", 5) == 0) fail("the tar checkpoint format of PyTorch before 0.4 is not supported");
  if (d[0] != 0x80) fail("not a torch.save file (neither a zip archive nor a pickle)");
  return loadLegacy(file, opt);
}

void saveTorchFile(const PyRef& root, const std::string& path, const std::string& who) {
  struct Saved {
    c10::Storage storage;
    at::ScalarType dtype;
    std::string key;
  };
  std::vector<Saved> saved;
  std::unordered_map<const void*, size_t> index;
  StorageIdFn ids = [&](const at::Tensor& t) -> PyRef {
    const void* impl = t.storage().unsafeGetStorageImpl();
    auto it = index.find(impl);
    size_t k;
    if (it == index.end()) {
      k = saved.size();
      index.emplace(impl, k);
      saved.push_back({t.storage(), t.scalar_type(), std::to_string(k)});
    } else {
      k = it->second;
      if (saved[k].dtype != t.scalar_type())
        fail(std::string("two tensors share a storage as different dtypes (") + c10::toString(saved[k].dtype) + " and " +
             c10::toString(t.scalar_type()) + "), which torch.save cannot represent");
    }
    const char* cls = storageClassName(t.scalar_type());
    if (!cls) fail(std::string("tensors of dtype ") + c10::toString(t.scalar_type()) + " cannot be saved");
    auto sc = PyObject::make(PyType::StorageType);
    sc->text = cls;
    int64_t numel = int64_t(saved[k].storage.nbytes() / c10::elementSize(t.scalar_type()));
    std::string location = t.device().is_cpu() ? "cpu" : t.device().str();
    if (t.device().is_cuda() && !t.device().has_index()) location = "cuda:0";
    return PyObject::tuple({PyObject::str("storage"), sc, PyObject::str(saved[k].key), PyObject::str(location), PyObject::integer_(numel)});
  };
  std::string data = pickle(root, ids);
  AtomicWriter out(path, who);
  ZipWriter zip([&](const void* p, size_t n) { out.write(p, n); });
  zip.add("archive/data.pkl", data.data(), data.size());
  zip.add("archive/byteorder", "little", 6);
  for (auto& s : saved) {
    if (s.storage.device().is_cpu()) {
      zip.add("archive/data/" + s.key, s.storage.data_ptr().get(), s.storage.nbytes());
    } else {
      at::Tensor bytes = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(s.storage.device()));
      bytes.set_(s.storage, 0, {int64_t(s.storage.nbytes())}, {1});
      at::Tensor host = bytes.cpu();
      zip.add("archive/data/" + s.key, host.data_ptr(), s.storage.nbytes());
    }
  }
  zip.add("archive/version", "3\n", 2);
  zip.finish();
  out.commit();
}

}  // namespace purple::formats
