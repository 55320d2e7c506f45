// The `purple` command's two modes: running a script and the interactive REPL.
#pragma once
#include "interp/interp.hpp"
#include <string>

namespace purple {

// Evaluates every form of `text`, printing each value that is not unspecified (the REPL's
// output). Returns false if an error was reported.
bool evalAndPrint(Interp& in, const std::string& text, const std::string& sourceName, bool printValues);
// Prints an uncaught error (message, position, backtrace) to the current error port.
void reportError(Interp& in, const PurpleException& e);
// The interactive loop: libedit line editing, history, completion, multi-line input.
// Without a terminal it reads forms from standard input and prints their values.
int runRepl(Interp& in);

}  // namespace purple
