#include "builtins/formats/atomic_file.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include <cerrno>
#include <cstring>

namespace purple::formats {

void AtomicWriter::write(const void* data, size_t n) {
  if (n && std::fwrite(data, 1, n, file_.stream()) != n)
    throwError("file-error", who_ + ": writing " + file_.path() + " failed: " + std::strerror(errno),
               cons(makeString(file_.path()), Value::nil()));
}

}  // namespace purple::formats
