// Purple's <pybind11/stl.h> for load-inline: extension code that includes it gets the part of pybind11
// that names functions (purple_extension.h); there is no Python to bind to.
#pragma once
#include <torch/all.h>
#include <purple_extension.h>
