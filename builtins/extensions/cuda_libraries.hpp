// NVRTC and the CUDA driver API, opened with dlopen when first needed, so that Purple builds and
// runs where neither exists (a CPU-only machine never fails for want of CUDA; it gets a Purple error
// when it asks for a CUDA kernel). Only the handful of entry points cuda-raw-kernel uses are
// declared, with the C types they have in nvrtc.h and cuda.h.
#pragma once
#include <cstddef>
#include <string>

namespace purple::extensions {

struct Nvrtc {
  using Program = void*;
  int (*createProgram)(Program*, const char* src, const char* name, int numHeaders, const char* const* headers,
                       const char* const* includeNames) = nullptr;
  int (*compileProgram)(Program, int numOptions, const char* const* options) = nullptr;
  int (*getProgramLogSize)(Program, size_t*) = nullptr;
  int (*getProgramLog)(Program, char*) = nullptr;
  int (*getPTXSize)(Program, size_t*) = nullptr;
  int (*getPTX)(Program, char*) = nullptr;
  int (*addNameExpression)(Program, const char*) = nullptr;
  int (*getLoweredName)(Program, const char*, const char**) = nullptr;
  int (*destroyProgram)(Program*) = nullptr;
  const char* (*getErrorString)(int) = nullptr;
  int (*version)(int* major, int* minor) = nullptr;
  std::string path;    // the library opened
};
// NVRTC, or nullptr; WHY_NOT then says where it was looked for. Looked for: $PURPLE_NVRTC, beside
// the CUDA LibTorch this process runs (a pip PyTorch's nvidia/cuda_nvrtc), libnvrtc.so on the
// loader's path, then $CUDA_HOME and /usr/local/cuda.
const Nvrtc* nvrtc(std::string* whyNot);

struct CudaDriver {
  using Context = void*;
  using Module = void*;
  using Function = void*;
  using Stream = void*;
  int (*init)(unsigned flags) = nullptr;
  int (*deviceGet)(int* device, int ordinal) = nullptr;
  int (*deviceGetAttribute)(int* value, int attribute, int device) = nullptr;
  int (*primaryCtxRetain)(Context*, int device) = nullptr;
  int (*ctxGetCurrent)(Context*) = nullptr;
  int (*ctxSetCurrent)(Context) = nullptr;
  int (*moduleLoadData)(Module*, const void* image) = nullptr;
  int (*moduleGetFunction)(Function*, Module, const char* name) = nullptr;
  int (*launchKernel)(Function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned sharedBytes, Stream, void** params, void** extra) = nullptr;
  int (*getErrorString)(int, const char**) = nullptr;
  static constexpr int kComputeCapabilityMajor = 75;   // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  static constexpr int kComputeCapabilityMinor = 76;
  // "CUDA_ERROR_...: text" for a driver result.
  std::string describe(int result) const;
};
// The driver (libcuda.so.1, initialised), or nullptr with WHY_NOT.
const CudaDriver* cudaDriver(std::string* whyNot);

// The compute capability of CUDA device INDEX as major*10+minor (90 for an H100/H200), or 0 when
// there is no driver or no such device.
int computeCapability(int index);

// The handle of the current CUDA stream of device INDEX, as LibTorch's kernels use it
// (c10::cuda::getCurrentCUDAStream); nullptr, the legacy default stream, when this Purple was
// built without LibTorch's CUDA headers. (cuda_stream.cpp, built with PURPLE_HAVE_CUDA.)
void* currentCudaStream(int index);
// Makes device INDEX current on this thread for the lifetime of the guard (cuda_stream.cpp).
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int index);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace purple::extensions
