// libFuzzer target: evaluation in a sandbox under tight budgets (docs/hardening.md,
// tests/fuzz/targets.hpp). No crash, abort, sanitizer report or hang past the time budget.
#include "tests/fuzz/targets.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace {
std::unique_ptr<purple::embed::Interpreter> interp;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  purple::fuzz::limitHeap();
  interp = std::make_unique<purple::embed::Interpreter>(purple::fuzz::sandboxOptions());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A fresh interpreter every 256 inputs: definitions an input makes reach only a few after it,
  // and making one (the prelude) costs more than most inputs.
  static int uses = 0;
  if (++uses % 256 == 0) {
    interp.reset();
    interp = std::make_unique<purple::embed::Interpreter>(purple::fuzz::sandboxOptions());
  }
  purple::fuzz::evalSandboxed(*interp, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
