// (serve-kernel): the running program as a Jupyter kernel, as IPython's embed_kernel makes a
// Python program one (docs/attach.md). Jupyter's protocol (ZeroMQ, through xeus) is spoken by a
// purple-kernel process started here in its bridge mode: it attaches to this program's REPL
// server (attach_server.hpp) and forwards execute, complete and inspect requests, which run on
// this program's own thread, with its state. The bridge writes the connection file that
// `jupyter console --existing FILE` reads, and ends with the program.
#include "builtins/builtins.hpp"
#include "interp/core/port.hpp"
#include "interp/language/attach_server.hpp"
#include "interp/limits/sandbox.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

extern char** environ;

namespace purple {

namespace {

// The one bridge of this process.
struct Bridge {
  Interp* owner = nullptr;
  pid_t pid = -1;
  std::string connectionFile;
  std::string privateDir;   // where the REPL server's socket is, when serve-kernel made it
};
std::mutex gMutex;
Bridge* gBridge = nullptr;

std::string directoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

// purple-kernel: PURPLE_KERNEL_PROGRAM, beside the running program (the purple command), beside
// libpurple or in the bin/ beside its lib/ (an embedding host), or on PATH.
std::string findKernelProgram() {
  if (const char* e = std::getenv("PURPLE_KERNEL_PROGRAM"); e && *e) return e;
  std::vector<std::string> candidates;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    candidates.push_back(directoryOf(self) + "/purple-kernel");
  }
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&registerServeKernel), &info) && info.dli_fname) {
    std::string lib = directoryOf(info.dli_fname);
    candidates.push_back(lib + "/purple-kernel");
    candidates.push_back(lib + "/../bin/purple-kernel");
  }
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t start = 0; start <= p.size();) {
      size_t colon = p.find(':', start);
      if (colon == std::string::npos) colon = p.size();
      if (colon > start) candidates.push_back(p.substr(start, colon - start) + "/purple-kernel");
      start = colon + 1;
    }
  }
  for (const std::string& c : candidates)
    if (executable(c)) return c;
  throwError("error", "serve-kernel: purple-kernel was not found (this Purple was built without xeus, or it is not "
                      "installed beside purple); PURPLE_KERNEL_PROGRAM names it");
}

bool makeDirectories(const std::string& path) {
  for (size_t i = 1; i <= path.size(); i++) {
    if (i < path.size() && path[i] != '/') continue;
    if (::mkdir(path.substr(0, i).c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// Jupyter's runtime directory, as jupyter_core finds it.
std::string jupyterRuntimeDir() {
  if (const char* d = std::getenv("JUPYTER_RUNTIME_DIR"); d && *d) return d;
  std::string data;
  if (const char* d = std::getenv("JUPYTER_DATA_DIR"); d && *d) data = d;
  else if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) data = std::string(x) + "/jupyter";
  else if (const char* h = std::getenv("HOME"); h && *h) data = std::string(h) + "/.local/share/jupyter";
  else data = "/tmp/jupyter";
  return data + "/runtime";
}

void endBridge(Bridge* b) {
  if (b->pid > 0) {
    ::kill(b->pid, SIGTERM);
    int status = 0;
    for (int k = 0; k < 50 && ::waitpid(b->pid, &status, WNOHANG) == 0; k++)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (::waitpid(b->pid, &status, WNOHANG) == 0) {
      ::kill(b->pid, SIGKILL);
      ::waitpid(b->pid, &status, 0);
    }
  }
  ::unlink(b->connectionFile.c_str());
}

// The bridge's end (shutdown_request) or the interpreter's: the file and a private server go.
void forgetBridge(Interp& in) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gBridge || gBridge->owner != &in) return;
  endBridge(gBridge);
  if (!gBridge->privateDir.empty()) {
    stopAttachServer(in);
    ::rmdir(gBridge->privateDir.c_str());
  }
  delete gBridge;
  gBridge = nullptr;
}

bool bridgeExited(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == pid;
}

}  // namespace

void registerServeKernel(Registry& r) {
  r.def("serve-kernel", "(:key (wait #t) connection-file)",
        [](Interp& in, bool wait, std::optional<std::string> connectionFile) -> Value {
    {
      std::lock_guard<std::mutex> lock(gMutex);
      if (gBridge && bridgeExited(gBridge->pid)) gBridge->pid = -1;
      if (gBridge && gBridge->pid > 0) throwError("error", "serve-kernel: this program is a kernel already: " + gBridge->connectionFile);
    }
    if (gBridge) forgetBridge(*gBridge->owner);
    std::string kernel = findKernelProgram();
    auto bridge = std::make_unique<Bridge>();
    bridge->owner = &in;
    std::string socket = attachServerPath(in);
    if (socket.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/purple-kernel-XXXXXX";
      if (!::mkdtemp(&dir[0])) throwError("file-error", std::string("serve-kernel: cannot make a directory: ") + std::strerror(errno));
      socket = dir + "/repl.sock";
      try {
        startAttachServer(in, socket);
      } catch (...) {
        ::rmdir(dir.c_str());
        throw;
      }
      bridge->privateDir = dir;
    }
    std::string file = connectionFile && !connectionFile->empty()
                           ? *connectionFile
                           : jupyterRuntimeDir() + "/kernel-purple-" + std::to_string(::getpid()) + ".json";
    if (file.find('/') != std::string::npos && !makeDirectories(directoryOf(file)))
      throwError("file-error", "serve-kernel: cannot make the directory of " + file + ": " + std::strerror(errno));
    ::unlink(file.c_str());
    bridge->connectionFile = file;
    std::vector<std::string> args{kernel, "--attach", socket, "--connection-file", file};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    int e = ::posix_spawn(&pid, kernel.c_str(), nullptr, nullptr, argv.data(), environ);
    if (e != 0) throwError("error", "serve-kernel: cannot start " + kernel + ": " + std::strerror(e));
    bridge->pid = pid;
    {
      std::lock_guard<std::mutex> lock(gMutex);
      gBridge = bridge.release();
    }
    in.onDestroy.push_back(forgetBridge);
    // The bridge writes the file once its ports are bound.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    struct stat st;
    while (::stat(file.c_str(), &st) != 0 || st.st_size == 0) {
      if (bridgeExited(pid) || std::chrono::steady_clock::now() > deadline) {
        gBridge->pid = -1;
        forgetBridge(in);
        throwError("error", "serve-kernel: purple-kernel ended without writing " + file + " (its error is above)");
      }
      in.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Value out = in.currentOutputPort();
    portWrite(out, "Purple kernel: connect with  jupyter console --existing " + file + "\n");
    portFlush(out);
    if (!wait) return makeString(file);
    // As embed_kernel: the program is the kernel until a client shuts it down.
    while (!bridgeExited(pid)) {
      in.poll();
      serveAttachedClients(in, 0.1);
    }
    gBridge->pid = -1;
    forgetBridge(in);
    return makeString(file);
  }, "Makes the running program a Jupyter kernel, as IPython's embed_kernel does: writes a "
     "connection file (in Jupyter's runtime directory, or CONNECTION-FILE) that `jupyter console "
     "--existing FILE` and other Jupyter clients attach to, and returns its path. Their cells run on this "
     "program's thread with its globals, modules and optimizers. With :wait #t (the default) it "
     "serves until a client shuts the kernel down (`quit` in jupyter console), then returns; with "
     ":wait #f it returns at once and cells run at the program's safe points while it goes on.");
  sandbox(r, "serve-kernel", Needs::Files | Needs::Process, "a connection file, a process (purple-kernel), and the program to its clients");
}

}  // namespace purple
