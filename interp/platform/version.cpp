// The version line shown by `purple --version` and the REPL banner.
#include "interp/platform/version.hpp"
#include <ATen/Context.h>
#include <torch/version.h>

namespace purple {

std::string versionLine() {
  std::string cuda = at::hasCUDA() ? "available" : "not available";
  return std::string("Purple ") + PURPLE_VERSION + " (LibTorch " + TORCH_VERSION + ", CUDA " + cuda + ")";
}

}  // namespace purple
