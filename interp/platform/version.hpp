#pragma once
#include <string>

namespace purple {
std::string versionLine();   // "Purple 0.1.0 (LibTorch 1.13.0, CUDA not available)"
}
