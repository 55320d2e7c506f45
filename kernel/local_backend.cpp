// The kernel's own interpreter: each request through Purple's public embedding API
// (include/purple/purple.hpp) and nothing else.
#include "kernel/backend.hpp"

#include <cstdlib>
#include <cstring>

namespace purple::kernel {

namespace {

Options kernelOptions() {
  Options o;
  o.commandLine = {"purple-kernel"};
  return o;
}

class LocalBackend final : public Backend {
 public:
  LocalBackend() : interp_(kernelOptions()) {
    // As the purple command does: subnormal floats make Adam ~80x slower on some CPUs.
    const char* ftz = std::getenv("PURPLE_FLUSH_DENORMAL");
    if (!(ftz && std::strcmp(ftz, "0") == 0)) interp_.eval("(set-flush-denormal! #t)", "<startup>");
  }

  void setDisplay(DisplayHandler display) override { interp_.setDisplayHandler(std::move(display), true); }

  std::optional<MimeBundle> execute(const std::string& code, const std::string& sourceName, const OutputCallback& out,
                                    const OutputCallback& err) override {
    Interpreter::OutputCapture capture(interp_, out, err);
    std::vector<Value> lastResults;
    interp_.evalForms(code, sourceName, [&](const std::vector<Value>& results, const FormSource&) { lastResults = results; });
    if (lastResults.empty()) return std::nullopt;
    return representation(lastResults.back());
  }

  MimeBundle evaluate(const std::string& expr) override { return representation(interp_.eval(expr, "<user expression>")); }
  Completions complete(const std::string& code, std::size_t cursor) override { return interp_.complete(code, cursor); }
  std::optional<std::string> documentation(const std::string& name) override { return interp_.documentation(name); }
  void interrupt() override { interp_.interrupt(); }
  void settle() override { interp_.cancelInterrupt(); }
  void flush() override { interp_.flush(); }
  std::string describe() const override { return "A Scheme with tensors."; }

 private:
  MimeBundle representation(const Value& v) {
    try {
      return interp_.represent(v);
    } catch (const Error&) {
      return {Representation{"text/plain", v.repr()}};   // a broken representer must not hide the value
    }
  }

  Interpreter interp_;
};

}  // namespace

std::unique_ptr<Backend> makeLocalBackend() { return std::make_unique<LocalBackend>(); }

}  // namespace purple::kernel
