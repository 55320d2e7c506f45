// `purple --install-kernel`: registers the Jupyter kernel (purple-kernel, built beside purple
// when xeus is available) as a kernelspec, for the user or system-wide.
#pragma once
#include <string>
#include <vector>

namespace purple::repl {

// ARGS are the options after --install-kernel: --user (the default), --system, --prefix DIR,
// --name NAME, --display-name TEXT. Prints where the kernelspec went; returns the exit status.
int installKernel(const std::vector<std::string>& args);

}  // namespace purple::repl
