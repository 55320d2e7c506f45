// Installs Purple's caching allocator for large CPU tensor buffers (cpu_allocator.cpp).
// Process-wide and idempotent; PURPLE_CPU_ALLOCATOR=system keeps LibTorch's default.
#pragma once

namespace purple {
void installCpuAllocator();
}
