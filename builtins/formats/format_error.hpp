// What the file readers and writers of builtins/formats throw: a one-line description of what is
// wrong with a file ("truncated at byte 812", "refers to the Python global os.system ..."). The
// builtins catch it and raise a Purple file-error naming themselves and the path, so the C++
// pieces (zip, pickle, safetensors, npy) stay free of interpreter state.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>

namespace purple::formats {

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& what) { throw FormatError(what); }

// A bool element is one byte holding 0 or 1. LibTorch's kernels read it as a C++ bool, for which
// any other byte is undefined behaviour (fuzz-npy: printing a '|b1' array holding byte 32), so a
// file's bool data is checked before a tensor is made of it. NumPy itself would read such a byte
// as True; a file that holds one was not written by NumPy, torch or safetensors.
inline void checkBoolBytes(const void* data, size_t n) {
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; i++)
    if (p[i] > 1)
      fail("bool data holds the byte " + std::to_string(unsigned(p[i])) + " at element " + std::to_string(i) + " (a bool is 0 or 1)");
}

}  // namespace purple::formats
