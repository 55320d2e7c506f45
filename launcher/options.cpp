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
    "  --no-purple            SCRIPT is a program to run as is (torchrun's --no-python)\n"
    "  --purple PATH          the purple command to run (default: the one next to purple-run)\n"
    "  --listen-dir DIR       each rank serves a REPL on DIR/rank-N.sock: purple --attach DIR --all -e EXPR\n"
    "                         evaluates EXPR in every rank, purple --attach DIR/rank-N.sock in one\n"
    "Exit status: 0 when every rank exits 0; otherwise the first failed rank's status (1 when it was\n"
    "killed by a signal), after naming it; 130 after Ctrl-C, which stops every rank.\n";

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
      auto colon = v.find(':');   // torchrun's MIN:MAX: only fixed sizes here
      if (colon != std::string::npos) {
        if (v.substr(0, colon) != v.substr(colon + 1))
          throw std::runtime_error("--nnodes: elastic sizes (MIN:MAX) are not supported; give one number");
        v = v.substr(0, colon);
      }
      o.nnodes = toInt(flag, v, 1, 100000);
    } else if (flag == "--node-rank") {
      o.nodeRank = toInt(flag, next(), 0, 100000);
    } else if (flag == "--master-addr") {
      o.masterAddr = next();
      if (o.masterAddr.empty()) throw std::runtime_error("--master-addr needs a host name or address");
    } else if (flag == "--master-port") {
      o.masterPort = toInt(flag, next(), 1, 65535);
      masterPortGiven = true;
    } else if (flag == "--standalone") {
      o.nnodes = 1;
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
      if (toInt(flag, next(), 0, 1000) != 0) throw std::runtime_error("--max-restarts: restarting ranks is not supported");
    } else if (flag == "--rdzv-backend" || flag == "--rdzv-id" || flag == "--run-id" || flag == "--monitor-interval" ||
               flag == "--rdzv-conf" || flag == "--start-method" || flag == "--role") {
      next();   // accepted for torchrun command lines; ranks meet at MASTER_ADDR:MASTER_PORT, and
                // the others concern torchrun's agent (how Python starts workers, a label)
    } else if (flag == "--rdzv-endpoint") {
      std::string v = next();
      auto colon = v.rfind(':');
      if (colon == std::string::npos) {
        o.masterAddr = v;
      } else {
        o.masterAddr = v.substr(0, colon);
        o.masterPort = toInt(flag, v.substr(colon + 1), 1, 65535);
        masterPortGiven = true;
      }
    } else {
      throw std::runtime_error("unknown option " + a);
    }
  }
  for (; i < args.size(); i++) o.command.push_back(args[i]);
  if (o.help) return o;
  if (o.command.empty()) throw std::runtime_error("no script given");
  if (!o.listenDir.empty() && o.runAsIs)
    throw std::runtime_error("--listen-dir serves Purple ranks' REPLs; with --no-purple there are none");
  if (o.nodeRank >= o.nnodes)
    throw std::runtime_error("--node-rank " + std::to_string(o.nodeRank) + " is outside 0.." + std::to_string(o.nnodes - 1));
  if (!masterPortGiven && o.nnodes > 1) o.masterPort = 29500;
  return o;
}

}  // namespace purple::launcher
