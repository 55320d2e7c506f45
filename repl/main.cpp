// `purple`: REPL, script runner and one-shot evaluator. The interpreter runs on a 1 GB stack
// (reserved, not committed), so deep non-tail recursion reaches Purple's depth limit and raises
// an error long before the C++ stack could overflow. It is the main thread's own stack switched
// to a mapped region, not a new thread: glibc serves the main thread from its main malloc
// arena, where LibTorch's small allocations cost about 700 instructions less per tiny tensor
// op than in a second thread's arena (callgrind, 4x4 matmul + relu).
#include "interp/gc.hpp"
#include "interp/interp.hpp"
#include "interp/port.hpp"
#include "interp/printer.hpp"
#include "interp/tensor_value.hpp"
#include "interp/version.hpp"
#include "launcher/handoff.hpp"
#include "repl/repl.hpp"
#include <gc/gc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

const char* kUsage =
    "usage: purple [options] [FILE [ARGS...]]\n"
    "  (no FILE)       start the interactive REPL\n"
    "  FILE ARGS...    run the script FILE; (command-line) gives FILE and ARGS\n"
    "  -e EXPR         evaluate EXPR and print its value\n"
    "  -i FILE         load FILE, then start the REPL\n"
    "  -I DIR          add DIR to the library search path (for import)\n"
    "  --nproc-per-node N SCRIPT ARGS...   run SCRIPT as N ranks of a distributed job (purple-run --help)\n"
    "  --help          show this help\n"
    "  --version       show the Purple and LibTorch versions and whether CUDA is available\n"
    "environment: PURPLE_TENSOR_GC_THRESHOLD (bytes of new tensor storage between collections),\n"
    "             PURPLE_CHECK_TENSOR_LEAKS=1 (fail if a tensor is alive after the final collection)\n"
    "             PURPLE_FLUSH_DENORMAL=0 (keep subnormal floats; flushed to zero by default)\n"
    "             PURPLE_GC_STRESS=1 (collect very often; for testing)\n";

struct Job {
  std::vector<std::string> args;
  int status = 0;
};

// At exit: drop the interpreter's roots, collect, and check no tensor survived.
int checkTensorLeaks() {
  for (int i = 0; i < 3; i++) purple::gcCollectNow();
  auto stats = purple::tensorMemoryStats();
  if (stats.liveTensors != 0) {
    std::fprintf(stderr, "purple: %lld tensors still alive after the final collection (%lld bytes)\n",
                 (long long)stats.liveTensors, (long long)stats.countedBytes);
    return 3;
  }
  return 0;
}

int run(const std::vector<std::string>& args) {
  using namespace purple;
  std::string script, expr, preload;
  std::vector<std::string> scriptArgs, libDirs;
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
    } else if (a == "-e" && i + 1 < args.size()) {
      expr = args[++i];
    } else if (a == "-i" && i + 1 < args.size()) {
      preload = args[++i];
    } else if (a == "-I" && i + 1 < args.size()) {
      libDirs.push_back(args[++i]);
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      std::cerr << "purple: unknown option " << a << "\n" << kUsage;
      return 2;
    } else {
      script = a;
    }
  }
  int status = 0;
  {
    auto* interp = new Interp();
    Interp& in = *interp;
    InterpScope scope(&in);
    in.libraryPath = libDirs;
    // Subnormal floats make Adam ~80x slower on this kind of CPU (DESIGN.md); the command
    // flushes them to zero unless PURPLE_FLUSH_DENORMAL=0. Embedding hosts decide for themselves.
    const char* ftz = std::getenv("PURPLE_FLUSH_DENORMAL");
    if (!(ftz && std::strcmp(ftz, "0") == 0)) in.evalString("(set-flush-denormal! #t)", "<startup>");
    in.commandLine.push_back(script.empty() ? "purple" : script);
    for (auto& s : scriptArgs) in.commandLine.push_back(s);
    try {
      if (!expr.empty()) {
        status = evalAndPrint(in, expr, "<command line>", true) ? 0 : 1;
      } else if (!script.empty()) {
        try {
          in.resetBudgets();
          in.loadFile(script);
        } catch (const PurpleException& e) {
          reportError(in, e);
          status = 1;
        }
      } else {
        if (!preload.empty()) {
          try {
            in.loadFile(preload);
          } catch (const PurpleException& e) {
            reportError(in, e);
          }
        }
        status = runRepl(in);
      }
    } catch (const PurpleExit& e) {
      status = e.code;
    }
    portFlush(in.currentOutputPort());
    portFlush(in.currentErrorPort());
    delete interp;
  }
  const char* check = std::getenv("PURPLE_CHECK_TENSOR_LEAKS");
  if (check && std::strcmp(check, "1") == 0 && status == 0) status = checkTensorLeaks();
  return status;
}

constexpr size_t kStackBytes = size_t(1) << 30;
constexpr size_t kGuardBytes = 64 * 1024;
Job* gJob = nullptr;
char* gStack = nullptr;

void* setStackBottom(void* sb) {
  GC_set_stackbottom(nullptr, static_cast<GC_stack_base*>(sb));
  return nullptr;
}

[[noreturn]] void finish(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
  // Everything the program wrote is flushed and files are closed; skipping the destructors of
  // LibTorch's ~285 libraries saves ~70 ms of every run.
  std::_Exit(status);
}

// The first frame on the big stack. The collector is told where this stack ends (it scans the
// main thread from its stack pointer up to that bottom), and the evaluator where it begins.
void onBigStack() {
  GC_stack_base sb{};
  sb.mem_base = gStack + kStackBytes;
  GC_call_with_alloc_lock(setStackBottom, &sb);
  // Keep 256 KB above the guard for the C++ code (LibTorch included) below the deepest eval.
  purple::setCurrentThreadStackLimit(gStack + kGuardBytes + 256 * 1024);
  finish(run(gJob->args));
}

}  // namespace

int main(int argc, char** argv) {
  if (purple::launcher::isLauncherCommandLine(argc, argv)) return purple::launcher::handOffToLauncher(argc, argv);
  purple::gcInit();
  Job job;
  for (int i = 1; i < argc; i++) job.args.emplace_back(argv[i]);
  gJob = &job;
  void* mem = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  static ucontext_t mainContext, bigContext;
  if (mem != MAP_FAILED && mprotect(mem, kGuardBytes, PROT_NONE) == 0 && getcontext(&bigContext) == 0) {
    gStack = static_cast<char*>(mem);
    bigContext.uc_stack.ss_sp = gStack;
    bigContext.uc_stack.ss_size = kStackBytes;
    bigContext.uc_link = &mainContext;
    makecontext(&bigContext, onBigStack, 0);
    swapcontext(&mainContext, &bigContext);   // does not come back: onBigStack exits
  }
  finish(run(job.args));   // no big stack: the main thread's own
}
