// What the file readers and writers of builtins/formats throw: a one-line description of what is
// wrong with a file ("truncated at byte 812", "refers to the Python global os.system ..."). The
// builtins catch it and raise a Purple file-error naming themselves and the path, so the C++
// pieces (zip, pickle, safetensors, npy) stay free of interpreter state.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace purple::formats {

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& what) { throw FormatError(what); }

// The product of a shape's dimensions, zeros counted as ones, must fit in int64: LibTorch computes
// contiguous strides that way, with no overflow check, so an empty (0, 888888888888, 8888888888)
// array from a file was signed overflow (fuzz-npy, UBSan). NumPy refuses such a shape too
// ("array is too big").
template <class Dims> void checkShapeFits(const Dims& shape) {
  int64_t span = 1;
  for (auto d : shape)
    if (d > 1 && __builtin_mul_overflow(span, int64_t(d), &span)) fail("the shape is too big: its dimensions multiply past int64");
}

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
