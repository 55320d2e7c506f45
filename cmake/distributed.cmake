# Distributed training (builtins/distributed/, prelude/45-distributed.purple, launcher/): c10d
# and its Gloo backend are inside LibTorch's libtorch_cpu; compiling against their headers needs
# Gloo's headers too. Debian: libgloo-dev (/usr/include/gloo). A pip PyTorch 2.x ships them under
# torch/include/gloo, which is one of TORCH_INCLUDE_DIRS. NCCL is used when the LibTorch found has
# CUDA and nccl.h is found (the pip package nvidia-nccl-cu12 ships it: pass
# -DNCCL_INCLUDE_DIR=.../site-packages/nvidia/nccl/include when it is not found on its own).
#
# Sets PURPLE_HAVE_DISTRIBUTED, PURPLE_HAVE_GLOO and PURPLE_HAVE_NCCL; purple_enable_distributed(target) adds the
# compile definitions and include directories to the library.

option(PURPLE_DISTRIBUTED "Build distributed training (c10d, Gloo, NCCL when available)" ON)
set(PURPLE_HAVE_DISTRIBUTED OFF)
set(PURPLE_HAVE_NCCL OFF)

if(PURPLE_DISTRIBUTED)
  find_path(PURPLE_C10D_INCLUDE_DIR torch/csrc/distributed/c10d/ProcessGroup.hpp HINTS ${TORCH_INCLUDE_DIRS})
  find_path(PURPLE_GLOO_INCLUDE_DIR gloo/algorithm.h HINTS ${TORCH_INCLUDE_DIRS})
  set(PURPLE_HAVE_GLOO OFF)
  if(PURPLE_C10D_INCLUDE_DIR AND PURPLE_GLOO_INCLUDE_DIR AND
     EXISTS "${PURPLE_C10D_INCLUDE_DIR}/torch/csrc/distributed/c10d/ProcessGroupGloo.hpp")
    set(PURPLE_HAVE_GLOO ON)
    # Debian's libtorch_cpu links libgloo.so.0; inline code from Gloo's headers may need it too.
    # A pip LibTorch has Gloo inside libtorch_cpu, and no libgloo.
    find_library(PURPLE_GLOO_LIBRARY gloo)
  endif()
  set(purple_torch_has_cuda OFF)
  if(TORCH_CUDA_LIBRARIES OR TARGET torch_cuda)
    set(purple_torch_has_cuda ON)
  endif()
  if(PURPLE_C10D_INCLUDE_DIR AND purple_torch_has_cuda AND
     EXISTS "${PURPLE_C10D_INCLUDE_DIR}/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp")
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${TORCH_INCLUDE_DIRS} ENV NCCL_INCLUDE_DIR
              PATH_SUFFIXES ../../nvidia/nccl/include ../../nvidia/cu13/include ../../nvidia/cu12/include)
    if(NCCL_INCLUDE_DIR)
      set(PURPLE_HAVE_NCCL ON)
    endif()
  endif()
  # A pip PyTorch ships c10d's headers but not Gloo's: distributed training then has NCCL only.
  if(PURPLE_HAVE_GLOO OR PURPLE_HAVE_NCCL)
    set(PURPLE_HAVE_DISTRIBUTED ON)
    message(STATUS "Distributed training: c10d; Gloo: ${PURPLE_HAVE_GLOO}; NCCL: ${PURPLE_HAVE_NCCL}")
  else()
    message(STATUS "Distributed training: off (c10d or Gloo headers not found; install libgloo-dev)")
  endif()
endif()

function(purple_enable_distributed target)
  if(NOT PURPLE_HAVE_DISTRIBUTED)
    return()
  endif()
  # USE_C10D_GLOO / USE_C10D_NCCL unlock c10d's backend headers, as LibTorch's own build does.
  target_compile_definitions(${target} PRIVATE PURPLE_HAVE_DISTRIBUTED=1)
  if(PURPLE_HAVE_GLOO)
    target_compile_definitions(${target} PRIVATE PURPLE_HAVE_GLOO=1 USE_C10D_GLOO=1)
    target_include_directories(${target} PRIVATE ${PURPLE_GLOO_INCLUDE_DIR})
    if(PURPLE_GLOO_LIBRARY)
      target_link_libraries(${target} PRIVATE ${PURPLE_GLOO_LIBRARY})
    endif()
  endif()
  if(PURPLE_HAVE_NCCL)
    target_compile_definitions(${target} PRIVATE PURPLE_HAVE_NCCL=1 USE_C10D_NCCL=1)
    target_include_directories(${target} PRIVATE ${NCCL_INCLUDE_DIR})
  endif()
endfunction()
