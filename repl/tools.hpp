// `purple check FILE...` and `purple --lsp`: Purple programs (tools/) compiled into the command
// and run in an interpreter of their own.
#pragma once
#include <string>
#include <vector>

namespace purple::repl {

// Loads the tools into a fresh interpreter and calls ENTRY (a Purple procedure of one argument)
// with ARGS as a list of strings; returns the exit status the tool asks for.
int runTool(const std::string& entry, const std::vector<std::string>& args);

}  // namespace purple::repl
