// The allow-list of Python globals a pickle may name, and what each does when the pickle calls
// it: torch's tensor and parameter rebuilders, storages and dtypes, torch.Size and torch.device,
// OrderedDict and the other builtin containers, and NumPy's array and scalar reconstructors. The
// same list as PyTorch's weights_only unpickler, plus NumPy data and argparse.Namespace (plain
// data too); nothing on it can run code.
#include "builtins/formats/format_error.hpp"
#include "builtins/formats/numpy.hpp"
#include "builtins/formats/unpickler.hpp"
#include <unordered_map>

namespace purple::formats {

namespace {

using Args = std::vector<PyRef>;
using Call = PyRef (*)(const Args&);

const PyObject& arg(const Args& a, size_t i, const char* who) {
  if (i >= a.size()) fail(std::string(who) + " is called with " + std::to_string(a.size()) + " arguments, too few");
  return *a[i];
}

int64_t intArg(const Args& a, size_t i, const char* who) {
  const PyObject& o = arg(a, i, who);
  if (o.type == PyType::Int) return o.integer;
  if (o.type == PyType::Bool) return o.flag;
  fail(std::string(who) + ": argument " + std::to_string(i + 1) + " must be an int, not " + pyTypeName(o));
}

std::vector<int64_t> intsArg(const Args& a, size_t i, const char* who) {
  const PyObject& o = arg(a, i, who);
  if (!o.isSequence()) fail(std::string(who) + ": argument " + std::to_string(i + 1) + " must be a tuple of ints, not " + pyTypeName(o));
  std::vector<int64_t> out;
  for (auto& x : o.items) {
    if (x->type != PyType::Int) fail(std::string(who) + ": argument " + std::to_string(i + 1) + " holds a " + pyTypeName(*x) + ", not an int");
    out.push_back(x->integer);
  }
  return out;
}

bool truthy(const PyObject& o) { return o.type == PyType::Bool ? o.flag : o.type == PyType::Int ? o.integer != 0 : o.type != PyType::None; }

PyRef makeDict(const Args& a) {
  PyRef d = PyObject::dict();
  if (a.empty()) return d;
  const PyObject& src = *a[0];
  if (src.type == PyType::Dict) {
    d->entries = src.entries;
  } else if (src.isSequence()) {
    for (auto& kv : src.items) {
      if (!kv->isSequence() || kv->items.size() != 2) fail("OrderedDict: the items must be pairs");
      d->entries.emplace_back(kv->items[0], kv->items[1]);
    }
  } else {
    fail("OrderedDict: cannot be made from a " + pyTypeName(src));
  }
  return d;
}

PyRef makeSet(const Args& a) {
  auto s = PyObject::make(PyType::Set);
  if (!a.empty()) {
    if (!a[0]->isSequence() && a[0]->type != PyType::Set) fail("set: cannot be made from a " + pyTypeName(*a[0]));
    s->items = a[0]->items;
  }
  return s;
}

// Python's str.encode('latin-1') of a UTF-8 string.
std::string latin1(const std::string& utf8) {
  std::string out;
  for (size_t i = 0; i < utf8.size();) {
    uint8_t c = uint8_t(utf8[i]);
    uint32_t cp;
    if (c < 0x80) cp = c, i += 1;
    else if ((c & 0xE0) == 0xC0 && i + 1 < utf8.size()) cp = (c & 0x1Fu) << 6 | (uint8_t(utf8[i + 1]) & 0x3Fu), i += 2;
    else fail("bytes: a character beyond Latin-1 in encoded bytes");
    if (cp > 0xFF) fail("bytes: a character beyond Latin-1 in encoded bytes");
    out += char(cp);
  }
  return out;
}

PyRef encodeBytes(const Args& a) {
  if (a.empty()) return PyObject::bytes("");
  const PyObject& s = arg(a, 0, "bytes");
  if (s.type == PyType::Bytes) return PyObject::bytes(s.text);
  if (s.type != PyType::Str) fail("bytes: cannot be made from a " + pyTypeName(s));
  std::string enc = a.size() > 1 && a[1]->type == PyType::Str ? a[1]->text : "latin1";
  if (enc == "latin1" || enc == "latin-1") return PyObject::bytes(latin1(s.text));
  if (enc == "utf-8" || enc == "utf8") return PyObject::bytes(s.text);
  fail("bytes: unknown encoding " + enc);
}

PyRef makeComplex(const Args& a) {
  auto num = [&](size_t i) {
    if (i >= a.size()) return 0.0;
    const PyObject& o = *a[i];
    if (o.type == PyType::Float) return o.real;
    if (o.type == PyType::Int) return double(o.integer);
    fail("complex: arguments must be numbers");
  };
  auto c = PyObject::make(PyType::Complex);
  c->real = num(0);
  c->imag = num(1);
  return c;
}

// ---- tensors ----

// A tensor over STORAGE, after checking that every element it can reach lies inside it (a
// corrupt or hostile file must not read past the storage, and LibTorch would grow it instead).
at::Tensor viewOfStorage(const PyObject& storage, int64_t offset, const std::vector<int64_t>& size, const std::vector<int64_t>& stride,
                         at::ScalarType dtype, const char* who) {
  if (storage.type != PyType::Storage) fail(std::string(who) + ": the first argument must be a storage, not " + pyTypeName(storage));
  if (size.size() != stride.size()) fail(std::string(who) + ": size and stride differ in length");
  int64_t elem = int64_t(c10::elementSize(dtype));
  int64_t capacity = int64_t(storage.storage.nbytes()) / elem;
  if (offset < 0) fail(std::string(who) + ": negative storage offset");
  bool empty = false;
  int64_t last = offset, span = 0;
  for (size_t i = 0; i < size.size(); i++) {
    if (size[i] < 0 || stride[i] < 0) fail(std::string(who) + ": negative size or stride");
    if (size[i] == 0) empty = true;
    else if (__builtin_mul_overflow(size[i] - 1, stride[i], &span) || __builtin_add_overflow(last, span, &last))
      fail(std::string(who) + ": size and stride overflow");
  }
  if (!empty && last >= capacity)
    fail(std::string(who) + ": the tensor reaches element " + std::to_string(last) + " of a storage of " + std::to_string(capacity) +
         " (corrupt file)");
  at::Tensor t = at::empty({0}, at::TensorOptions().dtype(dtype).device(storage.device));
  t.set_(storage.storage, offset, size, stride);
  return t;
}

void setRequiresGrad(at::Tensor& t, bool rg) {
  if (rg && (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()))) t.requires_grad_(true);
}

PyRef rebuildTensor(const Args& a) {   // (storage, offset, size, stride)
  const PyObject& s = arg(a, 0, "_rebuild_tensor");
  return PyObject::tensorOf(viewOfStorage(s, intArg(a, 1, "_rebuild_tensor"), intsArg(a, 2, "_rebuild_tensor"), intsArg(a, 3, "_rebuild_tensor"),
                                          s.dtype, "_rebuild_tensor"));
}

PyRef rebuildTensorV2(const Args& a) {   // (storage, offset, size, stride, requires_grad, hooks[, metadata])
  const char* who = "_rebuild_tensor_v2";
  const PyObject& s = arg(a, 0, who);
  at::Tensor t = viewOfStorage(s, intArg(a, 1, who), intsArg(a, 2, who), intsArg(a, 3, who), s.dtype, who);
  setRequiresGrad(t, a.size() > 4 && truthy(*a[4]));
  return PyObject::tensorOf(t);
}

PyRef rebuildTensorV3(const Args& a) {   // (storage, offset, size, stride, requires_grad, hooks, dtype[, metadata])
  const char* who = "_rebuild_tensor_v3";
  const PyObject& s = arg(a, 0, who);
  const PyObject& dt = arg(a, 6, who);
  if (dt.type != PyType::Dtype) fail(std::string(who) + ": argument 7 must be a dtype");
  at::Tensor t = viewOfStorage(s, intArg(a, 1, who), intsArg(a, 2, who), intsArg(a, 3, who), dt.dtype, who);
  setRequiresGrad(t, truthy(arg(a, 4, who)));
  return PyObject::tensorOf(t);
}

PyRef rebuildParameter(const Args& a) {   // (data, requires_grad, hooks[, state])
  const PyObject& d = arg(a, 0, "_rebuild_parameter");
  if (d.type != PyType::Tensor) fail("_rebuild_parameter: the data must be a tensor, not " + pyTypeName(d));
  at::Tensor t = d.tensor.detach();
  setRequiresGrad(t, a.size() > 1 && truthy(*a[1]));
  auto p = PyObject::tensorOf(t);
  p->flag = true;
  return p;
}

PyRef rebuildFromType(const Args& a) {   // (func, type, args, state): func(*args), then the type
  const PyObject& f = arg(a, 0, "_rebuild_from_type_v2");
  const PyObject& args = arg(a, 2, "_rebuild_from_type_v2");
  if (f.type != PyType::Global || f.flag) fail("_rebuild_from_type_v2: cannot call " + pyTypeName(f));
  if (!args.isSequence()) fail("_rebuild_from_type_v2: the arguments must be a tuple");
  PyRef r = callGlobal(f, args.items);
  const PyObject& type = arg(a, 1, "_rebuild_from_type_v2");
  if (r->type == PyType::Tensor && type.type == PyType::Global && type.text == "torch.nn.parameter.Parameter") r->flag = true;
  return r;
}

PyRef rebuildSparse(const Args& a) {   // (layout, (indices, values, size[, coalesced]))
  const PyObject& layout = arg(a, 0, "_rebuild_sparse_tensor");
  const PyObject& data = arg(a, 1, "_rebuild_sparse_tensor");
  if (layout.type != PyType::Str || layout.text != "sparse_coo")
    fail("_rebuild_sparse_tensor: only sparse COO tensors are supported, not " + (layout.type == PyType::Str ? layout.text : pyTypeName(layout)));
  if (!data.isSequence() || data.items.size() < 3 || data.items[0]->type != PyType::Tensor || data.items[1]->type != PyType::Tensor)
    fail("_rebuild_sparse_tensor: malformed COO data");
  std::vector<int64_t> size = intsArg(data.items, 2, "_rebuild_sparse_tensor");
  at::Tensor t = at::sparse_coo_tensor(data.items[0]->tensor, data.items[1]->tensor, size);
  if (data.items.size() > 3 && truthy(*data.items[3])) t = t.coalesce();
  return PyObject::tensorOf(t);
}

PyRef rebuildMeta(const Args& a) {   // (dtype, size, stride, requires_grad)
  const PyObject& dt = arg(a, 0, "_rebuild_meta_tensor_no_storage");
  if (dt.type != PyType::Dtype) fail("_rebuild_meta_tensor_no_storage: argument 1 must be a dtype");
  at::Tensor t = at::empty_strided(intsArg(a, 1, "meta tensor"), intsArg(a, 2, "meta tensor"), at::TensorOptions().dtype(dt.dtype).device(c10::kMeta));
  return PyObject::tensorOf(t);
}

PyRef unsupportedQuantized(const Args&) { fail("quantized tensors are not supported (dequantize them in Python before saving)"); }
PyRef unsupportedNested(const Args&) { fail("nested tensors are not supported"); }
PyRef unsupportedSubclass(const Args&) { fail("tensor subclasses (wrapper subclasses) are not supported"); }

PyRef makeSize(const Args& a) {
  auto s = PyObject::make(PyType::Size);
  if (!a.empty()) {
    intsArg(a, 0, "torch.Size");   // checks that they are ints
    s->items = a[0]->items;
  }
  return s;
}

PyRef makeDevice(const Args& a) {
  const PyObject& t = arg(a, 0, "torch.device");
  if (t.type != PyType::Str) fail("torch.device: the type must be a string");
  std::string s = t.text;
  if (a.size() > 1 && a[1]->type == PyType::Int) s += ":" + std::to_string(a[1]->integer);
  try {
    c10::Device d(s);
    auto o = PyObject::make(PyType::Device);
    o->device = d;
    o->text = s;
    return o;
  } catch (const c10::Error&) {
    fail("torch.device: unknown device " + s);
  }
}

PyRef getLayout(const Args& a) {   // torch.serialization._get_layout("torch.strided")
  const PyObject& n = arg(a, 0, "_get_layout");
  if (n.type != PyType::Str) fail("_get_layout: the name must be a string");
  std::string s = n.text.rfind("torch.", 0) == 0 ? n.text.substr(6) : n.text;
  return PyObject::str(s);
}

PyRef makeNamespace(const Args&) {
  PyRef d = PyObject::dict();
  d->integer = 1;   // BUILD's state is the content
  return d;
}

// ---- NumPy ----

PyRef numpyReconstruct(const Args&) {   // (ndarray, (0,), b'b'): an empty array, filled by BUILD
  auto o = PyObject::make(PyType::Object);
  o->text = "numpy.ndarray";
  return o;
}

PyRef numpyDtype(const Args& a) {   // ('f8', align, copy); BUILD gives the byte order
  const PyObject& d = arg(a, 0, "numpy.dtype");
  if (d.type != PyType::Str) fail("numpy.dtype: the descriptor must be a string");
  auto o = PyObject::make(PyType::Object);
  o->text = "numpy.dtype";
  o->items = {PyObject::str(d.text), PyObject::str("=")};
  return o;
}

void numpyDtypeOf(const PyObject& d, at::ScalarType& t, bool& big, bool& wideUnsigned) {
  if (d.type != PyType::Object || d.text != "numpy.dtype") fail("numpy: expected a dtype, got " + pyTypeName(d));
  std::string order = d.items[1]->text, descr = d.items[0]->text;
  if (!numpyDescrToDtype((order == "=" || order == "|" ? "" : order) + descr, t, big, wideUnsigned))
    fail("numpy: dtype " + descr + " has no tensor equivalent");
}

void numpyArrayBuild(PyObject& arr, const PyObject& state) {   // (version, shape, dtype, fortran, data)
  if (!state.isSequence() || state.items.size() < 5) fail("numpy.ndarray: malformed state");
  std::vector<int64_t> shape = intsArg(state.items, 1, "numpy.ndarray");
  at::ScalarType t;
  bool big, wide;
  numpyDtypeOf(*state.items[2], t, big, wide);
  const PyObject& raw = *state.items[4];
  if (raw.type != PyType::Bytes && raw.type != PyType::Str) fail("numpy.ndarray: object arrays are not supported");
  arr.type = PyType::Tensor;
  arr.tensor = tensorFromNumpyBytes(raw.text, shape, t, truthy(*state.items[3]), big, wide);
  arr.items.clear();
}

PyRef numpyScalar(const Args& a) {   // (dtype, bytes)
  at::ScalarType t;
  bool big, wide;
  numpyDtypeOf(arg(a, 0, "numpy scalar"), t, big, wide);
  const PyObject& raw = arg(a, 1, "numpy scalar");
  if (raw.type != PyType::Bytes && raw.type != PyType::Str) fail("numpy scalar: malformed data");
  at::Tensor x = tensorFromNumpyBytes(raw.text, {}, t, false, big, wide);
  if (at::isComplexType(t)) {
    auto c = PyObject::make(PyType::Complex);
    auto v = x.item<c10::complex<double>>();
    c->real = v.real(), c->imag = v.imag();
    return c;
  }
  if (t == at::kBool) return PyObject::boolean(x.item<bool>());
  if (at::isFloatingType(t)) return PyObject::floating(x.item<double>());
  return PyObject::integer_(x.item<int64_t>());
}

const std::unordered_map<std::string, Call>& callables() {
  static const std::unordered_map<std::string, Call> table = {
      {"collections.OrderedDict", makeDict},
      {"collections.Counter", makeDict},
      {"builtins.dict", makeDict},
      {"builtins.set", makeSet},
      {"builtins.frozenset", makeSet},
      {"builtins.bytearray", encodeBytes},
      {"builtins.bytes", encodeBytes},
      {"_codecs.encode", encodeBytes},
      {"builtins.complex", makeComplex},
      {"argparse.Namespace", makeNamespace},
      {"torch._utils._rebuild_tensor", rebuildTensor},
      {"torch._utils._rebuild_tensor_v2", rebuildTensorV2},
      {"torch._utils._rebuild_tensor_v3", rebuildTensorV3},
      {"torch._utils._rebuild_parameter", rebuildParameter},
      {"torch._utils._rebuild_parameter_with_state", rebuildParameter},
      {"torch._utils._rebuild_sparse_tensor", rebuildSparse},
      {"torch._utils._rebuild_meta_tensor_no_storage", rebuildMeta},
      {"torch._utils._rebuild_qtensor", unsupportedQuantized},
      {"torch._utils._rebuild_nested_tensor", unsupportedNested},
      {"torch._utils._rebuild_wrapper_subclass", unsupportedSubclass},
      {"torch._tensor._rebuild_from_type_v2", rebuildFromType},
      {"torch._tensor._rebuild_from_type", rebuildFromType},
      {"torch.Size", makeSize},
      {"torch.device", makeDevice},
      {"torch.serialization._get_layout", getLayout},
      {"torch.Tensor", nullptr},
      {"torch.nn.parameter.Parameter", nullptr},
      {"numpy.ndarray", nullptr},
      {"numpy.core.multiarray._reconstruct", numpyReconstruct},
      {"numpy._core.multiarray._reconstruct", numpyReconstruct},
      {"numpy.dtype", numpyDtype},
      {"numpy.core.multiarray.scalar", numpyScalar},
      {"numpy._core.multiarray.scalar", numpyScalar},
  };
  return table;
}

}  // namespace

PyRef lookupGlobal(const std::string& module, const std::string& name) {
  if (module == "torch" || module == "torch.storage") {
    at::ScalarType t;
    if (module == "torch" && dtypeOfTorchName(name, t)) {
      auto o = PyObject::make(PyType::Dtype);
      o->dtype = t;
      return o;
    }
    if (dtypeOfStorageClass(name, t)) {
      auto o = PyObject::make(PyType::StorageType);
      o->dtype = t;
      o->text = name;
      return o;
    }
    if (module == "torch" && (name == "strided" || name == "sparse_coo")) return PyObject::str(name);
  }
  std::string full = module + "." + name;
  if (callables().count(full)) return PyObject::global(full);
  return nullptr;
}

PyRef callGlobal(const PyObject& callable, const std::vector<PyRef>& args) {
  auto it = callables().find(callable.text);
  if (it == callables().end() || !it->second) fail(callable.text + " cannot be called in a pickle");
  return it->second(args);
}

void buildObject(PyObject& obj, const PyRef& state) {
  switch (obj.type) {
    case PyType::Dict:
      if (obj.integer == 1 && state->type == PyType::Dict) obj.entries = state->entries;   // argparse.Namespace
      return;   // OrderedDict attributes such as _metadata
    case PyType::Tensor: return;   // Python attributes of a tensor
    case PyType::Object:
      if (obj.text == "numpy.ndarray") return numpyArrayBuild(obj, *state);
      if (obj.text == "numpy.dtype") {
        if (state->isSequence() && state->items.size() > 1 && state->items[1]->type == PyType::Str) obj.items[1] = state->items[1];
        return;
      }
      if (obj.items.size() < 2) obj.items.resize(2);
      obj.items[1] = state;
      return;
    default: fail("BUILD gives state to a " + pyTypeName(obj));
  }
}

}  // namespace purple::formats
