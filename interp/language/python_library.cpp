// (import (purple python)) loads the Python bridge (builtins/python/), which is a plugin,
// libpurple_python.so beside libpurple, not part of libpurple: so neither libpurple nor the
// `purple` command needs libpython to run, and the `purple` Python module can load libpurple into
// python3, whose interpreter is linked statically, without a second copy of libpython.
//
// Loading: when no Python runs in this process, libpython (the one CMake found) is loaded with
// RTLD_GLOBAL, as Python's own extension modules (torch, numpy) expect its symbols to be global;
// then the plugin, whose purple_python_install(Interp*) defines the library's names. Every way
// this can fail ends in a Purple error that says why.
#include "interp/core/interp.hpp"
#include "interp/core/error.hpp"
#include "purple_python_config.hpp"
#include <dlfcn.h>
#include <cstdlib>
#include <mutex>
#include <string>

namespace purple {

namespace {

using InstallFn = void (*)(Interp*);

std::mutex gMutex;
InstallFn gInstall = nullptr;

#ifdef PURPLE_PYTHON_PLUGIN
std::string libpurpleDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&importPythonLibrary), &info) || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

// Loads the plugin (once per process); on failure returns false with the reason in `why`.
bool loadPlugin(std::string* why) {
  if (gInstall) return true;
  if (!dlsym(RTLD_DEFAULT, "Py_IsInitialized")) {
    // RTLD_GLOBAL: the extension modules Python imports (torch._C, numpy) find libpython's
    // symbols in the global scope, as they do in python3 itself.
    if (!dlopen(PURPLE_PYTHON_LIBRARY, RTLD_NOW | RTLD_GLOBAL)) {
      const char* e = dlerror();
      if (why)
        *why = std::string("cannot load CPython's library ") + PURPLE_PYTHON_LIBRARY + " (" + (e ? e : "unknown error") +
               "); install the package that provides it (Debian: libpython" PURPLE_PYTHON_VERSION ")";
      return false;
    }
  }
  const char* override = std::getenv("PURPLE_PYTHON_PLUGIN");
  std::string plugin = override && *override ? std::string(override) : libpurpleDirectory() + PURPLE_PYTHON_PLUGIN;
  void* handle = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    if (why) *why = "cannot load the Python bridge " + plugin + " (" + (e ? e : "unknown error") + ")";
    return false;
  }
  auto install = reinterpret_cast<InstallFn>(dlsym(handle, "purple_python_install"));
  if (!install) {
    if (why) *why = plugin + " is not Purple's Python bridge (no purple_python_install)";
    return false;
  }
  gInstall = install;
  return true;
}
#endif

}  // namespace

bool pythonLibraryAvailable(std::string* whyNot) {
#ifdef PURPLE_PYTHON_PLUGIN
  std::lock_guard<std::mutex> lock(gMutex);
  return loadPlugin(whyNot);
#else
  if (whyNot) *whyNot = PURPLE_PYTHON_UNAVAILABLE;
  return false;
#endif
}

void importPythonLibrary(Interp& in) {
  std::string why;
  InstallFn install = nullptr;
  {
    std::lock_guard<std::mutex> lock(gMutex);
#ifdef PURPLE_PYTHON_PLUGIN
    if (loadPlugin(&why)) install = gInstall;
#else
    why = PURPLE_PYTHON_UNAVAILABLE;
#endif
  }
  if (!install) throwError("error", "import: the library (purple python) is not available: " + why);
  install(&in);
}

}  // namespace purple
