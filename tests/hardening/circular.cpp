// Every procedure on circular data (issue 11): each global procedure — builtins and prelude
// alike — is called with circular lists (in the cdr and in the car direction), circular
// association lists, self-containing vectors, a circular argument list for apply and a circular
// keyword tail, in the argument positions that list-walking procedures read (first, second,
// third, after a procedure, after a keyword). Each call must end within its budgets (1 s, 2
// million steps) in a value or a Purple error: a cycle check, or a safe point that honours the
// budget. A call still running 20 s later is a hang nothing can stop: the program names it and
// fails at once.
//
// usage: purple_circular_host [--only SUBSTRING] [--after NAME]
//   --only: the procedures whose name contains SUBSTRING; --after: those after NAME (in the
//   order of %global-names), to go on past a hang when hunting for several.
#include <purple/purple.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// The circular data, made afresh for every call (a call may mutate what it gets).
const char* kData =
    "(define (%circ) (let ((c (list 1 2 3))) (set-cdr! (cddr c) c) c))"
    "(define (%circ-car) (let ((d (list 1 2))) (set-car! d d) d))"
    "(define (%circ-alist) (let ((a (list (cons 'x 1) (cons \"x\" 2) (cons 3 3)))) (set-cdr! (cddr a) a) a))"
    "(define (%circ-vector) (let ((v (vector 1 2 3))) (vector-set! v 1 v) v))"
    "(define (%circ-nested) (list (%circ) (%circ)))"
    "(define (%circ-keys) (let ((k (list ':dim 0))) (set-cdr! (cdr k) k) k))"
    "(define (%circ-tensors) (let ((c (list (tensor-ones 2) (tensor-ones 2)))) (set-cdr! (cdr c) c) c))";

// How each procedure P is called; C is a fresh circular list.
const char* kCalls[] = {
    "(P C)",
    "(P C C)",
    "(P C 1)",
    "(P 1 C)",
    "(P 'x C)",
    "(P C C C)",
    "(P 1 2 C)",
    "(P car C)",
    "(P (lambda args #f) C)",
    "(P (lambda args #f) C C)",
    "(P + 0 C)",
    "(P list C C)",
    "(P (%circ-car))",
    "(P 1 (%circ-car))",
    "(P (%circ-alist))",
    "(P 'x (%circ-alist))",
    "(P \"x\" (%circ-alist))",
    "(P (%circ-alist) 'x)",
    "(P (%circ-vector))",
    "(P 1 (%circ-vector))",
    "(P (%circ-nested))",
    "(P (list (%circ-car)))",
    "(P (%circ-tensors))",
    "(P (tensor-ones 2 2) (%circ-tensors))",
    "(P (tensor-ones 2 2) :dim C)",
    "(apply P C)",
    "(apply P (tensor-ones 2 2) (%circ-keys))",
    "(apply P 1 (%circ-keys))",
};

std::string callText(const std::string& proc, const std::string& pattern) {
  std::string out;
  for (char ch : pattern) {
    if (ch == 'P') out += proc;
    else if (ch == 'C') out += "(%circ)";
    else out += ch;
  }
  return out;
}

// The hang detector: the driver announces each call; a call that outlives kHang is reported
// and the process exits (nothing else can stop it). At kNudge it is first interrupted, as a
// host would do, which counts as stopping only when the call then ends.
class HangDetector {
 public:
  static constexpr auto kNudge = std::chrono::seconds(10);
  static constexpr auto kHang = std::chrono::seconds(20);

  explicit HangDetector(purple::Interpreter& in) : in_(in), thread_([this] { run(); }) {}
  ~HangDetector() {
    {
      std::lock_guard<std::mutex> g(lock_);
      done_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  void begin(const std::string& procedure, const std::string& code) {
    std::lock_guard<std::mutex> g(lock_);
    procedure_ = procedure;
    code_ = code;
    started_ = Clock::now();
    busy_ = true;
    nudged_ = false;
    wake_.notify_one();
  }
  bool end() {   // true when the call needed the host's interrupt to stop
    std::lock_guard<std::mutex> g(lock_);
    busy_ = false;
    return nudged_;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> g(lock_);
    while (!done_) {
      if (!busy_) {
        wake_.wait(g);
        continue;
      }
      auto now = Clock::now();
      if (now - started_ > kHang) {
        std::fprintf(stderr, "FAIL: hang, neither the budgets nor interrupt() stopped it: %s\nHUNG-PROCEDURE %s\n",
                     code_.c_str(), procedure_.c_str());
        std::fflush(stderr);
        std::_Exit(1);
      }
      if (now - started_ > kNudge && !nudged_) {
        nudged_ = true;
        in_.interrupt();
      }
      wake_.wait_for(g, std::chrono::milliseconds(200));
    }
  }

  purple::Interpreter& in_;
  std::mutex lock_;
  std::condition_variable wake_;
  std::string procedure_, code_;
  Clock::time_point started_;
  bool busy_ = false, nudged_ = false, done_ = false;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string only, after;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--only") only = argv[i + 1];
    else if (std::string(argv[i]) == "--after") after = argv[i + 1];
  }
  std::ostringstream sink;   // what the calls print
  purple::Options options;
  options.limits = purple::Limits::sandbox();
  options.limits.maxSeconds = 1.0;
  options.limits.maxSteps = 2000000;
  options.limits.maxTensorBytes = int64_t(256) << 20;
  options.out = &sink;
  options.err = &sink;
  options.input = std::string("");
  purple::Interpreter in(options);
  in.eval(kData);
  std::vector<std::string> names;
  for (const purple::Value& v :
       in.eval("(filter (lambda (s) (and (guard (e (#t #f)) (procedure? (eval s)))"
               "                          (not (memq s '(%circ %circ-car %circ-alist %circ-vector %circ-nested %circ-keys %circ-tensors)))))"
               "        (%global-names))")
           .elements())
    names.push_back(v.str());

  std::map<std::string, int> kinds;          // how the calls ended
  std::vector<std::string> needInterrupt;    // stopped only by the host's interrupt()
  std::vector<std::string> budgetStops;      // stopped by the time or step budget
  size_t calls = 0, procedures = 0;
  HangDetector detector(in);
  bool skipping = !after.empty();
  for (const std::string& name : names) {
    if (skipping) {
      skipping = name != after;
      continue;
    }
    if (!only.empty() && name.find(only) == std::string::npos) continue;
    procedures++;
    if (std::getenv("PURPLE_CIRCULAR_TRACE")) std::fprintf(stderr, "PROCEDURE %s\n", name.c_str());
    for (const char* pattern : kCalls) {
      std::string code = callText(name, pattern);
      detector.begin(name, code);
      std::string kind = "value";
      try {
        in.eval(code);
      } catch (const purple::Error& e) {   // purple::Exit included
        kind = e.kind();
      }
      bool nudged = detector.end();
      sink.str("");
      calls++;
      kinds[kind]++;
      if (nudged) needInterrupt.push_back(code);
      else if (kind == "time-limit" || kind == "step-limit") budgetStops.push_back(kind + ": " + code);
    }
  }
  std::printf("%zu procedures, %zu calls on circular data\n", procedures, calls);
  for (auto& [kind, n] : kinds) std::printf("  %-16s %d\n", kind.c_str(), n);
  for (auto& s : budgetStops) std::printf("stopped by a budget (a safe point, no cycle check): %s\n", s.c_str());
  for (auto& s : needInterrupt) std::printf("FAIL: outlived its budgets, stopped only by interrupt(): %s\n", s.c_str());
  // the interpreter is intact afterwards
  bool alive = in.eval("(+ 1 2)").to<int64_t>() == 3;
  if (!alive) std::printf("FAIL: the interpreter does not answer afterwards\n");
  if (procedures < (only.empty() && after.empty() ? 500u : 1u)) {
    std::printf("FAIL: only %zu procedures found\n", procedures);
    return 1;
  }
  return needInterrupt.empty() && alive ? 0 : 1;
}
