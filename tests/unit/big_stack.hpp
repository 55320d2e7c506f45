// Runs a test's deep recursion on a thread whose stack size the test chooses, so that what it
// checks does not depend on the main thread's stack (`ulimit -s`, 8 MB by default), which
// AddressSanitizer's frames, two to three times larger, outgrow (docs/hardening.md).
#pragma once

#include "interp/core/gc.hpp"

#include <gc/gc.h>
#include <pthread.h>

#include <exception>
#include <functional>
#include <stdexcept>

namespace purple_test {

// 256 MB: ample for the unit tests' deepest recursion even instrumented, yet every exception
// still starts unwinding less than 64 MB deep, beyond which AddressSanitizer stops unpoisoning
// the stack it unwinds and reports false errors.
constexpr size_t kBigStackBytes = size_t(256) << 20;

// Runs f on a new thread with a stack of `bytes` and waits for it; an exception f throws (a
// failed REQUIRE included) is rethrown here. GC_pthread_create registers the thread with the
// collector for its lifetime (and unregisters it: a second unregistration would crash).
inline void onBigStack(const std::function<void()>& f, size_t bytes = kBigStackBytes) {
  struct Job {
    const std::function<void()>* f;
    std::exception_ptr error;
  } job{&f, nullptr};
  purple::gcInit();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  int rc = GC_pthread_create(&thread, &attr, [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    try {
      (*j->f)();
    } catch (...) {
      j->error = std::current_exception();
    }
    return nullptr;
  }, &job);
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("pthread_create failed for a big-stack thread");
  GC_pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace purple_test
