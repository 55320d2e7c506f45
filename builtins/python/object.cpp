// py-object: a Python object held by Purple. A Foreign cell owning one reference, dropped by its
// finalizer under the GIL; it prints with the object's repr, and applying it calls it.
// Foreign::small is 1 for a raw handle (its results stay Python objects).
#include "builtins/python/bridge.hpp"
#include "interp/core/error.hpp"
#include "interp/core/gc.hpp"
#include "interp/language/printer.hpp"

namespace purple::python {

namespace {

void destroyObject(void* p) {
  // After Python's finalization began the object belongs to the dying interpreter.
  if (!pythonAlive()) return;
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF(static_cast<PyObject*>(p));
  PyGILState_Release(g);
}

Value* gTypeName = nullptr;   // the symbol py-object, in a root

void printObject(std::string& out, Value v, bool) {
  auto* o = static_cast<PyObject*>(v.as<Foreign>()->ptr);
  if (!o) {
    out += "#<py released>";
    return;
  }
  if (!pythonAlive()) {
    out += "#<py object>";
    return;
  }
  std::string text;
  PyGILState_STATE g = PyGILState_Ensure();
  {
    // The repr string is dropped inside this block, while the GIL is still held: a Ref that
    // outlives PyGILState_Release decrefs without the GIL (a crash on Python 3.13).
    Ref r(PyObject_Repr(o));
    if (r) {
      Py_ssize_t n = 0;
      const char* s = PyUnicode_AsUTF8AndSize(r.get(), &n);
      if (s) text.assign(s, size_t(n));
    }
    if (PyErr_Occurred()) {
      PyErr_Clear();
      text = std::string(Py_TYPE(o)->tp_name) + " (repr failed)";
    }
  }
  PyGILState_Release(g);
  out += "#<py ";
  out += text;
  out += '>';
}

Value (*gPreviousApplyHook)(Interp&, Value, const Value*, int) = nullptr;

Value applyObject(Interp& in, Value fn, const Value* argv, int argc) {
  if (isPyObject(fn)) {
    InPython py(in);
    return callPython(in, objectOf(fn), argv, argc, fn, "py-call");
  }
  if (gPreviousApplyHook) return gPreviousApplyHook(in, fn, argv, argc);
  throwError("type-error", "attempt to call a non-procedure:", listFromArray(&fn, 1));
}

}  // namespace

void registerObjectKind() {
  static std::once_flag once;
  std::call_once(once, [] {
    gTypeName = static_cast<Value*>(gcAllocRoot(sizeof(Value)));
    *gTypeName = intern("py-object");
    setForeignPrinter(&destroyObject, &printObject);
    gPreviousApplyHook = Interp::extensionApplyHook;
    Interp::extensionApplyHook = &applyObject;
  });
}

Value wrapObject(PyObject* owned, bool raw) {
  Ref guard(owned);   // dropped if the cell cannot be made
  Value v = makeForeign(owned, &destroyObject, *gTypeName);
  guard.release();
  if (PyCallable_Check(owned)) v.obj()->flags |= kForeignCallable;
  if (raw) v.obj()->small = 1;
  return v;
}

bool isPyObject(Value v) { return v.is(Kind::Foreign) && v.as<Foreign>()->destroy == &destroyObject; }

bool isRawObject(Value v) { return isPyObject(v) && v.obj()->small == 1; }

PyObject* objectOf(Value v) {
  if (!isPyObject(v)) return nullptr;
  return static_cast<PyObject*>(v.as<Foreign>()->ptr);
}

}  // namespace purple::python
