#include "builtins/formats/pyobject.hpp"

namespace purple::formats {

PyObject::~PyObject() {
  if (items.empty() && entries.empty()) return;
  static thread_local std::vector<PyRef>* pending = nullptr;
  std::vector<PyRef> local;
  bool outermost = pending == nullptr;
  if (outermost) pending = &local;
  for (auto& x : items) pending->push_back(std::move(x));
  for (auto& e : entries) pending->push_back(std::move(e.first)), pending->push_back(std::move(e.second));
  items.clear();
  entries.clear();
  if (!outermost) return;
  while (!local.empty()) {
    PyRef x = std::move(local.back());
    local.pop_back();
    x.reset();   // its children land in `local`
  }
  pending = nullptr;
}

std::string pyTypeName(const PyObject& o) {
  switch (o.type) {
    case PyType::None: return "NoneType";
    case PyType::Bool: return "bool";
    case PyType::Int: case PyType::Long: return "int";
    case PyType::Float: return "float";
    case PyType::Complex: return "complex";
    case PyType::Str: return "str";
    case PyType::Bytes: return "bytes";
    case PyType::List: return "list";
    case PyType::Tuple: return "tuple";
    case PyType::Dict: return "dict";
    case PyType::Set: return "set";
    case PyType::Tensor: return o.flag ? "torch.nn.Parameter" : "torch.Tensor";
    case PyType::Storage: return "torch.storage";
    case PyType::StorageType: return "torch storage class";
    case PyType::Device: return "torch.device";
    case PyType::Dtype: return "torch.dtype";
    case PyType::Size: return "torch.Size";
    case PyType::Global: return o.text;
    case PyType::Object: return o.text + " instance";
  }
  return "object";
}

namespace {
struct DtypeNames {
  at::ScalarType type;
  const char* storage;
  const char* names[3];   // torch.NAME aliases
};
const DtypeNames kDtypes[] = {
    {at::kFloat, "FloatStorage", {"float32", "float", nullptr}},
    {at::kDouble, "DoubleStorage", {"float64", "double", nullptr}},
    {at::kHalf, "HalfStorage", {"float16", "half", nullptr}},
    {at::kBFloat16, "BFloat16Storage", {"bfloat16", nullptr, nullptr}},
    {at::kLong, "LongStorage", {"int64", "long", nullptr}},
    {at::kInt, "IntStorage", {"int32", "int", nullptr}},
    {at::kShort, "ShortStorage", {"int16", "short", nullptr}},
    {at::kChar, "CharStorage", {"int8", nullptr, nullptr}},
    {at::kByte, "ByteStorage", {"uint8", nullptr, nullptr}},
    {at::kBool, "BoolStorage", {"bool", nullptr, nullptr}},
    {at::kComplexFloat, "ComplexFloatStorage", {"complex64", "cfloat", nullptr}},
    {at::kComplexDouble, "ComplexDoubleStorage", {"complex128", "cdouble", nullptr}},
    {at::kComplexHalf, "ComplexHalfStorage", {"complex32", "chalf", nullptr}},
    {at::kQInt8, "QInt8Storage", {"qint8", nullptr, nullptr}},
    {at::kQUInt8, "QUInt8Storage", {"quint8", nullptr, nullptr}},
    {at::kQInt32, "QInt32Storage", {"qint32", nullptr, nullptr}},
};
}  // namespace

const char* storageClassName(at::ScalarType t) {
  for (auto& d : kDtypes)
    if (d.type == t) return d.storage;
  return nullptr;
}

bool dtypeOfStorageClass(const std::string& name, at::ScalarType& out) {
  for (auto& d : kDtypes)
    if (name == d.storage) return out = d.type, true;
  if (name == "UntypedStorage" || name == "_UntypedStorage") return out = at::kByte, true;
  return false;
}

const char* torchDtypeName(at::ScalarType t) {
  for (auto& d : kDtypes)
    if (d.type == t) return d.names[0];
  return nullptr;
}

bool dtypeOfTorchName(const std::string& name, at::ScalarType& out) {
  for (auto& d : kDtypes)
    for (const char* n : d.names)
      if (n && name == n) return out = d.type, true;
  return false;
}

}  // namespace purple::formats
