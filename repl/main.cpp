// `purple`: REPL, script runner and one-shot evaluator, a client of the public embedding API
// (include/purple/purple.hpp) like any other host. The interpreter runs on the main thread
// switched to a 1 GB stack (reserved, not committed; purple::runOnLargeStack), so deep non-tail
// recursion reaches Purple's depth limit long before the C++ stack could overflow. It stays on
// the main thread because glibc serves it from its main malloc arena, where LibTorch's small
// allocations cost about 700 instructions less per tiny tensor op than in a second thread's
// arena (callgrind, 4x4 matmul + relu).
#include "repl/attach.hpp"
#include "repl/figures.hpp"
#include "repl/install_kernel.hpp"
#include "launcher/handoff.hpp"
#include "repl/repl.hpp"
#include "repl/tools.hpp"
#include <purple/purple.hpp>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

namespace {

const char* kUsage =
    "usage: purple [options] [FILE [ARGS...]]\n"
    "  (no FILE)       start the interactive REPL\n"
    "  FILE ARGS...    run the script FILE; (command-line) gives FILE and ARGS\n"
    "  check FILE...   report reader errors, unbound variables, wrong argument counts and provable\n"
    "                  shape mismatches without running anything (exit 1 when it finds some)\n"
    "  --lsp           speak the Language Server Protocol on stdin/stdout (docs/editors.md)\n"
    "  --listen SOCKET serve a REPL on the Unix socket SOCKET while FILE (or the REPL) runs:\n"
    "                  purple --attach SOCKET connects to it (docs/attach.md)\n"
    "  --attach SOCKET [-e EXPR]   a REPL inside the program serving SOCKET, or EXPR evaluated there;\n"
    "                  --attach DIR --all -e EXPR: on every rank of purple-run --listen-dir DIR\n"
    "  -e EXPR         evaluate EXPR and print its value\n"
    "  -i FILE         load FILE, then start the REPL\n"
    "  -I DIR          add DIR to the library search path (for import)\n"
    "  --sandbox       run FILE (or -e EXPR) as untrusted code: no files, processes, environment\n"
    "                  or process-wide settings (docs/sandbox.md); with the budgets below\n"
    "  --max-seconds S       stop the program after S seconds of wall-clock time\n"
    "  --max-steps N         stop it after N procedure calls\n"
    "  --max-memory M        cap the collected heap at M bytes (suffixes K, M, G)\n"
    "  --max-tensor-bytes B  cap live tensor storage at B bytes (suffixes K, M, G)\n"
    "  --profile FILE ARGS...  run FILE under the sampling profiler: time by procedure and line on\n"
    "                  standard error, folded stacks in PREFIX.folded, a flame graph in PREFIX.svg\n"
    "  --profile-out PREFIX    where --profile writes (default: purple-profile)\n"
    "  --track-tensor-memory   record where every tensor is made, for (tensor-memory-report)\n"
    "  --memory-stats          when the program ends, print how its tensors were freed: early, as\n"
    "                  their last reference died, or by the collector (tensor-memory-summary)\n"
    "  --install-kernel [--user|--system|--prefix DIR]\n"
    "                  register the Jupyter kernel (purple-kernel) for this user or everybody\n"
    "  --nproc-per-node N SCRIPT ARGS...   run SCRIPT as N ranks of a distributed job (purple-run --help)\n"
    "  --help          show this help\n"
    "  --version       show the Purple and LibTorch versions and whether CUDA is available\n"
    "environment: PURPLE_TENSOR_GC_THRESHOLD (bytes of new tensor storage between collections),\n"
    "             PURPLE_CHECK_TENSOR_LEAKS=1 (fail if a tensor is alive after the final collections;\n"
    "             =2 also reports how many collections that took)\n"
    "             PURPLE_FLUSH_DENORMAL=0 (keep subnormal floats; flushed to zero by default)\n"
    "             PURPLE_GC_STRESS=1 (collect very often; for testing)\n";

// At exit, with the interpreter gone: collect, and check no tensor survived.
int checkTensorLeaks(bool report) {
  purple::TensorCensus census = purple::collectGarbage();
  if (report) std::fprintf(stderr, "purple: exit census: %d collections\n", census.collections);
  if (census.liveTensors != 0) {
    std::fprintf(stderr, "purple: %lld tensors still alive after the final collections (%lld bytes, %d collections)\n",
                 (long long)census.liveTensors, (long long)census.bytes, census.collections);
    return 3;
  }
  return 0;
}

// "1500", "64K", "512M", "2G": a byte count (powers of 1024), or -1 when it is not one.
int64_t parseBytes(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return -1;
  size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    return -1;
  }
  std::string unit = text.substr(used);
  int shift = unit.empty() ? 0 : unit == "K" || unit == "k" ? 10 : unit == "M" || unit == "m" ? 20 : unit == "G" || unit == "g" ? 30 : -1;
  if (shift < 0 || n > (uint64_t(INT64_MAX) >> shift)) return -1;
  return int64_t(n << shift);
}

double parseSeconds(const std::string& text) {
  size_t used = 0;
  double s = -1;
  try {
    s = std::stod(text, &used);
  } catch (const std::exception&) {
    return -1;
  }
  return used == text.size() && s > 0 && std::isfinite(s) ? s : -1;
}

// TEXT as a Purple string literal.
std::string purpleString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The script's text, read by the command itself: a sandboxed interpreter may not open files.
bool readScript(const std::string& path, std::string& text) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream all;
  all << f.rdbuf();
  text = all.str();
  return !f.bad();
}

int run(const std::vector<std::string>& args) {
  using namespace purple;
  std::string script, expr, preload, listen;
  std::vector<std::string> scriptArgs, libDirs;
  bool sandbox = false, profile = false, trackTensorMemory = false, memoryStats = false;
  std::string profilePrefix = "purple-profile";
  Limits budgets;
  // `purple check` and `purple --lsp` are tools of their own (tools/); a script named check
  // still runs as ./check.
  if (!args.empty() && args[0] == "check") return repl::runTool("check-main", std::vector<std::string>(args.begin() + 1, args.end()));
  if (!args.empty() && args[0] == "--lsp") return repl::runTool("lsp-main", std::vector<std::string>(args.begin() + 1, args.end()));
  if (!args.empty() && args[0] == "--attach") return repl::runAttach(std::vector<std::string>(args.begin() + 1, args.end()));
  int64_t heapLimit = 0;
  auto badValue = [](const std::string& option, const std::string& value) {
    std::cerr << "purple: " << option << " needs a positive " << (option == "--max-seconds" ? "number of seconds" : "count")
              << ", got '" << value << "'\n";
    return 2;
  };
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (!script.empty()) {
      scriptArgs.push_back(a);
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--version" || a == "-v") {
      std::cout << versionLine() << "\n";
      return 0;
    } else if (a == "--install-kernel") {
      return repl::installKernel(std::vector<std::string>(args.begin() + long(i) + 1, args.end()));
    } else if (a == "-e" && i + 1 < args.size()) {
      expr = args[++i];
    } else if (a == "-i" && i + 1 < args.size()) {
      preload = args[++i];
    } else if (a == "-I" && i + 1 < args.size()) {
      libDirs.push_back(args[++i]);
    } else if (a == "--sandbox") {
      sandbox = true;
    } else if (a == "--listen") {
      if (i + 1 >= args.size() || args[i + 1].empty()) {
        std::cerr << "purple: --listen needs a socket path\n";
        return 2;
      }
      listen = args[++i];
    } else if (a == "--profile") {
      profile = true;
    } else if (a == "--profile-out" && i + 1 < args.size()) {
      profilePrefix = args[++i];
    } else if (a == "--track-tensor-memory") {
      trackTensorMemory = true;
    } else if (a == "--memory-stats") {
      memoryStats = true;
    } else if (a == "--max-seconds" || a == "--max-steps" || a == "--max-memory" || a == "--max-tensor-bytes") {
      if (i + 1 >= args.size()) return badValue(a, "");
      const std::string& v = args[++i];
      if (a == "--max-seconds") {
        budgets.maxSeconds = parseSeconds(v);
        if (budgets.maxSeconds <= 0) return badValue(a, v);
      } else {
        int64_t n = parseBytes(v);
        if (n <= 0 || (a == "--max-steps" && v.find_first_not_of("0123456789") != std::string::npos)) return badValue(a, v);
        (a == "--max-steps" ? budgets.maxSteps : a == "--max-memory" ? heapLimit : budgets.maxTensorBytes) = n;
      }
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      std::cerr << "purple: unknown option " << a << "\n" << kUsage;
      return 2;
    } else {
      script = a;
    }
  }
  if (profile && (script.empty() || sandbox)) {
    std::cerr << "purple: --profile runs a FILE, without --sandbox\n";
    return 2;
  }
  if (trackTensorMemory && sandbox) {
    std::cerr << "purple: --track-tensor-memory changes a process-wide setting, which --sandbox forbids\n";
    return 2;
  }
  if (sandbox && script.empty() && expr.empty()) {
    std::cerr << "purple: --sandbox runs a FILE or -e EXPR, not the REPL\n";
    return 2;
  }
  std::string scriptText;
  if (sandbox && !script.empty() && !readScript(script, scriptText)) {
    std::cerr << "purple: cannot read " << script << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  if (heapLimit > 0) setHeapLimit(size_t(heapLimit));
  int status = 0;
  {
    Options options;
    if (sandbox) {
      options.limits = Limits::sandbox();
      // Subnormal floats are flushed by a setting of the whole process, which a sandboxed
      // interpreter may not change: a plain one sets it first.
      const char* ftz = std::getenv("PURPLE_FLUSH_DENORMAL");
      if (!(ftz && std::strcmp(ftz, "0") == 0)) Interpreter().eval("(set-flush-denormal! #t)", "<startup>");
    }
    options.limits.maxSeconds = budgets.maxSeconds;
    options.limits.maxSteps = budgets.maxSteps;
    options.limits.maxTensorBytes = budgets.maxTensorBytes;
    options.libraryPath = libDirs;
    options.commandLine.push_back(script.empty() ? "purple" : script);
    for (auto& s : scriptArgs) options.commandLine.push_back(s);
    std::unique_ptr<Interpreter> interp;
    try {
      interp = std::make_unique<Interpreter>(options);
    } catch (const Error& e) {
      std::cerr << "purple: " << e.what() << "\n";
      return 1;
    }
    Interpreter& in = *interp;
    in.setDisplayHandler([](const MimeBundle& bundle, const std::string&, bool) { repl::showOnTerminal(bundle); });
    if (!listen.empty()) {
      // Before anything runs, so a client can attach from the first form on; under --sandbox the
      // clients' forms run under the same limits (they run on this interpreter).
      try {
        in.serveRepl(listen);
      } catch (const Error& e) {
        std::cerr << "purple: --listen: " << e.what() << "\n";
        return 1;
      }
    }
    try {
      // Subnormal floats make Adam ~80x slower on this kind of CPU (DESIGN.md); the command
      // flushes them to zero unless PURPLE_FLUSH_DENORMAL=0. Embedding hosts decide for themselves.
      const char* ftz = std::getenv("PURPLE_FLUSH_DENORMAL");
      if (!sandbox && !(ftz && std::strcmp(ftz, "0") == 0)) in.eval("(set-flush-denormal! #t)", "<startup>");
      if (trackTensorMemory) in.eval("(record-tensor-origins! #t)", "<startup>");
      if (!expr.empty()) {
        status = repl::evalAndPrint(in, expr, "<command line>", true) ? 0 : 1;
      } else if (!script.empty()) {
        try {
          if (sandbox) in.eval(scriptText, script);
          else if (profile) in.eval("(%profile-script " + purpleString(script) + " " + purpleString(profilePrefix) + ")", "<profile>");
          else in.load(script);
        } catch (const Exit&) {
          throw;
        } catch (const Error& e) {
          repl::reportError(in, e);
          status = 1;
        }
      } else {
        if (!preload.empty()) {
          try {
            in.load(preload);
          } catch (const Exit&) {
            throw;
          } catch (const Error& e) {
            repl::reportError(in, e);
          }
        }
        status = repl::runRepl(in, !listen.empty());
      }
    } catch (const Exit& e) {
      status = e.code();
    }
    if (memoryStats) {
      try {
        in.eval("(%print-memory-stats)", "<memory-stats>");
      } catch (const Exit&) {
      } catch (const Error& e) {
        repl::reportError(in, e);
      }
    }
    try {
      in.flush();
    } catch (const Error&) {
    }
  }
  return status;
}

[[noreturn]] void finish(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
  // Everything the program wrote is flushed and files are closed; skipping the destructors of
  // LibTorch's ~285 libraries saves ~70 ms of every run.
  std::_Exit(status);
}

}  // namespace

int main(int argc, char** argv) {
  if (purple::launcher::isLauncherCommandLine(argc, argv)) return purple::launcher::handOffToLauncher(argc, argv);
  std::vector<std::string> args;
  for (int i = 1; i < argc; i++) args.emplace_back(argv[i]);
  int status = purple::runOnLargeStack([&] { return run(args); });
  // The census runs here, back on the thread's own stack, after the large stack that held every
  // evaluation frame is unmapped: the collector scans the live part of a stack conservatively,
  // and dead values left in run()'s frame would count as references.
  const char* check = std::getenv("PURPLE_CHECK_TENSOR_LEAKS");
  if (check && (std::strcmp(check, "1") == 0 || std::strcmp(check, "2") == 0) && status == 0)
    status = checkTensorLeaks(check[0] == '2');
  finish(status);
}
