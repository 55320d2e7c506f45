// The kernel's bridge mode (serve-kernel): requests run in the program serving a REPL socket,
// through the attach client (include/purple/attach.hpp), on that program's own thread.
#include "kernel/backend.hpp"

#include <purple/attach.hpp>

namespace purple::kernel {

namespace {

class AttachedBackend final : public Backend {
 public:
  explicit AttachedBackend(const std::string& socketPath) : client_(socketPath) {}

  void setDisplay(DisplayHandler display) override { display_ = std::move(display); }

  std::optional<MimeBundle> execute(const std::string& code, const std::string& sourceName, const OutputCallback& out,
                                    const OutputCallback& err) override {
    AttachClient::Handlers h;
    h.out = out;
    h.err = err;
    h.display = display_;
    std::optional<MimeBundle> last;
    std::size_t lastForm = 0;
    h.result = [&](const MimeBundle& b, std::size_t form) {
      last = b;
      lastForm = form;
    };
    std::size_t forms = client_.eval(code, h, sourceName, true);
    // As a local cell: the value shown is the last form's (none when that form has no value).
    if (forms == 0 || lastForm != forms - 1) return std::nullopt;
    return last;
  }

  MimeBundle evaluate(const std::string& expr) override {
    AttachClient::Handlers h;
    MimeBundle last{Representation{"text/plain", ""}};
    h.result = [&](const MimeBundle& b, std::size_t) { last = b; };
    client_.eval(expr, h, "<user expression>");
    return last;
  }

  Completions complete(const std::string& code, std::size_t cursor) override { return client_.complete(code, cursor); }
  std::optional<std::string> documentation(const std::string& name) override { return client_.documentation(name); }
  void interrupt() override { client_.interrupt(); }
  bool quitShutsDown() const override { return true; }
  std::string describe() const override {
    return "Attached to " + client_.program() + " (pid " + std::to_string(client_.pid()) +
           "): cells run inside it; `quit` shuts this kernel down and the program goes on.";
  }

 private:
  AttachClient client_;
  DisplayHandler display_;
};

}  // namespace

std::unique_ptr<Backend> makeAttachedBackend(const std::string& socketPath) {
  return std::make_unique<AttachedBackend>(socketPath);
}

}  // namespace purple::kernel
