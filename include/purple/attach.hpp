// A client of a running program's REPL server (docs/attach.md): what `purple --attach` and the
// Jupyter kernel's bridge (serve-kernel) use to evaluate code inside another Purple process.
//
//   purple::AttachClient c("/tmp/train.sock");
//   purple::AttachClient::Handlers h;
//   h.result = [](const purple::MimeBundle& b) { /* b[0] is text/plain */ };
//   c.eval("(set! learning-rate 0.001)", h);
//
// The server runs each request on the program's own interpreter thread at its next safe point
// (Interpreter::serveRepl). One AttachClient is used by one thread at a time; interrupt() may
// be called from any thread and from a signal handler.
#pragma once
#include "purple/purple.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace purple::embed {

class AttachClient {
 public:
  // Connects to the server at SOCKET_PATH and reads its banner. Throws Error of kind
  // "attach-error" saying why when there is no such socket, nothing listens there any more (the
  // program ended), the server refuses (another user's program, too many clients) or does not
  // answer within TIMEOUT_SECONDS.
  explicit AttachClient(const std::string& socketPath, double timeoutSeconds = 10);
  ~AttachClient();
  AttachClient(const AttachClient&) = delete;
  AttachClient& operator=(const AttachClient&) = delete;

  // The program's version line ("Purple 0.1.0 (LibTorch ...)"), process id and command line.
  const std::string& versionLine() const;
  int64_t pid() const;
  const std::string& program() const;
  const std::string& socketPath() const;

  struct Handlers {
    OutputCallback out;                               // what the code writes to its output port
    OutputCallback err;                               // ... and to its error port
    DisplayHandler display;                           // (show x)
    // Each value of each form, as a REPL shows it, with the form's index in the code (from 0).
    std::function<void(const MimeBundle&, std::size_t form)> result;
    // Called once when the program has not begun the request after `waitingAfter` seconds: it is
    // busy in code without safe points (a long LibTorch call, a blocking read).
    std::function<void()> waiting;
    double waitingAfter = 2.0;
  };
  // Evaluates CODE in the program form by form (a read error anywhere runs nothing), as the
  // program's REPL would, and returns how many forms ran. Throws the first failure as an Error
  // with the kind, message and backtrace the program reported ("interrupt" after interrupt());
  // Error of kind "attach-error" when the connection is lost (the program ended).
  std::size_t eval(std::string_view code, const Handlers& handlers, std::string_view sourceName = "<attach>",
            bool liveDisplays = false);
  // Names in the program completing the identifier that ends at byte CURSOR of CODE.
  Completions complete(std::string_view code, std::size_t cursor);
  // (help 'NAME) in the program; std::nullopt when NAME is not bound there.
  std::optional<std::string> documentation(std::string_view name);
  // Stops the request in progress, in the program (which goes on). Ignored between requests.
  void interrupt();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace purple::embed

#ifndef PURPLE_IMPLEMENTATION
namespace purple {
using embed::AttachClient;
}
#endif
