// The embedding API's atomic save for front ends (the REPL's figure files): the same writer as
// every save Purple makes from a script (interp/core/file_io.hpp), so a crash or a kill leaves the old
// file or the new one, and what a killed writer left is removed by the next save.
#define PURPLE_IMPLEMENTATION
#include "purple/purple.hpp"

#include "interp/core/error.hpp"
#include "interp/core/file_io.hpp"
#include "interp/core/gc.hpp"
#include "interp/core/interp.hpp"

namespace purple {
namespace embed {

void saveFile(const std::string& path, std::string_view bytes) {
  gcInit();
  detail::ThreadScope thread;   // a file-error is a collected value until it becomes an Error
  // The front end saves for itself: a sandboxed script running on this thread does not decide.
  InterpScope host(nullptr);
  try {
    writeFileAtomically(path, bytes.data(), bytes.size(), "save-file");
  } catch (const PurpleException& e) {
    throw Error("file-error", e.what());
  }
}

}  // namespace embed
}  // namespace purple
