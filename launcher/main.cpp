// purple-run: starts the ranks of a distributed Purple job on this machine, as torchrun does for
// Python (docs/distributed.md). Each rank is a `purple` process (the command-line front end) with
// torchrun's environment; the launcher itself runs no Purple code.
#include "launcher/options.hpp"
#include "launcher/supervisor.hpp"
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace purple::launcher;
  std::vector<std::string> args(argv + 1, argv + argc);
  Options o;
  try {
    o = parseOptions(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "purple-run: %s\n%s", e.what(), kUsage);
    return 2;
  }
  if (o.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
    return supervise(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "purple-run: %s\n", e.what());
    return 1;
  }
}
