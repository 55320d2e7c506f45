#include "builtins/formats/atomic_file.hpp"
#include "interp/error.hpp"
#include "interp/interp.hpp"
#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace purple::formats {

AtomicFile::AtomicFile(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {
  requireFileAccess(who_);
  tmp_ = path_ + ".tmp-" + std::to_string(::getpid());
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) throwError("file-error", who_ + ": cannot open " + tmp_ + " for writing: " + std::strerror(errno), cons(makeString(path_), Value::nil()));
}

AtomicFile::~AtomicFile() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  if (n && std::fwrite(data, 1, n, f_) != n)
    throwError("file-error", who_ + ": writing " + tmp_ + " failed: " + std::strerror(errno), cons(makeString(path_), Value::nil()));
}

void AtomicFile::commit() {
  bool ok = std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
  int err = errno;
  ok = std::fclose(f_) == 0 && ok;
  f_ = nullptr;
  if (!ok) {
    std::remove(tmp_.c_str());
    throwError("file-error", who_ + ": writing " + tmp_ + " failed: " + std::strerror(err), cons(makeString(path_), Value::nil()));
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    err = errno;
    std::remove(tmp_.c_str());
    throwError("file-error", who_ + ": cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(err), cons(makeString(path_), Value::nil()));
  }
}

}  // namespace purple::formats
