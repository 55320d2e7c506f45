// Purple's Python bridge for hosts that embed both Purple and CPython, and for the `purple`
// Python module (python/), which is built on it. Link with libpurple_python (present when Purple
// was built with Python); docs/python.md is the guide.
//
// Every function taking or returning a PyObject* (spelled _object* here, so this header does
// not need Python.h) expects the calling thread to hold the GIL, as the CPython API does.
// Purple code run through runFromPython runs with the GIL released and the interpreter's lock
// held; Purple code that calls into Python releases that lock and takes the GIL.
#pragma once

#include "purple/purple.hpp"

#include <functional>

struct _object;   // PyObject

#define PURPLE_PYTHON_API __attribute__((visibility("default")))

namespace purple::python {

// Makes (purple python) available in INTERP, as (import (purple python)) does; starts CPython
// when the process has none. Throws purple::Error saying why when Python is unavailable.
PURPLE_PYTHON_API void enable(embed::Interpreter& interp);

// HOLDER (a Python object owning INTERP, such as purple.Interpreter) is kept alive as long as
// Python holds values that came from INTERP, so procedures handed to Python stay callable.
// It is held strongly only through those values (no reference cycle). nullptr clears it.
PURPLE_PYTHON_API void setHolder(embed::Interpreter& interp, _object* holder);

// The bridge's Python module (_purple_bridge: Value, Procedure, Symbol, Error, module_class(),
// dataset_class()), created on first use. New reference, or nullptr with a Python exception.
PURPLE_PYTHON_API _object* bridgeModuleReference();

// Purple -> Python: a new reference, or nullptr with a Python exception set.
PURPLE_PYTHON_API _object* toPython(embed::Interpreter& interp, const embed::Value& value);

// Python -> Purple, with the bridge's conversions; false with a Python exception set on failure.
PURPLE_PYTHON_API bool fromPython(embed::Interpreter& interp, _object* object, embed::Value* out);

// Runs BODY, which uses INTERP, as Purple code entered from Python (the GIL released, the
// interpreter's lock held) and returns its value converted to Python (a new reference), or
// nullptr with the Python exception set for its error: purple.Error for a Purple error, the
// original exception for one that came from Python.
PURPLE_PYTHON_API _object* runFromPython(embed::Interpreter& interp, const std::function<embed::Value()>& body);

}  // namespace purple::python
