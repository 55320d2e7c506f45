// The attach protocol: what `purple --attach`, the Jupyter kernel's bridge and the REPL server
// (attach_server.hpp) say to each other over a Unix socket. Bytes only: no Purple value is
// made or read here, so the server's own thread can use it.
//
// A connection opens with the client sending kMagic; the server answers kMagic and a Banner
// frame. Everything after is frames: a 4-byte big-endian length (of what follows), one type
// byte, then fields, each a 4-byte big-endian length and that many bytes. Anything else (wrong
// magic, an unknown type, a field running past its frame, a frame over kMaxFrame) is a
// protocol error: the server says why and closes that connection, and nothing else changes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace purple::attach {

constexpr std::string_view kMagic = "PURPLE-ATTACH/1\n";
constexpr size_t kMaxFrame = size_t(16) << 20;   // 16 MiB: a request or a reply larger is refused

enum class Tag : uint8_t {
  // client -> server
  Eval = 'E',          // id, code, source name, live displays ("1"/"0")
  Complete = 'C',      // id, code, cursor
  Document = 'D',      // id, name
  Interrupt = 'I',     // id: stop that request (running or waiting)
  // server -> client
  Banner = 'B',        // version line, pid, the program's command line
  Started = 'S',       // id: the request has begun (the program reached a safe point)
  Out = 'o',           // id, text written to the current output port
  Err = 'e',           // id, text written to the current error port
  Display = 'P',       // id, display id, update ("1"/"0"), bundle
  Result = 'V',        // id, form (its index, from 0), bundle: one value of a form, as a REPL shows it
  Failure = 'X',       // id, kind, message, backtrace lines...: the request failed
  Done = 'Z',          // id, forms evaluated: the request has ended (after its results or its failure)
  Completions = 'M',   // id, begin, end, matches...
  Documentation = 'T', // id, found ("1"/"0"), text
  Refusal = 'F',       // message: the connection is closed after it
};

// One representation of a value (as Representation in include/purple/purple.hpp).
struct WireRepresentation {
  std::string mimeType, data;
  bool binary = false;
  int width = 0, height = 0;
};
using WireBundle = std::vector<WireRepresentation>;

// Builds one frame.
class FrameWriter {
 public:
  explicit FrameWriter(Tag type);
  FrameWriter& field(std::string_view bytes);
  FrameWriter& field(int64_t n);
  FrameWriter& bundle(const WireBundle& b);
  // The frame's bytes, length prefix included.
  std::string finish();

 private:
  std::string bytes_;
};

// Reads the fields of one frame's body (after the type byte). Every accessor returns
// std::nullopt, and ok() turns false, when the frame ends early or a number is malformed.
class FrameReader {
 public:
  FrameReader(Tag type, std::string_view body) : type_(type), body_(body) {}
  Tag type() const { return type_; }
  std::optional<std::string> field();
  std::optional<int64_t> number();
  std::optional<WireBundle> bundle();
  std::vector<std::string> rest();   // every field left
  bool atEnd() const { return pos_ == body_.size(); }
  bool ok() const { return ok_; }

 private:
  Tag type_;
  std::string_view body_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Splits complete frames off the front of `buffer`. Returns a frame when one is whole; nothing
// when more bytes are needed; sets `error` (and returns nothing) when the buffer cannot be a
// frame (over kMaxFrame, no type byte).
struct RawFrame {
  Tag type;
  std::string body;
};
std::optional<RawFrame> takeFrame(std::string& buffer, std::string& error);

// Whether `type` is a frame a client may send / a server may send.
bool isClientFrame(uint8_t type);
bool isServerFrame(uint8_t type);

// Writes all of `bytes` to `fd`, retrying on EINTR; false when the peer is gone.
bool writeAll(int fd, std::string_view bytes);

}  // namespace purple::attach
