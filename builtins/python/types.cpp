// The Python types of the bridge, in the module _purple_bridge:
//   purple.Value      a Purple value held by Python (an uncollectable GC cell); repr is Purple's
//                     `write`, == is equal?, _global(name) is a global of its interpreter
//   purple.Procedure  a Purple procedure (or module) as a Python callable: positional arguments
//                     and keyword arguments (which become Purple keywords, _ as -)
//   _Owner            one per interpreter that values came from: knows whether the interpreter
//                     still exists and keeps its Python holder (the front end's Interpreter)
//                     alive while values from it live.
// The rest of the module (Symbol, Error, the torch adapters) is Python: bridge.py.
#include "builtins/python/bridge.hpp"
#include "interp/language/equality.hpp"
#include "interp/core/gc.hpp"
#include "interp/language/printer.hpp"
#include <structmember.h>

namespace purple {
struct PreludeSource { const char* name; const char* text; };
extern const PreludeSource kPythonBridgeSources[];
extern const std::size_t kPythonBridgeSourceCount;
}  // namespace purple

namespace purple::python {

namespace {

struct ValueObject;

struct OwnerObject {
  PyObject_HEAD
  Interp* interp;          // nullptr once the interpreter is destroyed
  BridgeState* state;
  PyObject* anchor;        // strong, or nullptr
  ValueObject* first;      // the values that hold this owner
};

struct ValueObject {
  PyObject_HEAD
  Value* cell;             // uncollectable: the collector sees the value
  OwnerObject* owner;      // strong
  ValueObject* prev;
  ValueObject* next;
  PyObject* weakrefs;
};

PyTypeObject* gOwnerType = nullptr;
PyTypeObject* gValueType = nullptr;
PyTypeObject* gProcedureType = nullptr;

// ---- _Owner -------------------------------------------------------------------------------

int ownerTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<OwnerObject*>(self)->anchor);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int ownerClear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<OwnerObject*>(self)->anchor);
  return 0;
}

void ownerDealloc(PyObject* self) {
  auto* o = reinterpret_cast<OwnerObject*>(self);
  PyObject_GC_UnTrack(self);
  if (o->state && o->state->owner == self) o->state->owner = nullptr;
  Py_CLEAR(o->anchor);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyType_Slot gOwnerSlots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(ownerTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(ownerClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(ownerDealloc)},
    {0, nullptr},
};
PyType_Spec gOwnerSpec = {"_purple_bridge._Owner", sizeof(OwnerObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, gOwnerSlots};

OwnerObject* ownerFor(BridgeState& st) {
  if (st.owner) {
    Py_INCREF(st.owner);
    return reinterpret_cast<OwnerObject*>(st.owner);
  }
  auto* o = PyObject_GC_New(OwnerObject, gOwnerType);
  if (!o) throwPythonError("python");
  o->interp = st.interp;
  o->state = &st;
  o->anchor = st.anchor;
  Py_XINCREF(o->anchor);
  o->first = nullptr;
  PyObject_GC_Track(reinterpret_cast<PyObject*>(o));
  st.owner = reinterpret_cast<PyObject*>(o);
  return o;
}

// ---- purple.Value ---------------------------------------------------------------------------

Interp* interpOf(ValueObject* v) { return v->owner ? v->owner->interp : nullptr; }

void unlink(ValueObject* v) {
  if (!v->owner) return;
  if (v->prev) v->prev->next = v->next;
  else v->owner->first = v->next;
  if (v->next) v->next->prev = v->prev;
  v->prev = v->next = nullptr;
}

int valueTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<PyObject*>(reinterpret_cast<ValueObject*>(self)->owner));
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int valueClear(PyObject* self) {
  auto* v = reinterpret_cast<ValueObject*>(self);
  unlink(v);
  PyObject* owner = reinterpret_cast<PyObject*>(v->owner);
  v->owner = nullptr;
  Py_XDECREF(owner);
  return 0;
}

void valueDealloc(PyObject* self) {
  auto* v = reinterpret_cast<ValueObject*>(self);
  PyObject_GC_UnTrack(self);
  if (v->weakrefs) PyObject_ClearWeakRefs(self);
  valueClear(self);
  if (v->cell) {
    *v->cell = Value::unspecified();
    gcFreeRoot(v->cell);
    v->cell = nullptr;
  }
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

// Runs a Purple printer on the value with the thread registered; errors become Python ones.
template <class F> PyObject* printed(ValueObject* v, F print) {
  GcThread gc;
  try {
    std::string s = print(*v->cell);
    return PyUnicode_FromStringAndSize(s.data(), Py_ssize_t(s.size()));
  } catch (...) {
    setPythonErrorFromCurrent();
    return nullptr;
  }
}

PyObject* valueRepr(PyObject* self) {
  auto* v = reinterpret_cast<ValueObject*>(self);
  const char* kind = Py_TYPE(self) == gProcedureType ? "purple.Procedure" : "purple.Value";
  return printed(v, [&](Value x) { return "<" + std::string(kind) + " " + toWriteString(x) + ">"; });
}

PyObject* valueStr(PyObject* self) {
  return printed(reinterpret_cast<ValueObject*>(self), [](Value x) { return toDisplayString(x); });
}

PyObject* valueRichCompare(PyObject* self, PyObject* other, int op) {
  Value a = *reinterpret_cast<ValueObject*>(self)->cell, b;
  if ((op != Py_EQ && op != Py_NE) || !unwrapPurpleValue(other, &b)) Py_RETURN_NOTIMPLEMENTED;
  bool same = equalValues(a, b);
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

// value._global(name): the global NAME of the value's interpreter, converted.
PyObject* valueGlobal(PyObject* self, PyObject* arg) {
  auto* v = reinterpret_cast<ValueObject*>(self);
  Interp* in = interpOf(v);
  if (!in) {
    PyErr_SetString(PyExc_RuntimeError, "the Purple interpreter of this value no longer exists");
    return nullptr;
  }
  const char* name = PyUnicode_AsUTF8(arg);
  if (!name) return nullptr;
  GcThread gc;
  try {
    Value g = in->lookupGlobal(name);
    if (g.isUnbound()) {
      PyErr_Format(PyExc_NameError, "Purple has no global named %s", name);
      return nullptr;
    }
    return toPython(*in, g).release();
  } catch (...) {
    setPythonErrorFromCurrent();
    return nullptr;
  }
}

PyMethodDef gValueMethods[] = {
    {"_global", valueGlobal, METH_O, "The global NAME of this value's Purple interpreter."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef gValueMembers[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(ValueObject, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot gValueSlots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(valueTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(valueClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(valueDealloc)},
    {Py_tp_repr, reinterpret_cast<void*>(valueRepr)},
    {Py_tp_str, reinterpret_cast<void*>(valueStr)},
    {Py_tp_richcompare, reinterpret_cast<void*>(valueRichCompare)},
    {Py_tp_hash, reinterpret_cast<void*>(PyObject_HashNotImplemented)},
    {Py_tp_methods, gValueMethods},
    {Py_tp_members, gValueMembers},
    {Py_tp_doc, const_cast<char*>("A Purple value held by Python (printed as Purple writes it; == is Purple's equal?).")},
    {0, nullptr},
};
PyType_Spec gValueSpec = {"purple.Value", sizeof(ValueObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE, gValueSlots};

// ---- purple.Procedure -----------------------------------------------------------------------

PyObject* procedureCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* v = reinterpret_cast<ValueObject*>(self);
  Interp* in = interpOf(v);
  if (!in) {
    PyErr_SetString(PyExc_RuntimeError, "the Purple interpreter of this procedure no longer exists");
    return nullptr;
  }
  GcThread gc;
  try {
    Py_ssize_t npos = PyTuple_GET_SIZE(args);
    Py_ssize_t nkw = kwargs ? PyDict_Size(kwargs) : 0;
    size_t n = size_t(npos + 2 * nkw);
    Value inlineArgs[8];
    // Scanned either way: the stack, or a GC vector the stack points at.
    Value vec = n > 8 ? makeVector(n, Value::f()) : Value::f();
    Value* argv = n > 8 ? vec.as<Vector>()->items : inlineArgs;
    for (Py_ssize_t i = 0; i < npos; i++) argv[i] = fromPython(*in, PyTuple_GET_ITEM(args, i));
    if (nkw) {
      Py_ssize_t pos = 0, k = npos;
      PyObject *key, *value;
      while (PyDict_Next(kwargs, &pos, &key, &value)) {
        const char* name = PyUnicode_AsUTF8(key);
        if (!name) throwPythonError("purple");
        std::string kw(name);
        for (char& c : kw)
          if (c == '_') c = '-';
        argv[k++] = internKeyword(kw);
        argv[k++] = fromPython(*in, value);
      }
    }
    Value proc = *v->cell;
    Value result;
    {
      InPurple enter(*in);
      result = in->apply(proc, argv, int(n));
    }
    return toPython(*in, result).release();
  } catch (...) {
    setPythonErrorFromCurrent(in);
    return nullptr;
  }
}

PyType_Slot gProcedureSlots[] = {
    {Py_tp_call, reinterpret_cast<void*>(procedureCall)},
    {Py_tp_traverse, reinterpret_cast<void*>(valueTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(valueClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(valueDealloc)},
    {Py_tp_doc, const_cast<char*>("A Purple procedure as a Python callable; keyword arguments become Purple keywords (_ as -).")},
    {0, nullptr},
};
PyType_Spec gProcedureSpec = {"purple.Procedure", sizeof(ValueObject), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, gProcedureSlots};

PyModuleDef gBridgeDef = {PyModuleDef_HEAD_INIT, "_purple_bridge", "Purple's Python bridge.", -1,
                          nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyObject* createBridgeModule() {
  Ref module(PyModule_Create(&gBridgeDef));
  if (!module) return nullptr;
  gOwnerType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&gOwnerSpec));
  gValueType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&gValueSpec));
  if (!gOwnerType || !gValueType) return nullptr;
  Ref bases(PyTuple_Pack(1, reinterpret_cast<PyObject*>(gValueType)));
  gProcedureType = reinterpret_cast<PyTypeObject*>(PyType_FromSpecWithBases(&gProcedureSpec, bases.get()));
  if (!gProcedureType) return nullptr;
  PyModule_AddObjectRef(module.get(), "_Owner", reinterpret_cast<PyObject*>(gOwnerType));
  PyModule_AddObjectRef(module.get(), "Value", reinterpret_cast<PyObject*>(gValueType));
  PyModule_AddObjectRef(module.get(), "Procedure", reinterpret_cast<PyObject*>(gProcedureType));
  PyObject* modules = PyImport_GetModuleDict();
  if (PyDict_SetItemString(modules, "_purple_bridge", module.get()) < 0) return nullptr;
  // The Python half (bridge.py), run in the module's namespace.
  PyObject* dict = PyModule_GetDict(module.get());
  if (PyDict_GetItemString(dict, "__builtins__") == nullptr) PyDict_SetItemString(dict, "__builtins__", PyEval_GetBuiltins());
  for (size_t i = 0; i < kPythonBridgeSourceCount; i++) {
    Ref code(Py_CompileString(kPythonBridgeSources[i].text, (std::string("builtins/python/") + kPythonBridgeSources[i].name).c_str(),
                              Py_file_input));
    if (!code) return nullptr;
    Ref r(PyEval_EvalCode(code.get(), dict, dict));
    if (!r) return nullptr;
  }
  return module.release();
}

Ref wrapPurpleValue(Interp& in, Value v) {
  BridgeState& st = requireBridgeState(in);
  Ref owner(reinterpret_cast<PyObject*>(ownerFor(st)));
  PyTypeObject* type = isProcedure(v) ? gProcedureType : gValueType;
  auto* o = PyObject_GC_New(ValueObject, type);
  if (!o) throwPythonError("python");
  o->cell = nullptr;
  o->owner = nullptr;
  o->prev = o->next = nullptr;
  o->weakrefs = nullptr;
  Ref result(reinterpret_cast<PyObject*>(o));
  o->cell = static_cast<Value*>(gcAllocRoot(sizeof(Value)));
  *o->cell = v;
  auto* ow = reinterpret_cast<OwnerObject*>(owner.release());
  o->owner = ow;
  o->next = ow->first;
  if (ow->first) ow->first->prev = o;
  ow->first = o;
  PyObject_GC_Track(result.get());
  return result;
}

bool unwrapPurpleValue(PyObject* o, Value* out) {
  if (!gValueType || !PyObject_TypeCheck(o, gValueType)) return false;
  auto* v = reinterpret_cast<ValueObject*>(o);
  *out = v->cell ? *v->cell : Value::unspecified();
  return true;
}

void interpreterDestroyed(BridgeState& st) {
  auto* o = reinterpret_cast<OwnerObject*>(st.owner);
  if (!o) return;
  // Values of a dead interpreter cannot be used (procedures cannot run); what they held is
  // released now, so it does not outlive the interpreter.
  for (ValueObject* v = o->first; v; v = v->next)
    if (v->cell) *v->cell = Value::unspecified();
  o->interp = nullptr;
  o->state = nullptr;
  st.owner = nullptr;
}

}  // namespace purple::python
