#include "builtins/extensions/cuda_libraries.hpp"
#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace purple::extensions {

namespace {

template <class F> bool bind(void* lib, F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
  return slot != nullptr;
}

// Files matching PATTERN, newest version last (glob sorts names).
std::vector<std::string> globbed(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; i++) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

// The directory of a loaded LibTorch CUDA library (a pip PyTorch's torch/lib), or "".
std::string torchCudaLibraryDir() {
  std::string dir;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        std::string path = info->dlpi_name ? info->dlpi_name : "";
        size_t slash = path.rfind('/');
        if (slash != std::string::npos && path.find("libc10_cuda.so", slash) != std::string::npos)
          *static_cast<std::string*>(data) = path.substr(0, slash);
        return 0;
      },
      &dir);
  return dir;
}

std::vector<std::string> nvrtcCandidates() {
  std::vector<std::string> c;
  if (const char* p = std::getenv("PURPLE_NVRTC")) c.emplace_back(p);
  std::string torchLib = torchCudaLibraryDir();
  if (!torchLib.empty()) {
    for (const char* pattern : {"/libnvrtc.so*", "/../../nvidia/cuda_nvrtc/lib/libnvrtc.so*",
                                "/../../nvidia/cu13/lib/libnvrtc.so*", "/../../nvidia/cu12/lib/libnvrtc.so*"})
      for (auto& f : globbed(torchLib + pattern))
        if (f.find("builtins") == std::string::npos && f.find(".alt.") == std::string::npos) c.push_back(f);
  }
  for (const char* soname : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"}) c.emplace_back(soname);
  std::vector<std::string> roots;
  if (const char* home = std::getenv("CUDA_HOME")) roots.emplace_back(home);
  roots.emplace_back("/usr/local/cuda");
  for (auto& r : roots)
    for (const char* sub : {"/lib64/libnvrtc.so", "/lib/libnvrtc.so"}) c.push_back(r + sub);
  return c;
}

}  // namespace

const Nvrtc* nvrtc(std::string* whyNot) {
  static std::once_flag once;
  static Nvrtc* found = nullptr;
  static std::string error;
  std::call_once(once, [] {
    std::string tried;
    for (const auto& path : nvrtcCandidates()) {
      void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!lib) {
        tried += (tried.empty() ? "" : ", ") + path;
        continue;
      }
      auto* n = new Nvrtc;
      n->path = path;
      bool ok = bind(lib, n->createProgram, "nvrtcCreateProgram") && bind(lib, n->compileProgram, "nvrtcCompileProgram") &&
                bind(lib, n->getProgramLogSize, "nvrtcGetProgramLogSize") &&
                bind(lib, n->getProgramLog, "nvrtcGetProgramLog") && bind(lib, n->getPTXSize, "nvrtcGetPTXSize") &&
                bind(lib, n->getPTX, "nvrtcGetPTX") && bind(lib, n->addNameExpression, "nvrtcAddNameExpression") &&
                bind(lib, n->getLoweredName, "nvrtcGetLoweredName") &&
                bind(lib, n->destroyProgram, "nvrtcDestroyProgram") &&
                bind(lib, n->getErrorString, "nvrtcGetErrorString") && bind(lib, n->version, "nvrtcVersion");
      if (ok) {
        found = n;
        return;
      }
      delete n;
      tried += (tried.empty() ? "" : ", ") + path + " (lacks an NVRTC function)";
    }
    error = "NVRTC (libnvrtc.so) was not found; tried " + tried +
            ". Install CUDA's NVRTC, or set PURPLE_NVRTC to the library's path";
  });
  if (!found && whyNot) *whyNot = error;
  return found;
}

std::string CudaDriver::describe(int result) const {
  const char* text = nullptr;
  if (getErrorString) getErrorString(result, &text);
  return "CUDA driver error " + std::to_string(result) + (text ? std::string(": ") + text : std::string());
}

const CudaDriver* cudaDriver(std::string* whyNot) {
  static std::once_flag once;
  static CudaDriver* found = nullptr;
  static std::string error;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "the CUDA driver (libcuda.so.1) is not installed: this machine has no NVIDIA GPU driver";
      return;
    }
    auto* d = new CudaDriver;
    bool ok = bind(lib, d->init, "cuInit") && bind(lib, d->deviceGet, "cuDeviceGet") &&
              bind(lib, d->deviceGetAttribute, "cuDeviceGetAttribute") &&
              bind(lib, d->primaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
              bind(lib, d->ctxGetCurrent, "cuCtxGetCurrent") && bind(lib, d->ctxSetCurrent, "cuCtxSetCurrent") &&
              bind(lib, d->moduleLoadData, "cuModuleLoadData") &&
              bind(lib, d->moduleGetFunction, "cuModuleGetFunction") &&
              bind(lib, d->launchKernel, "cuLaunchKernel") && bind(lib, d->getErrorString, "cuGetErrorString");
    if (!ok) {
      delete d;
      error = "the CUDA driver (libcuda.so.1) lacks a function cuda-raw-kernel needs";
      return;
    }
    int rc = d->init(0);
    if (rc != 0) {
      error = "the CUDA driver did not start (" + d->describe(rc) + ")";
      delete d;
      return;
    }
    found = d;
  });
  if (!found && whyNot) *whyNot = error;
  return found;
}

int computeCapability(int index) {
  const CudaDriver* d = cudaDriver(nullptr);
  if (!d) return 0;
  int device = 0, major = 0, minor = 0;
  if (d->deviceGet(&device, index) != 0) return 0;
  if (d->deviceGetAttribute(&major, CudaDriver::kComputeCapabilityMajor, device) != 0 ||
      d->deviceGetAttribute(&minor, CudaDriver::kComputeCapabilityMinor, device) != 0)
    return 0;
  return major * 10 + minor;
}

}  // namespace purple::extensions
