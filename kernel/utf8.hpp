// Jupyter counts cursor positions in Unicode code points; Purple's API counts bytes of UTF-8.
#pragma once
#include <cstddef>
#include <string_view>

namespace purple::kernel {

// The byte offset of code point `index` in `text` (its length when past the end).
inline std::size_t byteOffset(std::string_view text, std::size_t index) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < text.size(); i++) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;   // continuation byte
    if (seen == index) return i;
    seen++;
  }
  return text.size();
}

// The number of code points in the first `bytes` bytes of `text`.
inline std::size_t codePoints(std::string_view text, std::size_t bytes) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < bytes && i < text.size(); i++)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) n++;
  return n;
}

}  // namespace purple::kernel
