// Folder listings, for datasets laid out as files in folders (the image-folder dataset of
// (purple vision)): the entries of a directory, and whether a path is one.
#include "builtins/builtins.hpp"
#include "interp/limits/sandbox.hpp"
#include <dirent.h>
#include <sys/stat.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace purple {

namespace {

std::vector<std::string> directoryEntries(const std::string& path) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), ::closedir);
  if (!dir) throwError("file-error", "directory-files: cannot read the directory " + path + " (" + std::strerror(errno) + ")");
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir.get())) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  // Byte order, as Python's sorted() orders os.listdir's names: the same files in the same order
  // on every machine, whatever readdir's order.
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

void registerDirectories(Registry& r) {
  r.def("directory-files", "(path)",
        [](std::string path) {
          requireFileAccess("directory-files");
          Value out = Value::nil();
          std::vector<std::string> names = directoryEntries(path);
          for (auto it = names.rbegin(); it != names.rend(); ++it) out = cons(makeString(*it), out);
          return out;
        },
        "The names of the entries of the directory PATH (files and folders, without \".\" and \"..\"),\n"
        "sorted by their bytes as Python's sorted(os.listdir(PATH)). A file-error when PATH is no readable\n"
        "directory.");
  sandbox(r, "directory-files", Needs::Files, "files: lists a directory");
  r.def("file-directory?", "(path)",
        [](std::string path) {
          requireFileAccess("file-directory?");
          struct stat sb;
          return ::stat(path.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
        },
        "True when PATH names a directory (following symbolic links).");
  sandbox(r, "file-directory?", Needs::Files, "files: looks at a path");
}

}  // namespace purple
