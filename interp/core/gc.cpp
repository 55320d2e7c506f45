// Boehm GC set-up for Purple. What was measured (DESIGN.md) and is done here:
// 1. only Purple's own static data is scanned, not LibTorch's ~285 libraries (4-9 ms -> 0.06 ms
//    a collection);
// 2. finalizers run on demand, at the interpreter's safe points, never inside an allocation;
// 3. tensor bytes are counted (tensor_value.cpp) and a collection is forced past a threshold,
//    because the GC sees only the small cells, not the megabytes behind them.
#include "interp/core/gc.hpp"
#include "interp/core/value.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include <gc/gc.h>
#include <gc/gc_mark.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <alloca.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace purple {

namespace {
std::once_flag gInitOnce;
std::string gLibraryName;          // libpurple's name as the dynamic linker knows it
std::atomic<bool> gFinalizersPending{false};
bool gStress = false;
unsigned gStressCounter = 0;

int keepOnlyPurpleRoots(const char* name, void*, size_t) {
  // The main program (empty name) and libpurple itself hold Purple's static roots; the other
  // shared libraries (LibTorch and its dependencies) never hold Purple values.
  if (name == nullptr || name[0] == '\0') return 1;
  if (!gLibraryName.empty() && gLibraryName == name) return 1;
  return 0;
}

void onFinalizersReady() { gFinalizersPending.store(true, std::memory_order_relaxed); }

// GC_INIT counts the thread it runs on as the process's first thread, with the main thread's
// stack. When that is a worker thread (a host whose first use of Purple is on a worker, or one
// that dlopens libpurple there), the thread is given its own stack bottom and is unregistered
// when it exits; otherwise every later collection signals a dead thread and aborts ("Signals
// delivery fails constantly"). libpurple's load-time constructor below makes this rare: a
// linked host initialises the collector on its main thread before main() runs.
struct InitThreadExit {
  bool active = false;
  ~InitThreadExit() {
    if (active && GC_thread_is_registered()) GC_unregister_my_thread();
  }
};
thread_local InitThreadExit tInitThreadExit;

void* setOwnStackBottom(void* sb) {
  GC_set_stackbottom(nullptr, static_cast<GC_stack_base*>(sb));
  return nullptr;
}

struct GrowingRoots {
  const void* base;
  const int64_t* used;
  size_t unitBytes;
};
// Changed and read only under the collector's allocation lock.
std::vector<GrowingRoots>* gGrowingRoots = new std::vector<GrowingRoots>();
GC_push_other_roots_proc gPreviousPushOtherRoots = nullptr;

void GC_CALLBACK pushGrowingRoots() {
  if (gPreviousPushOtherRoots) gPreviousPushOtherRoots();   // the thread stacks
  for (const GrowingRoots& r : *gGrowingRoots) {
    int64_t used = *r.used;
    if (used < 0) used = 0;
    char* b = static_cast<char*>(const_cast<void*>(r.base));
    GC_push_all(b, b + size_t(used + 2) * r.unitBytes);
  }
}
}  // namespace

void gcInit() {
  std::call_once(gInitOnce, [] {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&gcInit), &info) && info.dli_fname) gLibraryName = info.dli_fname;
    // The main program's name in dl_iterate_phdr is "", so when libpurple is linked statically
    // gLibraryName names the executable and the empty-name rule covers it.
    if (!std::getenv("PURPLE_GC_SCAN_ALL_LIBRARIES")) GC_register_has_static_roots_callback(keepOnlyPurpleRoots);
    GC_set_finalize_on_demand(1);
    GC_set_finalizer_notifier(onFinalizersReady);
    // Data-loader worker processes (builtins/data/worker_processes.cpp) fork and go on
    // allocating in the child: the collector's own fork handlers hold its lock across fork() and
    // leave the child a consistent collector with its one thread. Only effective before GC_INIT.
    GC_set_handle_fork(1);
    GC_INIT();
    if (syscall(SYS_gettid) != getpid()) {
      GC_stack_base sb;
      if (GC_get_stack_base(&sb) == GC_SUCCESS) GC_call_with_alloc_lock(setOwnStackBottom, &sb);
      tInitThreadExit.active = true;
    }
    GC_allow_register_threads();
    gPreviousPushOtherRoots = GC_get_push_other_roots();
    GC_set_push_other_roots(pushGrowingRoots);
    // A 32 MB heap to start with (unless GC_INITIAL_HEAP_SIZE says otherwise): with Boehm's
    // default of a few hundred KB, list- and closure-heavy code collected every few thousand
    // conses, and marking the prelude's nodes each time cost 40% of the closure benchmark
    // (0.13 s -> 0.07 s). Tensor loops are unaffected: their storage is counted separately.
    if (!std::getenv("GC_INITIAL_HEAP_SIZE") && GC_get_heap_size() < (size_t(32) << 20))
      GC_expand_hp((size_t(32) << 20) - GC_get_heap_size());
    // PURPLE_GC_STRESS=1: a full collection every 50 gcAlloc calls (nodes, vectors, frames,
    // most builtins' objects), to find Values kept where the collector cannot see them.
    if (const char* stress = std::getenv("PURPLE_GC_STRESS"); stress && *stress == '1') gStress = true;
  });
}

namespace {
__attribute__((constructor)) void initCollectorAtLoad() { gcInit(); }
}  // namespace

bool gcFinalizersPending() { return gFinalizersPending.load(std::memory_order_relaxed); }

void gcRunFinalizers() {
  gFinalizersPending.store(false, std::memory_order_relaxed);
  if (GC_should_invoke_finalizers()) GC_invoke_finalizers();
}

void gcCollectNow() { gcCollectAndFinalize(); }

namespace {
// Zeroes the stack memory just below the caller's frame, which the collection's own frames are
// about to reuse. Deeper calls made earlier (the last evaluation, the interpreter's destructor)
// left pointers there; a collector frame that does not overwrite its slots would have them
// scanned as live, and a dead tensor would survive the census: the exit check of
// purple/resume failed about once in 50 runs so, with nothing in the heap, the live stack or
// the static data pointing at what it kept. Bounded by 64 KB and by the thread's stack limit.
__attribute__((noinline)) void clearStackBelowCaller() {
  char* here = static_cast<char*>(__builtin_frame_address(0));
  char* limit = currentThreadStackLimit();
  size_t bytes = here > limit ? std::min<size_t>(64 * 1024, size_t(here - limit) / 2) : 0;
  if (bytes == 0) return;
  char* stale = static_cast<char*>(alloca(bytes));
  explicit_bzero(stale, bytes);
}
}  // namespace

int gcCollectFully() {
  clearStackBelowCaller();
  constexpr int kMaxCollections = 64;
  int collections = 0;
  while (collections < kMaxCollections) {
    collections++;
    if (gcCollectAndFinalize() == 0) break;
  }
  return collections;
}

int gcCollectAndFinalize() {
  GC_gcollect();
  gFinalizersPending.store(false, std::memory_order_relaxed);
  int ran = 0;
  while (GC_should_invoke_finalizers()) ran += GC_invoke_finalizers();
  return ran;
}

GcStats gcStats() {
  GcStats s;
  s.heapBytes = int64_t(GC_get_heap_size());
  s.freeBytes = int64_t(GC_get_free_bytes());
  s.collections = int64_t(GC_get_gc_no());
  s.allocatedBytes = int64_t(GC_get_total_bytes());
  return s;
}

namespace {
std::atomic<size_t> gHeapLimit{0};
}  // namespace

void gcSetHeapLimit(size_t bytes) {
  gcInit();
  gHeapLimit.store(bytes);
  GC_set_max_heap_size(bytes);
}

size_t gcHeapLimit() { return gHeapLimit.load(std::memory_order_relaxed); }

void checkResultBytes(const char* who, size_t bytes) {
  constexpr size_t kMostBytes = UINT32_MAX - 1;   // the longest object (objects.cpp)
  if (bytes > kMostBytes)
    throwError("range-error", std::string(who) + ": result too long (" + std::to_string(bytes) +
                                  " bytes; a string holds at most " + std::to_string(kMostBytes) + ")");
  size_t limit = gcHeapLimit();
  if (limit && bytes > limit)
    throwError("memory-error", std::string(who) + ": result of " + std::to_string(bytes) +
                                   " bytes is past the heap limit (" + std::to_string(limit) + " bytes)");
}

// Small objects are never refused (checkAllocationBudget): the budgets poll between them.
void checkLargeAllocation(const char* what, size_t bytes) {
  size_t limit = gcHeapLimit();
  if (limit && bytes > limit)
    throwError("memory-error", std::string(what) + " of " + std::to_string(bytes) + " bytes is past the heap limit (" +
                                   std::to_string(limit) + " bytes)");
  Interp* in = Interp::current();
  if (!in || !in->hasDeadline) return;
  // Fresh memory is mapped and cleared at about 0.6 GB/s on a loaded machine; this allows 1 GB/s.
  constexpr double kClearedBytesPerSecond = 1e9;
  double left = std::chrono::duration<double>(in->deadline - std::chrono::steady_clock::now()).count();
  left = std::max(left, 0.0);
  if (double(bytes) > left * kClearedBytesPerSecond) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", left);
    throwError("memory-error", std::string(what) + " of " + std::to_string(bytes) +
                                   " bytes cannot be allocated within the time budget (" + seconds + " s left)");
  }
}

namespace {
std::atomic<int64_t> gExternal{0};
std::atomic<int64_t> gExternalAfterCollect{0};
// The tensor accounting's threshold (tensor_value.cpp) for the same reason: a collection per
// 64 MB of fresh outside memory keeps dropped buffers from piling up at a cost that is small
// beside the work of filling 64 MB.
constexpr int64_t kExternalCollectBytes = int64_t(64) << 20;

int64_t heapInUse() { return int64_t(GC_get_heap_size()) - int64_t(GC_get_free_bytes()); }
}  // namespace

void gcChargeExternal(const char* who, int64_t bytes) {
  if (bytes <= 0) return;
  int64_t live = gExternal.load(std::memory_order_relaxed);
  bool collected = false;
  if (live + bytes - gExternalAfterCollect.load(std::memory_order_relaxed) > kExternalCollectBytes) {
    gcCollectNow();
    collected = true;
    live = gExternal.load(std::memory_order_relaxed);
    gExternalAfterCollect.store(live, std::memory_order_relaxed);
  }
  if (int64_t limit = int64_t(gcHeapLimit())) {
    if (!collected && live + bytes + heapInUse() > limit) {   // garbage may be what fills it
      gcCollectNow();
      live = gExternal.load(std::memory_order_relaxed);
      gExternalAfterCollect.store(live, std::memory_order_relaxed);
    }
    if (live + bytes + heapInUse() > limit)
      throwError("memory-error", std::string(who) + ": " + std::to_string(bytes) +
                                     " more bytes would pass the heap limit (" + std::to_string(limit) +
                                     " bytes; " + std::to_string(live) + " held by buffers, " +
                                     std::to_string(heapInUse()) + " by the heap)");
  }
  gExternal.fetch_add(bytes, std::memory_order_relaxed);
}

void gcUnchargeExternal(int64_t bytes) { gExternal.fetch_sub(bytes, std::memory_order_relaxed); }

int64_t gcExternalBytes() { return gExternal.load(std::memory_order_relaxed); }

void gcAddGrowingRoots(const void* base, const int64_t* used, size_t unitBytes) {
  GrowingRoots r{base, used, unitBytes};
  GC_call_with_alloc_lock([](void* p) -> void* {
    gGrowingRoots->push_back(*static_cast<GrowingRoots*>(p));
    return nullptr;
  }, &r);
}

void gcRemoveGrowingRoots(const void* base) {
  GC_call_with_alloc_lock([](void* p) -> void* {
    auto& v = *gGrowingRoots;
    for (size_t i = 0; i < v.size(); i++)
      if (v[i].base == p) {
        v.erase(v.begin() + i);
        break;
      }
    return nullptr;
  }, const_cast<void*>(base));
}

void gcRegisterCurrentThread() {
  gcInit();
  if (GC_thread_is_registered()) return;
  GC_stack_base sb;
  GC_get_stack_base(&sb);
  GC_register_my_thread(&sb);
}

void gcUnregisterCurrentThread() { GC_unregister_my_thread(); }

void* gcAlloc(size_t bytes) {
  if (gStress && ++gStressCounter % 50 == 0) GC_gcollect();
  void* p = GC_MALLOC(bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

void* gcAllocAtomic(size_t bytes) {
  void* p = GC_MALLOC_ATOMIC(bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes < 64 ? bytes : 0);   // small atomic objects start zeroed
  return p;
}

void* gcAllocRoot(size_t bytes) {
  void* p = GC_MALLOC_UNCOLLECTABLE(bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

void gcFreeRoot(void* p) { GC_FREE(p); }

void* gcAllocImmortalRoot(size_t bytes) {
  constexpr size_t kChunkBytes = 16384;
  static std::mutex lock;
  static char* next = nullptr;
  static size_t left = 0;
  bytes = (bytes + sizeof(void*) - 1) & ~(sizeof(void*) - 1);
  if (bytes > kChunkBytes / 4) return gcAllocRoot(bytes);
  std::lock_guard<std::mutex> g(lock);
  if (bytes > left) {
    next = static_cast<char*>(gcAllocRoot(kChunkBytes));   // zeroed: the unused tail holds no pointers
    left = kChunkBytes;
  }
  void* p = next;
  next += bytes;
  left -= bytes;
  return p;
}

void gcRegisterFinalizer(void* obj, void (*fn)(void* obj, void* data), void* data) {
  GC_register_finalizer_no_order(obj, fn, data, nullptr, nullptr);
}

}  // namespace purple
