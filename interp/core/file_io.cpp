#include "interp/core/file_io.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace purple {

namespace {

std::atomic<uint64_t> gSerial{0};

std::string directoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseNameOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

[[noreturn]] void fileError(const std::string& who, const std::string& what, int err) {
  throwError("file-error", who + ": " + what + ": " + std::strerror(err));
}

// PATH.tmp-PID[-N] files whose writer no longer runs: a crash (or kill -9) during a save left
// them. One that a live process is still writing is left alone.
void removeStaleTemporaries(const std::string& path) {
  std::string dir = directoryOf(path), prefix = baseNameOf(path) + ".tmp-";
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const char* digits = name.c_str() + prefix.size();
    char* end = nullptr;
    long pid = std::strtol(digits, &end, 10);
    if (end == digits || pid <= 0 || (*end != '\0' && *end != '-')) continue;
    if (pid != long(getpid()) && kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      unlink((dir + "/" + name).c_str());
  }
  closedir(d);
}

void syncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  fsync(fd);   // some file systems refuse; the rename is still atomic there
  close(fd);
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path, std::string_view who) : path_(path), who_(who) {
  requireFileAccess(who);
  struct stat sb;
  if (stat(path.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode)) fileError(who_, path + " is a directory", EISDIR);
  removeStaleTemporaries(path);
  temp_ = path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(gSerial.fetch_add(1));
  file_ = std::fopen(temp_.c_str(), "wb");
  if (!file_) fileError(who_, "cannot open " + path + " for writing", errno);
}

AtomicFile::~AtomicFile() {
  if (file_) std::fclose(file_);
  if (!temp_.empty()) unlink(temp_.c_str());
}

void AtomicFile::commit() {
  bool ok = std::fflush(file_) == 0;
  int err = ok ? 0 : errno;
  if (ok && fsync(fileno(file_)) != 0) ok = false, err = errno;
  if (std::fclose(file_) != 0 && ok) ok = false, err = errno;
  file_ = nullptr;
  if (ok && std::rename(temp_.c_str(), path_.c_str()) != 0) ok = false, err = errno;
  if (!ok) fileError(who_, "could not write " + path_, err);   // the destructor removes temp_
  temp_.clear();
  syncDirectory(directoryOf(path_));
}

std::string readWholeFile(const std::string& path, std::string_view who) {
  std::string w(who);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fileError(w, "cannot open " + path, errno);
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int err = errno;
    close(fd);
    fileError(w, "cannot open " + path, err);
  }
  if (S_ISDIR(sb.st_mode)) {
    close(fd);
    fileError(w, "cannot read " + path, EISDIR);
  }
  std::string out;
  if (S_ISREG(sb.st_mode)) out.reserve(size_t(sb.st_size));
  // On the heap: a 64 KB frame does not fit a small host thread's stack (builtins/formats/mapped_file.cpp).
  std::vector<char> buf(65536);
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      fileError(w, "cannot read " + path, err);
    }
    out.append(buf.data(), size_t(n));
    if (out.size() > (size_t(1) << 32)) {
      close(fd);
      throwError("file-error", w + ": " + path + " is larger than 4 GB");
    }
  }
  close(fd);
  return out;
}

void writeFileAtomically(const std::string& path, const char* data, size_t size, std::string_view who) {
  AtomicFile f(path, who);
  if (size && std::fwrite(data, 1, size, f.stream()) != size)
    fileError(std::string(who), "could not write " + path, errno);
  f.commit();
}

}  // namespace purple
