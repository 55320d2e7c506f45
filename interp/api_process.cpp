// The embedding API's process-level services for front ends: the version line, a big stack for
// the interpreter, and the exit-time collection that checks no tensor leaked.
#define PURPLE_IMPLEMENTATION
#include "purple/purple.hpp"

#include "interp/gc.hpp"
#include "interp/interp.hpp"
#include "interp/tensor_value.hpp"
#include "interp/version.hpp"

#include <gc/gc.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <exception>

namespace purple {
namespace embed {

std::string versionLine() { return ::purple::versionLine(); }

namespace {

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
  GC_stack_base sb{};
  sb.mem_base = job->stack + job->bytes;
  GC_call_with_alloc_lock(setStackBottom, &sb);
  setCurrentThreadStackLimit(job->stack + kGuardBytes + kCppMargin);
  try {
    job->result = (*job->body)();
  } catch (...) {
    job->error = std::current_exception();
  }
  // uc_link returns to the caller's context
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
  tJob = &job;
  swapcontext(&job.caller, &bigContext);
  tJob = outer;
  // Back on the thread's own stack: the collector and the evaluator must look at it again.
  if (haveSaved) GC_call_with_alloc_lock(setStackBottom, &saved);
  setCurrentThreadStackLimit(nullptr);
  munmap(mem, bytes);
  if (job.error) std::rethrow_exception(job.error);
  return job.result;
}

TensorCensus collectGarbage() {
  gcInit();
  bool entered = detail::enterThread();
  for (int i = 0; i < 3; i++) gcCollectNow();   // finalizers can release what other cells held
  TensorMemoryStats stats = tensorMemoryStats();
  detail::leaveThread(entered);
  TensorCensus census;
  census.liveTensors = stats.liveTensors;
  census.bytes = stats.countedBytes;
  return census;
}

}  // namespace embed
}  // namespace purple
