// A file written in pieces and committed atomically: bytes go to PATH.tmp-PID, which is flushed to
// disk and renamed over PATH by commit(); a writer destroyed before commit() (an error, an
// interrupt) removes the temporary file, so PATH is either the old file or the complete new one.
// writeFileAtomically (builtins/nn/value.hpp) is the one-buffer form of the same thing.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace purple::formats {

class AtomicFile {
 public:
  // Throws a Purple file-error naming WHO when the temporary file cannot be made.
  AtomicFile(std::string path, std::string who);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t n);
  void commit();

 private:
  std::string path_, tmp_, who_;
  std::FILE* f_ = nullptr;
};

}  // namespace purple::formats
