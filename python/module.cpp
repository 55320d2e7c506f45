// purple._purple: the extension module behind `import purple`. A client of the public API only
// (purple/purple.hpp for the interpreter, purple/python.hpp for the bridge): it defines the
// Interpreter type; conversions, purple.Value / purple.Procedure and errors come from the bridge.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include <purple/python.hpp>

#include <string>
#include <vector>

namespace {

struct InterpreterObject {
  PyObject_HEAD
  purple::Interpreter* interp;
  PyObject* weakrefs;
};

// Sets the Python exception for the purple::Error (or other C++ exception) being handled.
void setError() {
  try {
    throw;
  } catch (const purple::Error& e) {
    PyObject* bridge = purple::python::bridgeModuleReference();
    PyObject* cls = bridge ? PyObject_GetAttrString(bridge, "Error") : nullptr;
    Py_XDECREF(bridge);
    if (!cls) return;
    PyObject* err = PyObject_CallFunction(cls, "ss[]()Os", e.kind().c_str(), e.message().c_str(), Py_None, e.report().c_str());
    if (err) PyErr_SetObject(cls, err);
    Py_XDECREF(err);
    Py_DECREF(cls);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

purple::Interpreter* live(PyObject* self) {
  auto* o = reinterpret_cast<InterpreterObject*>(self);
  if (!o->interp) PyErr_SetString(PyExc_RuntimeError, "the Purple interpreter was closed");
  return o->interp;
}

int interpreterInit(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"sandbox", "max_steps", "max_seconds", "max_tensor_bytes", "library_path", "argv", nullptr};
  int sandbox = 0;
  long long maxSteps = 0, maxTensorBytes = 0;
  double maxSeconds = 0;
  PyObject* libraryPath = nullptr;
  PyObject* argv = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$pLdLOO", const_cast<char**>(keywords), &sandbox, &maxSteps,
                                   &maxSeconds, &maxTensorBytes, &libraryPath, &argv))
    return -1;
  auto* o = reinterpret_cast<InterpreterObject*>(self);
  if (o->interp) {
    PyErr_SetString(PyExc_RuntimeError, "Interpreter.__init__ called twice");
    return -1;
  }
  purple::Options options;
  if (sandbox) options.limits = purple::Limits::sandbox();
  options.limits.maxSteps = maxSteps;
  options.limits.maxSeconds = maxSeconds;
  options.limits.maxTensorBytes = maxTensorBytes;
  for (PyObject* list : {libraryPath, argv}) {
    if (!list || list == Py_None) continue;
    PyObject* seq = PySequence_Fast(list, "library_path and argv are lists of strings");
    if (!seq) return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
      const char* s = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
      if (!s) {
        Py_DECREF(seq);
        return -1;
      }
      (list == libraryPath ? options.libraryPath : options.commandLine).push_back(s);
    }
    Py_DECREF(seq);
  }
  try {
    purple::Interpreter* interp = nullptr;
    Py_BEGIN_ALLOW_THREADS
    try {
      interp = new purple::Interpreter(std::move(options));
    } catch (...) {
    }
    Py_END_ALLOW_THREADS
    if (!interp) {
      PyErr_SetString(PyExc_RuntimeError, "could not create a Purple interpreter");
      return -1;
    }
    o->interp = interp;
    purple::python::enable(*interp);
    purple::python::setHolder(*interp, self);
  } catch (...) {
    if (!PyErr_Occurred()) setError();
    return -1;
  }
  return 0;
}

void interpreterDealloc(PyObject* self) {
  auto* o = reinterpret_cast<InterpreterObject*>(self);
  if (o->weakrefs) PyObject_ClearWeakRefs(self);
  delete o->interp;   // its values held by Python are released; procedures stop working
  o->interp = nullptr;
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

// Runs `f` on the interpreter as Purple code entered from Python.
template <class F> PyObject* run(PyObject* self, F f) {
  purple::Interpreter* interp = live(self);
  if (!interp) return nullptr;
  return purple::python::runFromPython(*interp, [&]() -> purple::Value { return f(*interp); });
}

PyObject* interpreterEval(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"code", "source", nullptr};
  const char* code = nullptr;
  Py_ssize_t n = 0;
  const char* source = "<python>";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#|s", const_cast<char**>(keywords), &code, &n, &source)) return nullptr;
  std::string text(code, size_t(n)), name(source);
  return run(self, [&](purple::Interpreter& in) { return in.eval(text, name); });
}

PyObject* interpreterLoad(PyObject* self, PyObject* arg) {
  PyObject* bytes = nullptr;
  if (!PyUnicode_FSConverter(arg, &bytes)) return nullptr;
  std::string path(PyBytes_AS_STRING(bytes));
  Py_DECREF(bytes);
  return run(self, [&](purple::Interpreter& in) { return in.load(path); });
}

PyObject* interpreterGet(PyObject* self, PyObject* arg) {
  const char* name = PyUnicode_AsUTF8(arg);
  if (!name) return nullptr;
  std::string n(name);
  return run(self, [&](purple::Interpreter& in) { return in.get(n); });
}

PyObject* interpreterHas(PyObject* self, PyObject* arg) {
  const char* name = PyUnicode_AsUTF8(arg);
  if (!name) return nullptr;
  std::string n(name);
  return run(self, [&](purple::Interpreter& in) { return purple::Value::boolean(in.has(n)); });
}

PyObject* interpreterDefine(PyObject* self, PyObject* args) {
  const char* name = nullptr;
  PyObject* value = nullptr;
  if (!PyArg_ParseTuple(args, "sO", &name, &value)) return nullptr;
  purple::Interpreter* interp = live(self);
  if (!interp) return nullptr;
  purple::Value v;
  if (!purple::python::fromPython(*interp, value, &v)) return nullptr;
  std::string n(name);
  PyObject* r = run(self, [&](purple::Interpreter& in) {
    in.setValue(n, v);
    return purple::Value();
  });
  return r;
}

PyObject* interpreterInterrupt(PyObject* self, PyObject*) {
  purple::Interpreter* interp = live(self);
  if (!interp) return nullptr;
  interp->interrupt();
  Py_RETURN_NONE;
}

PyMethodDef gInterpreterMethods[] = {
    {"eval", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(interpreterEval)), METH_VARARGS | METH_KEYWORDS,
     "eval(code, source='<python>'): evaluates the Purple forms in CODE and returns the last value, converted."},
    {"load", interpreterLoad, METH_O, "load(path): evaluates the Purple file at PATH; returns its last value."},
    {"get", interpreterGet, METH_O, "get(name): the value of the Purple global NAME, converted (purple.Error if unbound)."},
    {"has", interpreterHas, METH_O, "has(name): True if the Purple global NAME is bound."},
    {"define", interpreterDefine, METH_VARARGS,
     "define(name, value): binds the Purple global NAME to VALUE, converted (a Python callable stays callable)."},
    {"interrupt", interpreterInterrupt, METH_NOARGS,
     "interrupt(): stops the Purple evaluation running (from another thread) with an interrupt error."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef gInterpreterMembers[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(InterpreterObject, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot gInterpreterSlots[] = {
    {Py_tp_init, reinterpret_cast<void*>(interpreterInit)},
    {Py_tp_dealloc, reinterpret_cast<void*>(interpreterDealloc)},
    {Py_tp_methods, gInterpreterMethods},
    {Py_tp_members, gInterpreterMembers},
    {Py_tp_doc, const_cast<char*>("A Purple interpreter.")},
    {0, nullptr},
};
PyType_Spec gInterpreterSpec = {"purple._purple.Interpreter", sizeof(InterpreterObject), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, gInterpreterSlots};

PyModuleDef gModuleDef = {PyModuleDef_HEAD_INIT, "purple._purple", "Purple, an embeddable Lisp with tensors.", -1,
                          nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__purple() {
  PyObject* m = PyModule_Create(&gModuleDef);
  if (!m) return nullptr;
  PyObject* type = PyType_FromSpec(&gInterpreterSpec);
  PyObject* bridge = type ? purple::python::bridgeModuleReference() : nullptr;
  if (!type || !bridge || PyModule_AddObject(m, "Interpreter", type) < 0 || PyModule_AddObject(m, "bridge", bridge) < 0) {
    Py_XDECREF(type);
    Py_XDECREF(bridge);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
