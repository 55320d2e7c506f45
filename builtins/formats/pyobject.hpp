// Python objects as the pickle reader builds them and the pickle writer consumes them: a small
// tree of shared nodes (a list may be referenced twice through the pickle memo, as in Python),
// with tensors as LibTorch tensors. Nothing here is a Purple value, so the reader and writer need
// no GC rooting; python_values.cpp converts to and from Purple data.
#pragma once
#include <ATen/ATen.h>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace purple::formats {

struct PyObject;
using PyRef = std::shared_ptr<PyObject>;

enum class PyType : uint8_t {
  None, Bool, Int, Long, Float, Complex, Str, Bytes,
  List, Tuple, Dict, Set,
  Tensor,        // `tensor`; `flag`: a torch.nn.Parameter
  Storage,       // `storage` of dtype `dtype` on `device` (a torch.*Storage restored by persistent id)
  StorageType,   // a torch.*Storage class: its `dtype`
  Device,        // `text`: "cpu", "cuda:0"
  Dtype,         // `dtype`
  Size,          // torch.Size: `items` are Ints
  Global,        // a class or function from the allow-list; `text` is "module.name"
  Object,        // an instance of a class outside the allow-list (unsafe mode only): `text` class,
                 // items[0] the constructor arguments, items[1] the state given by BUILD
};

struct PyObject {
  PyType type;
  bool flag = false;
  int64_t integer = 0;
  double real = 0, imag = 0;
  std::string text;       // Str: UTF-8; Bytes; Long: little-endian two's complement; Global/Object: name
  std::vector<PyRef> items;
  std::vector<std::pair<PyRef, PyRef>> entries;   // Dict, in insertion order
  at::Tensor tensor;
  c10::Storage storage;
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::Device(c10::kCPU);

  explicit PyObject(PyType t) : type(t) {}
  ~PyObject();   // iterative: a hostile pickle nesting a million lists must not overflow the stack
  static PyRef make(PyType t) { return std::make_shared<PyObject>(t); }
  static PyRef none() { return make(PyType::None); }
  static PyRef boolean(bool b) { auto o = make(PyType::Bool); o->flag = b; return o; }
  static PyRef integer_(int64_t i) { auto o = make(PyType::Int); o->integer = i; return o; }
  static PyRef floating(double d) { auto o = make(PyType::Float); o->real = d; return o; }
  static PyRef str(std::string s) { auto o = make(PyType::Str); o->text = std::move(s); return o; }
  static PyRef bytes(std::string s) { auto o = make(PyType::Bytes); o->text = std::move(s); return o; }
  static PyRef tuple(std::vector<PyRef> xs) { auto o = make(PyType::Tuple); o->items = std::move(xs); return o; }
  static PyRef list(std::vector<PyRef> xs) { auto o = make(PyType::List); o->items = std::move(xs); return o; }
  static PyRef dict() { return make(PyType::Dict); }
  static PyRef tensorOf(at::Tensor t) { auto o = make(PyType::Tensor); o->tensor = std::move(t); return o; }
  static PyRef global(std::string name) { auto o = make(PyType::Global); o->text = std::move(name); return o; }

  bool isSequence() const { return type == PyType::Tuple || type == PyType::List || type == PyType::Size; }
};

// The name Python gives an object's type, for error messages ("str", "tuple", "torch.Tensor" ...).
std::string pyTypeName(const PyObject& o);

// torch's storage class name for a dtype ("FloatStorage") and back.
const char* storageClassName(at::ScalarType t);
bool dtypeOfStorageClass(const std::string& name, at::ScalarType& out);
// torch's dtype name ("float32") and back, for torch.float32 globals.
const char* torchDtypeName(at::ScalarType t);
bool dtypeOfTorchName(const std::string& name, at::ScalarType& out);

}  // namespace purple::formats
