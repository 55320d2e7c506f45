// libFuzzer target: evaluation in a sandbox under tight budgets (docs/hardening.md). Whatever
// the input, the interpreter must answer with a value or a purple::Error within its limits:
// no crash, no abort, no sanitizer report, no hang past the time budget.
#include <purple/purple.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace {

purple::Options sandbox() {
  purple::Options o;
  o.limits = purple::Limits::sandbox();
  o.limits.maxSteps = 200000;
  o.limits.maxSeconds = 2;
  o.limits.maxTensorBytes = int64_t(64) << 20;
  o.limits.maxDepth = 20000;
  o.input = std::string("(read-line) 42\n");
  o.onOutput = [](std::string_view) {};
  o.onError = [](std::string_view) {};
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  purple::setHeapLimit(size_t(1) << 30);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A fresh interpreter every 64 inputs: definitions an input makes reach only a few after it,
  // and making one (the prelude) costs more than most inputs.
  static std::unique_ptr<purple::Interpreter> interp;
  static int uses = 0;
  if (!interp || ++uses % 64 == 0) {
    interp.reset();
    interp = std::make_unique<purple::Interpreter>(sandbox());
  }
  std::string code(reinterpret_cast<const char*>(data), size);
  try {
    purple::Value v = interp->eval(code, "<fuzz>");
    (void)v.repr();
  } catch (const purple::Error&) {
  }
  return 0;
}
