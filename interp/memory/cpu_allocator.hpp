// Installs Purple's allocator for large CPU tensor buffers (cpu_allocator.cpp).
// Process-wide and idempotent; PURPLE_CPU_ALLOCATOR=system keeps LibTorch's default.
#pragma once
#include <cstddef>

namespace purple {
void installCpuAllocator();

// What the allocator holds, in bytes, and the system calls it made (for tests and benchmarks).
struct CpuAllocatorStats {
  bool installed = false;         // false under PURPLE_CPU_ALLOCATOR=system: the rest are 0
  size_t inUse = 0;               // large blocks handed out and not yet freed
  size_t free = 0;                // mapped, free, kept for the next allocation
  size_t peakInUse = 0;
  size_t peakFootprint = 0;       // the most inUse + free has been
  size_t freshMaps = 0;           // mmap calls
  size_t unmaps = 0;              // munmap calls
  size_t watermark = 0;           // the most inUse has been since resetCpuAllocatorWatermark()
};
CpuAllocatorStats cpuAllocatorStats();
// Starts the watermark again from the bytes in use now (a measurement's window; the allocator's
// own policy uses peakInUse, which this leaves alone).
void resetCpuAllocatorWatermark();
}
