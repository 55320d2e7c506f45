#include "repl/install_kernel.hpp"
#include <purple/purple.hpp>
#include <unistd.h>
#include <cstdlib>
#include <iostream>
#include <string>

namespace purple::repl {

namespace {

const char* kInstallUsage =
    "usage: purple --install-kernel [--user | --system | --prefix DIR] [--name NAME] [--display-name TEXT]\n"
    "  --user          for this user: $JUPYTER_DATA_DIR or ~/.local/share/jupyter/kernels/NAME (default)\n"
    "  --system        for everybody: /usr/local/share/jupyter/kernels/NAME\n"
    "  --prefix DIR    under DIR/share/jupyter/kernels/NAME (Jupyter finds it with JUPYTER_PATH=DIR/share/jupyter)\n"
    "  --name NAME     the kernelspec's name (default purple)\n";

std::string executableDirectory() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, size_t(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else out += c;
  }
  return out + "\"";
}

}  // namespace

int installKernel(const std::vector<std::string>& args) {
  std::string where = "user", prefix, name = "purple", displayName = "Purple";
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--user") where = "user";
    else if (a == "--system") where = "system";
    else if (a == "--prefix" && i + 1 < args.size()) where = "prefix", prefix = args[++i];
    else if (a == "--name" && i + 1 < args.size()) name = args[++i];
    else if (a == "--display-name" && i + 1 < args.size()) displayName = args[++i];
    else {
      std::cerr << "purple: unknown --install-kernel option " << a << "\n" << kInstallUsage;
      return 2;
    }
  }
  std::string kernelPath = executableDirectory() + "/purple-kernel";
  if (access(kernelPath.c_str(), X_OK) != 0) {
    std::cerr << "purple: " << kernelPath
              << " is missing: this Purple was built without the Jupyter kernel (xeus-dev was not installed)\n";
    return 1;
  }
  std::string base;
  if (where == "system") {
    base = "/usr/local/share/jupyter";
  } else if (where == "prefix") {
    base = prefix + "/share/jupyter";
  } else if (const char* data = std::getenv("JUPYTER_DATA_DIR"); data && *data) {
    base = data;
  } else if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    base = std::string(xdg) + "/jupyter";
  } else {
    const char* home = std::getenv("HOME");
    if (!home) {
      std::cerr << "purple: HOME is not set; use --prefix DIR or --system\n";
      return 1;
    }
    base = std::string(home) + "/.local/share/jupyter";
  }
  std::string dir = base + "/kernels/" + name;
  std::string spec = "{\n"
                     "  \"argv\": [" + jsonString(kernelPath) + ", \"-f\", \"{connection_file}\"],\n"
                     "  \"display_name\": " + jsonString(displayName) + ",\n"
                     "  \"language\": \"scheme\",\n"
                     "  \"interrupt_mode\": \"signal\",\n"
                     "  \"metadata\": {\"purple_version\": " + jsonString(versionLine()) + "}\n"
                     "}\n";
  try {
    // Purple's own file procedures: a clear error for a directory that cannot be made, and
    // output files that are written whole or not at all (temporary file, then rename).
    Interpreter interp;
    interp.call("create-directory", dir);
    interp.call(interp.eval("(lambda (path text) (call-with-output-file path (lambda (p) (write-string text p))))"),
                dir + "/kernel.json", spec);
  } catch (const Error& e) {
    std::cerr << "purple: cannot install the kernelspec in " << dir << ": " << e.what() << "\n";
    return 1;
  }
  std::cout << "Installed the Jupyter kernelspec " << name << " in " << dir << "\n";
  return 0;
}

}  // namespace purple::repl
