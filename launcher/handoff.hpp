// `purple --nproc-per-node N SCRIPT ARGS...` is purple-run's command line given to purple: the
// purple command hands it, unchanged, to the purple-run next to it (header-only, so that the
// front end needs nothing else from the launcher).
#pragma once
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <unistd.h>

namespace purple::launcher {

inline bool isLauncherCommandLine(int argc, char** argv) {
  if (argc < 2) return false;
  std::string a = argv[1];
  for (const char* f : {"--nproc-per-node", "--nproc_per_node", "--nnodes", "--standalone", "--node-rank",
                        "--node_rank", "--master-addr", "--master_addr", "--master-port", "--master_port"}) {
    size_t n = std::strlen(f);
    if (a.compare(0, n, f) == 0 && (a.size() == n || a[n] == '=')) return true;
  }
  return false;
}

// Replaces this process with purple-run; returns an exit status only when that fails.
inline int handOffToLauncher(int argc, char** argv) {
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = ".";
  if (n > 0) {
    self[n] = 0;
    std::string s(self);
    dir = s.substr(0, s.rfind('/'));
  }
  std::string launcher = dir + "/purple-run";
  std::vector<char*> args{const_cast<char*>(launcher.c_str())};
  for (int i = 1; i < argc; i++) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(launcher.c_str(), args.data());
  std::fprintf(stderr, "purple: cannot start %s (%s): this purple was built without distributed training, or "
                       "purple-run is not installed next to it\n", launcher.c_str(), std::strerror(errno));
  return 2;
}

}  // namespace purple::launcher
