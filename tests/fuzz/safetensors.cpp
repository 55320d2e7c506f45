// libFuzzer target: the safetensors reader on arbitrary bytes (docs/hardening.md, tests/fuzz/targets.hpp).
#include "tests/fuzz/targets.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  purple::fuzz::fileInterp();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  purple::fuzz::loadSafetensors(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
