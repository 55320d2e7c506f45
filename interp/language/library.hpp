// The libraries built into Purple (lib/, embedded like the prelude), as help and apropos see them
// before anything imports them. The rest of libraries (define-library, import) is Interp's
// (interp/core/interp.hpp; library.cpp).
#pragma once
#include "interp/core/value.hpp"
#include <string>
#include <vector>

namespace purple {

struct BuiltInLibrary {
  std::string name;                   // as written: "(purple vision)"
  std::vector<std::string> exports;   // the names it exports
  Value nameValue() const;            // the name as a list: (purple vision)
};

// Read once from the embedded define-library forms; nothing is loaded.
const std::vector<BuiltInLibrary>& builtInLibraries();

}  // namespace purple
