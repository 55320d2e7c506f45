// GPU memory from Purple: the caching allocator's counters and cache, under torch.cuda's names.
// On a LibTorch without CUDA (or with no GPU) the counters read 0 and emptying does nothing, as
// torch.cuda.memory_allocated() and torch.cuda.empty_cache() behave before CUDA is initialised.
#include "builtins/tensor/util.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/device_memory.hpp"
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

// DEVICE: absent for the current device, an index, or a CUDA device name ("cuda:1").
int deviceIndexOf(std::optional<at::Device> device, const char* who) {
  if (!device) return -1;
  if (!device->is_cuda())
    throwError("tensor-error", std::string(who) + ": DEVICE must be a CUDA device, got \"" + device->str() + "\"");
  return device->has_index() ? int(device->index()) : -1;
}

}  // namespace

void registerCudaMemory(Registry& r) {
  r.def("cuda-memory-stats", "(:optional device)",
        [](std::optional<at::Device> device) {
          DeviceMemoryStats s = deviceMemoryStats(deviceIndexOf(device, "cuda-memory-stats"));
          auto entry = [](const char* k, int64_t v) { return cons(intern(k), makeInteger(v)); };
          Value items[] = {entry("allocated", s.allocated),   entry("max-allocated", s.maxAllocated),
                           entry("reserved", s.reserved),     entry("max-reserved", s.maxReserved),
                           entry("active", s.active),         entry("num-alloc-retries", s.allocRetries),
                           entry("num-ooms", s.ooms),         entry("oom-collections", s.oomCollections)};
          return listFromArray(items, sizeof items / sizeof items[0]);
        },
        "An alist of the CUDA caching allocator's counters for DEVICE (default: the current one), in "
        "bytes: allocated and max-allocated (live tensors, as torch.cuda.memory_allocated and "
        "max_memory_allocated), reserved and max-reserved (held from the driver), active; and counts: "
        "num-alloc-retries, num-ooms, and oom-collections (collections Purple ran after a CUDA "
        "out-of-memory error before retrying). All 0 without CUDA.");
  sandboxAllowed(r, "cuda-memory-stats", "global settings: GPU memory counters", "reads numbers; changes nothing");
  r.def("cuda-memory-allocated", "(:optional device)",
        [](std::optional<at::Device> device) {
          return deviceMemoryStats(deviceIndexOf(device, "cuda-memory-allocated")).allocated;
        },
        "Bytes of GPU memory in live tensors on DEVICE (default: the current one); 0 without CUDA.");
  sandboxAllowed(r, "cuda-memory-allocated", "global settings: GPU memory counters", "reads a number");
  r.def("cuda-max-memory-allocated", "(:optional device)",
        [](std::optional<at::Device> device) {
          return deviceMemoryStats(deviceIndexOf(device, "cuda-max-memory-allocated")).maxAllocated;
        },
        "The peak of cuda-memory-allocated since the start or the last cuda-reset-peak-memory-stats.");
  sandboxAllowed(r, "cuda-max-memory-allocated", "global settings: GPU memory counters", "reads a number");
  r.def("cuda-reset-peak-memory-stats", "(:optional device)",
        [](std::optional<at::Device> device) {
          deviceMemoryResetPeaks(deviceIndexOf(device, "cuda-reset-peak-memory-stats"));
        },
        "Starts the peaks of cuda-memory-stats afresh from the current values.");
  sandbox(r, "cuda-reset-peak-memory-stats", Needs::Process, "global settings: the GPU's peak counters, which every interpreter shares");
  r.def("cuda-empty-cache", "()", []() { deviceMemoryEmptyCache(); },
        "Returns the GPU memory the caching allocator holds but no tensor uses to the driver, as "
        "torch.cuda.empty_cache. Tensors that are unreachable but not yet collected still hold "
        "theirs: run (gc) first to free them too.");
  sandbox(r, "cuda-empty-cache", Needs::Process, "global settings: the GPU cache every interpreter shares");
}

}  // namespace purple
