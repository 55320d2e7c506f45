#include "interp/language/attach_wire.hpp"

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

namespace purple::attach {

namespace {

void putLength(std::string& out, size_t n) {
  for (int shift = 24; shift >= 0; shift -= 8) out += char((n >> shift) & 0xFF);
}

size_t getLength(std::string_view in, size_t at) {
  size_t n = 0;
  for (size_t k = 0; k < 4; k++) n = (n << 8) | uint8_t(in[at + k]);
  return n;
}

}  // namespace

FrameWriter::FrameWriter(Tag type) : bytes_(4, '\0') { bytes_ += char(type); }

FrameWriter& FrameWriter::field(std::string_view bytes) {
  putLength(bytes_, bytes.size());
  bytes_.append(bytes.data(), bytes.size());
  return *this;
}

FrameWriter& FrameWriter::field(int64_t n) { return field(std::to_string(n)); }

FrameWriter& FrameWriter::bundle(const WireBundle& b) {
  field(int64_t(b.size()));
  for (const WireRepresentation& r : b)
    field(r.mimeType).field(r.data).field(r.binary ? "1" : "0").field(int64_t(r.width)).field(int64_t(r.height));
  return *this;
}

std::string FrameWriter::finish() {
  size_t n = bytes_.size() - 4;
  for (int k = 0; k < 4; k++) bytes_[size_t(k)] = char((n >> (24 - 8 * k)) & 0xFF);
  return std::move(bytes_);
}

std::optional<std::string> FrameReader::field() {
  if (!ok_ || body_.size() - pos_ < 4) {
    ok_ = false;
    return std::nullopt;
  }
  size_t n = getLength(body_, pos_);
  if (body_.size() - pos_ - 4 < n) {
    ok_ = false;
    return std::nullopt;
  }
  std::string out(body_.substr(pos_ + 4, n));
  pos_ += 4 + n;
  return out;
}

std::optional<int64_t> FrameReader::number() {
  std::optional<std::string> f = field();
  if (!f) return std::nullopt;
  const std::string& s = *f;
  size_t start = !s.empty() && s[0] == '-' ? 1 : 0;
  if (s.size() == start || s.size() - start > 18 || s.find_first_not_of("0123456789", start) != std::string::npos) {
    ok_ = false;
    return std::nullopt;
  }
  return std::stoll(s);
}

std::optional<WireBundle> FrameReader::bundle() {
  std::optional<int64_t> count = number();
  if (!count || *count < 0 || *count > 64) {
    ok_ = false;
    return std::nullopt;
  }
  WireBundle out;
  for (int64_t k = 0; k < *count; k++) {
    WireRepresentation r;
    std::optional<std::string> mime = field(), data = field(), binary = field();
    std::optional<int64_t> width = number(), height = number();
    if (!mime || !data || !binary || !width || !height) return std::nullopt;
    r.mimeType = std::move(*mime);
    r.data = std::move(*data);
    r.binary = *binary == "1";
    r.width = int(*width);
    r.height = int(*height);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> FrameReader::rest() {
  std::vector<std::string> out;
  while (ok_ && !atEnd()) {
    std::optional<std::string> f = field();
    if (f) out.push_back(std::move(*f));
  }
  return out;
}

bool isClientFrame(uint8_t t) {
  switch (Tag(t)) {
    case Tag::Eval: case Tag::Complete: case Tag::Document: case Tag::Interrupt: return true;
    default: return false;
  }
}

bool isServerFrame(uint8_t t) {
  switch (Tag(t)) {
    case Tag::Banner: case Tag::Started: case Tag::Out: case Tag::Err: case Tag::Display: case Tag::Result:
    case Tag::Failure: case Tag::Done: case Tag::Completions: case Tag::Documentation:
    case Tag::Refusal: return true;
    default: return false;
  }
}

std::optional<RawFrame> takeFrame(std::string& buffer, std::string& error) {
  if (buffer.size() < 4) return std::nullopt;
  size_t n = getLength(buffer, 0);
  if (n == 0) {
    error = "an empty frame";
    return std::nullopt;
  }
  if (n > kMaxFrame) {
    error = "a frame of " + std::to_string(n) + " bytes (at most " + std::to_string(kMaxFrame) + ")";
    return std::nullopt;
  }
  if (buffer.size() - 4 < n) return std::nullopt;
  RawFrame f{Tag(uint8_t(buffer[4])), buffer.substr(5, n - 1)};
  buffer.erase(0, 4 + n);
  return f;
}

bool writeAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(size_t(n));
  }
  return true;
}

}  // namespace purple::attach
