// maxTensorBytes (issue 11), in a process of its own so that its peak memory is its own:
// - an allocation past the cap is refused before it is made: the process's peak resident
//   memory (VmHWM) does not grow by the size asked for;
// - the budget is per interpreter: a capped interpreter makes small tensors while another
//   interpreter holds more than the cap, and two capped interpreters each have the whole cap;
// - what an interpreter holds is counted against it until collected, whichever thread frees it.
#include "checks.hpp"
#include <purple/purple.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace {

using hardening::check;
using hardening::failures;

// The process's peak resident set, in bytes, from /proc/self/status (VmHWM).
int64_t peakRss() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  return -1;
}

// Resets the peak to the current resident set (Linux 4.0+); false when not permitted.
bool resetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  if (!clear) return false;
  clear << "5";
  clear.flush();
  return bool(clear);
}

std::string errorKind(purple::Interpreter& in, const std::string& code) {
  try {
    in.eval(code);
  } catch (const purple::Error& e) {
    return e.kind();
  }
  return "no error";
}

purple::Options capped(int64_t bytes) {
  purple::Options o;
  o.limits = purple::Limits::sandbox();
  o.limits.maxTensorBytes = bytes;
  return o;
}

constexpr int64_t MB = int64_t(1) << 20;

}  // namespace

int main() {
  // ---- refused before it is made ----
  {
    purple::Interpreter in(capped(64 * MB));
    in.eval("(tensor-ones 16 16)");   // LibTorch's own first-use allocations happen here
    // Each asks for 1.6 GB at once (20000 x 20000 float32), through a different path.
    const char* huge[] = {
        "(tensor-ones 20000 20000)",
        "(tensor-zeros 20000 20000)",
        "(tensor-randn 20000 20000)",
        "(tensor-full '(20000 20000) 7.)",
        "(tensor-arange 0 400000000)",
        "(tensor-contiguous (tensor-expand (tensor-ones 1 1) 20000 20000))",
        "(tensor-matmul (tensor-ones 20000 1) (tensor-ones 1 20000))",
        "(* (tensor-ones 20000 1) (tensor-ones 1 20000))",
        "(tensor-ones 20000 20000 :dtype 'float64)",
    };
    for (const char* code : huge) {
      bool reset = resetPeakRss();
      int64_t before = reset ? peakRss() : -1;
      std::string kind = errorKind(in, code);
      check(kind == "memory-error", std::string(code) + " under a 64 MB cap is a memory-error (got " + kind + ")");
      if (reset) {
        int64_t grew = peakRss() - before;
        check(grew < 200 * MB, std::string(code) + ": peak RSS grew by " + std::to_string(grew / MB) +
                                   " MB (the 1.6 GB were never touched)");
      }
    }
    if (!resetPeakRss()) std::printf("note: /proc/self/clear_refs not writable, peak RSS not measured\n");
    // the live total: 4 x 20 MB held at once passes 64 MB; dropped and collected, it fits again
    check(errorKind(in, "(define held (list (tensor-ones 5000000) (tensor-ones 5000000) (tensor-ones 5000000)"
                        " (tensor-ones 5000000)))") == "memory-error",
          "80 MB held at once under a 64 MB cap is a memory-error");
    in.eval("(define held #f) (gc)");
    check(in.eval("(tensor-numel (tensor-ones 5000000))").to<int64_t>() == 5000000,
          "after the garbage is collected, 20 MB fit again");
  }

  // ---- per interpreter ----
  {
    purple::Interpreter host;                        // no cap
    host.eval("(define big (tensor-ones 25000000))");   // 100 MB
    purple::Interpreter sandbox(capped(64 * MB));
    check(errorKind(sandbox, "(define small (tensor-ones 1024))") == "no error",
          "a 64 MB-capped interpreter makes a 4 KB tensor while another holds 100 MB");
    check(errorKind(sandbox, "(define mid (tensor-ones 10000000))") == "no error",
          "... and a 40 MB one");
    purple::Interpreter second(capped(64 * MB));
    check(errorKind(second, "(define mid (tensor-ones 10000000))") == "no error",
          "a second capped interpreter has its own 64 MB while the first holds 40 MB");
    check(errorKind(second, "(define more (tensor-ones 10000000))") == "memory-error",
          "... and its own 80 MB go past its cap");
    check(errorKind(sandbox, "(define more (tensor-ones 10000000))") == "memory-error",
          "the first one's 80 MB go past its cap too");
    // a tensor made by the host and handed in is not the sandbox's
    sandbox.setValue("host-tensor", host.eval("big"));
    check(errorKind(sandbox, "(tensor-numel host-tensor)") == "no error", "a host's tensor handed in is usable");
    // the first interpreter's tensors, freed after it is gone, do not disturb anybody
    host.eval("(define big #f)");
  }
  {
    // capped interpreters on two threads at once, each making 20 MB tensors 20 times (garbage
    // included, more than its cap: collections free what each has dropped)
    int ok[2] = {0, 0};
    auto work = [&ok](int i) {
      purple::Interpreter in(capped(64 * MB));
      for (int k = 0; k < 20; k++) {
        if (errorKind(in, "(define t (tensor-ones 5000000)) (tensor-numel t)") == "no error") ok[i]++;
      }
    };
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    check(ok[0] == 20 && ok[1] == 20, "two capped interpreters on two threads each stay within their own cap (" +
                                          std::to_string(ok[0]) + ", " + std::to_string(ok[1]) + " of 20)");
  }
  std::printf("%d failed\n", failures.load());
  return failures ? 1 : 0;
}
