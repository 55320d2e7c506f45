// Interpreters made and used on threads with small stacks, as thread pools and musl (128 KB by
// default) give them: each must be created, evaluate code (a closure, a tensor, a caught error),
// end deep recursion with "recursion too deep" rather than a crash, and be destroyed. Below the
// free stack Purple needs (64 KB), the constructor throws an error that names the stack's size.
//
// With glibc, a thread's static TLS sits at the top of its stack (LibTorch's is about 110 KB), so
// a 192 KB thread has under 80 KB free, and glibc refuses threads too small to hold the TLS at
// all (EINVAL): those sizes are reported and skipped. Sizes go up, because glibc reuses the stack
// of an ended thread for any later one that fits in it.
#include "checks.hpp"
#include <purple/purple.hpp>

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

namespace {

using hardening::check;
using hardening::failures;

constexpr std::size_t kNeededFree = 64 * 1024;

struct Job {
  std::size_t kb;
};

// A torch-save file of a list nested 5,000 deep (under the loaders' 10,000-level bound), made on
// the main thread. Loading it recursed once per level whatever the stack: on a small thread, or
// under AddressSanitizer (fuzz-zip), that overflowed the stack.
std::string gDeepFile;
constexpr int kDeepLevels = 5000;
const std::string kDeepList = "(let loop ((i 0) (x '())) (if (= i " + std::to_string(kDeepLevels) + ") x (loop (+ i 1) (list x))))";

void* onSmallStack(void* arg) {
  const Job& job = *static_cast<Job*>(arg);
  pthread_attr_t attr;
  void* low = nullptr;
  std::size_t size = 0;
  pthread_getattr_np(pthread_self(), &attr);
  pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  std::size_t free = std::size_t(static_cast<char*>(__builtin_frame_address(0)) - static_cast<char*>(low));
  // The constructor measures from its own frame, a little lower: near the line, either is right.
  bool mustRefuse = free < kNeededFree, mustMake = free >= kNeededFree + 4096;
  std::string at = std::to_string(job.kb) + " KB stack (" + std::to_string(size / 1024) + " KB, " +
                   std::to_string(free / 1024) + " KB free): ";
  std::unique_ptr<purple::Interpreter> made;
  try {
    made = std::make_unique<purple::Interpreter>();
  } catch (const purple::Error& e) {
    bool named = e.message().find(std::to_string(size / 1024) + " KB") != std::string::npos;
    check(!mustMake && named, at + "refused, naming the size: " + e.message());
    return nullptr;
  }
  if (mustRefuse) {
    check(false, at + "made an interpreter where it should refuse");
    return nullptr;
  }
  check(true, at + "interpreter made");
  purple::Interpreter& in = *made;
  try {
    in.eval("(define (depth n) (if (= n 0) 0 (+ 1 (depth (- n 1)))))");
    check(in.eval("(depth 20)").to<int64_t>() == 20, at + "a recursive procedure");
    check(in.eval("(tensor-item (tensor-sum (tensor-matmul (tensor-ones 8 8) (tensor-ones 8 8))))").to<double>() == 512,
          at + "tensor arithmetic");
    check(in.eval("(guard (e (#t 'caught)) (car 1))").to<std::string>() == "caught", at + "a caught error");
    try {
      in.eval("(depth 10000000)");
      check(false, at + "deep recursion ended without an error");
    } catch (const purple::Error& e) {
      check(e.kind() == "recursion-error", at + "deep recursion is a recursion-error (" + e.kind() + ")");
    }
    check(in.eval("(depth 10)").to<int64_t>() == 10, at + "usable after the recursion error");
    // Nested data in and out of files: the levels it holds, or an error, never a crash.
    try {
      int64_t levels = in.eval("(let loop ((x (torch-load \"" + gDeepFile + "\")) (d 0)) (if (null? x) d (loop (car x) (+ d 1))))")
                           .to<int64_t>();
      check(levels == kDeepLevels, at + "a deeply nested file loads whole (" + std::to_string(levels) + " levels)");
    } catch (const purple::Error& e) {
      check(e.kind() == "file-error" && e.message().find("nested") != std::string::npos,
            at + "a deeply nested file is a file-error: " + e.message());
    }
    try {
      in.eval("(torch-save " + kDeepList + " \"" + gDeepFile + ".out\")");
      check(true, at + "deeply nested data saved");
    } catch (const purple::Error& e) {
      check(e.message().find("nested") != std::string::npos, at + "deeply nested data refused: " + e.message());
    }
  } catch (const purple::Error& e) {
    check(false, at + "unexpected error: " + e.message());
  }
  made.reset();
  check(true, at + "interpreter destroyed");
  return nullptr;
}

void runOn(std::size_t kb) {
  Job job{kb};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_t thread;
  if (pthread_attr_setstacksize(&attr, kb * 1024) != 0 || pthread_create(&thread, &attr, onSmallStack, &job) != 0) {
    std::printf("skipped: %zu KB: this libc makes no thread that small here\n", kb);
    pthread_attr_destroy(&attr);
    return;
  }
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

}  // namespace

int main() {
  char dir[] = "/tmp/purple-small-stacks-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  gDeepFile = std::string(dir) + "/deep.pt";
  {
    purple::Interpreter main;
    main.eval("(torch-save " + kDeepList + " \"" + gDeepFile + "\")");
  }
  for (std::size_t kb : {64, 96, 128, 144, 160, 176, 192, 256, 320, 1024}) runOn(kb);
  std::remove(gDeepFile.c_str());
  std::remove((gDeepFile + ".out").c_str());
  rmdir(dir);
  std::printf("%d failed\n", failures.load());
  return failures == 0 ? 0 : 1;
}
