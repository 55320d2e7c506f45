// purple-run's command line: torchrun's flags (both --nproc-per-node and --nproc_per_node
// spellings, `--flag value` and `--flag=value`), plus Purple's own.
#pragma once
#include <set>
#include <string>
#include <vector>

namespace purple::launcher {

struct Options {
  int nprocPerNode = 1;
  int nnodes = 1;
  int nodeRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = -1;               // -1: a free port (one machine) or 29500 (several)
  bool prefixOutput = false;         // "[rank3]: " before every line
  std::set<int> localRanksShown;     // empty: every rank's output
  double stopTimeout = 5.0;          // seconds; see supervisor.hpp
  bool runAsIs = false;              // --no-purple: the command is not a Purple script
  std::string purple;                // the purple binary (default: next to purple-run)
  std::string listenDir;             // each rank serves a REPL on DIR/rank-N.sock (docs/attach.md)
  std::vector<std::string> command;  // script and its arguments (or the program, with --no-purple)
  bool help = false;
};

// Parses ARGS (without the program name). Throws std::runtime_error with a message for the user.
Options parseOptions(const std::vector<std::string>& args);
extern const char* kUsage;

}  // namespace purple::launcher
