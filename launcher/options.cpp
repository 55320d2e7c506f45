#include "launcher/options.hpp"
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace purple::launcher {

const char* kUsage =
    "usage: purple-run [options] SCRIPT [ARGS...]\n"
    "       purple --nproc-per-node N [options] SCRIPT [ARGS...]\n"
    "Starts the ranks of a distributed job, each `purple SCRIPT ARGS...` with torchrun's environment\n"
    "(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT ...), so that (dist-init) joins them.\n"
    "  --nproc-per-node N     ranks on this machine (default 1); also cpu (one per core), gpu (one per\n"
    "                         visible GPU), auto (gpu when there are GPUs, else cpu)\n"
    "  --nnodes N             machines in the job (default 1)\n"
    "  --node-rank R          this machine's index, 0..nnodes-1 (default 0)\n"
    "  --master-addr HOST     the machine of rank 0, reachable from every machine (default 127.0.0.1)\n"
    "  --master-port PORT     the port rank 0 serves the store on (default: a free port on one machine,\n"
    "                         29500 with several)\n"
    "  --standalone           one machine, a free port (as torchrun's)\n"
    "  --prefix-output        prefix every output line with its rank: \"[rank1]: ...\"\n"
    "  --local-ranks-filter L show only the output of these local ranks (comma-separated)\n"
    "  --stop-timeout S       when a rank fails, the others get S seconds to end on their own, then\n"
    "                         SIGTERM, then SIGKILL S seconds later (default 5)\n"
    "  --max-restarts N       when a rank fails, stop every rank of the job (on every machine) and start\n"
    "                         them again, up to N times; each sees TORCHELASTIC_RESTART_COUNT (default 0)\n"
    "  --rdzv-backend B       static (default: each machine gives --node-rank) or c10d (the launchers meet\n"
    "                         at --rdzv-endpoint and are given node ranks in the order they join)\n"
    "  --rdzv-endpoint H:P    where the launchers meet (c10d; default port 29400)\n"
    "  --rdzv-id ID           the job's name: launchers of another job are turned away\n"
    "  --nnodes MIN:MAX       elastic membership (c10d): start with MIN machines or more, up to MAX; a\n"
    "                         machine that joins later restarts the job with it\n"
    "  --rdzv-conf K=V,...    join_timeout (600 s) for the machines of a round, last_call_timeout (30 s)\n"
    "                         for more machines once MIN have joined\n"
    "  --no-purple            SCRIPT is a program to run as is (torchrun's --no-python)\n"
    "  --purple PATH          the purple command to run (default: the one next to purple-run)\n"
    "  --listen-dir DIR       each rank serves a REPL on DIR/rank-N.sock: purple --attach DIR --all -e EXPR\n"
    "                         evaluates EXPR in every rank, purple --attach DIR/rank-N.sock in one\n"
    "Exit status: 0 when every rank exits 0; otherwise the first failed rank's status (1 when it was\n"
    "killed by a signal, or failed on another machine), after naming it; 130 after Ctrl-C, which stops every rank.\n";

namespace {

int toInt(const std::string& flag, const std::string& v, int low, int high) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || x < low || x > high) {
    std::ostringstream m;
    m << flag << " must be an integer in " << low << ".." << high << ", got \"" << v << "\"";
    throw std::runtime_error(m.str());
  }
  return int(x);
}

// GPUs this process may use, without loading CUDA: CUDA_VISIBLE_DEVICES when set, else the
// /dev/nvidiaN device files.
int visibleGpus() {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::stringstream ss(v);
    std::string part;
    int n = 0;
    while (std::getline(ss, part, ','))
      if (!part.empty() && part != "-1") n++;
    return n;
  }
  int n = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    std::string name = e.path().filename().string();
    if (name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      n++;
  }
  return n;
}

// torchrun's --nproc-per-node values: a number, "cpu" (one rank per core), "gpu" (one per GPU),
// "auto" (one per GPU when there are GPUs, else one per core).
int nprocValue(const std::string& flag, const std::string& v) {
  if (v == "cpu" || v == "auto" || v == "gpu") {
    int gpus = v == "cpu" ? 0 : visibleGpus();
    if (v == "gpu" && gpus == 0) throw std::runtime_error(flag + " gpu: this machine has no visible GPU");
    if (gpus > 0) return gpus;
    long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? int(cores) : 1;
  }
  return toInt(flag, v, 1, 4096);
}

std::string canonical(std::string flag) {
  for (auto& c : flag)
    if (c == '_') c = '-';
  return flag;
}

double seconds(const std::string& what, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(x > 0)) throw std::runtime_error(what + " must be a positive number of seconds, got \"" + v + "\"");
  return x;
}

// torchrun's --rdzv-conf KEY=VALUE,...: the two timeouts of a round are used; its other keys
// (read_timeout, close_timeout, keep_alive_*, is_host, timeout) concern torchrun's store and
// are accepted as they are.
void parseRendezvousConf(const std::string& conf, Options& o) {
  std::stringstream ss(conf);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--rdzv-conf: expected KEY=VALUE, got \"" + item + "\"");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "join_timeout") o.joinTimeout = seconds("--rdzv-conf join_timeout", value);
    else if (key == "last_call_timeout") o.lastCallTimeout = seconds("--rdzv-conf last_call_timeout", value);
  }
}

}  // namespace

Options parseOptions(const std::vector<std::string>& args) {
  Options o;
  bool masterPortGiven = false;
  size_t i = 0;
  for (; i < args.size(); i++) {
    std::string a = args[i];
    if (a == "--") {
      i++;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;
    std::string flag = a, value;
    bool hasValue = false;
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      hasValue = true;
    }
    flag = canonical(flag);
    auto next = [&]() -> std::string {
      if (hasValue) return value;
      if (i + 1 >= args.size()) throw std::runtime_error(flag + " needs a value");
      return args[++i];
    };
    if (flag == "-h" || flag == "--help") {
      o.help = true;
    } else if (flag == "--nproc-per-node") {
      o.nprocPerNode = nprocValue(flag, next());
    } else if (flag == "--nnodes") {
      std::string v = next();
      auto colon = v.find(':');   // torchrun's MIN:MAX (elastic membership)
      if (colon != std::string::npos) {
        o.minNodes = toInt(flag + " (MIN of MIN:MAX)", v.substr(0, colon), 1, 100000);
        o.nnodes = toInt(flag + " (MAX of MIN:MAX)", v.substr(colon + 1), 1, 100000);
        if (o.minNodes > o.nnodes) throw std::runtime_error("--nnodes " + v + ": MIN is above MAX");
      } else {
        o.nnodes = o.minNodes = toInt(flag, v, 1, 100000);
      }
    } else if (flag == "--node-rank") {
      o.nodeRank = toInt(flag, next(), 0, 100000);
    } else if (flag == "--master-addr") {
      o.masterAddr = next();
      if (o.masterAddr.empty()) throw std::runtime_error("--master-addr needs a host name or address");
    } else if (flag == "--master-port") {
      o.masterPort = toInt(flag, next(), 1, 65535);
      masterPortGiven = true;
    } else if (flag == "--standalone") {
      o.nnodes = o.minNodes = 1;
      o.nodeRank = 0;
    } else if (flag == "--prefix-output" || flag == "--tag-output") {
      o.prefixOutput = true;
    } else if (flag == "--local-ranks-filter") {
      std::stringstream ss(next());
      std::string part;
      while (std::getline(ss, part, ','))
        if (!part.empty()) o.localRanksShown.insert(toInt(flag, part, 0, 4095));
    } else if (flag == "--stop-timeout") {
      std::string v = next();
      char* end = nullptr;
      o.stopTimeout = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(o.stopTimeout >= 0))
        throw std::runtime_error("--stop-timeout must be a number of seconds, got \"" + v + "\"");
    } else if (flag == "--no-purple" || flag == "--no-python") {
      o.runAsIs = true;
    } else if (flag == "--purple") {
      o.purple = next();
    } else if (flag == "--listen-dir") {
      o.listenDir = next();
      if (o.listenDir.empty()) throw std::runtime_error("--listen-dir needs a directory");
    } else if (flag == "--max-restarts") {
      o.maxRestarts = toInt(flag, next(), 0, 1000000);
    } else if (flag == "--rdzv-backend") {
      o.rdzvBackend = next();
      if (o.rdzvBackend != "static" && o.rdzvBackend != "c10d")
        throw std::runtime_error("--rdzv-backend " + o.rdzvBackend + " is not supported: use c10d (node ranks assigned as "
                                 "launchers join) or static (given with --node-rank)");
    } else if (flag == "--rdzv-id" || flag == "--run-id") {
      o.rdzvId = next();
      if (o.rdzvId.empty() || o.rdzvId.find_first_of(" \t\n") != std::string::npos)
        throw std::runtime_error(flag + " must be a word without spaces");
    } else if (flag == "--rdzv-conf") {
      parseRendezvousConf(next(), o);
    } else if (flag == "--monitor-interval" || flag == "--start-method" || flag == "--role") {
      next();   // accepted for torchrun command lines: how torchrun's agent polls and starts Python
                // workers, and a label
    } else if (flag == "--rdzv-endpoint") {
      std::string v = next();
      auto colon = v.rfind(':');
      if (colon == std::string::npos || v.find(']', colon) != std::string::npos) {
        o.rdzvHost = v;
      } else {
        o.rdzvHost = v.substr(0, colon);
        o.rdzvPort = toInt(flag, v.substr(colon + 1), 0, 65535);
      }
      if (o.rdzvHost.size() > 2 && o.rdzvHost.front() == '[' && o.rdzvHost.back() == ']')
        o.rdzvHost = o.rdzvHost.substr(1, o.rdzvHost.size() - 2);
      if (o.rdzvHost.empty()) throw std::runtime_error("--rdzv-endpoint needs a host name or address");
    } else {
      throw std::runtime_error("unknown option " + a);
    }
  }
  for (; i < args.size(); i++) o.command.push_back(args[i]);
  if (o.help) return o;
  if (o.command.empty()) throw std::runtime_error("no script given");
  if (!o.listenDir.empty() && o.runAsIs)
    throw std::runtime_error("--listen-dir serves Purple ranks' REPLs; with --no-purple there are none");
  if (o.minNodes < o.nnodes && o.rdzvBackend != "c10d")
    throw std::runtime_error("--nnodes " + std::to_string(o.minNodes) + ":" + std::to_string(o.nnodes) +
                             ": elastic membership needs --rdzv-backend c10d (node ranks are assigned as launchers join)");
  if (o.rdzvBackend == "static") {
    // torchrun's static rendezvous: the endpoint, when given, is where rank 0 serves the store
    if (!o.rdzvHost.empty()) o.masterAddr = o.rdzvHost;
    if (o.rdzvPort > 0) {
      o.masterPort = o.rdzvPort;
      masterPortGiven = true;
    }
    if (o.nodeRank >= o.nnodes)
      throw std::runtime_error("--node-rank " + std::to_string(o.nodeRank) + " is outside 0.." + std::to_string(o.nnodes - 1));
  } else {
    // c10d: the launchers meet at the endpoint (torchrun's default port 29400); node ranks are
    // assigned in the order they join, the endpoint's own launcher first
    o.rdzvEndpointGiven = !o.rdzvHost.empty() || masterPortGiven;
    if (o.rdzvHost.empty()) o.rdzvHost = o.masterAddr;
    if (o.rdzvPort < 0) o.rdzvPort = masterPortGiven ? o.masterPort : 29400;
    o.nodeRank = -1;
  }
  o.masterPortGiven = masterPortGiven;
  if (!masterPortGiven && o.nnodes > 1) o.masterPort = 29500;
  return o;
}

}  // namespace purple::launcher
