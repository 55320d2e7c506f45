// A file mapped into memory, read-only for its readers and copy-on-write for tensors that alias
// it: a tensor made over a mapped region keeps the mapping alive (shared_ptr in its DataPtr), and
// writing into such a tensor changes private pages, never the file. Files that cannot be mapped
// (pipes, some network file systems) are read into memory instead.
#pragma once
#include <ATen/ATen.h>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace purple::formats {

class MappedFile {
 public:
  // Throws FormatError when PATH cannot be opened.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  std::string_view view(uint64_t offset, uint64_t n) const {
    return {reinterpret_cast<const char*>(data_) + offset, size_t(n)};
  }
  // A CPU storage of N bytes at OFFSET that aliases the mapping (no copy) when the address suits
  // ALIGNMENT, else a fresh copy. Bounds are the caller's to check.
  static c10::Storage storage(const std::shared_ptr<MappedFile>& file, uint64_t offset, uint64_t n, size_t alignment);

 private:
  MappedFile() = default;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
};

// A CPU storage holding a copy of N bytes (through the process's CPU allocator, so Purple's tensor
// accounting sees it).
c10::Storage copiedStorage(const void* bytes, uint64_t n);

}  // namespace purple::formats
