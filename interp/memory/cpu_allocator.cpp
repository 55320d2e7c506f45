// LibTorch's CPU allocator for Purple: large buffers come from a heap of mmapped address ranges
// that Purple keeps, with blocks split to fit and merged with free neighbours when freed.
//
// Why not glibc: the evaluator runs on its own thread, whose glibc arena returns large freed
// chunks to the OS unpredictably; a loop over 4 MB temporaries peaked anywhere between 310 and
// 590 MB. Pinning malloc's mmap threshold bounds RSS (177 MB) but then every 4 MB buffer is
// fresh pages: 9 s of page faults in 3,000 iterations. Keeping freed ranges for the next
// allocation gives both.
//
// Why a heap and not a cache of same-size blocks (which this was until issue 47): a training
// step of a convolutional network asks for a few hundred buffers of dozens of sizes, the
// forward pass's activations and the backward pass's gradients and workspaces, and the sizes it
// frees are not those it asks for next. A same-size cache missed on most of them and, bounded by
// the peak in use, unmapped what the next pass wanted: resnet18 trained on 640 64x64 images at 1
// thread (bench/examples/resnet-folder.purple, 3 epochs) took 1.55 M page faults, 0.49 M more
// every epoch, and 2.96 s of system time (python3-torch 1.15 M and 2.23 s). glibc's heap
// (python3-torch's) serves any size from any freed range; so does this one, and a training
// loop's layout settles within its first steps: 0.08 M page faults and 0.23 s, the same for one
// epoch as for three (bench/results/2026-11-29-allocator.md).
//
// What is kept: free ranges stay mapped while the footprint (bytes in use and free) is within
// the largest footprint so far, or within the bytes in use plus kSlack; a fresh mapping first
// unmaps the excess. A request that takes the bytes in use more than kSlack past their peak is
// a change of work (the test pass of the mnist example, batches of 1,000 after training on 64):
// every free range is unmapped first, since it would sit under the new peak. A peak that creeps
// up a block at a time (tensors the collector frees later, a graph that grows) unmaps nothing:
// unmapping every free range at each new peak made bench/train/mlp map and unmap a block every
// ten steps. Blocks over kLargestCached are mapped and unmapped each time, as glibc does past
// its largest mmap threshold, which is what python3-torch's get.
//
// Below 128 KB (kLargeBlock), glibc's malloc serves LibTorch. Its defaults move the mmap threshold at run time
// and give memory back at every free that leaves 2x that threshold free at the heap's top, so a
// training step that frees its mid-sized buffers shrinks the heap (brk) and touches fresh
// pages again on the next step: 340 page faults and 3 brk calls a step in bench/train/cnn
// (bench/train/counts.py). A fixed mmap threshold at the heap's boundary and a trim threshold
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
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace purple {

namespace {

// Below this, the default allocator. 128 KB, not 1 MB: the 158 KB gate buffers of an LSTM cell,
// left to glibc's heap among the smaller buffers an autograd graph saves, made the heap grow by
// 200-400 MB at each of the first forward passes of PyTorch's time_sequence_prediction example
// (a 1,000-step loop of two LSTM cells: peak 2.17 GB against python3-torch's 1.45 GB); served
// here, the same run peaked at 1.36 GB (issue 30).
constexpr size_t kLargeBlock = size_t(128) << 10;
// Blocks are whole pages. Not 64 KB: a 158 KB LSTM gate buffer then took 192 KB, and once ranges
// are split and merged, the tails one block leaves untouched are touched by the next: lstm-sine
// peaked at 1,092 MB against 1,020 MB with pages (and with the same-size cache before).
constexpr size_t kGranule = size_t(4) << 10;
// Room for the heap's fragmentation: a fresh mapping may take the footprint this far above the
// bytes in use when that is past the largest footprint so far. Without it (free ranges bounded by
// the peak in use alone), the resnet18 above settled nowhere: its layout needs 25-35 MB more than
// the peak in use, so each step unmapped ranges and mapped them again (replayed from its
// allocation trace: about 13,000 page faults a step with no room, 4,000 with 16 MB, 2,000 with
// 32 MB, none with 64 MB). A closure loop (LBFGS over an LSTM, PyTorch's time_sequence_prediction
// example) frees a whole graph's buffers, about 900 MB, after each evaluation and asks for the
// same ones again: the bound by the largest footprint keeps them (a fixed 64 MB cache took 1.48
// million page faults there, python3-torch 321,000).
constexpr size_t kSlack = size_t(64) << 20;
// Larger blocks are unmapped when freed, as glibc does past its largest mmap threshold (32 MB),
// which is what python3-torch's buffers get. Keeping one made a peak: the test pass of the mnist
// example (batches of 1,000) held the last batch's 37 MB max-pool output idle while the next
// batch's 86 and 147 MB convolution outputs were both live (770 MB against Python's 740).
constexpr size_t kLargestCached = size_t(32) << 20;
constexpr size_t kTrimThreshold = size_t(128) << 20; // free bytes glibc keeps at its heap's top

class CachingCpuAllocator final : public c10::Allocator {
 public:
  explicit CachingCpuAllocator(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t bytes) PURPLE_ALLOCATE_CONST override {
    if (bytes < kLargeBlock) return fallback_->allocate(bytes);
    size_t size = roundUp(bytes);
    char* base = size <= kLargestCached ? takeFree(size) : nullptr;
    if (!base) base = mapFresh(size);
    reportToProfiler(base, int64_t(size));
    // Data and context are the same pointer, as raw_allocate requires; the block's size is kept
    // in used_. Blocks start on page boundaries: 64-byte aligned, as LibTorch wants.
    return {base, base, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  PURPLE_ALLOCATOR_COPY_DATA

  CpuAllocatorStats stats() const {
    std::lock_guard<std::mutex> g(lock_);
    return {true, live_, cached_, peakLive_, peakFootprint_, freshMaps_, unmaps_, watermark_};
  }

  void resetWatermark() {
    std::lock_guard<std::mutex> g(lock_);
    watermark_ = live_;
  }

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

  static size_t roundUp(size_t n) { return (n + kGranule - 1) / kGranule * kGranule; }

  // The smallest free range that holds SIZE bytes, split when larger (best fit, as glibc's large
  // bins): the rest stays free, with its pages. Null when none does.
  char* takeFree(size_t size) const {
    std::lock_guard<std::mutex> g(lock_);
    auto it = bySize_.lower_bound({size, nullptr});
    if (it == bySize_.end()) return nullptr;
    auto [have, base] = *it;
    forgetFree(base, have);
    if (have > size) rememberFree(base + size, have - size);
    cached_ -= size;
    live_ += size;
    watermark_ = std::max(watermark_, live_);
    used_[base] = size;
    return base;
  }

  char* mapFresh(size_t size) const {
    unmap(evictFor(size));
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {   // the address space or the overcommit limit: give back every free range, once
      unmap(takeAllFree());
      p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
    }
    char* base = static_cast<char*>(p);
    std::lock_guard<std::mutex> g(lock_);
    used_[base] = size;
    live_ += size;
    freshMaps_++;
    peakLive_ = std::max(peakLive_, live_);
    watermark_ = std::max(watermark_, live_);
    peakFootprint_ = std::max(peakFootprint_, live_ + cached_);
    return base;
  }

  using Ranges = std::vector<std::pair<char*, size_t>>;

  // The free ranges to unmap before mapping SIZE fresh bytes (see the header comment), taken out
  // of the heap: all of them when the bytes in use jump more than kSlack past their peak, else
  // the excess over the bound, cut from the ends of the largest free ranges.
  Ranges evictFor(size_t size) const {
    std::lock_guard<std::mutex> g(lock_);
    if (live_ + size > peakLive_ + kSlack) return takeAllFreeLocked();
    size_t bound = std::max(peakFootprint_, live_ + size + kSlack);
    size_t excess = live_ + cached_ + size > bound ? live_ + cached_ + size - bound : 0;
    Ranges out;
    while (excess > 0 && !bySize_.empty()) {
      auto [have, base] = *bySize_.rbegin();
      forgetFree(base, have);
      size_t cut = std::min(have, roundUp(excess));
      if (cut < have) rememberFree(base, have - cut);
      out.emplace_back(base + (have - cut), cut);
      cached_ -= cut;
      excess -= std::min(excess, cut);
    }
    return out;
  }

  Ranges takeAllFree() const {
    std::lock_guard<std::mutex> g(lock_);
    return takeAllFreeLocked();
  }

  Ranges takeAllFreeLocked() const {
    Ranges out(byAddress_.begin(), byAddress_.end());
    byAddress_.clear();
    bySize_.clear();
    cached_ = 0;
    return out;
  }

  void unmap(const Ranges& ranges) const {
    for (auto& [base, size] : ranges) munmap(base, size);
    if (!ranges.empty()) {
      std::lock_guard<std::mutex> g(lock_);
      unmaps_ += ranges.size();
    }
  }

  // A free range, merged with the free ranges right before and after it. Ranges of different
  // mappings merge too: both are ours, mapped alike, and munmap takes any run of pages. Under lock_.
  void addFree(char* base, size_t size) const {
    auto next = byAddress_.find(base + size);
    if (next != byAddress_.end()) {
      size_t n = next->second;
      forgetFree(base + size, n);
      size += n;
    }
    auto after = byAddress_.lower_bound(base);
    if (after != byAddress_.begin()) {
      auto prev = std::prev(after);
      if (prev->first + prev->second == base) {
        char* start = prev->first;
        size_t n = prev->second;
        forgetFree(start, n);
        base = start;
        size += n;
      }
    }
    rememberFree(base, size);
  }

  void rememberFree(char* base, size_t size) const {
    byAddress_.emplace(base, size);
    bySize_.emplace(size, base);
  }

  void forgetFree(char* base, size_t size) const {
    byAddress_.erase(base);
    bySize_.erase({size, base});
  }

  static void release(void* ptr) {
    CachingCpuAllocator* self = instance;
    char* base = static_cast<char*>(ptr);
    size_t size;
    {
      std::lock_guard<std::mutex> g(self->lock_);
      auto it = self->used_.find(base);
      if (it == self->used_.end()) {
        // a small block handed out through raw_allocate: the default allocator's to free
        if (c10::DeleterFnPtr d = self->fallback_->raw_deleter()) d(ptr);
        return;
      }
      size = it->second;
      self->used_.erase(it);
      reportToProfiler(base, -int64_t(size));
      self->live_ -= size;
      if (size <= kLargestCached) {
        // the footprint does not grow: the block goes from in use to free
        self->addFree(base, size);
        self->cached_ += size;
        return;
      }
      self->unmaps_++;
    }
    munmap(base, size);
  }

  c10::Allocator* fallback_;
  mutable std::mutex lock_;
  mutable std::map<char*, size_t> byAddress_;            // free ranges by start
  mutable std::set<std::pair<size_t, char*>> bySize_;    // the same, smallest first
  mutable std::unordered_map<char*, size_t> used_;       // blocks handed out, by start
  mutable size_t cached_ = 0;          // bytes in free ranges
  mutable size_t live_ = 0;            // bytes of blocks handed out and not yet freed
  mutable size_t peakLive_ = 0;        // the most live_ has been
  mutable size_t peakFootprint_ = 0;   // the most live_ + cached_ has been
  mutable size_t freshMaps_ = 0;       // mmap calls
  mutable size_t unmaps_ = 0;          // munmap calls
  mutable size_t watermark_ = 0;       // the most live_ has been since resetWatermark (measurements only)
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

CpuAllocatorStats cpuAllocatorStats() {
  return CachingCpuAllocator::instance ? CachingCpuAllocator::instance->stats() : CpuAllocatorStats{};
}

void resetCpuAllocatorWatermark() {
  if (CachingCpuAllocator::instance) CachingCpuAllocator::instance->resetWatermark();
}

}  // namespace purple
