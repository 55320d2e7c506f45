#include "builtins/tensorboard/record_writer.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include <unistd.h>
#include <cerrno>
#include <cstring>

namespace purple::tensorboard {

namespace {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), a byte at a time from a table.
struct Crc32cTable {
  uint32_t entries[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      entries[i] = c;
    }
  }
};

void putLittleEndian(char* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) out[i] = char((v >> (8 * i)) & 0xff);
}

}  // namespace

uint32_t crc32c(const void* data, std::size_t n) {
  static const Crc32cTable table;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; i++) c = table.entries[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t maskedCrc32c(const void* data, std::size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

RecordWriter::RecordWriter(const std::string& path) : path_(path) {
  requireFileAccess("summary-writer");
  file_ = std::fopen(path.c_str(), "ab");
  if (!file_) throwError("file-error", "summary-writer: cannot open " + path + ": " + std::strerror(errno));
}

RecordWriter::~RecordWriter() {
  if (file_) std::fclose(file_);
}

void RecordWriter::write(std::string_view record) {
  if (!file_) throwError("error", "summary-writer: the writer of " + path_ + " is closed");
  char header[12], footer[4];
  putLittleEndian(header, record.size(), 8);
  putLittleEndian(header + 8, maskedCrc32c(header, 8), 4);
  putLittleEndian(footer, maskedCrc32c(record.data(), record.size()), 4);
  if (std::fwrite(header, 1, 12, file_) != 12 || std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fwrite(footer, 1, 4, file_) != 4 || std::fflush(file_) != 0)
    throwError("file-error", "summary-writer: writing " + path_ + " failed: " + std::strerror(errno));
}

void RecordWriter::flush() {
  if (file_ && (std::fflush(file_) != 0 || fsync(fileno(file_)) != 0))
    throwError("file-error", "summary-writer: flushing " + path_ + " failed: " + std::strerror(errno));
}

void RecordWriter::close() {
  if (!file_) return;
  flush();
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace purple::tensorboard
