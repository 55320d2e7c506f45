#include "builtins/extensions/extension_cache.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace purple {
// The shim headers' text, embedded by cmake/extensions.cmake (generated/extension_shim_sources.cpp).
struct PreludeSource { const char* name; const char* text; };
extern const PreludeSource kExtensionShimSources[];
extern const std::size_t kExtensionShimSourceCount;
}  // namespace purple

namespace purple::extensions {

namespace fs = std::filesystem;

namespace {

std::atomic<int> gSerial{0};

[[noreturn]] void cacheError(std::string_view who, const std::string& what, int err) {
  throwError("file-error", std::string(who) + ": " + what + (err ? std::string(": ") + std::strerror(err) : ""));
}

void makeDirectories(const std::string& dir, std::string_view who) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) cacheError(who, "cannot make the directory " + dir, ec.value());
}

uint64_t fnv1a(std::string_view text, uint64_t basis) {
  uint64_t h = basis;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Build directories left by processes that are gone (build-STEM-PID-N, include-HASH.tmp-PID-N):
// the process is not running here and the directory has not changed for an hour (a cache shared
// between machines may hold another machine's build in progress, under a PID that means nothing here).
void removeStaleBuilds(const std::string& root) {
  std::error_code ec;
  auto hourAgo = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("build-", 0) != 0 && name.find(".tmp-") == std::string::npos) continue;
    size_t last = name.rfind('-');
    size_t before = last == std::string::npos || last == 0 ? std::string::npos : name.rfind('-', last - 1);
    if (before == std::string::npos) continue;
    long pid = std::strtol(name.c_str() + before + 1, nullptr, 10);
    std::error_code timeError;
    auto changed = fs::last_write_time(entry.path(), timeError);
    if (pid > 0 && kill(pid_t(pid), 0) != 0 && errno == ESRCH && !timeError && changed < hourAgo)
      removeTree(entry.path().string());
  }
}

}  // namespace

std::string cacheRoot(const std::string& override, std::string_view who) {
  std::string root = override;
  if (root.empty()) {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg && xdg[0] == '/') root = std::string(xdg) + "/purple/extensions";
    else if (home && home[0] == '/') root = std::string(home) + "/.cache/purple/extensions";
    else cacheError(who, "neither XDG_CACHE_HOME nor HOME names a directory for the extension cache "
                         "(or give :build-directory)", 0);
  }
  makeDirectories(root, who);
  // absolute: the compiler runs inside a build directory, where a relative -I would mean another place
  return absolutePath(root);
}

std::string hashHex(std::string_view text) {
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", (unsigned long long)fnv1a(text, 0xcbf29ce484222325ULL),
                (unsigned long long)fnv1a(text, 0x84222325cbf29ce4ULL ^ text.size()));
  return out;
}

const std::string& shimHash() {
  static const std::string h = [] {
    std::string all;
    for (size_t i = 0; i < kExtensionShimSourceCount; i++)
      all += std::string(kExtensionShimSources[i].name) + '\0' + kExtensionShimSources[i].text + '\0';
    return hashHex(all);
  }();
  return h;
}

std::string shimIncludeDir(const std::string& root, std::string_view who) {
  std::string final = root + "/include-" + shimHash().substr(0, 16);
  if (fileExists(final + "/torch/extension.h")) return final;
  std::string temp = final + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(gSerial.fetch_add(1));
  for (size_t i = 0; i < kExtensionShimSourceCount; i++) {
    std::string path = temp + "/" + kExtensionShimSources[i].name;
    makeDirectories(fs::path(path).parent_path().string(), who);
    std::ofstream f(path, std::ios::binary);
    f << kExtensionShimSources[i].text;
    f.close();
    if (!f) {
      removeTree(temp);
      cacheError(who, "cannot write " + path, errno);
    }
  }
  if (!publishDirectory(temp, final)) cacheError(who, "cannot make " + final, errno);
  return final;
}

FileLock::FileLock(const std::string& path, void (*onWait)(void*), void* context) {
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  bool told = false;
  for (;;) {
    if (flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    if (errno != EWOULDBLOCK && errno != EINTR) {   // no locks here (some network file systems)
      close(fd_);
      fd_ = -1;
      return;
    }
    if (!told && onWait) onWait(context);
    told = true;
    try {
      pollCurrentInterp();
    } catch (...) {
      close(fd_);
      fd_ = -1;
      throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);   // closing releases the lock
}

std::string makeBuildDirectory(const std::string& root, const std::string& stem, std::string_view who) {
  removeStaleBuilds(root);
  std::string dir = root + "/build-" + stem + "-" + std::to_string(getpid()) + "-" + std::to_string(gSerial.fetch_add(1));
  removeTree(dir);
  makeDirectories(dir, who);
  return dir;
}

bool publishDirectory(const std::string& build, const std::string& final) {
  if (std::rename(build.c_str(), final.c_str()) == 0) return true;
  // Another process published FINAL first (rename onto a non-empty directory fails): keep theirs.
  removeTree(build);
  return fs::is_directory(final);
}

void removeTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::string absolutePath(const std::string& path) {
  std::error_code ec;
  std::string out = fs::absolute(path, ec).lexically_normal().string();
  if (ec) return path;
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

bool fileExists(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

void syncFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

}  // namespace purple::extensions
