// A pickle reader (protocols 0 to 5) written as a table: one row per opcode with its name, how its
// operand is encoded, and what it does to the stack. It never runs code: a GLOBAL names a class
// or function, which is looked up in an allow-list (python_globals.cpp) that rebuilds tensors,
// storages, OrderedDicts, torch.Size, devices, dtypes and NumPy arrays. In safe mode (the default)
// any other global is an error naming it; unsafe mode turns it into an inert Object node.
#pragma once
#include "builtins/formats/pyobject.hpp"
#include <functional>
#include <string_view>

namespace purple::formats {

struct UnpickleOptions {
  bool safe = true;
  // Resolves a persistent id (torch's storages); required when the pickle has any.
  std::function<PyRef(const PyRef& pid)> persistentLoad;
};

// Reads one pickle from the start of BYTES; *consumed (when given) receives its length, since
// torch's legacy format puts several pickles one after another. Throws FormatError.
PyRef unpickle(std::string_view bytes, const UnpickleOptions& options, size_t* consumed = nullptr);

// ---- the allow-list (python_globals.cpp) ----
// The object a GLOBAL module/name pushes: a Dtype, a StorageType, or a Global that REDUCE, NEWOBJ
// and BUILD know. Null when the name is not on the list.
PyRef lookupGlobal(const std::string& module, const std::string& name);
// CALLABLE(*ARGS) for a Global from the list (REDUCE and NEWOBJ).
PyRef callGlobal(const PyObject& callable, const std::vector<PyRef>& args);
// BUILD: gives OBJ its state (numpy arrays and dtypes get their data here; OrderedDict attributes
// such as _metadata are dropped; an unsafe-mode Object keeps it).
void buildObject(PyObject& obj, const PyRef& state);

}  // namespace purple::formats
