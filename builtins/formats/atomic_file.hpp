// The format writers' file: interp/core/file_io.hpp's AtomicFile (sandbox check, fsync of the file
// and its directory, leftovers of crashed writers removed) plus a checked write for writers that
// produce their bytes in pieces (zip entries, tensor data).
#pragma once
#include "interp/core/file_io.hpp"
#include <string>

namespace purple::formats {

class AtomicWriter {
 public:
  AtomicWriter(const std::string& path, const std::string& who) : file_(path, who), who_(who) {}
  // A file-error naming WHO when the disk refuses the bytes.
  void write(const void* data, size_t n);
  void commit() { file_.commit(); }

 private:
  purple::AtomicFile file_;
  std::string who_;
};

}  // namespace purple::formats
