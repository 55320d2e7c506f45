// LibTorch 1.13 bundles oneDNN 2.6, whose AMX kernels execute tile instructions that fault with
// SIGILL on current Linux kernels (observed: bf16 autocast matmul; Debian's python3-torch dies the
// same way, with or without arch_prctl's AMX permission). Capping oneDNN at AVX512_CORE_BF16 keeps
// bf16 on the vector units. oneDNN reads the variable lazily at its first primitive, so setting it
// when libpurple loads is early enough for the CLI and for embedding hosts. A value the user set is
// kept, and LibTorch 2.x (oneDNN 3.x, whose AMX kernels run) is left alone (torch_compat.hpp, 10.).
#include "interp/platform/torch_compat.hpp"

#include <cstdlib>

namespace purple {
namespace {

struct OneDnnIsaCap {
  OneDnnIsaCap() {
    if (compat::kCapOneDnnBelowAmx) setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", /*overwrite=*/0);
  }
};

const OneDnnIsaCap oneDnnIsaCap;

}  // namespace
}  // namespace purple
