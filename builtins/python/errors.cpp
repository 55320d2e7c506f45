// Exceptions across the bridge.
//   Python -> Purple: an error object of kind python-error naming the builtin, whose message is
//     "Type: message" followed by the Python traceback; the exception object is kept (the
//     error's payload) for python-error-exception, and it is what Python sees again if the error
//     goes back into Python. SystemExit becomes Purple's exit.
//   Purple -> Python: purple.Error (an Exception) with kind, message, irritants, backtrace and
//     the error object as value; str() is the report the `purple` command prints. A purple.Error
//     that comes back into Purple is the original Purple error again, so guard sees it.
#define PURPLE_IMPLEMENTATION
#include "purple/purple.hpp"
#include "builtins/python/bridge.hpp"
#include "interp/language/printer.hpp"

namespace purple::python {

namespace {

// purple.Error, or nullptr (with no exception set) while the bridge module is not made: errors
// on the way must not recurse into the bridge.
Ref errorClass() {
  PyObject* bridge = existingBridgeModule();
  Ref cls(bridge ? PyObject_GetAttrString(bridge, "Error") : nullptr);
  if (!cls) {
    PyErr_Clear();
    PyErr_SetString(PyExc_RuntimeError, "Purple's Python bridge could not be initialized");
  }
  return cls;
}

std::string utf8(PyObject* s) {
  if (!s) return "";
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s, &n);
  if (!p) {
    PyErr_Clear();
    return "";
  }
  return std::string(p, size_t(n));
}

std::string strOf(PyObject* o) {
  Ref s(PyObject_Str(o));
  if (!s) {
    PyErr_Clear();
    return "<unprintable>";
  }
  return utf8(s.get());
}

}  // namespace

std::string pythonTypeName(PyObject* type) {
  Ref module(PyObject_GetAttrString(type, "__module__"));
  Ref qualname(PyObject_GetAttrString(type, "__qualname__"));
  PyErr_Clear();
  std::string name = qualname ? utf8(qualname.get()) : std::string(reinterpret_cast<PyTypeObject*>(type)->tp_name);
  std::string mod = module && PyUnicode_Check(module.get()) ? utf8(module.get()) : "";
  if (!mod.empty() && mod != "builtins" && mod != "__main__") name = mod + "." + name;
  return name;
}

std::string pythonTraceback(PyObject* tb) {
  if (!tb || tb == Py_None) return "";
  Ref traceback(PyImport_ImportModule("traceback"));
  Ref lines(traceback ? PyObject_CallMethod(traceback.get(), "format_tb", "O", tb) : nullptr);
  Ref empty(PyUnicode_FromString(""));
  Ref joined(lines && empty ? PyUnicode_Join(empty.get(), lines.get()) : nullptr);
  PyErr_Clear();
  std::string text = joined ? utf8(joined.get()) : "";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

namespace {

// The purple.Error instance for a Purple error payload (new reference).
Ref purpleErrorObject(Interp* in, Value payload, bool interrupt) {
  std::string kind = "raise", message, report;
  Ref irritants(PyList_New(0)), backtrace(PyList_New(0));
  if (payload.is(Kind::ErrorObject)) {
    auto* e = payload.as<ErrorObject>();
    kind = e->errorKind.is(Kind::Symbol) ? std::string(symbolName(e->errorKind)) : "error";
    message = isString(e->message) ? std::string(stringView(e->message)) : toDisplayString(e->message);
    report = errorMessage(payload);
    for (Value p = e->irritants; isPair(p); p = cdr(p)) {
      Ref item;
      if (in) {
        try {
          item = toPython(*in, car(p));
        } catch (...) {
          PyErr_Clear();
        }
      }
      if (!item) item = Ref(PyUnicode_FromString(toWriteString(car(p)).c_str()));
      if (item) PyList_Append(irritants.get(), item.get());
    }
    for (Value p = e->backtrace; isPair(p); p = cdr(p)) {
      if (!isString(car(p))) continue;
      std::string line(stringView(car(p)));
      report += "\n" + line;
      Ref s(PyUnicode_FromString(line.c_str()));
      if (s) PyList_Append(backtrace.get(), s.get());
    }
  } else {
    message = report = "uncaught exception: " + toWriteString(payload);
  }
  if (interrupt) kind = "interrupt";
  Ref value;
  if (in && bridgeState(in)) {
    try {
      value = wrapPurpleValue(*in, payload);
    } catch (...) {
      PyErr_Clear();
    }
  }
  if (!value) value = Ref::borrow(Py_None);
  Ref cls = errorClass();
  if (!cls) return Ref();
  return Ref(PyObject_CallFunction(cls.get(), "ssOOOs", kind.c_str(), message.c_str(), irritants.get(), backtrace.get(),
                                   value.get(), report.c_str()));
}

void raisePurpleError(Interp* in, Value payload, bool interrupt) {
  Ref err = purpleErrorObject(in, payload, interrupt);
  if (!err) return;   // constructing it failed: that exception is set
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.get())), err.get());
}

}  // namespace

PyObject* pythonExceptionOf(Value error) {
  if (!error.is(Kind::ErrorObject)) return nullptr;
  auto* e = error.as<ErrorObject>();
  if (!(e->errorKind.is(Kind::Symbol) && symbolName(e->errorKind) == "python-error")) return nullptr;
  return objectOf(e->payload);
}

void throwPythonError(std::string_view who) {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  if (!type) throwError("python-error", std::string(who) + ": a Python operation failed without setting an exception");
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb && value) PyException_SetTraceback(value, tb);
  Ref t(type), v(value), trace(tb);
  if (!v) v = Ref::borrow(Py_None);

  if (PyErr_GivenExceptionMatches(t.get(), PyExc_SystemExit)) {
    Ref code(PyObject_GetAttrString(v.get(), "code"));
    PyErr_Clear();
    int status = 0;
    if (code && PyLong_Check(code.get())) status = int(PyLong_AsLong(code.get()));
    else if (code && code.get() != Py_None) status = 1;
    throw PurpleExit{status};
  }
  // A Purple error that went through Python code comes back as itself.
  Ref purpleError = errorClass();
  if (purpleError && PyObject_IsInstance(v.get(), purpleError.get()) == 1) {
    Ref carried(PyObject_GetAttrString(v.get(), "value"));
    Ref kind(PyObject_GetAttrString(v.get(), "kind"));
    PyErr_Clear();
    Value payload;
    if (carried && unwrapPurpleValue(carried.get(), &payload) && !payload.isUnspecified()) {
      if (kind && utf8(kind.get()) == "interrupt") throw PurpleInterrupt(payload);
      throw PurpleException(payload);
    }
  }
  PyErr_Clear();

  std::string message = pythonTypeName(t.get());
  std::string text = strOf(v.get());
  if (!text.empty()) message += ": " + text;
  std::string tbText = pythonTraceback(trace.get());
  if (!tbText.empty()) message += "\nPython traceback (most recent call last):\n" + tbText;
  Value err = makeError(intern("python-error"), message, Value::nil());
  err.as<ErrorObject>()->who = intern(who);
  err.as<ErrorObject>()->payload = wrapObject(v.release(), true);
  if (Interp* in = Interp::current()) err.as<ErrorObject>()->backtrace = in->backtrace();
  throw PurpleException(err);
}

void setPythonErrorFromCurrent(Interp* in) {
  if (!in) in = Interp::current();
  try {
    throw;
  } catch (const PurpleInterrupt& e) {
    raisePurpleError(in, e.payload(), true);
  } catch (const PurpleException& e) {
    Value payload = e.payload();
    if (PyObject* exc = pythonExceptionOf(payload)) {
      // The Python exception that became this Purple error, with its traceback.
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
      return;
    }
    raisePurpleError(in, payload, false);
  } catch (const embed::Exit& e) {
    Ref code(PyLong_FromLong(e.code()));
    PyErr_SetObject(PyExc_SystemExit, code.get());
  } catch (const embed::Error& e) {
    if (e.original) {
      try {
        std::rethrow_exception(e.original);
      } catch (const embed::Error& inner) {
        PyErr_SetString(PyExc_RuntimeError, inner.what());
      } catch (...) {
        setPythonErrorFromCurrent(in);
      }
      return;
    }
    Ref cls = errorClass();
    if (!cls) return;
    Ref err(PyObject_CallFunction(cls.get(), "ssOOOs", e.kind().c_str(), e.message().c_str(), Ref(PyList_New(0)).get(),
                                  Ref(PyList_New(0)).get(), Py_None, e.report().c_str()));
    if (err) PyErr_SetObject(cls.get(), err.get());
  } catch (const PurpleExit& e) {
    Ref code(PyLong_FromLong(e.code));
    PyErr_SetObject(PyExc_SystemExit, code.get());
  } catch (const ContinuationInvoked&) {
    PyErr_SetString(PyExc_RuntimeError, "a Purple continuation was invoked outside its extent (Purple's continuations escape only)");
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception in Purple");
  }
}

}  // namespace purple::python
