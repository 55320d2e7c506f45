// The collector's services as the rest of Purple sees them (gc.cpp). Allocation itself is in
// value.hpp (gcAlloc ...).
#pragma once
#include <cstddef>
#include <cstdint>

namespace purple {

void gcInit();                          // idempotent; every Interp calls it
void gcCollectNow();                    // full collection, then pending finalizers
int gcCollectAndFinalize();             // the same; returns how many finalizers ran
// What `(gc)` and the embedding API's census do: clears the dead stack below the caller, then
// collects until a collection leaves no finalizer to run (at most 64); returns how many it ran.
// A finalizer can release what its object held (a module's parameters, a host object's roots),
// and that is free only at the next collection, so one collection leaves a chain half alive.
int gcCollectFully();
bool gcFinalizersPending();             // cheap flag, polled at safe points
void gcRunFinalizers();
void gcRegisterFinalizer(void* obj, void (*fn)(void* obj, void* data), void* data);
// A thread that touches Purple values (a LibTorch worker running a Purple hook, a loader
// thread) must be registered, or objects it allocates can be collected while live.
void gcRegisterCurrentThread();
void gcUnregisterCurrentThread();

// Memory the collector does not own whose used part holds Values: an interpreter's call
// records (a million slots reserved, a few in use). Each collection scans `base` up to
// (*used + 2) units of `unitBytes`. Registered for the memory's lifetime.
void gcAddGrowingRoots(const void* base, const int64_t* used, size_t unitBytes);
void gcRemoveGrowingRoots(const void* base);

// The heap limit a host set (purple::setHeapLimit), or 0: builtins that would build a result
// larger than it refuse before starting.
void gcSetHeapLimit(size_t bytes);
size_t gcHeapLimit();
// For a result gathered outside the collected heap before it becomes one object (a string
// port's text, string-append's bytes): refuses, naming WHO, a size no string can have or that
// is past the heap limit, before the buffer grows that big where no limit applies.
void checkResultBytes(const char* who, size_t bytes);
// Before one object of BYTES is allocated (a vector, a string, a bytevector): past the heap
// limit it is a memory-error, and so it is when the interpreter running on this thread has a
// time budget too short to clear that much fresh memory (the collector clears it inside one
// allocation call, where no budget is polled: `(make-vector 1000000000)` took 14 s and 7.8 GB
// under a 3-second budget). WHAT names the kind of object. Every string and vector allocation
// passes here, so the common small case is one comparison, inline.
void checkLargeAllocation(const char* what, size_t bytes);
constexpr size_t kLargeAllocationBytes = size_t(64) << 20;
inline void checkAllocationBudget(const char* what, size_t bytes) {
  if (bytes >= kLargeAllocationBytes) checkLargeAllocation(what, bytes);
}

// Memory that collectable objects own outside the collected heap (a port's buffers). The
// collector cannot see it, so a loop that drops such objects would never start a collection;
// charging it does: past 64 MB charged since the last collection, a charge collects first. With
// a heap limit, what is charged counts against it beside the heap in use, and a charge that
// would pass it raises a memory-error naming WHO before the memory is taken.
void gcChargeExternal(const char* who, int64_t bytes);
void gcUnchargeExternal(int64_t bytes);
int64_t gcExternalBytes();

struct GcStats {
  int64_t heapBytes;
  int64_t freeBytes;
  int64_t collections;
  int64_t allocatedBytes;   // collected-heap bytes allocated since the process began
};
GcStats gcStats();

}  // namespace purple
