# load-inline and cuda-raw-kernel (builtins/extensions/): what they compile with at run time is
# what Purple was built with, recorded here into build/generated/extension_toolchain.hpp:
#   - the C++ compiler, the flags of this build type, the C++ standard and LibTorch's own flags
#     (TORCH_CXX_FLAGS: the libstdc++ ABI), and LibTorch's include directories;
#   - with a CUDA LibTorch, nvcc and CUDA's include and library directories (for :cuda-sources).
# The LibTorch libraries an extension links are not recorded: they are found at run time among
# the libraries the process has loaded, so that an extension links the very LibTorch it runs with.
# The shim headers (builtins/extensions/shim/: <torch/extension.h> without Python) are compiled
# into the library as text, as the prelude is, and written beside the cache when first needed.
#
# purple_extension_sources(VAR) appends the generated sources to VAR.

string(TOUPPER "${CMAKE_BUILD_TYPE}" purple_ext_build_type)
set(purple_ext_flags "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${purple_ext_build_type}} ${TORCH_CXX_FLAGS}")
separate_arguments(purple_ext_flags UNIX_COMMAND "${purple_ext_flags}")
list(APPEND purple_ext_flags ${CMAKE_CXX17_STANDARD_COMPILE_OPTION})

# C string literals, one per list item, for an initializer list.
function(purple_c_strings out)
  set(text "")
  foreach(item ${ARGN})
    string(REPLACE "\\" "\\\\" item "${item}")
    string(REPLACE "\"" "\\\"" item "${item}")
    string(APPEND text "\"${item}\", ")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

set(purple_ext_torch_has_cuda false)
set(PURPLE_NVCC "")
set(purple_ext_cuda_include_dirs "")
set(purple_ext_cuda_library_dirs "")
if(TORCH_CUDA_LIBRARIES OR TARGET torch_cuda)
  set(purple_ext_torch_has_cuda true)
  find_program(PURPLE_NVCC_PROGRAM nvcc
               HINTS ${CUDAToolkit_BIN_DIR} ${CUDA_TOOLKIT_ROOT_DIR}/bin ENV CUDA_HOME PATH_SUFFIXES bin
               PATHS /usr/local/cuda/bin)
  if(PURPLE_NVCC_PROGRAM)
    set(PURPLE_NVCC ${PURPLE_NVCC_PROGRAM})
    get_filename_component(purple_cuda_root "${PURPLE_NVCC_PROGRAM}" DIRECTORY)
    get_filename_component(purple_cuda_root "${purple_cuda_root}" DIRECTORY)
    set(purple_ext_cuda_include_dirs ${CUDAToolkit_INCLUDE_DIRS} ${CUDA_INCLUDE_DIRS} ${purple_cuda_root}/include)
    set(purple_ext_cuda_library_dirs ${CUDAToolkit_LIBRARY_DIR} ${purple_cuda_root}/lib64 ${purple_cuda_root}/lib)
    list(REMOVE_DUPLICATES purple_ext_cuda_include_dirs)
    list(REMOVE_DUPLICATES purple_ext_cuda_library_dirs)
    message(STATUS "load-inline :cuda-sources: ${PURPLE_NVCC}")
  else()
    message(STATUS "load-inline :cuda-sources: nvcc not found (CUDA_HOME=/path/to/cuda)")
  endif()
endif()

# A -isystem of the compiler's own /usr/include breaks #include_next in libstdc++.
set(purple_ext_include_dirs ${TORCH_INCLUDE_DIRS})
list(REMOVE_ITEM purple_ext_include_dirs ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES})
list(REMOVE_DUPLICATES purple_ext_include_dirs)

purple_c_strings(PURPLE_EXT_FLAGS ${purple_ext_flags})
purple_c_strings(PURPLE_EXT_INCLUDE_DIRS ${purple_ext_include_dirs})
purple_c_strings(PURPLE_EXT_CUDA_INCLUDE_DIRS ${purple_ext_cuda_include_dirs})
purple_c_strings(PURPLE_EXT_CUDA_LIBRARY_DIRS ${purple_ext_cuda_library_dirs})
set(PURPLE_EXT_CXX "${CMAKE_CXX_COMPILER}")
set(PURPLE_EXT_CXX_ID "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
set(PURPLE_EXT_TORCH_HAS_CUDA ${purple_ext_torch_has_cuda})
configure_file(${CMAKE_SOURCE_DIR}/builtins/extensions/extension_toolchain.hpp.in
               ${CMAKE_BINARY_DIR}/generated/extension_toolchain.hpp @ONLY)

file(GLOB_RECURSE PURPLE_EXTENSION_SHIM_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/builtins/extensions/shim/*.h)
list(SORT PURPLE_EXTENSION_SHIM_FILES)
string(REPLACE ";" "|" purple_ext_shim_arg "${PURPLE_EXTENSION_SHIM_FILES}")
set(PURPLE_EXTENSION_SHIM_CPP ${CMAKE_BINARY_DIR}/generated/extension_shim_sources.cpp)
add_custom_command(
  OUTPUT ${PURPLE_EXTENSION_SHIM_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${PURPLE_EXTENSION_SHIM_CPP} "-DFILES=${purple_ext_shim_arg}"
          -DBASE=${CMAKE_SOURCE_DIR}/builtins/extensions/shim -DNAME=kExtensionShimSources
          -DCOUNT=kExtensionShimSourceCount -P ${CMAKE_SOURCE_DIR}/cmake/embed_prelude.cmake
  DEPENDS ${PURPLE_EXTENSION_SHIM_FILES} ${CMAKE_SOURCE_DIR}/cmake/embed_prelude.cmake
  COMMENT "Embedding load-inline's <torch/extension.h>" VERBATIM)
