// Where the kernel's requests are answered: an interpreter of its own (the kernel Jupyter
// starts), or a running program the kernel is attached to (its bridge mode, which serve-kernel
// starts: docs/attach.md). PurpleKernel speaks Jupyter's protocol and asks one of these.
#pragma once
#include <purple/purple.hpp>

#include <memory>
#include <optional>
#include <string>

namespace purple::kernel {

class Backend {
 public:
  virtual ~Backend() = default;
  // Where (show x) goes: set once, before the first request.
  virtual void setDisplay(DisplayHandler display) = 0;
  // Runs a cell form by form, its output to OUT and ERR; returns the representations of the
  // last form's last value (none when it has none). Throws Error (Exit for exit).
  virtual std::optional<MimeBundle> execute(const std::string& code, const std::string& sourceName,
                                            const OutputCallback& out, const OutputCallback& err) = 0;
  // One expression's representations (user_expressions). Throws Error.
  virtual MimeBundle evaluate(const std::string& expr) = 0;
  virtual Completions complete(const std::string& code, std::size_t cursor) = 0;
  virtual std::optional<std::string> documentation(const std::string& name) = 0;
  // From the signal thread: stops the cell running now.
  virtual void interrupt() = 0;
  // After a cell: drops an interrupt that came as it ended.
  virtual void settle() {}
  virtual void flush() {}
  // A line for the banner, after Purple's version.
  virtual std::string describe() const = 0;
  // True when a cell `quit` (or `exit`) should shut the kernel down, as it does IPython's: the
  // attached kernel, whose program then goes on (a console cannot otherwise shut down a kernel
  // it did not start).
  virtual bool quitShutsDown() const { return false; }
};

// An interpreter of this process.
std::unique_ptr<Backend> makeLocalBackend();
// The program serving the REPL socket SOCKET_PATH (throws Error when it cannot be reached).
std::unique_ptr<Backend> makeAttachedBackend(const std::string& socketPath);

}  // namespace purple::kernel
