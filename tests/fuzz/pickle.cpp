// libFuzzer target: the pickle reader on arbitrary bytes (docs/hardening.md, tests/fuzz/targets.hpp).
#include "tests/fuzz/targets.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  purple::fuzz::readerInterp();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  purple::fuzz::unpickleAll(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
