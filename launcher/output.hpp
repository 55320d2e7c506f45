// Relaying a rank's output line by line, optionally prefixed with its rank ("[rank2]: ") and
// optionally hidden (--local-ranks-filter). Used only when one of those options is on; otherwise
// the ranks write to the launcher's own standard output and error directly.
#pragma once
#include <string>

namespace purple::launcher {

class LineRelay {
 public:
  LineRelay(int readFd, int writeFd, std::string prefix, bool shown)
      : in_(readFd), out_(writeFd), prefix_(std::move(prefix)), shown_(shown) {}
  int fd() const { return in_; }
  bool open() const { return in_ >= 0; }
  // Reads what is available; returns false at end of file (the descriptor is then closed).
  bool pump();
  // Writes a last partial line and closes.
  void finish();

 private:
  void emit(const char* data, size_t n);
  int in_, out_;
  std::string prefix_, partial_;
  bool shown_;
};

}  // namespace purple::launcher
