// The embedding API's process-level services for front ends: the version line, a big stack for
// the interpreter, and the exit-time collection that checks no tensor leaked.
#define PURPLE_IMPLEMENTATION
#include "purple/purple.hpp"

#include "interp/core/gc.hpp"
#include "interp/core/interp.hpp"
#include "interp/memory/tensor_value.hpp"
#include "interp/platform/version.hpp"

#include <gc/gc.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstring>
#include <exception>

// AddressSanitizer follows the stack it believes the thread is on; told nothing, it takes the
// switch to the mapped stack for a huge overflow and reports a stack-buffer-overflow at the
// first C++ exception unwinding there. Each switch is announced and confirmed.
#if defined(__SANITIZE_ADDRESS__)
#define PURPLE_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PURPLE_ASAN_FIBERS 1
#endif
#endif
#ifdef PURPLE_ASAN_FIBERS
#include <dlfcn.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace purple {
namespace embed {

std::string versionLine() { return ::purple::versionLine(); }

namespace {

#ifdef PURPLE_ASAN_FIBERS
// AddressSanitizer's own swapcontext only prints a warning (on every program's stderr, where
// tests compare output) and clears the new stack's shadow: the switches here are announced,
// so libc's is called, and the shadow cleared by hand.
int switchContext(ucontext_t* from, ucontext_t* to) {
  using Swap = int (*)(ucontext_t*, const ucontext_t*);
  static Swap real = reinterpret_cast<Swap>(dlsym(RTLD_NEXT, "swapcontext"));
  if (!real) return swapcontext(from, to);
  __asan_unpoison_memory_region(to->uc_stack.ss_sp, to->uc_stack.ss_size);
  return real(from, to);
}
#else
int switchContext(ucontext_t* from, ucontext_t* to) { return swapcontext(from, to); }
#endif

// The guard page at the low end of the mapped stack turns an overflow into a fault instead of
// silent corruption; above it, 256 KB stay free for the C++ code (LibTorch included) that runs
// below the deepest evaluation.
constexpr std::size_t kGuardBytes = 64 * 1024;
constexpr std::size_t kCppMargin = 256 * 1024;

struct StackJob {
  const std::function<int()>* body;
  char* stack;
  std::size_t bytes;
  int result = 0;
  std::exception_ptr error;
  ucontext_t caller;
  // the caller's stack as AddressSanitizer knows it, to switch back to
  const void* callerBottom = nullptr;
  std::size_t callerSize = 0;
};
StackJob* tJob = nullptr;   // only read by the trampoline, right after the switch

void* setStackBottom(void* sb) {
  GC_set_stackbottom(nullptr, static_cast<GC_stack_base*>(sb));
  return nullptr;
}

// The first frame on the new stack. The collector is told where this stack ends (it scans the
// thread from its stack pointer up to that bottom), and the evaluator where it begins.
void trampoline() {
  StackJob* job = tJob;
#ifdef PURPLE_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(nullptr, &job->callerBottom, &job->callerSize);
#endif
  GC_stack_base sb{};
  sb.mem_base = job->stack + job->bytes;
  GC_call_with_alloc_lock(setStackBottom, &sb);
  setCurrentThreadStackLimit(job->stack + kGuardBytes + kCppMargin);
  try {
    job->result = (*job->body)();
  } catch (...) {
    job->error = std::current_exception();
  }
  // uc_link returns to the caller's context; this stack is not used again
#ifdef PURPLE_ASAN_FIBERS
  __sanitizer_start_switch_fiber(nullptr, job->callerBottom, job->callerSize);
#endif
}

}  // namespace

int runOnLargeStack(const std::function<int()>& body, std::size_t bytes) {
  gcInit();
  if (!GC_thread_is_registered()) gcRegisterCurrentThread();
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                   -1, 0);
  if (mem == MAP_FAILED) return body();
  GC_stack_base saved{};
  bool haveSaved = GC_get_my_stackbottom(&saved) != nullptr;
  StackJob job;
  job.body = &body;
  job.stack = static_cast<char*>(mem);
  job.bytes = bytes;
  ucontext_t bigContext;
  if (mprotect(mem, kGuardBytes, PROT_NONE) != 0 || getcontext(&bigContext) != 0) {
    munmap(mem, bytes);
    return body();
  }
  bigContext.uc_stack.ss_sp = job.stack;
  bigContext.uc_stack.ss_size = bytes;
  bigContext.uc_link = &job.caller;
  makecontext(&bigContext, trampoline, 0);
  StackJob* outer = tJob;
  char* callerLimit = currentThreadStackLimit();   // restored after: the caller may be on such a stack too
  tJob = &job;
#ifdef PURPLE_ASAN_FIBERS
  void* fakeStack = nullptr;
  __sanitizer_start_switch_fiber(&fakeStack, job.stack, bytes);
#endif
  switchContext(&job.caller, &bigContext);
#ifdef PURPLE_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(fakeStack, nullptr, nullptr);
#endif
  tJob = outer;
  // Back on the thread's own stack: the collector and the evaluator must look at it again.
  if (haveSaved) GC_call_with_alloc_lock(setStackBottom, &saved);
  setCurrentThreadStackLimit(callerLimit);
  munmap(mem, bytes);
  if (job.error) std::rethrow_exception(job.error);
  return job.result;
}

TensorCensus collectGarbage() {
  gcInit();
  bool entered = detail::enterThread();
  TensorCensus census;
  census.collections = gcCollectFully();
  TensorMemoryStats stats = tensorMemoryStats();
  detail::leaveThread(entered);
  census.liveTensors = stats.liveTensors;
  census.bytes = stats.countedBytes;
  return census;
}

}  // namespace embed
}  // namespace purple
