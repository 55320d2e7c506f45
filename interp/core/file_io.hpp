// Whole files in and out. Reading: a directory, or anything that is not a readable regular
// file, is a file-error (an ifstream "opens" a directory and reads nothing). Writing: a crash
// at any moment leaves either the old file or the complete new one: the data goes to PATH.tmp-PID-N beside it, which is flushed and fsync'd, renamed over
// PATH, and then the directory is fsync'd so the rename itself is on disk. Every file Purple
// writes (ports, state dicts, checkpoints) goes through here.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace purple {

// The contents of the file at PATH, or a file-error naming WHO.
std::string readWholeFile(const std::string& path, std::string_view who);

class AtomicFile {
 public:
  // Opens the temporary file for PATH (a file-error naming WHO when it cannot be made), after
  // removing what crashed writers of PATH left: PATH.tmp-PID-* of processes that are gone.
  AtomicFile(const std::string& path, std::string_view who);
  ~AtomicFile();   // not committed: the temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::FILE* stream() const { return file_; }
  const std::string& path() const { return path_; }
  // Flush, fsync, close, rename over PATH, fsync the directory; a file-error on any failure
  // (the temporary file is removed and PATH is left as it was).
  void commit();

 private:
  std::string path_, temp_, who_;
  std::FILE* file_ = nullptr;
};

// PATH's whole contents replaced atomically by DATA.
void writeFileAtomically(const std::string& path, const char* data, size_t size, std::string_view who);

}  // namespace purple
