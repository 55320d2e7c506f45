// purple-run's command line: torchrun's flags (both --nproc-per-node and --nproc_per_node
// spellings, `--flag value` and `--flag=value`), plus Purple's own.
#pragma once
#include <set>
#include <string>
#include <vector>

namespace purple::launcher {

struct Options {
  int nprocPerNode = 1;
  int nnodes = 1;                    // with elastic membership: the most nodes (MAX of MIN:MAX)
  int minNodes = 1;                  // MIN of --nnodes MIN:MAX (= nnodes for a fixed size)
  int nodeRank = 0;                  // -1: assigned at the rendezvous (--rdzv-backend c10d)
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

  // Restarts and rendezvous (rendezvous.hpp). With none of these the launcher starts its ranks
  // once and meets no other launcher, as before.
  int maxRestarts = 0;               // --max-restarts: times the job's ranks are started again
  std::string rdzvBackend = "static";   // "static" (node ranks given) or "c10d" (assigned)
  std::string rdzvHost;              // --rdzv-endpoint HOST[:PORT]; "" = --master-addr
  int rdzvPort = -1;                 // -1: --master-port (static), 29400 (c10d, torchrun's)
  std::string rdzvId = "none";       // --rdzv-id: launchers of other jobs are refused
  double joinTimeout = 600;          // --rdzv-conf join_timeout=S: for the nodes of a round
  double lastCallTimeout = 30;       // --rdzv-conf last_call_timeout=S: more nodes past MIN
  bool masterPortGiven = false;
  bool rdzvEndpointGiven = false;    // --rdzv-endpoint (or, with c10d, --master-addr/--master-port)
  // Whether the launchers coordinate (a rendezvous and restarts) rather than run once.
  bool agentMode() const { return maxRestarts > 0 || rdzvBackend == "c10d" || minNodes < nnodes; }
};

// Parses ARGS (without the program name). Throws std::runtime_error with a message for the user.
Options parseOptions(const std::vector<std::string>& args);
extern const char* kUsage;

}  // namespace purple::launcher
