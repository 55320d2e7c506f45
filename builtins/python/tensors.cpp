// Tensors between Purple and Python. When Python's torch runs on the LibTorch that Purple links
// (Debian's python3-torch and libtorch share libtorch_cpu.so.1.13), a tensor crosses as the same
// at::Tensor: Purple -> Python through torch's own THPVariable_Wrap (which gives back the Python
// object a TensorImpl already has, so identity survives a round trip), Python -> Purple through
// the TensorImpl pointer the Python object holds (Tensor._cdata). Same storage, same autograd
// graph, no copy. When the libraries differ (another torch on sys.path) tensors cross through
// DLPack: same memory, but autograd does not follow. PURPLE_PYTHON_TENSORS=dlpack forces that
// path (for testing it).
#include "builtins/python/bridge.hpp"
#include <ATen/DLConvertor.h>
#include <c10/core/CPUAllocator.h>
#include <dlfcn.h>
#include <cstdlib>
#include <cstring>

namespace purple::python {

namespace {

struct Torch {
  bool initialized = false;
  bool shared = false;
  PyObject* module = nullptr;        // torch
  PyObject* tensorType = nullptr;    // torch.Tensor
  PyObject* fromDlpack = nullptr;    // torch.utils.dlpack.from_dlpack
  PyObject* toDlpack = nullptr;      // torch.utils.dlpack.to_dlpack
  PyObject* (*wrapByValue)(at::TensorBase) = nullptr;          // THPVariable_Wrap, PyTorch <= 2.x
  PyObject* (*wrapByReference)(const at::TensorBase&) = nullptr;   // THPVariable_Wrap in newer ones
};
Torch gTorch;

Ref checked(PyObject* p) {
  if (!p) throwPythonError("python");
  return Ref(p);
}

// Finds torch's Python bindings in the process and decides whether tensors can be shared.
void initTorch() {
  if (gTorch.initialized) return;
  Ref torch(PyImport_ImportModule("torch"));
  if (!torch) throwPythonError("python (importing torch for a tensor)");
  Ref tensorType = checked(PyObject_GetAttrString(torch.get(), "Tensor"));
  Ref dlpack = importModule("torch.utils.dlpack");
  Ref fromDlpack = checked(PyObject_GetAttrString(dlpack.get(), "from_dlpack"));
  Ref toDlpack = checked(PyObject_GetAttrString(dlpack.get(), "to_dlpack"));
  bool shared = false;
  const char* mode = std::getenv("PURPLE_PYTHON_TENSORS");
  if (!(mode && std::strcmp(mode, "dlpack") == 0)) {
    Ref c = checked(PyObject_GetAttrString(torch.get(), "_C"));
    Ref file(PyObject_GetAttrString(c.get(), "__file__"));
    const char* path = file ? PyUnicode_AsUTF8(file.get()) : nullptr;
    PyErr_Clear();
    // dlsym on torch._C's handle searches the libraries it was loaded with: the same
    // GetCPUAllocator as ours means the same libc10, hence the same LibTorch.
    if (void* handle = path ? dlopen(path, RTLD_NOLOAD | RTLD_LAZY) : nullptr) {
      void* theirs = dlsym(handle, "_ZN3c1015GetCPUAllocatorEv");
      void* ours = reinterpret_cast<void*>(&c10::GetCPUAllocator);
      if (theirs == ours) {
        gTorch.wrapByValue = reinterpret_cast<PyObject* (*)(at::TensorBase)>(dlsym(handle, "_Z16THPVariable_WrapN2at10TensorBaseE"));
        gTorch.wrapByReference =
            reinterpret_cast<PyObject* (*)(const at::TensorBase&)>(dlsym(handle, "_Z16THPVariable_WrapRKN2at10TensorBaseE"));
        shared = gTorch.wrapByValue || gTorch.wrapByReference;
      }
      dlclose(handle);
    }
  }
  gTorch.module = torch.release();
  gTorch.tensorType = tensorType.release();
  gTorch.fromDlpack = fromDlpack.release();
  gTorch.toDlpack = toDlpack.release();
  gTorch.shared = shared;
  gTorch.initialized = true;
}

void deleteUnusedCapsule(PyObject* capsule) {
  // A capsule nobody consumed still owns its DLManagedTensor.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (t && t->deleter) t->deleter(t);
  }
  PyErr_Clear();
}

Ref capsuleOf(const at::Tensor& t) {
  DLManagedTensor* m = at::toDLPack(t);
  PyObject* capsule = PyCapsule_New(m, "dltensor", deleteUnusedCapsule);
  if (!capsule) {
    m->deleter(m);
    throwPythonError("python");
  }
  return Ref(capsule);
}

at::Tensor tensorFromCapsule(PyObject* capsule) {
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (!m) throwPythonError("python");
  at::Tensor t = at::fromDLPack(m);   // owns m from here
  PyCapsule_SetName(capsule, "used_dltensor");
  return t;
}

const char* numpyTypestr(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "<f4";
    case at::kDouble: return "<f8";
    case at::kHalf: return "<f2";
    case at::kLong: return "<i8";
    case at::kInt: return "<i4";
    case at::kShort: return "<i2";
    case at::kChar: return "|i1";
    case at::kByte: return "|u1";
    case at::kBool: return "|b1";
    case at::kComplexFloat: return "<c8";
    case at::kComplexDouble: return "<c16";
    default: throwError("tensor-error", std::string("tensor->numpy: numpy has no dtype for ") + c10::toString(t));
  }
}

}  // namespace

bool tensorsShared() {
  initTorch();
  return gTorch.shared;
}

bool isTorchTensor(PyObject* o) {
  if (!gTorch.initialized) {
    // Nothing can be a torch.Tensor before torch was imported.
    PyObject* modules = PyImport_GetModuleDict();
    if (!modules || !PyDict_GetItemString(modules, "torch")) return false;
    initTorch();
  }
  int r = PyObject_IsInstance(o, gTorch.tensorType);
  if (r < 0) throwPythonError("python");
  return r == 1;
}

at::Tensor tensorFromPython(PyObject* o) {
  initTorch();
  if (gTorch.shared) {
    Ref cdata = checked(PyObject_GetAttrString(o, "_cdata"));
    auto* impl = static_cast<c10::TensorImpl*>(PyLong_AsVoidPtr(cdata.get()));
    if (!impl) throwPythonError("python");
    return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(impl));
  }
  Ref capsule = checked(PyObject_CallOneArg(gTorch.toDlpack, o));
  return tensorFromCapsule(capsule.get());
}

Ref tensorToPython(const at::Tensor& t) {
  initTorch();
  if (gTorch.shared) {
    PyObject* r = gTorch.wrapByReference ? gTorch.wrapByReference(t) : gTorch.wrapByValue(at::TensorBase(t));
    return checked(r);
  }
  Ref capsule = capsuleOf(t);
  return checked(PyObject_CallOneArg(gTorch.fromDlpack, capsule.get()));
}

Ref numpyFromTensor(const at::Tensor& t) {
  if (!t.device().is_cpu()) throwError("tensor-error", "tensor->numpy: the tensor is on " + t.device().str() + "; move it to the CPU first");
  at::Tensor plain = t.detach();   // numpy has no autograd; the memory stays shared
  if (plain.is_conj()) plain = plain.resolve_conj();
  initTorch();
  if (gTorch.shared) {
    Ref py = tensorToPython(plain);
    return checked(PyObject_CallMethod(py.get(), "numpy", nullptr));
  }
  // numpy.from_dlpack gives read-only arrays: lend the memory through __array_interface__ instead.
  const char* typestr = numpyTypestr(plain.scalar_type());
  Ref shape = checked(PyTuple_New(plain.dim())), strides = checked(PyTuple_New(plain.dim()));
  for (int64_t d = 0; d < plain.dim(); d++) {
    PyTuple_SET_ITEM(shape.get(), d, PyLong_FromLongLong(plain.size(d)));
    PyTuple_SET_ITEM(strides.get(), d, PyLong_FromLongLong(plain.stride(d) * int64_t(plain.element_size())));
  }
  Ref data = checked(PyLong_FromVoidPtr(plain.data_ptr()));
  Ref holder = checked(PyObject_CallFunction(bridgeAttr("ArrayHolder").get(), "OOOOs", capsuleOf(plain).get(), data.get(),
                                             shape.get(), strides.get(), typestr));
  Ref numpy = importModule("numpy");
  return checked(PyObject_CallMethod(numpy.get(), "asarray", "O", holder.get()));
}

at::Tensor tensorFromNumpy(PyObject* array) {
  initTorch();
  if (gTorch.shared) {
    Ref fromNumpy = checked(PyObject_GetAttrString(gTorch.module, "from_numpy"));
    Ref t = checked(PyObject_CallOneArg(fromNumpy.get(), array));
    return tensorFromPython(t.get());
  }
  Ref capsule = checked(PyObject_CallMethod(array, "__dlpack__", nullptr));
  return tensorFromCapsule(capsule.get());
}

}  // namespace purple::python
