// Zip archives as PyTorch (torch.save, torch.jit.save) and NumPy (.npz) write them: a reader over
// a mapped file that checks every offset against the file, refuses what looks hostile (entries that
// overlap, encryption, a compressed entry inflating far past its size: zip bombs), verifies CRCs,
// and hands stored entries out without copying; and a writer of stored entries, 64-byte aligned as
// PyTorch aligns them, or deflated ones (np.savez_compressed), with zip64 records when sizes or
// offsets pass 4 GB.
#pragma once
#include "builtins/formats/mapped_file.hpp"
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace purple::formats {

class ZipReader {
 public:
  struct Entry {
    std::string name;
    uint16_t method = 0;        // 0 stored, 8 deflated
    uint32_t crc = 0;
    uint64_t compressedSize = 0, size = 0;
    uint64_t headerOffset = 0;  // local header
    uint64_t dataOffset = 0;    // first byte of the (compressed) data
    uint64_t endOffset = 0;     // just after its data and data descriptor
  };

  // Throws FormatError when FILE is not a well-formed zip archive.
  explicit ZipReader(std::shared_ptr<MappedFile> file);
  static bool looksLikeZip(const MappedFile& file);

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(const std::string& name) const;
  // The entry's bytes (inflated and CRC-checked), as a string.
  std::string read(const Entry& e) const;
  // The entry's bytes as a CPU storage: an alias of the mapping when stored and ALIGNMENT-aligned
  // and `mayAlias`, else a copy.
  c10::Storage storage(const Entry& e, size_t alignment, bool mayAlias) const;
  const std::shared_ptr<MappedFile>& file() const { return file_; }

 private:
  void checkCrc(const Entry& e, const void* data, uint64_t n) const;
  std::shared_ptr<MappedFile> file_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> byName_;
};

// Writes entries one after another; `finish` writes the central directory. The sink receives the
// bytes in order (a file, or memory).
class ZipWriter {
 public:
  using Sink = std::function<void(const void*, size_t)>;
  explicit ZipWriter(Sink sink) : sink_(std::move(sink)) {}
  void add(const std::string& name, const void* data, uint64_t n, bool deflate = false);
  void finish();

 private:
  void put(const void* p, size_t n) {
    sink_(p, n);
    offset_ += n;
  }
  struct Written {
    std::string name;
    uint32_t crc;
    uint16_t method;
    uint64_t compressedSize, size, offset;
  };
  Sink sink_;
  uint64_t offset_ = 0;
  std::vector<Written> written_;
};

}  // namespace purple::formats
