// Purple's CPU allocator for large tensor buffers (interp/memory/cpu_allocator.cpp): blocks split
// from and merged back into free ranges keep their bytes apart, a loop asking for many sizes
// settles without fresh mappings, and what stays mapped is bounded (issue 47).
#include "interp/memory/cpu_allocator.hpp"

#include <c10/core/CPUAllocator.h>

#include "tests/unit/doctest_after_torch.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

using namespace purple;

namespace {

constexpr size_t KB = 1024, MB = 1024 * 1024;

c10::Allocator* allocator() {
  installCpuAllocator();
  return c10::GetCPUAllocator();
}

struct Block {
  c10::DataPtr data;
  size_t size;
  uint8_t mark;
};

Block fill(size_t size, uint8_t mark) {
  Block b{allocator()->allocate(size), size, mark};
  std::memset(b.data.get(), mark, size);
  return b;
}

bool intact(const Block& b) {
  const auto* p = static_cast<const uint8_t*>(b.data.get());
  for (size_t i = 0; i < b.size; i += 509)
    if (p[i] != b.mark) return false;
  return p[b.size - 1] == b.mark;
}

// One "training step": the forward pass keeps what it makes, the backward pass frees it in
// reverse order while asking for gradients of other sizes, as a convolutional network does.
void step(const std::vector<size_t>& forward, const std::vector<size_t>& backward) {
  std::vector<Block> kept;
  for (size_t i = 0; i < forward.size(); i++) kept.push_back(fill(forward[i], uint8_t(i + 1)));
  std::vector<Block> grads;
  for (size_t i = 0; i < backward.size(); i++) {
    grads.push_back(fill(backward[i], uint8_t(100 + i)));
    if (!kept.empty()) {
      REQUIRE(intact(kept.back()));
      kept.pop_back();
    }
    if (grads.size() > 3) grads.erase(grads.begin());   // a gradient lives until the optimizer step
  }
  for (auto& g : grads) REQUIRE(intact(g));
}

}  // namespace

TEST_CASE("cpu allocator: split and merged blocks keep their bytes apart") {
  installCpuAllocator();
  REQUIRE(cpuAllocatorStats().installed);   // not under PURPLE_CPU_ALLOCATOR=system, where this test is moot
  std::mt19937 rng(47);
  std::uniform_int_distribution<size_t> size(128 * KB, 6 * MB);
  std::vector<Block> live;
  uint8_t mark = 1;
  for (int round = 0; round < 400; round++) {
    if (!live.empty() && rng() % 3 == 0) {
      size_t k = rng() % live.size();
      REQUIRE(intact(live[k]));
      live.erase(live.begin() + std::ptrdiff_t(k));
    } else {
      live.push_back(fill(size(rng) | 1, mark));   // odd sizes: blocks end inside a granule
      mark = uint8_t(mark % 250 + 1);
    }
  }
  for (auto& b : live) CHECK(intact(b));
  auto s = cpuAllocatorStats();
  CHECK(s.peakFootprint >= s.peakInUse);
}

TEST_CASE("cpu allocator: a loop asking for many sizes settles without fresh mappings") {
  // A resnet-like step: activations of one set of sizes, gradients of another (issue 47: a
  // cache of same-size blocks mapped fresh pages for most of these at every step).
  std::vector<size_t> forward, backward;
  for (size_t i = 0; i < 24; i++) forward.push_back((8 * MB >> (i / 6)) + i * 12 * KB);
  for (size_t i = 0; i < 24; i++) backward.push_back((9 * MB >> (i / 5)) + i * 20 * KB + 4 * KB);
  for (int i = 0; i < 3; i++) step(forward, backward);
  auto before = cpuAllocatorStats();
  for (int i = 0; i < 20; i++) step(forward, backward);
  auto after = cpuAllocatorStats();
  CHECK(after.freshMaps == before.freshMaps);
  CHECK(after.unmaps == before.unmaps);
  CHECK(after.inUse == before.inUse);
}

TEST_CASE("cpu allocator: what stays mapped is bounded") {
  installCpuAllocator();
  { std::vector<Block> blocks; for (int i = 0; i < 4; i++) blocks.push_back(fill(8 * MB, 5)); }
  auto s0 = cpuAllocatorStats();
  REQUIRE(s0.free >= 32 * MB);   // freed, kept for the next allocation
  CHECK(s0.inUse + s0.free <= s0.peakFootprint);
  CHECK(s0.peakFootprint <= s0.peakInUse + 64 * MB);

  // A peak in use that creeps up keeps the free ranges (blocks over 32 MB are always mapped fresh;
  // these are never touched, so they cost no memory).
  {
    c10::DataPtr creep = allocator()->allocate(s0.peakInUse - s0.inUse + 40 * MB);
    auto s1 = cpuAllocatorStats();
    CHECK(s1.peakInUse > s0.peakInUse);
    CHECK(s1.free >= 32 * MB);
  }
  // A jump more than 64 MB past it is a change of work: every free range is unmapped first, since
  // it would sit under the new peak.
  {
    auto s2 = cpuAllocatorStats();
    REQUIRE(s2.free > 0);
    c10::DataPtr jump = allocator()->allocate(s2.peakInUse - s2.inUse + 100 * MB);
    CHECK(cpuAllocatorStats().free == 0);
  }

  // Blocks past 32 MB are unmapped when freed, as glibc does past its largest mmap threshold.
  { std::vector<Block> blocks; for (int i = 0; i < 2; i++) blocks.push_back(fill(8 * MB, 6)); }
  CpuAllocatorStats holding, freed;
  {
    Block huge = fill(40 * MB, 9);
    holding = cpuAllocatorStats();
  }
  freed = cpuAllocatorStats();
  CHECK(freed.inUse == holding.inUse - 40 * MB);
  CHECK(freed.free == holding.free);
  CHECK(freed.unmaps == holding.unmaps + 1);
  CHECK(freed.inUse + freed.free <= freed.peakFootprint);
}
