#include "launcher/output.hpp"
#include <cerrno>
#include <unistd.h>

namespace purple::launcher {

namespace {
void writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= size_t(w);
  }
}
}  // namespace

void LineRelay::emit(const char* data, size_t n) {
  if (!shown_) return;
  std::string line = prefix_;
  line.append(data, n);
  writeAll(out_, line.data(), line.size());
}

bool LineRelay::pump() {
  if (in_ < 0) return false;
  char buf[65536];
  ssize_t n = ::read(in_, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    finish();
    return false;
  }
  partial_.append(buf, size_t(n));
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
    emit(partial_.data() + start, nl + 1 - start);
  partial_.erase(0, start);
  return true;
}

void LineRelay::finish() {
  if (!partial_.empty()) {
    partial_ += '\n';
    emit(partial_.data(), partial_.size());
    partial_.clear();
  }
  if (in_ >= 0) ::close(in_);
  in_ = -1;
}

}  // namespace purple::launcher
