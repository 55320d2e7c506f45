// Purple's <torch/extension.h> (load-inline puts this directory first on the include path):
// LibTorch's whole C++ API, as PyTorch's own header gives it, and in place of Python's bindings
// the small part of pybind11 that extension code uses to name its functions (purple_extension.h).
#pragma once
#include <torch/all.h>
#include <purple_extension.h>
