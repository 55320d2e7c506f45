// A pickle writer (protocol 2, what torch.save uses by default) for PyObject trees. Tensors are
// written the way torch.save writes them -- torch._utils._rebuild_tensor_v2 over a storage named
// by a persistent id -- and the caller (torch_file.cpp) decides the ids, so tensors that share a
// storage share it in the file too.
#pragma once
#include "builtins/formats/pyobject.hpp"
#include <functional>
#include <string>

namespace purple::formats {

// Returns the persistent id of the storage under TENSOR: ('storage', <torch.FloatStorage>, key,
// location, numel).
using StorageIdFn = std::function<PyRef(const at::Tensor& tensor)>;

std::string pickle(const PyRef& root, const StorageIdFn& storageId);

}  // namespace purple::formats
