// The collector's services as the rest of Purple sees them (gc.cpp). Allocation itself is in
// value.hpp (gcAlloc ...).
#pragma once
#include <cstddef>
#include <cstdint>

namespace purple {

void gcInit();                          // idempotent; every Interp calls it
void gcCollectNow();                    // full collection, then pending finalizers
bool gcFinalizersPending();             // cheap flag, polled at safe points
void gcRunFinalizers();
void gcRegisterFinalizer(void* obj, void (*fn)(void* obj, void* data), void* data);
// A thread that touches Purple values (a LibTorch worker running a Purple hook, a loader
// thread) must be registered, or objects it allocates can be collected while live.
void gcRegisterCurrentThread();
void gcUnregisterCurrentThread();

struct GcStats {
  int64_t heapBytes;
  int64_t freeBytes;
  int64_t collections;
};
GcStats gcStats();

}  // namespace purple
