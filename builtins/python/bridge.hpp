// The Python bridge's internal interface: (purple python) and the `purple` Python module.
//
// Threads and locks. Two interpreters share each thread that crosses between them, and each has
// a lock: CPython's GIL, and a lock per Purple interpreter (InterpLock). A thread holds at most
// one of them while it may wait for the other: going from Purple into Python (InPython) it
// lets go of the Purple lock and then takes the GIL; going from Python into Purple (InPurple) it
// releases the GIL and then takes the Purple lock. So the GIL is held only while Python code or
// the CPython API runs, and Purple's loader thread and LibTorch's threads (which take the GIL in
// torch's own Python nodes and TensorImpl destructors) never wait on a thread that waits on them.
// The Purple lock keeps Python threads from running Purple code of an interpreter while another
// thread runs it: a thread running Purple code outside any InPurple (the `purple` command, a C++
// host) holds it implicitly and lets go of it whenever it calls into Python.
//
// Memory. Python objects that Purple holds are Foreign cells (py-object) owning one reference;
// their finalizer takes the GIL and drops it. Purple values that Python holds are
// purple.Value / purple.Procedure objects owning an uncollectable GC cell; they also hold the
// interpreter's Owner object, which knows whether the interpreter still exists, and the values
// of an interpreter that is destroyed are released then. A Purple value is never stored where
// the collector cannot see it.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "interp/language/bind.hpp"

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace purple::python {

// ---- owned Python references ------------------------------------------------------------------

class Ref {
 public:
  Ref() = default;
  explicit Ref(PyObject* owned) : p_(owned) {}
  static Ref borrow(PyObject* o) {
    Py_XINCREF(o);
    return Ref(o);
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Ref& operator=(Ref&& o) noexcept {
    if (this != &o) {
      Py_XDECREF(p_);
      p_ = o.p_;
      o.p_ = nullptr;
    }
    return *this;
  }
  ~Ref() { Py_XDECREF(p_); }
  PyObject* get() const { return p_; }
  PyObject* release() {
    PyObject* p = p_;
    p_ = nullptr;
    return p;
  }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PyObject* p_ = nullptr;
};

// ---- the runtime (runtime.cpp) ----------------------------------------------------------------

// Starts CPython when no Python runs in this process (the `purple` command, a C++ host); the
// GIL is released afterwards. In a python3 process it only notes that Python was already there.
void ensurePython();
// False once Python is finalizing (or was never started): finalizers then leave objects alone.
bool pythonAlive();
// __main__'s namespace, where py-exec runs (borrowed; GIL held).
PyObject* mainDict();
// The bridge's Python module, _purple_bridge (borrowed; GIL held): Value, Procedure, Symbol,
// Error and the Python half of the bridge (bridge.py).
PyObject* bridgeModule();
PyObject* existingBridgeModule();   // nullptr until made (borrowed)
// An attribute of the bridge module (new reference; throws a Purple error when missing).
Ref bridgeAttr(const char* name);
// Imports a module (new reference; a Python exception becomes a Purple error).
Ref importModule(const char* name);

// The lock of one Purple interpreter (see the top of this file).
class InterpLock {
 public:
  // This thread (recursively). `runningHere`: this thread is running Purple code of the
  // interpreter (Interp::current()), so an implicit hold is its own; returns whether acquire
  // took over that implicit hold, which release() then gives back.
  bool acquire(bool runningHere = false);
  void release(bool wasImplicit = false);
  // Lets go of whatever hold the calling thread has (its own, or the implicit one); returns what
  // restore() needs to take it back.
  int releaseForPython();
  void restore(int token);
  void holdImplicitly();    // the thread running Purple code outside any InPurple holds it
  bool ownedByThisThread();

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::thread::id owner_;
  int count_ = 0;
  bool implicit_ = false;
};

struct BridgeState {
  Interp* interp = nullptr;
  bool installed = false;       // the library's names are defined in the interpreter
  InterpLock lock;
  PyObject* owner = nullptr;    // the live Owner object, borrowed (it clears this when it dies)
  PyObject* anchor = nullptr;   // borrowed: a Python object owning the interpreter (the front end)
};
BridgeState* bridgeState(Interp* in);   // nullptr when (purple python) is not installed in it
BridgeState& requireBridgeState(Interp& in);
BridgeState* createBridgeState(Interp* in);
void destroyBridgeState(Interp* in);   // the interpreter is being destroyed

// Purple -> Python, for a thread running Purple code of `in`: lets go of the interpreter lock,
// takes the GIL; the destructor undoes both.
class InPython {
 public:
  explicit InPython(Interp& in);
  ~InPython();
  InPython(const InPython&) = delete;
  InPython& operator=(const InPython&) = delete;

 private:
  BridgeState* st_;
  int token_ = 0;
  PyGILState_STATE gil_;
};

// Python -> Purple, for a thread holding the GIL: releases the GIL, takes the interpreter lock,
// makes `in` the current interpreter with this thread's stack limit; the destructor undoes it.
// The thread must be registered with the collector (GcThread) first.
class InPurple {
 public:
  explicit InPurple(Interp& in);
  ~InPurple();
  InPurple(const InPurple&) = delete;
  InPurple& operator=(const InPurple&) = delete;

 private:
  Interp& in_;
  BridgeState* st_;
  PyThreadState* saved_;
  bool runningHere_;          // before scope_: whether this thread was already running `in`
  bool wasImplicit_ = false;
  InterpScope scope_;
  char* savedLimit_ = nullptr;
};

// Registers the calling thread with the collector for the scope when it is not registered
// (Python's threads are not); Purple objects may be allocated then.
class GcThread {
 public:
  GcThread();
  ~GcThread();
  GcThread(const GcThread&) = delete;
  GcThread& operator=(const GcThread&) = delete;

 private:
  bool registered_;
};

// ---- py-object cells (object.cpp) -------------------------------------------------------------

// A Purple value for a Python object (steals `owned`). A raw handle's results stay Python
// objects; a converting one's results are converted (convert.cpp).
Value wrapObject(PyObject* owned, bool raw = false);
bool isPyObject(Value v);
bool isRawObject(Value v);
PyObject* objectOf(Value v);   // borrowed, or nullptr when v is not a py-object
void registerObjectKind();     // its printer and apply hook (once per process)

// ---- conversions (convert.cpp); GIL held --------------------------------------------------------

// Purple -> Python, new reference; a value with no Python counterpart becomes a purple.Value.
// Throws a Purple error (with the Python exception cleared) when a conversion fails.
Ref toPython(Interp& in, Value v);
// Python -> Purple: numbers, strings, bytes, booleans, None, lists, tuples, dicts, tensors and
// Purple values convert, other objects become py-objects. With `raw`, only Purple values are
// unwrapped; everything else becomes a raw py-object.
Value fromPython(Interp& in, PyObject* o, bool raw = false);
// A result of a Python operation on `source` (a py-object or not): converted unless `source` is a
// raw handle. Steals `owned`.
Value resultOf(Interp& in, Ref owned, Value source);
// A Purple keyword's name as a Python keyword argument (hyphens become underscores).
std::string keywordArgumentName(Value keyword);
// Splits Purple arguments into a Python tuple and a kwargs dict (nullptr when there are none):
// a keyword followed by a value is a keyword argument.
void buildArguments(Interp& in, const Value* argv, int argc, Ref* args, Ref* kwargs, std::string_view who);
// Calls `callable` with Purple arguments; the result is converted as resultOf(source).
Value callPython(Interp& in, PyObject* callable, const Value* argv, int argc, Value source, std::string_view who);

// ---- tensors (tensors.cpp); GIL held ---------------------------------------------------------

// True when `o` is a torch.Tensor (false without importing torch when nothing imported it).
bool isTorchTensor(PyObject* o);
// The same at::Tensor (same TensorImpl: storage and autograd graph) when Python's torch runs on
// Purple's LibTorch; through DLPack otherwise (same memory, no autograd).
at::Tensor tensorFromPython(PyObject* o);
Ref tensorToPython(const at::Tensor& t);   // imports torch on first use
// True when the tensors cross as the same at::Tensor (imports torch).
bool tensorsShared();
Ref numpyFromTensor(const at::Tensor& t);
at::Tensor tensorFromNumpy(PyObject* array);

// ---- Python types (types.cpp) ------------------------------------------------------------------

// Creates _purple_bridge (GIL held); called once by the runtime.
PyObject* createBridgeModule();
// purple.Value / purple.Procedure for a Purple value of interpreter `in` (new reference).
Ref wrapPurpleValue(Interp& in, Value v);
// The Purple value inside a purple.Value, or false.
bool unwrapPurpleValue(PyObject* o, Value* out);
// Releases the values Python holds for an interpreter that is being destroyed.
void interpreterDestroyed(BridgeState& st);

// ---- errors (errors.cpp) -----------------------------------------------------------------------

// Turns the pending Python exception into a Purple error (kind python-error) naming `who`,
// whose message holds the Python type, message and traceback, and throws it. A purple.Error
// coming back is the Purple error it came from. GIL held.
[[noreturn]] void throwPythonError(std::string_view who);
// Inside a catch block: sets the Python exception for the C++ exception being handled (a
// Purple error becomes purple.Error, or the Python exception it came from). GIL held.
void setPythonErrorFromCurrent(Interp* in = nullptr);   // in: whose values the error may carry
// Whether a Purple error object came from a Python exception, and that exception (borrowed).
PyObject* pythonExceptionOf(Value error);
// "ValueError", "numpy.ndarray": a type's name, with its module unless builtin or __main__.
std::string pythonTypeName(PyObject* type);
// A traceback object as Python prints it (without the header line); "" for None.
std::string pythonTraceback(PyObject* tb);

// ---- builtins (builtins.cpp) -------------------------------------------------------------------

void registerPython(Registry& r);

}  // namespace purple::python
