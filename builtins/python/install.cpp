// The plugin's entry point, purple_python_install (libpurple calls it on (import (purple python))),
// and the public API of include/purple/python.hpp.
#define PURPLE_IMPLEMENTATION
#include "purple/python.hpp"
#include "builtins/python/bridge.hpp"

namespace purple {
struct PreludeSource { const char* name; const char* text; };
extern const PreludeSource kPythonPurpleSources[];
extern const std::size_t kPythonPurpleSourceCount;
namespace embed::detail {
::purple::Interp& interpOf(Impl* impl);   // api.cpp
}
}  // namespace purple

namespace purple::python {

namespace {

class Gil {
 public:
  Gil() : state_(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  PyGILState_STATE state_;
};

Interp* interpOf(embed::Interpreter& interp) { return &embed::detail::interpOf(interp.impl()); }

void install(Interp* in) {
  BridgeState* existing = bridgeState(in);
  if (existing && existing->installed) return;
  ensurePython();
  registerObjectKind();
  {
    Gil gil;
    bridgeModule();
  }
  BridgeState* st = createBridgeState(in);
  if (!existing) in->onDestroy.push_back([](Interp& i) { destroyBridgeState(&i); });
  // Purple code of this interpreter running outside any call from Python (the `purple` command,
  // a C++ host) holds the interpreter lock until it calls into Python.
  if (!st->lock.ownedByThisThread()) st->lock.holdImplicitly();
  st->installed = true;
  Registry r(*in, "python");
  registerPython(r);
  for (size_t i = 0; i < kPythonPurpleSourceCount; i++)
    in->evalString(kPythonPurpleSources[i].text, std::string("builtins/python/") + kPythonPurpleSources[i].name);
}

}  // namespace

// ---- include/purple/python.hpp -----------------------------------------------------------------

void enable(embed::Interpreter& interp) {
  Interp* in = interpOf(interp);
  if (BridgeState* st = bridgeState(in); st && st->installed) return;
  if (Py_IsInitialized() && PyGILState_Check()) {
    // Called from Python: the import runs as Purple code entered from Python, so the lock is
    // held for the call only.
    GcThread gc;
    createBridgeState(in);
    in->onDestroy.push_back([](Interp& i) { destroyBridgeState(&i); });
    InPurple enter(*in);
    interp.eval("(import (purple python))", "<python>");
    return;
  }
  interp.eval("(import (purple python))", "<embedding>");
}

void setHolder(embed::Interpreter& interp, _object* holder) {
  BridgeState& st = requireBridgeState(*interpOf(interp));
  st.anchor = holder;
}

_object* bridgeModuleReference() {
  try {
    PyObject* m = bridgeModule();
    Py_INCREF(m);
    return m;
  } catch (...) {
    setPythonErrorFromCurrent();
    return nullptr;
  }
}

_object* toPython(embed::Interpreter& interp, const embed::Value& value) {
  Interp* in = interpOf(interp);
  GcThread gc;
  try {
    return toPython(*in, ::purple::Value(value.word(), 0)).release();
  } catch (...) {
    setPythonErrorFromCurrent(in);
    return nullptr;
  }
}

bool fromPython(embed::Interpreter& interp, _object* object, embed::Value* out) {
  Interp* in = interpOf(interp);
  GcThread gc;
  try {
    ::purple::Value v = fromPython(*in, object);
    *out = embed::Value::fromWord(v.bits);
    return true;
  } catch (...) {
    setPythonErrorFromCurrent(in);
    return false;
  }
}

_object* runFromPython(embed::Interpreter& interp, const std::function<embed::Value()>& body) {
  Interp* in = interpOf(interp);
  GcThread gc;
  try {
    embed::Value result;
    {
      InPurple enter(*in);
      result = body();
    }
    return toPython(*in, ::purple::Value(result.word(), 0)).release();
  } catch (...) {
    setPythonErrorFromCurrent(in);
    return nullptr;
  }
}

}  // namespace purple::python

extern "C" PURPLE_PYTHON_API void purple_python_install(purple::Interp* in) { purple::python::install(in); }
