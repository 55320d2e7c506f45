// `purple --attach`: a REPL inside another running Purple program (docs/attach.md), through
// the public client (include/purple/attach.hpp).
#pragma once
#include <string>
#include <vector>

namespace purple::repl {

// ARGS: what follows --attach on the command line (SOCKET [-e EXPR], or DIR --all -e EXPR).
// Returns the exit status: 0, 1 when the code failed there or the program could not be reached,
// 2 for a wrong command line.
int runAttach(const std::vector<std::string>& args);

}  // namespace purple::repl
