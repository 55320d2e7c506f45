// Where compiled extensions live: $XDG_CACHE_HOME/purple/extensions (~/.cache/... without it),
// or the directory load-inline's :build-directory names. Inside:
//   NAME-KEY/NAME.so      a finished build (with its sources and build.log), KEY hashing
//                         everything that went into it; a directory appears only complete, by
//                         one rename of the build directory;
//   NAME-KEY.lock         taken while NAME-KEY is built, so that a second process waits for the
//                         first one's build instead of compiling the same thing again;
//   NAME-KEY.log          the compiler's whole output of the last failed build;
//   build-NAME-KEY-PID-N/ a build in progress (a crashed one's is removed by the next build);
//   include-HASH/         the headers extensions compile against (<torch/extension.h> ...).
#pragma once
#include <string>
#include <string_view>

namespace purple::extensions {

// The cache directory (made when missing): OVERRIDE when not empty, else the default above. A
// file-error naming WHO when it cannot be made.
std::string cacheRoot(const std::string& override, std::string_view who);

// 128 bits of TEXT, as 32 hex digits (two independent 64-bit FNV-1a hashes): a cache key.
std::string hashHex(std::string_view text);

// The directory of load-inline's own headers under ROOT, written (atomically) when missing.
std::string shimIncludeDir(const std::string& root, std::string_view who);
// The hash of those headers' text: part of every cache key.
const std::string& shimHash();

// An exclusive lock on PATH (flock), held until destroyed. Waiting for it polls the interpreter
// (Ctrl-C, time budget). ON_WAIT runs once when the lock is held by someone else. A file system
// that cannot lock is not an error: builds then race, and the rename keeps them consistent.
class FileLock {
 public:
  FileLock(const std::string& path, void (*onWait)(void*), void* context);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// A fresh, empty directory for one build under ROOT (build-STEM-PID-N); leftovers of builds whose
// process is gone are removed first.
std::string makeBuildDirectory(const std::string& root, const std::string& stem, std::string_view who);
// Moves the finished build directory BUILD to FINAL in one rename; when another process published
// FINAL first, BUILD is removed and that one is kept. False only when neither exists afterwards.
bool publishDirectory(const std::string& build, const std::string& final);
void removeTree(const std::string& path);
// PATH made absolute against the current directory.
std::string absolutePath(const std::string& path);
bool fileExists(const std::string& path);
// fsync of a file that another process may dlopen after a rename (a crash must not leave a
// published but empty library).
void syncFile(const std::string& path);

}  // namespace purple::extensions
