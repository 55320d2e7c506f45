// NumPy dtypes and arrays from raw bytes (numpy.hpp).
#include "builtins/formats/format_error.hpp"
#include "builtins/formats/numpy.hpp"
#include <algorithm>
#include <cstring>

namespace purple::formats {

namespace {
struct NumpyKind {
  const char* code;   // kind and size: "f4"
  at::ScalarType type;
};
const NumpyKind kKinds[] = {
    {"f4", at::kFloat},  {"f8", at::kDouble},  {"f2", at::kHalf},          {"i8", at::kLong},
    {"i4", at::kInt},    {"i2", at::kShort},   {"i1", at::kChar},          {"u1", at::kByte},
    {"b1", at::kBool},   {"c8", at::kComplexFloat}, {"c16", at::kComplexDouble},
};
}  // namespace

namespace {
const NumpyKind kWideUnsigned[] = {{"u2", at::kShort}, {"u4", at::kInt}, {"u8", at::kLong}};
}  // namespace

bool numpyDescrToDtype(std::string_view descr, at::ScalarType& dtype, bool& bigEndian, bool& wideUnsigned) {
  bigEndian = false;
  wideUnsigned = false;
  if (!descr.empty() && (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=')) {
    bigEndian = descr[0] == '>';
    descr.remove_prefix(1);
  }
  for (auto& k : kKinds)
    if (descr == k.code) return dtype = k.type, true;
  for (auto& k : kWideUnsigned)
    if (descr == k.code) return dtype = k.type, wideUnsigned = true, true;
  return false;
}

std::string dtypeToNumpyDescr(at::ScalarType dtype) {
  for (auto& k : kKinds)
    if (k.type == dtype) return std::string(c10::elementSize(dtype) == 1 ? "|" : "<") + k.code;
  fail(std::string("NumPy has no dtype for ") + c10::toString(dtype) + " (convert the tensor first, e.g. to float32)");
}

at::Tensor tensorFromNumpyBytes(std::string_view bytes, const std::vector<int64_t>& shape, at::ScalarType dtype, bool fortran,
                                bool bigEndian, bool wideUnsigned) {
  int64_t numel = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) fail("array shape is negative or overflows");
  checkShapeFits(shape);
  size_t elem = c10::elementSize(dtype);
  int64_t nbytes;
  if (__builtin_mul_overflow(numel, int64_t(elem), &nbytes)) fail("array size overflows");
  if (uint64_t(nbytes) > bytes.size())
    fail("array data is truncated: " + std::to_string(nbytes) + " bytes needed, " + std::to_string(bytes.size()) + " present");
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  if (fortran)
    for (size_t i = 0; i < shape.size(); i++) strides[i] = s, s *= std::max<int64_t>(shape[i], 1);
  else
    for (size_t i = shape.size(); i-- > 0;) strides[i] = s, s *= std::max<int64_t>(shape[i], 1);
  at::Tensor t = at::empty_strided(shape, strides, at::TensorOptions().dtype(dtype));
  auto* out = static_cast<uint8_t*>(t.data_ptr());
  if (nbytes) std::memcpy(out, bytes.data(), size_t(nbytes));
  if (dtype == at::kBool) checkBoolBytes(out, size_t(nbytes));
  if (bigEndian && elem > 1) {
    size_t unit = at::isComplexType(dtype) ? elem / 2 : elem;
    for (int64_t i = 0; i < nbytes; i += int64_t(unit)) std::reverse(out + i, out + i + unit);
  }
  if (wideUnsigned) {
    if (dtype == at::kShort) return t.to(at::kInt).bitwise_and(0xFFFF);
    if (dtype == at::kInt) return t.to(at::kLong).bitwise_and(int64_t(0xFFFFFFFF));
    if (numel && t.lt(0).any().item<bool>()) fail("uint64 array holds values beyond int64's range, which LibTorch cannot hold");
  }
  return t;
}

}  // namespace purple::formats
