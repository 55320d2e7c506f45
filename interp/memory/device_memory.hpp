// GPU memory as the interpreter sees it (device_memory.cpp): the CUDA caching allocator's
// counters, emptying its cache, and reclaiming memory when a CUDA allocation fails. Purple's
// collector frees a dead tensor only when it runs, so a failed allocation may be one collection
// away from succeeding: R torch and Hasktorch collect and retry once, and so does Purple.
// On a LibTorch without CUDA every function here answers "nothing" and does nothing.
#pragma once
#include <cstdint>

namespace purple {

struct DeviceMemoryStats {
  int64_t allocated = 0, maxAllocated = 0;   // bytes in live tensors (torch.cuda.memory_allocated)
  int64_t reserved = 0, maxReserved = 0;     // bytes the caching allocator holds from the driver
  int64_t active = 0;                        // bytes in blocks in use, including those awaiting a stream
  int64_t allocRetries = 0;                  // the allocator's own cache flushes after a failed cudaMalloc
  int64_t ooms = 0;                          // allocations that failed even then
  int64_t oomCollections = 0;                // collections Purple ran after an out-of-memory error
};

DeviceMemoryStats deviceMemoryStats(int device);         // device -1: the current one
void deviceMemoryResetPeaks(int device);
void deviceMemoryEmptyCache();
// After a CUDA out-of-memory error on the interpreter's thread: a full collection (so dead
// tensors' finalizers run and give their blocks back), then the cache is returned to the driver.
// Returns false when there is nothing to retry for (no CUDA).
bool reclaimDeviceMemory();

}  // namespace purple
