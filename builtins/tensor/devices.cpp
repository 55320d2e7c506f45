// Devices, dtype conversion and LibTorch's global settings (threads, denormals, default dtype).
//
// Only device-agnostic interfaces are used here (torch::cuda's declarations, which libtorch_cpu
// implements in every build, and at::Device), so this file compiles unchanged against Debian's
// CPU LibTorch 1.13 and a pip CUDA LibTorch 2.x; on a CPU build the CUDA queries answer "none"
// and moving a tensor to "cuda" is a Purple error.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <c10/core/DefaultDtype.h>
#include "builtins/tensor/util.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

// The positional target of tensor-to: a dtype name, a device name, or a tensor to match.
struct ToTarget {
  std::optional<at::ScalarType> dtype;
  std::optional<at::Device> device;
};

int64_t cudaDeviceCount() { return int64_t(torch::cuda::device_count()); }

at::Tensor convertTo(const at::Tensor& x, std::optional<at::ScalarType> dtype, std::optional<at::Device> device,
                     bool nonBlocking, bool copy) {
  at::ScalarType st = dtype ? *dtype : x.scalar_type();
  at::Device dev = device ? *device : x.device();
  // LibTorch's own message for this ("not linked with support for cuda devices") reads like a bug.
  checkDeviceAvailable(dev);
  return x.to(dev, st, nonBlocking, copy);
}

}  // namespace

template <> struct Convert<ToTarget> {
  static constexpr bool keepsValue = false;
  static ToTarget from(Interp&, Value v, const PrimitiveInfo* info, int) {
    ToTarget t;
    if (v.isMissing()) return t;
    if (isTensor(v)) {
      const at::Tensor& other = tensorOf(v);
      if (!other.defined()) throwError("tensor-error", info->name + ": the target tensor was already freed");
      t.dtype = other.scalar_type();
      t.device = other.device();
      return t;
    }
    if ((t.dtype = lookupScalarType(v))) return t;
    t.device = deviceFromValue(v, info->name);
    return t;
  }
};

void registerTensorDevices(Registry& r) {
  r.def("tensor-to", "(x :optional target target2 :key dtype device non-blocking copy)",
        [](const at::Tensor& x, ToTarget target, ToTarget target2, std::optional<at::ScalarType> dtype,
           std::optional<at::Device> device, bool nonBlocking, bool copy) {
          if (!dtype) dtype = target2.dtype ? target2.dtype : target.dtype;
          if (!device) device = target2.device ? target2.device : target.device;
          return convertTo(x, dtype, device, nonBlocking, copy);
        },
        "X converted to another dtype and/or device: (tensor-to x 'float64), (tensor-to x \"cuda:0\"), "
        "(tensor-to x \"cuda\" 'float16), "
        "(tensor-to x other-tensor) (OTHER's dtype and device), or :dtype and :device. X itself is "
        "returned when nothing changes, unless :copy #t.");
  r.def("tensor-cpu", "(x)", [](const at::Tensor& x) { return x.cpu(); },
        "X on the CPU (X itself when it is already there).");
  r.def("tensor-cuda", "(x :optional device :key non-blocking)",
        [](const at::Tensor& x, std::optional<at::Device> device, bool nonBlocking) {
          at::Device dev = device ? *device : at::Device(at::kCUDA);
          if (!dev.is_cuda())
            throwError("tensor-error", "tensor-cuda: DEVICE must be a CUDA device, got \"" + dev.str() + "\"");
          if (cudaDeviceCount() == 0)
            throwError("tensor-error", "tensor-cuda: no CUDA device is available (this LibTorch has no CUDA, "
                                       "or no GPU is present)");
          return x.to(dev, x.scalar_type(), nonBlocking);
        },
        "X on a CUDA device: the current one, or DEVICE (an index or \"cuda:N\").");
#define PURPLE_CAST(NAME, TYPE, DOC) \
  r.def(NAME, "(x)", [](const at::Tensor& x) { return x.to(TYPE); }, DOC)
  PURPLE_CAST("tensor-float", at::kFloat, "X converted to float32 (X itself when it already is).");
  PURPLE_CAST("tensor-double", at::kDouble, "X converted to float64.");
  PURPLE_CAST("tensor-half", at::kHalf, "X converted to float16.");
  PURPLE_CAST("tensor-long", at::kLong, "X converted to int64 (floats truncate towards zero).");
  PURPLE_CAST("tensor-int", at::kInt, "X converted to int32 (floats truncate towards zero).");
  PURPLE_CAST("tensor-bool", at::kBool, "X converted to bool (non-zero is #t).");
#undef PURPLE_CAST

  r.def("libtorch-version", "()", []() { return std::string(TORCH_VERSION); },
        "The version of the LibTorch Purple was built against, as a string such as \"2.6.0\" "
        "(Debian 13) or \"1.13.0\" (Debian 12); `purple --version` shows it too.");
  r.def("cuda-available?", "()", []() { return cudaDeviceCount() > 0; },
        "#t when this LibTorch has CUDA and at least one GPU is present.");
  r.def("cuda-device-count", "()", []() { return cudaDeviceCount(); },
        "The number of CUDA devices (0 on a CPU-only build).");
  r.def("cuda-synchronize", "(:optional device)",
        [](std::optional<at::Device> device) {
          if (cudaDeviceCount() == 0) return;   // nothing can be pending
          if (device && !device->is_cuda())
            throwError("tensor-error", "cuda-synchronize: DEVICE must be a CUDA device, got \"" + device->str() + "\"");
          torch::cuda::synchronize(device && device->has_index() ? device->index() : -1);
        },
        "Waits until all work queued on the current CUDA device (or DEVICE) has finished; does "
        "nothing without CUDA. Use it before timing GPU code.");
  sandboxAllowed(r, "cuda-synchronize", "the GPU: waits for its queued work",
               "changes nothing; a GPU is used like any tensor operation uses it (maxTensorBytes counts CUDA tensors after the fact)");
  r.def("set-num-threads!", "(n)",
        [](int64_t n) {
          requireProcessAccess("set-num-threads!");
          if (n < 1) throwError("tensor-error", "set-num-threads!: the thread count must be at least 1, got",
                                cons(makeInteger(n), Value::nil()));
          at::set_num_threads(int(n));
        },
        "Sets the number of threads LibTorch uses for intra-op parallelism on the CPU.");
  sandbox(r, "set-num-threads!", Needs::Process, "global settings: LibTorch's thread count");
  r.def("get-num-threads", "()", []() { return int64_t(at::get_num_threads()); },
        "The number of threads LibTorch uses for intra-op parallelism on the CPU.");
  sandboxAllowed(r, "get-num-threads", "global settings: LibTorch's thread count",
               "reads it; changes nothing");
  r.def("set-flush-denormal!", "(on)",
        [](bool on) {
          requireProcessAccess("set-flush-denormal!");
          return at::globalContext().setFlushDenormal(on);
        },
        "Turns flushing of subnormal floats to zero on the CPU on (#t) or off (#f); subnormal "
        "arithmetic can be ~80x slower (e.g. Adam late in training). Returns #t when the CPU "
        "supports it (SSE3), #f otherwise.");
  sandbox(r, "set-flush-denormal!", Needs::Process, "global settings: the CPU flush-denormal mode");
  r.def("set-default-dtype!", "(dtype)",
        [](at::ScalarType t) {
          requireProcessAccess("set-default-dtype!");
          if (!at::isFloatingType(t))
            throwError("tensor-error", "set-default-dtype!: the default dtype must be a floating-point type");
          c10::set_default_dtype(c10::scalarTypeToTypeMeta(t));
        },
        "Sets the dtype that float data and float tensor literals get when no :dtype is given "
        "(float32 at start-up; float64 is the usual alternative).");
  sandbox(r, "set-default-dtype!", Needs::Process, "global settings: the default dtype");
  r.def("get-default-dtype", "()", []() { return c10::get_default_dtype_as_scalartype(); },
        "The dtype float data gets when no :dtype is given (float32 unless set-default-dtype!).");
  sandboxAllowed(r, "get-default-dtype", "global settings: the default dtype",
               "reads it; changes nothing");
}

}  // namespace purple
