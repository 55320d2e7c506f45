// The `purple` command's two modes: running code and the interactive REPL. Built only on the
// public embedding API (include/purple/purple.hpp), like any other host.
#pragma once
#include <purple/purple.hpp>
#include <string>

namespace purple::repl {

// Prints an uncaught error (message, position, backtrace) on standard error, after whatever the
// program wrote to standard output.
void reportError(Interpreter& interp, const Error& e);
// Evaluates every form of `text`, printing each value that is not unspecified as `write` does
// (the REPL's output) when `printValues`. Returns false if an error was reported. (exit n)
// propagates as purple::Exit.
bool evalAndPrint(Interpreter& interp, const std::string& text, const std::string& sourceName, bool printValues);
// The interactive loop: libedit line editing, history, completion, multi-line input; Ctrl-C
// interrupts an evaluation or abandons the line being typed, Ctrl-D on an empty line leaves.
// Without a terminal it reads forms from standard input and prints their values.
int runRepl(Interpreter& interp);

}  // namespace purple::repl
