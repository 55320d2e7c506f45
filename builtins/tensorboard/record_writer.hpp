// TFRecord framing, as TensorBoard's event files use it: each record is
//   uint64 length (little-endian), uint32 masked CRC-32C of the length bytes,
//   the data, uint32 masked CRC-32C of the data;
// masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace purple::tensorboard {

uint32_t crc32c(const void* data, std::size_t n);
uint32_t maskedCrc32c(const void* data, std::size_t n);

// Appends records to an event file; every record is flushed to the operating system as soon as
// it is written, so TensorBoard (and a crash) sees all of them.
class RecordWriter {
 public:
  explicit RecordWriter(const std::string& path);   // throws a Purple file-error
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;
  void write(std::string_view record);
  void flush();
  void close();
  const std::string& path() const { return path_; }
  bool closed() const { return file_ == nullptr; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace purple::tensorboard
