// The one place cuda-raw-kernel needs LibTorch's CUDA headers: the current stream, which LibTorch's
// own kernels use, so that a raw kernel is ordered with them as a PyTorch op would be. CMake
// defines PURPLE_HAVE_CUDA on this file alone, and only with a CUDA LibTorch (see
// interp/memory/device_memory.cpp for the same arrangement); without it there are no CUDA tensors
// to launch on, and the stream is the legacy default one.
#include "builtins/extensions/cuda_libraries.hpp"
#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#ifdef PURPLE_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace purple::extensions {

void* currentCudaStream(int index) {
#ifdef PURPLE_HAVE_CUDA
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index)).stream();
#else
  (void)index;
  return nullptr;
#endif
}

CudaDeviceGuard::CudaDeviceGuard(int index) {
  // Through LibTorch's device-guard registry: the CUDA runtime then makes the device's primary
  // context current on this thread, the context LibTorch's allocations live in.
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  previous_ = impl->getDevice().index();
  impl->setDevice(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index)));
}

CudaDeviceGuard::~CudaDeviceGuard() {
  if (previous_ < 0) return;
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  impl->uncheckedSetDevice(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(previous_)));
}

}  // namespace purple::extensions
