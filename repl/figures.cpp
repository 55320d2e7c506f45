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
    if (!makeDirectories(dir)) {
      saved = "(could not write " + path + ": " + std::strerror(errno) + ")";
    } else {
      try {
        saveFile(path, picture->data);
        saved = path;
      } catch (const Error& e) {
        saved = "(" + e.message() + ")";
      }
    }
  }
  std::string line = text + (saved.empty() ? "" : (text.empty() ? "" : " ") + saved) + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace purple::repl
