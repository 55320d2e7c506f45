// The bridge's runtime: starting CPython when the process has none, the per-interpreter state and
// lock, and the crossings between the two interpreters (bridge.hpp explains the lock order).
#include "builtins/python/bridge.hpp"
#include <torch/csrc/jit/frontend/tracer.h>
#include "interp/core/gc.hpp"
#include "interp/core/port.hpp"
#include "purple_python_config.hpp"
#include <gc/gc.h>
#include <atomic>
#include <unordered_map>

namespace purple::python {

namespace {

std::atomic<bool> gAlive{false};
std::once_flag gStartOnce;
PyObject* gBridge = nullptr;   // _purple_bridge, created once and kept

std::mutex gStatesMutex;
std::unordered_map<Interp*, BridgeState*>& states() {
  static auto* m = new std::unordered_map<Interp*, BridgeState*>;
  return *m;
}

// Called by Python's atexit, early in Py_FinalizeEx: from then on, finalizers of py-objects leave
// their objects to the dying interpreter.
PyObject* markFinalizing(PyObject*, PyObject*) {
  gAlive.store(false);
  Py_RETURN_NONE;
}
PyMethodDef gMarkFinalizingDef = {"_purple_python_finalizing", markFinalizing, METH_NOARGS, nullptr};

void registerAtExit() {
  Ref atexitModule(PyImport_ImportModule("atexit"));
  Ref fn(PyCFunction_New(&gMarkFinalizingDef, nullptr));
  if (atexitModule && fn) {
    Ref r(PyObject_CallMethod(atexitModule.get(), "register", "O", fn.get()));
  }
  PyErr_Clear();
}

std::string statusMessage(const PyStatus& s) {
  std::string m = s.err_msg ? s.err_msg : "unknown error";
  if (s.func) m = std::string(s.func) + ": " + m;
  return m;
}

void startPython() {
  if (Py_IsInitialized()) {
    // A python3 process (the `purple` module): Python is the host.
    PyGILState_STATE g = PyGILState_Ensure();
    registerAtExit();
    PyGILState_Release(g);
    gAlive.store(true);
    return;
  }
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  // Purple's REPL owns SIGINT; Python must not replace its handler.
  config.install_signal_handlers = 0;
  config.parse_argv = 0;
  // Unbuffered: what Python prints and what Purple prints arrive in the order they were written.
  config.buffered_stdio = 0;
  // sys.executable is a real python3 (multiprocessing and friends start it), and the standard
  // library is found from its prefix.
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, PURPLE_PYTHON_EXECUTABLE);
  if (!PyStatus_Exception(status)) {
    wchar_t empty[] = L"";
    wchar_t* argv[] = {empty};
    status = PyConfig_SetArgv(&config, 1, argv);
  }
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) throw std::runtime_error("Python failed to start: " + statusMessage(status));
  registerAtExit();
  gAlive.store(true);
  PyEval_SaveThread();   // the GIL is taken only while Python runs
}

}  // namespace

void ensurePython() {
  std::exception_ptr failure;
  std::call_once(gStartOnce, [&] {
    try {
      startPython();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      throwError("error", std::string("import: the library (purple python) is not available: ") + e.what());
    }
  }
  if (!gAlive.load() && !Py_IsInitialized())
    throwError("error", "import: the library (purple python) is not available: Python failed to start earlier");
}

bool pythonAlive() { return gAlive.load(std::memory_order_relaxed) && Py_IsInitialized(); }

PyObject* mainDict() {
  PyObject* m = PyImport_AddModule("__main__");   // borrowed
  if (!m) throwPythonError("python");
  return PyModule_GetDict(m);
}

PyObject* bridgeModule() {
  if (!gBridge) {
    gBridge = createBridgeModule();
    if (!gBridge) throwPythonError("python");
  }
  return gBridge;
}

PyObject* existingBridgeModule() { return gBridge; }

Ref bridgeAttr(const char* name) {
  Ref r(PyObject_GetAttrString(bridgeModule(), name));
  if (!r) throwPythonError("python");
  return r;
}

Ref importModule(const char* name) {
  Ref m(PyImport_ImportModule(name));
  if (!m) throwPythonError("python");
  return m;
}

// ---- the interpreter lock ------------------------------------------------------------------------

bool InterpLock::acquire(bool runningHere) {
  std::unique_lock<std::mutex> l(m_);
  auto me = std::this_thread::get_id();
  if (count_ > 0 && owner_ == me) {
    count_++;
    return false;
  }
  if (count_ == 0 && implicit_ && runningHere) {
    // This thread holds the lock implicitly: it runs Purple code that reached Python without
    // InPython (LibTorch's autograd engine running a Python hook or Function for Purple's
    // `backward`). The implicit hold becomes an ordinary one until release() gives it back.
    implicit_ = false;
    owner_ = me;
    count_ = 1;
    return true;
  }
  cv_.wait(l, [&] { return count_ == 0 && !implicit_; });
  owner_ = me;
  count_ = 1;
  return false;
}

void InterpLock::release(bool wasImplicit) {
  std::lock_guard<std::mutex> l(m_);
  if (count_ > 0 && --count_ == 0) {
    owner_ = std::thread::id();
    if (wasImplicit) implicit_ = true;
    cv_.notify_all();
  }
}

int InterpLock::releaseForPython() {
  std::lock_guard<std::mutex> l(m_);
  if (count_ > 0 && owner_ == std::this_thread::get_id()) {
    int held = count_;
    count_ = 0;
    owner_ = std::thread::id();
    cv_.notify_all();
    return held;
  }
  if (implicit_) {
    implicit_ = false;
    cv_.notify_all();
    return -1;
  }
  return 0;
}

void InterpLock::restore(int token) {
  if (token == 0) return;
  std::unique_lock<std::mutex> l(m_);
  cv_.wait(l, [&] { return count_ == 0 && !implicit_; });
  if (token > 0) {
    owner_ = std::this_thread::get_id();
    count_ = token;
  } else {
    implicit_ = true;
  }
}

void InterpLock::holdImplicitly() {
  std::lock_guard<std::mutex> l(m_);
  implicit_ = true;
}

bool InterpLock::ownedByThisThread() {
  std::lock_guard<std::mutex> l(m_);
  return count_ > 0 && owner_ == std::this_thread::get_id();
}

// ---- per-interpreter state ---------------------------------------------------------------------

BridgeState* bridgeState(Interp* in) {
  std::lock_guard<std::mutex> l(gStatesMutex);
  auto it = states().find(in);
  return it == states().end() ? nullptr : it->second;
}

BridgeState& requireBridgeState(Interp& in) {
  BridgeState* st = bridgeState(&in);
  if (!st) throwError("error", "python: (purple python) is not imported in this interpreter");
  return *st;
}

BridgeState* createBridgeState(Interp* in) {
  std::lock_guard<std::mutex> l(gStatesMutex);
  auto& slot = states()[in];
  if (!slot) {
    slot = new BridgeState();
    slot->interp = in;
  }
  return slot;
}

void destroyBridgeState(Interp* in) {
  BridgeState* st;
  {
    std::lock_guard<std::mutex> l(gStatesMutex);
    auto it = states().find(in);
    if (it == states().end()) return;
    st = it->second;
    states().erase(it);
  }
  if (pythonAlive()) {
    PyGILState_STATE g = PyGILState_Ensure();
    interpreterDestroyed(*st);
    // What Python printed for this interpreter reaches the terminal before the process ends
    // (the `purple` command exits without finalizing Python).
    for (const char* stream : {"stdout", "stderr"}) {
      PyObject* f = PySys_GetObject(stream);   // borrowed
      if (f && f != Py_None) Ref(PyObject_CallMethod(f, "flush", nullptr));
    }
    PyErr_Clear();
    PyGILState_Release(g);
  }
  delete st;
}

// ---- crossings ---------------------------------------------------------------------------------

InPython::InPython(Interp& in) : st_(&requireBridgeState(in)) {
  // LibTorch's tracer (jit-trace) records the operations Purple runs on this thread; Python's
  // would be recorded with no way to replay the Python code around them.
  if (torch::jit::tracer::isTracing())
    throwError("value-error",
               "jit-trace: cannot trace a call into Python (the tracer records only what Purple runs); trace the "
               "Python part with torch.jit.trace, or keep it out of the traced procedure");
  // Purple's buffered output first, so the two interpreters' output keeps its order.
  portFlush(in.currentOutputPort());
  token_ = st_->lock.releaseForPython();
  gil_ = PyGILState_Ensure();
}

InPython::~InPython() {
  PyGILState_Release(gil_);
  st_->lock.restore(token_);
}

InPurple::InPurple(Interp& in)
    : in_(in),
      st_(&requireBridgeState(in)),
      saved_(PyEval_SaveThread()),
      runningHere_(Interp::current() == &in),
      scope_(&in) {
  wasImplicit_ = st_->lock.acquire(runningHere_);
  savedLimit_ = in.stackLimit;
  in.ensureStackLimit();   // this thread's stack
}

InPurple::~InPurple() {
  in_.stackLimit = savedLimit_;
  st_->lock.release(wasImplicit_);
  PyEval_RestoreThread(saved_);
}

GcThread::GcThread() : registered_(false) {
  gcInit();
  if (!GC_thread_is_registered()) {
    gcRegisterCurrentThread();
    registered_ = true;
  }
}

GcThread::~GcThread() {
  if (registered_) gcUnregisterCurrentThread();
}

}  // namespace purple::python
