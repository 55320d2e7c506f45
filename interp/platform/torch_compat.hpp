// The differences between the LibTorch lines Purple builds against, in one place: Debian 12's
// 1.13, Debian 13's 2.6, and a pip PyTorch 2.x (the GPU machine's 2.11 with CUDA). Debian pairs
// LibTorch with python3-torch at one version, so the compile-time version is also the behaviour
// the interop tests expect. Every #if on the LibTorch version belongs here, each difference a
// numbered item; code elsewhere names the difference (compat::..., PURPLE_ALLOCATE_CONST,
// PURPLE_C10D_BACKENDS) instead of a version number. Where one item holds for "2.x", it was seen
// in 2.6 (Debian 13) and, for the build, in 2.11; the release in between that brought it is not
// pinned down unless the item names it.
#pragma once
#include <torch/version.h>   // TORCH_VERSION_*: without this include they are undefined, i.e. 0
#include <c10/core/Allocator.h>
#include <ATen/core/Tensor.h>
#include <ATen/autocast_mode.h>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#if !defined(TORCH_VERSION_MAJOR)
#error "torch/version.h did not define TORCH_VERSION_MAJOR"
#endif

#define PURPLE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if PURPLE_TORCH_AT_LEAST(2, 1)
#include <ATen/ops/scaled_dot_product_attention.h>   // 12.
#endif

// 1. c10::Allocator::allocate was const until 2.3; from 2.3 it is not, and copy_data is a new
//    pure virtual. An allocator declares `c10::DataPtr allocate(size_t n) PURPLE_ALLOCATE_CONST
//    override` and puts PURPLE_ALLOCATOR_COPY_DATA in its body.
#if PURPLE_TORCH_AT_LEAST(2, 3)
#define PURPLE_ALLOCATE_CONST
#define PURPLE_ALLOCATOR_COPY_DATA                                                     \
  void copy_data(void* dest, const void* src, std::size_t count) const override {       \
    default_copy_data(dest, src, count);                                               \
  }
#else
#define PURPLE_ALLOCATE_CONST const
#define PURPLE_ALLOCATOR_COPY_DATA
#endif

namespace purple::compat {

// 2. c10::variant (and c10::get_if) became std::variant in 2.x: options such as a convolution's
//    padding hold one or the other.
template <class T, class Variant>
auto* getIf(Variant* v) {
#if TORCH_VERSION_MAJOR >= 2
  return std::get_if<T>(v);
#else
  return c10::get_if<T>(v);
#endif
}

// 3. An optimizer's state map is keyed by the parameter's TensorImpl: as a string in 1.13 (made
//    with c10::guts::to_string, which 2.x removed), as the address itself in 2.x.
template <class Key>
Key optimizerStateKey(const at::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;   // what c10::guts::to_string did: operator<< of the pointer
    s << static_cast<const void*>(p.unsafeGetTensorImpl());
    return s.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

// 4. TCPStore: 2.4 made libuv the store's default transport (TCPStoreOptions::useLibUV), and
//    Debian 13's LibTorch is built without libuv, so a store that asks for it fails ("use_libuv
//    was requested but PyTorch was build without libuv support"). Purple asks for the classic
//    socket server wherever the option exists; both speak the same protocol. (Python's side of a
//    mixed job sets USE_LIBUV=0, or use_libuv=False; see tests/distributed/python-peer.py.)
template <class T, class = void>
struct HasUseLibUV : std::false_type {};
template <class T>
struct HasUseLibUV<T, std::void_t<decltype(std::declval<T&>().useLibUV)>> : std::true_type {};
template <class TcpStoreOptions>
void tcpStoreWithoutLibuv(TcpStoreOptions& o) {
  if constexpr (HasUseLibUV<TcpStoreOptions>::value) o.useLibUV = false;
}

// 5. torch.distributed's rendezvous, which a Purple rank follows step by step so that Python
//    ranks can share its groups (Python's distributed_c10d.py; builtins/distributed/rendezvous.cpp):
//    1.13: group k's backend talks through PrefixStore("<k>", S), S = PrefixStore("default_pg",
//          the TCP store); every group ends in a store-based barrier in S (key
//          "store_based_barrier_key:<k+1>"), then sets its sequence number.
//    2.x:  the world's backend talks through PrefixStore("cpu/", PrefixStore("0/", S)) ("cuda/"
//          for NCCL), and sub-group k's through "cpu/" under "<k>/" under the world's "0/"; the
//          sequence number comes right after construction; the barrier (key
//          "store_based_barrier_key:<k>" and a ":last_worker" key; a sub-group's in the world's
//          "0/" store) runs only when TORCH_DIST_INIT_BARRIER=1.
constexpr bool kDistProtocol2 = PURPLE_TORCH_AT_LEAST(2, 0);

// 6. NAdam: 1.13 multiplied mu into mu_product_next twice (mu_product * mu * mu_next, after
//    mu_product had already taken mu); 2.x computes mu_product * mu_next, with mu_product read as
//    a number. Purple steps as the Python of its own LibTorch does.
constexpr bool kNadamMuTwice = !PURPLE_TORCH_AT_LEAST(2, 0);

// 7. Python's optimizer state dicts (which Purple reads and writes key for key): 2.x adds
//    param-group flags ("capturable", "differentiable", "fused") and reorders some; RMSprop's
//    and Adadelta's "step" become float32 tensors (1.13: Python ints); SGD without momentum keeps
//    no state (1.13: {"momentum_buffer": None} for every parameter it stepped). The layouts are in
//    builtins/nn/optim_state.cpp and optimizers.cpp.
constexpr bool kPythonOptimState2 = PURPLE_TORCH_AT_LEAST(2, 0);

// 8. Module reprs, which Purple prints as Python does: 2.x quotes string options (EmbeddingBag's
//    and Upsample's mode='sum'; 1.13: mode=sum), and Softplus's defaults are floats (beta=1.0,
//    threshold=20.0; 1.13: beta=1, threshold=20).
constexpr bool kPyReprQuotesModes = PURPLE_TORCH_AT_LEAST(2, 0);
constexpr bool kSoftplusIntDefaults = !PURPLE_TORCH_AT_LEAST(2, 0);
inline std::string pyReprMode(const std::string& mode) { return kPyReprQuotesModes ? "'" + mode + "'" : mode; }

// 9. c10d: 2.x splits 1.13's ProcessGroup into a ProcessGroup that routes to per-device Backends;
//    ProcessGroupGloo and ProcessGroupNCCL are Backends. Purple drives that object directly
//    (builtins/distributed/comm.hpp's Comm is the one or the other).
#define PURPLE_C10D_BACKENDS PURPLE_TORCH_AT_LEAST(2, 0)

// 10. oneDNN: LibTorch 1.13 bundles oneDNN 2.6, whose AMX bfloat16 kernels die with SIGILL on
//     current Linux kernels; Purple caps oneDNN's ISA at AVX512_CORE_BF16 there
//     (interp/platform/onednn_isa.cpp). 2.x (oneDNN 3.x) runs its AMX kernels, uncapped.
constexpr bool kCapOneDnnBelowAmx = !PURPLE_TORCH_AT_LEAST(2, 0);

// 11. Autocast state: 2.4 takes the device type in one set of functions; before, CPU and CUDA
//     each had their own (is_cpu_enabled, get_autocast_gpu_dtype ...). CPU autocast computes in
//     float16 from 2.2; before only in bfloat16.
inline bool autocastEnabled(at::DeviceType d) {
#if PURPLE_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(d);
#else
  return d == at::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}
inline void setAutocastEnabled(at::DeviceType d, bool on) {
#if PURPLE_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(d, on);
#else
  if (d == at::kCUDA) at::autocast::set_enabled(on);
  else at::autocast::set_cpu_enabled(on);
#endif
}
inline at::ScalarType autocastDtype(at::DeviceType d) {
#if PURPLE_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(d);
#else
  return d == at::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}
inline void setAutocastDtype(at::DeviceType d, at::ScalarType t) {
#if PURPLE_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(d, t);
#else
  if (d == at::kCUDA) at::autocast::set_autocast_gpu_dtype(t);
  else at::autocast::set_autocast_cpu_dtype(t);
#endif
}
constexpr bool kCpuAutocastHalf = PURPLE_TORCH_AT_LEAST(2, 2);

// 12. scaled_dot_product_attention: LibTorch's own (fused where it can) from 2.1; before, the
//     caller's FALLBACK computes it from the definition.
template <class Fallback>
at::Tensor scaledDotProductAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const c10::optional<at::Tensor>& mask, double dropoutP, bool isCausal,
                                     c10::optional<double> scale, Fallback fallback) {
#if PURPLE_TORCH_AT_LEAST(2, 1)
  (void)fallback;
  return at::scaled_dot_product_attention(q, k, v, mask, dropoutP, isCausal, scale);
#else
  (void)q, (void)k, (void)v, (void)mask, (void)dropoutP, (void)isCausal, (void)scale;
  return fallback();
#endif
}

// 13. Python's LR scheduler state dicts (the keys in __dict__ order): 2.x's CyclicLR writes
//     _scale_fn_custom last, and ReduceLROnPlateau adds default_min_lr (the :min-lr given as one
//     number, else None) and sets mode_worse, best and num_bad_epochs after the rest
//     (builtins/nn/schedulers.cpp). CyclicLR's use_beta1, which 1.13 lacks, Purple always writes.
constexpr bool kPythonSchedulerState2 = PURPLE_TORCH_AT_LEAST(2, 0);

// 14. c10::MemoryReportingInfoBase::reportMemoryUsage takes the allocator's totals as int64_t in
//     1.13 and as size_t in 2.6: an override names the type as MemoryReportTotal, read off the
//     declaration itself.
template <class> struct MemoryReportArgs;
template <class C, class R, class Ptr, class Size, class Total, class Reserved, class Device>
struct MemoryReportArgs<R (C::*)(Ptr, Size, Total, Reserved, Device)> {
  using TotalType = Total;
};
using MemoryReportTotal = MemoryReportArgs<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::TotalType;

}  // namespace purple::compat
