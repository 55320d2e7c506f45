// NumPy's side of the formats: dtype descriptors ("<f4", "|b1") and arrays from raw bytes, shared
// by the .npy/.npz reader and writer (numpy.cpp) and by the pickle reader, which meets NumPy
// arrays and scalars inside checkpoints.
#pragma once
#include <ATen/ATen.h>
#include <string>
#include <string_view>
#include <vector>

namespace purple::formats {

// "<f4", "f4", "|u1", ">i8" ... to a dtype; *bigEndian tells the byte order. False for kinds
// LibTorch has no dtype for (strings, objects ...). NumPy's uint16/32/64, which LibTorch lacks,
// give the signed dtype of their size and set *wideUnsigned: tensorFromNumpyBytes then widens
// them (uint16 to int32, uint32 and uint64 to int64), exactly.
bool numpyDescrToDtype(std::string_view descr, at::ScalarType& dtype, bool& bigEndian, bool& wideUnsigned);
// The little-endian descriptor NumPy writes for DTYPE ("<f4", "|b1"); throws FormatError when
// NumPy has none (bfloat16).
std::string dtypeToNumpyDescr(at::ScalarType dtype);
// A tensor of SHAPE and DTYPE from BYTES laid out in C order (or Fortran order), swapping bytes
// when they are big-endian. Throws FormatError when BYTES is too short.
// A uint64 value past int64's range is an error.
at::Tensor tensorFromNumpyBytes(std::string_view bytes, const std::vector<int64_t>& shape, at::ScalarType dtype, bool fortran,
                                bool bigEndian, bool wideUnsigned = false);

}  // namespace purple::formats
