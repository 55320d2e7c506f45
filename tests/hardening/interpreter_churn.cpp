// A host that makes and destroys interpreters all its life (a server with one sandboxed
// interpreter per request, a fuzzer) must not grow. Each interpreter used to leave about 790 KB
// behind: the metadata of its ~1,900 builtins (names, docs, parameter tables, the C++ callables)
// was allocated anew for every interpreter and never freed. That metadata is now made once per
// process and shared, so after the first interpreter the growth per interpreter must be small.
//
// Measured: malloc'd bytes in use (mallinfo2) and the collector's heap, after a full collection,
// between interpreter 20 and interpreter 20 + N; then the same with 4 threads making
// interpreters at once (the shared metadata is made under a lock, and must come out the same).
#include "checks.hpp"
#include <purple/purple.hpp>

#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

using hardening::check;
using hardening::failures;

// One short life: builtins with keywords and defaults, a closure, a tensor, a caught error, host
// functions, a sandboxed interpreter (whose refused builtins are wrapped).
void oneInterpreter(bool sandboxed) {
  purple::Options options;
  if (sandboxed) options.limits = purple::Limits::sandbox();
  purple::Interpreter in(options);
  in.define("host-twice", [](int64_t x) { return 2 * x; }, "Twice X.");
  // Host functions have metadata of their own (not shared): freed with their procedures.
  for (int k = 0; k < 40; k++)
    in.define("host-add-" + std::to_string(k), [k](int64_t x, int64_t y) { return x + y + k; },
              "X plus Y plus a constant.");
  int64_t r = in.eval(
                    "(define (f n) (if (< n 2) n (+ (f (- n 1)) (f (- n 2)))))"
                    "(define t (tensor-sum (tensor-ones 4 4) :dim 0))"
                    "(guard (e (#t 0)) (car 5))"
                    "(+ (f 10) (host-twice 3) (host-add-39 -39 0) (tensor-item (tensor-sum t)))")
                  .to<int64_t>();
  if (r != 55 + 6 + 16) {
    std::printf("FAIL: wrong result %lld\n", static_cast<long long>(r));
    failures++;
  }
}

size_t mallocInUse() { return mallinfo2().uordblks + mallinfo2().hblkhd; }

struct Usage {
  size_t malloced;
  size_t gcHeap;   // in use: heap size less free bytes
};

Usage usageAfterCollection() {
  purple::collectGarbage();
  purple::collectGarbage();   // finalizers run by the first may free more
  Usage u;
  u.malloced = mallocInUse();
  purple::Interpreter probe;
  u.gcHeap = size_t(
      probe.eval("(let ((s (gc-stats))) (- (cdr (assq 'heap-bytes s)) (cdr (assq 'free-bytes s))))").to<int64_t>());
  return u;
}

constexpr size_t KB = 1024;

}  // namespace

int main() {
  // Warm-up: the first interpreters make the shared metadata, LibTorch's lazily made state,
  // the allocator's arenas.
  for (int i = 0; i < 20; i++) oneInterpreter(i % 2 == 1);
  Usage before = usageAfterCollection();

  const int n = 200;
  for (int i = 0; i < n; i++) oneInterpreter(i % 2 == 1);
  Usage after = usageAfterCollection();
  double mallocPer = (double(after.malloced) - double(before.malloced)) / n;
  double heapPer = (double(after.gcHeap) - double(before.gcHeap)) / n;
  std::printf("one thread, %d interpreters: malloc %+.1f KB each, GC heap %+.1f KB each\n", n,
              mallocPer / KB, heapPer / KB);
  // The leak was 723 KB of malloc and ~100 KB of GC heap per interpreter; what is left must be
  // noise (allocator caches, symbol table growth from the programs' own names).
  check(mallocPer < 8 * KB, "malloc'd memory does not grow per interpreter made and destroyed");
  check(heapPer < 8 * KB, "the collector's heap does not grow per interpreter made and destroyed");

  // Four threads at once: the first use of the shared metadata races here.
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&done, t] {
      for (int i = 0; i < 25; i++) oneInterpreter((i + t) % 2 == 1);
      done++;
    });
  for (auto& th : threads) th.join();
  check(done == 4, "four threads made 100 interpreters at once");
  Usage threaded = usageAfterCollection();
  double threadedPer = (double(threaded.malloced) - double(after.malloced)) / 100;
  std::printf("four threads, 100 interpreters: malloc %+.1f KB each\n", threadedPer / KB);
  check(threadedPer < 8 * KB, "malloc'd memory does not grow per interpreter with threads either");

  // A host function's procedure can outlive its interpreter (another interpreter holds it): it
  // refuses to run then, and its metadata stays until the procedure itself is garbage.
  {
    purple::Value orphan;
    {
      purple::Interpreter owner;
      owner.define("host-orphan", [](int64_t x) { return x + 1; }, "X plus one.");
      orphan = owner.get("host-orphan");
      check(owner.call(orphan, 1).to<int64_t>() == 2, "a host function runs while its interpreter lives");
    }
    purple::collectGarbage();
    purple::Interpreter other;
    other.setValue("orphan", orphan);
    std::string refused;
    try {
      other.call(orphan, 1);
    } catch (const purple::Error& e) {
      refused = e.what();
    }
    check(refused.find("host-orphan: its interpreter has been destroyed") != std::string::npos,
          "a host function whose interpreter is gone refuses to run (got \"" + refused + "\")");
    check(other.eval("(procedure? orphan)").to<bool>(), "and stays a procedure until it is garbage");
  }

  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
