// Big exact arithmetic in a threaded host. Each GMP call on big operands runs on a worker thread
// so that a budget or interrupt() can stop it (interp/limits/gmp_worker.cpp); a stopped call's worker
// runs on, abandoned, for as long as the operation takes (a gcd of two 40-Mbit integers: 5 to 12 s
// here). Four interpreters on four threads, each under a 1 s budget, abandon such work round after
// round while a fifth is stopped by interrupt() from a watchdog thread. Every stop must come at
// its budget, and the work each interpreter does next (moderately big numbers, a few
// milliseconds) must not wait for the abandoned workers: once every worker slot was held by
// abandoned work, it waited for a slot past its own budget.
#include "checks.hpp"
#include <purple/purple.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

using hardening::check;
using hardening::failures;

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The error kind an evaluation ends in, or "none".
std::string errorKind(purple::Interpreter& in, const char* source) {
  try {
    in.eval(source);
    return "none";
  } catch (const purple::Error& e) {
    return e.kind();
  }
}

const char* kHugeGcd = "(gcd (- (expt 3 25000000) 1) (- (expt 5 17000000) 3))";
const char* kHugeQuotient = "(/ (+ (expt 3 11000000) 1) (- (expt 7 6000000) 2))";
// Operands of about 160,000 bits: past the worker threshold for gcds, a few milliseconds of work.
const char* kModerateGcd = "(gcd (* (expt 3 100000) 3125) (* (expt 7 90000) 3125))";

void budgetedRounds(int thread) {
  purple::Options options;
  options.limits = purple::Limits::sandbox();
  options.limits.maxSeconds = 1;
  options.limits.maxSteps = 0;
  purple::Interpreter in(options);
  for (int round = 0; round < 3; round++) {
    auto start = Clock::now();
    std::string kind = errorKind(in, round % 2 ? kHugeQuotient : kHugeGcd);
    double seconds = secondsSince(start);
    std::string where = "thread " + std::to_string(thread) + " round " + std::to_string(round);
    check(kind == "time-limit", where + ": huge operation stopped by the budget (" + kind + ")");
    check(seconds < 2.5, where + ": stopped after " + std::to_string(seconds) + " s (budget 1 s)");
    std::string result;
    try {
      result = in.eval(kModerateGcd).repr();
    } catch (const purple::Error& e) {
      result = e.kind() + ": " + e.what();
    }
    check(result == "3125", where + ": moderate gcd next, under the same budget, gives " + result);
  }
}

void interruptedRounds() {
  purple::Interpreter in;
  std::atomic<bool> stop{false};
  std::thread watchdog([&] {
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      in.interrupt();
    }
  });
  for (int round = 0; round < 3; round++) {
    auto start = Clock::now();
    std::string kind = errorKind(in, kHugeGcd);
    double seconds = secondsSince(start);
    check(kind == "interrupt", "interrupted round " + std::to_string(round) + ": " + kind + " after " +
                                   std::to_string(seconds) + " s (an interrupt every 0.7 s)");
    check(seconds < 2.5, "interrupted round " + std::to_string(round) + ": stopped in time");
  }
  stop = true;
  watchdog.join();
}

}  // namespace

int main() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) threads.emplace_back(budgetedRounds, t);
  threads.emplace_back(interruptedRounds);
  for (auto& t : threads) t.join();

  purple::Interpreter in;
  check(in.eval("(= (* (expt 3 1500000) (expt 3 1500000)) (expt 3 3000000))").isTrue(),
        "results still right afterwards");
  std::printf("%d failure(s)\n", failures.load());
  // Abandoned workers may still be running: returning ends them with the process.
  return failures ? 1 : 0;
}
