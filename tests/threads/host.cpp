// A host with threads (issue 11): Purple first used on a worker thread that then exits, used
// again on other threads; four threads with one interpreter each, running at once and
// collecting garbage; deep recursion on threads with small stacks. Any failure is an abort or
// a signal, so the test is that this program exits 0.
#include <purple/purple.hpp>

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<int> failures{0};

void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  failures++;
}

// Runs f on a new thread with a stack of `stackBytes` (0: the default) and waits for it.
void onThread(size_t stackBytes, const std::function<void()>& f) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (stackBytes) pthread_attr_setstacksize(&attr, stackBytes);
  auto* job = new std::function<void()>(f);
  pthread_t t;
  int rc = pthread_create(&t, &attr, [](void* p) -> void* {
    auto* g = static_cast<std::function<void()>*>(p);
    try {
      (*g)();
    } catch (const std::exception& e) {
      fail(std::string("exception on a thread: ") + e.what());
    }
    delete g;
    return nullptr;
  }, job);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    delete job;
    fail("pthread_create");
    return;
  }
  pthread_join(t, nullptr);
}

// Allocation-heavy work that needs collections: lists, strings, closures, tensors.
const char* kWork =
    "(define (churn n acc)"
    "  (if (= n 0) (length acc)"
    "      (churn (- n 1) (cons (list n (number->string n) (lambda () n) (tensor-ones 4 4)) (if (> (length acc) 50) '() acc)))))"
    "(define total 0)"
    "(do ((i 0 (+ i 1))) ((= i 20)) (set! total (+ total (churn 2000 '()))) (gc))"
    "total";

void useOnce(const std::string& who) {
  purple::Interpreter interp;
  int64_t v = interp.eval("(let loop ((i 0) (s 0)) (if (= i 100000) s (loop (+ i 1) (+ s i))))").to<int64_t>();
  if (v != 4999950000) fail(who + ": wrong sum");
  interp.eval("(gc)");
}

void deepRecursion(const std::string& who) {
  purple::Interpreter interp;
  try {
    interp.eval("(define (f n) (+ 1 (f (+ n 1)))) (f 0)");
    fail(who + ": no error from unbounded recursion");
  } catch (const purple::Error& e) {
    if (e.kind() != "recursion-error") fail(who + ": expected recursion-error, got " + e.kind() + ": " + e.message());
  }
  // deep but bounded recursion through a builtin that calls back (map), and deep data
  try {
    interp.eval("(define (m l) (map m (list l))) (m 1)");
    fail(who + ": no error from recursion through map");
  } catch (const purple::Error& e) {
    if (e.kind() != "recursion-error") fail(who + ": map recursion gave " + e.kind());
  }
  try {
    interp.eval("(define (nest n) (if (= n 0) '() (list (nest (- n 1))))) (write-string (let ((p (open-output-string))) (write (nest 100000) p) \"x\"))");
  } catch (const purple::Error& e) {
    if (e.kind() != "recursion-error") fail(who + ": deep data gave " + e.kind());
  }
  // and the interpreter still works
  if (interp.eval("(+ 1 2)").to<int64_t>() != 3) fail(who + ": broken after recursion-error");
}

}  // namespace

int main() {
  // 1. First use on a worker thread, which exits; then other threads, then this one.
  onThread(0, [] { useOnce("first worker"); });
  onThread(0, [] { useOnce("second worker"); });
  onThread(0, [] { useOnce("third worker"); });
  useOnce("main thread");

  // 2. Four threads, one interpreter each, at the same time.
  for (int round = 0; round < 3; round++) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) {
      threads.emplace_back([t, round] {
        purple::Interpreter interp;
        int64_t v = interp.eval(kWork).to<int64_t>();
        if (v <= 0) fail("worker " + std::to_string(t) + " round " + std::to_string(round));
      });
    }
    for (auto& th : threads) th.join();
  }

  // 3. Deep recursion on small stacks: a Purple error, never a crash. Below 512 KB the prelude
  // itself may not fit: making the interpreter is then refused with an error, also no crash.
  for (size_t kb : {512, 1024, 2048}) {
    onThread(kb * 1024, [kb] { deepRecursion(std::to_string(kb) + " KB stack"); });
  }
  for (size_t kb : {128, 256}) {
    onThread(kb * 1024, [kb] {
      try {
        deepRecursion(std::to_string(kb) + " KB stack");
      } catch (const purple::Error& e) {
        std::printf("%zu KB stack: %s\n", kb, e.message().c_str());
      }
    });
  }

  if (failures) {
    std::fprintf(stderr, "%d failures\n", failures.load());
    return 1;
  }
  std::puts("threads: ok");
  return 0;
}
