// The `purple` command's two modes: running code and the interactive REPL. Built only on the
// public embedding API (include/purple/purple.hpp), like any other host.
#pragma once
#include <purple/purple.hpp>
#include <string>
#include <vector>

namespace purple::repl {

// Prints an uncaught error (message, position, backtrace) on standard error, after whatever the
// program wrote to standard output.
void reportError(Interpreter& interp, const Error& e);
// Evaluates every form of `text`, printing each value that is not unspecified as `write` does
// (the REPL's output) when `printValues`. Returns false if an error was reported. (exit n)
// propagates as purple::Exit.
bool evalAndPrint(Interpreter& interp, const std::string& text, const std::string& sourceName, bool printValues);

// What the interactive loop talks to: this process's interpreter, or a program attached to
// (purple --attach, repl/attach.cpp).
class Session {
 public:
  virtual ~Session() = default;
  // Evaluates one complete input, printing its output, values and error as the REPL does.
  virtual void evaluate(const std::string& text, const std::string& sourceName) = 0;
  // Names completing WORD.
  virtual std::vector<std::string> complete(const std::string& word) = 0;
  // From the SIGINT handler: stops the evaluation in progress.
  virtual void interrupt() = 0;
  // True when idle() has work: the loop then calls it every 100 ms while it waits for a key.
  virtual bool wantsIdle() const { return false; }
  virtual void idle() {}
};

// The interactive loop: libedit line editing, history, completion, multi-line input; Ctrl-C
// interrupts an evaluation or abandons the line being typed, Ctrl-D on an empty line leaves.
// Without a terminal it reads forms from standard input and prints their values. BANNER is
// printed first on a terminal.
int runRepl(Session& session, const std::string& banner);
// The loop on this process's interpreter; with `serveClients`, attached clients' requests
// (--listen) run while it waits at the prompt.
int runRepl(Interpreter& interp, bool serveClients = false);

}  // namespace purple::repl
