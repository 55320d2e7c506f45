// GPU memory (device_memory.hpp). The CUDA parts compile only against a CUDA LibTorch
// (PURPLE_HAVE_CUDA, set by CMake on this file alone); the CUDA caching allocator's interface
// lives in c10_cuda, which a CPU LibTorch lacks.
#include "interp/memory/device_memory.hpp"
#include "interp/core/gc.hpp"
#include <atomic>
#ifdef PURPLE_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace purple {

namespace {
std::atomic<int64_t> gOomCollections{0};
}

#ifdef PURPLE_HAVE_CUDA

namespace {
bool haveDevice() { return c10::cuda::device_count() > 0; }
int resolve(int device) { return device < 0 ? int(c10::cuda::current_device()) : device; }
}  // namespace

DeviceMemoryStats deviceMemoryStats(int device) {
  DeviceMemoryStats out;
  out.oomCollections = gOomCollections.load();
  if (!haveDevice()) return out;
  c10::cuda::CUDACachingAllocator::DeviceStats s;
  try {
    s = c10::cuda::CUDACachingAllocator::getDeviceStats(resolve(device));
  } catch (const c10::Error&) {
    // Before the first CUDA tensor the allocator has no devices yet ("Invalid device argument"):
    // nothing is allocated, as torch.cuda.memory_stats() answers then.
    return out;
  }
  // Index 0 of each StatArray is the aggregate over pools (StatType::AGGREGATE, whose home
  // namespace moved between LibTorch versions).
  out.allocated = s.allocated_bytes[0].current;
  out.maxAllocated = s.allocated_bytes[0].peak;
  out.reserved = s.reserved_bytes[0].current;
  out.maxReserved = s.reserved_bytes[0].peak;
  out.active = s.active_bytes[0].current;
  out.allocRetries = s.num_alloc_retries;
  out.ooms = s.num_ooms;
  return out;
}

// Both are no-ops before the allocator has been set up (nothing to reset or return yet).
void deviceMemoryResetPeaks(int device) {
  if (!haveDevice()) return;
  try {
    c10::cuda::CUDACachingAllocator::resetPeakStats(resolve(device));
  } catch (const c10::Error&) {
  }
}

void deviceMemoryEmptyCache() {
  if (!haveDevice()) return;
  try {
    c10::cuda::CUDACachingAllocator::emptyCache();
  } catch (const c10::Error&) {
  }
}

bool reclaimDeviceMemory() {
  if (!haveDevice()) return false;
  gOomCollections.fetch_add(1);
  gcCollectNow();
  deviceMemoryEmptyCache();
  return true;
}

#else

DeviceMemoryStats deviceMemoryStats(int) {
  DeviceMemoryStats out;
  out.oomCollections = gOomCollections.load();
  return out;
}
void deviceMemoryResetPeaks(int) {}
void deviceMemoryEmptyCache() {}
bool reclaimDeviceMemory() { return false; }

#endif

}  // namespace purple
