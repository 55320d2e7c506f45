// How deep a JSON text nests, found by a scan of its raw bytes before any parser sees it, so that
// no hostile nesting reaches a recursive parser (safetensors headers, parse-json).
#pragma once
#include <cstddef>
#include <string_view>

namespace purple::formats {

// The byte at which TEXT's arrays and objects (brackets inside strings do not count) first nest
// deeper than MAX levels, or std::string_view::npos when they never do.
inline size_t jsonNestingPast(std::string_view text, int max) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); i++) {
    char c = text[i];
    if (inString) {
      if (c == '\\') i++;
      else if (c == '"') inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max) return i;
    } else if (c == '}' || c == ']') {
      depth--;
    }
  }
  return std::string_view::npos;
}

}  // namespace purple::formats
