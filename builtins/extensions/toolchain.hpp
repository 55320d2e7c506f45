// The compilers load-inline runs, and how it runs them. The C++ compiler, its flags and LibTorch's
// include directories are those Purple was built with (recorded by cmake/extensions.cmake); the
// LibTorch libraries an extension links are the ones this process has loaded, found at run time,
// so that an extension always links the LibTorch it will run with, wherever Purple is installed.
#pragma once
#include <string>
#include <vector>

namespace purple::extensions {

struct Toolchain {
  std::string cxx;                             // the C++ compiler Purple was built with
  std::string cxxId;                           // "GNU 12.2.0"
  std::vector<std::string> cxxFlags;           // the build type's flags, -std=c++17, LibTorch's ABI flag
  std::vector<std::string> torchIncludeDirs;
  std::vector<std::string> torchLibraries;     // libc10, libtorch_cpu, libtorch (and CUDA's): full paths
  std::string torchVersion;                    // of the headers Purple was built against
  bool torchHasCuda = false;
  std::vector<std::string> cudaIncludeDirs, cudaLibraryDirs;
  // Everything above: part of every cache key, so that another compiler, other flags or another
  // LibTorch never reuse a library built for this one.
  std::string fingerprint() const;
};
const Toolchain& toolchain();

// nvcc: the one found when Purple was configured, else $CUDA_HOME/bin/nvcc, else one on PATH;
// "" when there is none.
std::string findNvcc();

// Runs ARGV (ARGV[0] looked up on PATH when it has no slash) in directory DIR with its standard
// output and error appended to LOGPATH, and waits for it. While it runs, the calling interpreter
// is polled (Ctrl-C, time budget): when that throws, the command and every process under it are
// killed first. Returns the exit status (128 + N for a signal N); -1 when it could not be started.
int runProcess(const std::vector<std::string>& argv, const std::string& dir, const std::string& logPath);

// ARGV as a shell would read it, for :verbose and the logs.
std::string commandText(const std::vector<std::string>& argv);

}  // namespace purple::extensions
