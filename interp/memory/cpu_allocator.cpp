// LibTorch's CPU allocator for Purple: large buffers are mmapped and, when freed, kept in a
// cache of same-size blocks for the next allocation.
//
// Why: the evaluator runs on its own thread, whose glibc arena returns large freed chunks to the
// OS unpredictably; a loop over 4 MB temporaries peaked anywhere between 310 and 590 MB. Pinning
// malloc's mmap threshold bounds RSS (177 MB) but then every 4 MB buffer is fresh pages: 9 s of
// page faults in 3,000 iterations. Reusing same-size blocks gives both: training loops allocate
// the same shapes every step, so the cache hits. What is kept is bounded by the most the program
// has had in use at once (kCacheFloor below), so the cache never raises the peak.
//
// Below 128 KB (kLargeBlock), glibc's malloc serves LibTorch. Its defaults move the mmap threshold at run time
// and give memory back at every free that leaves 2x that threshold free at the heap's top, so a
// training step that frees its mid-sized buffers shrinks the heap (brk) and touches fresh
// pages again on the next step: 340 page faults and 3 brk calls a step in bench/train/cnn
// (bench/train/counts.py). A fixed mmap threshold at the cache's boundary and a trim threshold
// of twice the tensor-collection threshold keep those pages: 10 faults a step, no brk.
#include "interp/memory/cpu_allocator.hpp"
#include "interp/platform/torch_compat.hpp"
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>
#include <malloc.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace purple {

namespace {

// Below this, the default allocator. 128 KB, not 1 MB: the 158 KB gate buffers of an LSTM cell,
// left to glibc's heap among the smaller buffers an autograd graph saves, made the heap grow by
// 200-400 MB at each of the first forward passes of PyTorch's time_sequence_prediction example
// (a 1,000-step loop of two LSTM cells: peak 2.17 GB against python3-torch's 1.45 GB); served
// here, the same run peaked at 1.36 GB (issue 30).
constexpr size_t kLargeBlock = size_t(128) << 10;
// Freed blocks are kept while the blocks in use and those kept stay within the most the program
// has had in use at once (its peak), and at least this much. A closure loop (LBFGS over an
// LSTM, PyTorch's time_sequence_prediction example) frees a whole graph's buffers, about 900 MB,
// after each evaluation and asks for the same ones again. With a fixed 64 MB cache, the rest were
// unmapped and faulted in again: 1.48 million page faults against python3-torch's 321,000, whose
// glibc heap keeps them. Bounded by the peak instead: 314,000 faults, and the same peak RSS.
constexpr size_t kCacheFloor = size_t(64) << 20;
// Larger blocks are unmapped when freed, as glibc does past its largest mmap threshold (32 MB),
// which is what python3-torch's buffers get. Keeping one made a peak: the test pass of the mnist
// example (batches of 1,000) held the last batch's 37 MB max-pool output idle in the cache while
// the next batch's 86 and 147 MB convolution outputs were both live (770 MB against Python's 740).
constexpr size_t kLargestCached = size_t(32) << 20;
constexpr size_t kTrimThreshold = size_t(128) << 20; // free bytes glibc keeps at its heap's top

class CachingCpuAllocator final : public c10::Allocator {
 public:
  explicit CachingCpuAllocator(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t bytes) PURPLE_ALLOCATE_CONST override {
    if (bytes < kLargeBlock) return fallback_->allocate(bytes);
    size_t mapped = roundUp(bytes);
    void* base = takeCached(mapped);
    if (!base) {
      if (firstAskedFor(mapped)) evictAll();
      else evictToFit(mapped);
      // Page-aligned, so 64-byte aligned as LibTorch wants. Data and context are the same
      // pointer, as raw_allocate requires; the block's size is kept in sizes_.
      base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (base == MAP_FAILED) throw std::bad_alloc();
      std::lock_guard<std::mutex> g(lock_);
      sizes_[base] = mapped;
      live_ += mapped;
      if (live_ > peak_) peak_ = live_;
    }
    reportToProfiler(base, int64_t(mapped));
    return {base, base, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  PURPLE_ALLOCATOR_COPY_DATA

  static CachingCpuAllocator* instance;

 private:
  // LibTorch's default allocator tells a memory profiler (with-profiler's :profile-memory) of
  // each allocation and free; the large blocks served here must too. Without a profiler, one
  // thread-local lookup.
  static void reportToProfiler(void* base, int64_t bytes) {
    if (c10::memoryProfilingEnabled())
      c10::reportMemoryUsageToProfiler(base, bytes, compat::MemoryReportTotal(0), compat::MemoryReportTotal(0),
                                       c10::Device(c10::DeviceType::CPU));
  }

  static size_t roundUp(size_t n) {
    const size_t granule = 64 * 1024;
    return (n + granule - 1) / granule * granule;
  }

  // A miss for a size never asked for before unmaps every cached block: the work changed shape,
  // and the cache must not add to the peak. The test pass of the mnist example (batches of 1,000
  // after training on 64) otherwise kept the training's blocks resident under its own. A miss for
  // a size seen before is the same work again and evicts nothing: evicting there made a resnet
  // step, which asks for many sizes, unmap what its next step wanted (820,000 page faults against
  // Python's 300,000, and 20% slower).
  void evictAll() const {
    std::vector<std::pair<void*, size_t>> victims;
    {
      std::lock_guard<std::mutex> g(lock_);
      for (auto& [size, blocks] : free_) {
        for (void* p : blocks) {
          victims.emplace_back(p, size);
          sizes_.erase(p);
        }
        blocks.clear();
      }
      cached_ = 0;
    }
    for (auto& v : victims) munmap(v.first, v.second);
  }

  // A miss for a size seen before: unmaps cached blocks (the largest sizes first) until the
  // blocks in use, those kept and the new one fit under the peak, so the cache never takes the
  // process past what it has already needed.
  void evictToFit(size_t mapped) const {
    std::vector<std::pair<void*, size_t>> victims;
    {
      std::lock_guard<std::mutex> g(lock_);
      size_t bound = cacheBound(mapped);
      if (live_ + cached_ + mapped <= bound) return;
      std::vector<size_t> sizes;
      for (auto& [size, blocks] : free_)
        if (!blocks.empty()) sizes.push_back(size);
      std::sort(sizes.rbegin(), sizes.rend());
      for (size_t size : sizes) {
        auto& blocks = free_[size];
        size_t n = 0;   // the oldest first: their pages are the coldest
        for (; n < blocks.size() && live_ + cached_ + mapped > bound; n++) {
          sizes_.erase(blocks[n]);
          cached_ -= size;
          victims.emplace_back(blocks[n], size);
        }
        blocks.erase(blocks.begin(), blocks.begin() + std::ptrdiff_t(n));
      }
    }
    for (auto& v : victims) munmap(v.first, v.second);
  }

  // What the blocks in use (INCOMING more of them about to be) and the cached ones may add up
  // to: the peak in use, and at least kCacheFloor of cache. Under lock_.
  size_t cacheBound(size_t incoming) const { return std::max(peak_, live_ + incoming + kCacheFloor); }

  bool firstAskedFor(size_t mapped) const {
    std::lock_guard<std::mutex> g(lock_);
    return seen_.insert(mapped).second;
  }

  void* takeCached(size_t mapped) const {
    std::lock_guard<std::mutex> g(lock_);
    auto it = free_.find(mapped);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();   // the most recently freed: its pages are the warmest
    it->second.pop_back();
    cached_ -= mapped;
    live_ += mapped;
    return p;
  }

  static void release(void* base) {
    CachingCpuAllocator* self = instance;
    size_t mapped;
    {
      std::lock_guard<std::mutex> g(self->lock_);
      auto it = self->sizes_.find(base);
      if (it == self->sizes_.end()) {
        // a small block handed out through raw_allocate: the default allocator's to free
        if (c10::DeleterFnPtr d = self->fallback_->raw_deleter()) d(base);
        return;
      }
      mapped = it->second;
      reportToProfiler(base, -int64_t(mapped));
      self->live_ -= mapped;
      if (mapped <= kLargestCached && self->live_ + self->cached_ + mapped <= self->cacheBound(0)) {
        self->free_[mapped].push_back(base);
        self->cached_ += mapped;
        return;
      }
      self->sizes_.erase(it);
    }
    munmap(base, mapped);
  }

  c10::Allocator* fallback_;
  mutable std::mutex lock_;
  mutable std::unordered_map<size_t, std::vector<void*>> free_;   // cached blocks by size, oldest first
  mutable std::unordered_map<void*, size_t> sizes_;   // every live or cached block
  mutable size_t cached_ = 0;
  mutable size_t live_ = 0;    // bytes of large blocks handed out and not yet freed
  mutable size_t peak_ = 0;    // the most live_ has been
  mutable std::unordered_set<size_t> seen_;   // every block size asked for so far
};

CachingCpuAllocator* CachingCpuAllocator::instance = nullptr;

}  // namespace

void installCpuAllocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("PURPLE_CPU_ALLOCATOR");
    if (env && std::strcmp(env, "system") == 0) return;
    // Never destroyed: LibTorch may free tensors during static destruction.
    CachingCpuAllocator::instance = new CachingCpuAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(CachingCpuAllocator::instance, /*priority=*/1);
    // A host (or the user) that tunes malloc itself keeps its settings.
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (!(tunables && std::strstr(tunables, "malloc")) && !std::getenv("MALLOC_TRIM_THRESHOLD_") &&
        !std::getenv("MALLOC_MMAP_THRESHOLD_")) {
      mallopt(M_MMAP_THRESHOLD, int(kLargeBlock));
      mallopt(M_TRIM_THRESHOLD, int(kTrimThreshold));
    }
  });
}

}  // namespace purple
