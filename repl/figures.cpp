#include "repl/figures.hpp"
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace purple::repl {

namespace {

int gFigureCount = 0;

std::string figureDirectory() {
  if (const char* dir = std::getenv("PURPLE_FIGURE_DIR"); dir && *dir) return dir;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/purple-figures";
}

bool makeDirectories(const std::string& path) {
  for (size_t i = 1; i <= path.size(); i++) {
    if (i < path.size() && path[i] != '/') continue;
    if (::mkdir(path.substr(0, i).c_str(), 0777) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// Written whole or not at all: a temporary file renamed into place.
bool writeFile(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp-" + std::to_string(getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

void showOnTerminal(const MimeBundle& bundle) {
  std::string text, saved;
  const Representation* picture = nullptr;
  for (const Representation& r : bundle) {
    if (r.mimeType == "text/plain") text = r.data;
    if (!picture && (r.mimeType == "image/png" || r.mimeType == "image/svg+xml")) picture = &r;
  }
  if (picture) {
    std::string dir = figureDirectory();
    std::string path = dir + "/figure-" + std::to_string(getpid()) + "-" + std::to_string(++gFigureCount) +
                       (picture->mimeType == "image/png" ? ".png" : ".svg");
    if (makeDirectories(dir) && writeFile(path, picture->data)) saved = path;
    else saved = "(could not write " + path + ": " + std::strerror(errno) + ")";
  }
  std::string line = text + (saved.empty() ? "" : (text.empty() ? "" : " ") + saved) + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace purple::repl
