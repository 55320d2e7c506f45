// The communication backends: Gloo (CPU tensors; inside every LibTorch with c10d) and NCCL (CUDA
// tensors; only when the LibTorch Purple is built against has it). Each is made the way Python's
// torch.distributed makes it, so a Purple rank and a Python rank end up with compatible peers.
#include "builtins/distributed/comm.hpp"
#ifdef PURPLE_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef PURPLE_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace purple::dist {

namespace {

#ifdef PURPLE_HAVE_GLOO
// As torch's Python binding: GLOO_SOCKET_IFNAME names the interfaces (comma-separated); otherwise
// the device binds the address this machine's hostname resolves to (the loopback if none).
c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> glooOptions(std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  const char* ifnames = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifnames && std::strlen(ifnames) > 1) {
    std::stringstream ss(ifnames);
    std::string name;
    while (std::getline(ss, name, ','))
      if (!name.empty()) options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  options->threads = int(options->devices.size() * 2);
  return options;
}
#endif

}  // namespace

bool ncclAvailable() {
#ifdef PURPLE_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

CommPtr makeBackend(const std::string& kind, const StorePtr& store, int rank, int size,
                    std::chrono::milliseconds timeout, std::string_view who) {
  if (kind == "gloo") {
#ifdef PURPLE_HAVE_GLOO
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, glooOptions(timeout));
#else
    throwError("dist-error", std::string(who) +
                                 ": the Gloo backend is not available: the LibTorch this Purple was built against "
                                 "came without Gloo's headers (a pip PyTorch). Use :backend 'nccl for CUDA tensors");
#endif
  }
  if (kind == "nccl") {
#ifdef PURPLE_HAVE_NCCL
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
    throwError("dist-error", std::string(who) +
                                 ": the NCCL backend is not available: this Purple was built against a LibTorch "
                                 "without NCCL (a CPU build). Use :backend 'gloo, or build Purple against a CUDA "
                                 "LibTorch (see docs/distributed.md)");
#endif
  }
  throwError("dist-error", std::string(who) + ": unknown backend \"" + kind + "\" (expected gloo or nccl)");
}

}  // namespace purple::dist
