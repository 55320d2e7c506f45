// `purple-kernel -f CONNECTION_FILE`: the Jupyter kernel, started by Jupyter from the kernelspec
// that `purple --install-kernel` writes. xeus speaks the protocol (Debian 12's 2.4 with its own
// ZeroMQ server, Debian 13's 5.x with xeus-zmq's); Purple runs on the main thread switched to a
// big stack, as in the `purple` command, so deep recursion ends in Purple's depth limit.
//
// Interrupts: Jupyter sends SIGINT (interrupt_mode "signal"). It is blocked in every thread and
// received by one that waits for it, so no ZeroMQ poll ever sees EINTR; that thread only asks
// the interpreter to stop at its next safe point.
//
// `purple-kernel --attach SOCKET --connection-file FILE` is the bridge that (serve-kernel)
// starts (docs/attach.md): no interpreter of its own, requests run in the program serving SOCKET.
// It picks its ports, writes FILE for `jupyter console --existing FILE`, and ends with that
// program (its parent), removing FILE.
#include "kernel/purple_kernel.hpp"

#include <xeus/xeus.hpp>   // XEUS_VERSION_MAJOR
#include <xeus/xhelper.hpp>
#include <xeus/xkernel.hpp>
#include <xeus/xkernel_configuration.hpp>
#if XEUS_VERSION_MAJOR >= 5
// xeus 5 (Debian 13): the ZeroMQ server and context are the separate xeus-zmq library.
#include <xeus-zmq/xserver_zmq.hpp>
#include <xeus-zmq/xzmq_context.hpp>
#include <xeus/xsystem.hpp>
#else
#include <xeus/xserver_zmq.hpp>
#endif

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <pthread.h>
#include <sys/types.h>
#include <thread>
#include <unistd.h>

namespace {

// The kernel ends when the process that started it is gone, as ipykernel does: a client killed
// with SIGKILL sends no shutdown request, and the kernel would run on as an orphan. Jupyter names
// its process in JPY_PARENT_PID; without it, the parent at start is watched (a reparented kernel
// has lost it).
// A bridge watches the program that started it, whatever Jupyter's variable says.
std::string gConnectionFileToRemove;

void exitWithParent(bool bridge) {
  pid_t parentAtStart = getppid();
  pid_t named = 0;
  if (const char* e = std::getenv("JPY_PARENT_PID"); e && !bridge) named = pid_t(std::atol(e));
  std::thread([parentAtStart, named, bridge] {
    while (true) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      bool gone = named > 1 ? kill(named, 0) == -1 && errno == ESRCH : getppid() != parentAtStart;
      if (gone) {
        if (!bridge)
          std::fprintf(stderr, "purple-kernel: the process that started it (pid %ld) is gone; exiting\n",
                       long(named > 1 ? named : parentAtStart));
        if (!gConnectionFileToRemove.empty()) ::unlink(gConnectionFileToRemove.c_str());
        std::fflush(stderr);
        std::_Exit(bridge ? 0 : 1);
      }
    }
  }).detach();
}

// Five free TCP ports on 127.0.0.1, held open together so that they differ.
std::vector<int> freePorts(int count) {
  std::vector<int> fds, ports;
  for (int k = 0; k < count; k++) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error(std::string("cannot find a free port: ") + std::strerror(errno));
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

// A connection file as Jupyter writes one: loopback ports and a random HMAC key.
nl::json newConnectionInfo() {
  std::vector<int> ports = freePorts(5);
  std::random_device random;
  std::string key;
  const char* hex = "0123456789abcdef";
  for (int k = 0; k < 32; k++) key += hex[random() % 16];
  return {{"shell_port", ports[0]}, {"iopub_port", ports[1]}, {"stdin_port", ports[2]}, {"control_port", ports[3]},
          {"hb_port", ports[4]},    {"ip", "127.0.0.1"},      {"key", key},             {"transport", "tcp"},
          {"signature_scheme", "hmac-sha256"}, {"kernel_name", "purple"}};
}

// Mode 0600, as Jupyter writes connection files: the key in it lets a client run code.
void writePrivateText(const std::string& path, const std::string& text) {
  ::unlink(path.c_str());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

std::string argumentAfter(int argc, char* argv[], const char* flag) {
  for (int i = 1; i + 1 < argc; i++)
    if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
  return "";
}

}  // namespace

int main(int argc, char* argv[]) {
  if (xeus::should_print_version(argc, argv)) {
    std::cout << purple::versionLine() << "\n";
    return 0;
  }
  std::string attachSocket = argumentAfter(argc, argv, "--attach");
  bool bridge = !attachSocket.empty();
  std::string connectionFile = bridge ? argumentAfter(argc, argv, "--connection-file") : xeus::extract_filename(argc, argv);
  if (connectionFile.empty()) {
    std::cerr << "usage: purple-kernel -f CONNECTION_FILE\n"
                 "  Jupyter starts it; install the kernelspec with: purple --install-kernel\n"
                 "       purple-kernel --attach SOCKET --connection-file FILE\n"
                 "  the bridge (serve-kernel) starts: a kernel whose cells run in the program serving SOCKET\n";
    return 2;
  }
  sigset_t interrupts;
  sigemptyset(&interrupts);
  sigaddset(&interrupts, SIGINT);
  pthread_sigmask(SIG_BLOCK, &interrupts, nullptr);   // before any thread exists: all inherit it
  exitWithParent(bridge);

  int status = purple::runOnLargeStack([&] {
    try {
      std::unique_ptr<purple::kernel::Backend> backend =
          bridge ? purple::kernel::makeAttachedBackend(attachSocket) : purple::kernel::makeLocalBackend();
      // The bridge's file is written whole beside its final name, read back as Jupyter's own
      // files are, and renamed into place once the kernel's sockets are bound.
      std::string pendingFile = connectionFile + ".tmp";
      if (bridge) writePrivateText(pendingFile, newConnectionInfo().dump(2) + "\n");
      xeus::xconfiguration config = xeus::load_configuration(bridge ? pendingFile : connectionFile);
      auto interpreter = std::make_unique<purple::kernel::PurpleKernel>(std::move(backend));
      purple::kernel::PurpleKernel* purpleKernel = interpreter.get();
      std::thread([interrupts, purpleKernel] {
        int sig = 0;
        while (sigwait(&interrupts, &sig) == 0) purpleKernel->interruptIfRunning();
      }).detach();
#if XEUS_VERSION_MAJOR >= 5
      xeus::xkernel kernel(config, xeus::get_user_name(), xeus::make_zmq_context(), std::move(interpreter),
                           xeus::make_xserver_default);
#else
      auto context = xeus::make_context<zmq::context_t>();
      xeus::xkernel kernel(config, xeus::get_user_name(), std::move(context), std::move(interpreter),
                           xeus::make_xserver_zmq);
#endif
      if (bridge) {
        gConnectionFileToRemove = connectionFile;
        if (std::rename(pendingFile.c_str(), connectionFile.c_str()) != 0)
          throw std::runtime_error("cannot write " + connectionFile + ": " + std::strerror(errno));
      }
      kernel.start();   // returns after a shutdown request
      if (bridge) ::unlink(connectionFile.c_str());
      // The signal thread still refers to the kernel, and LibTorch's ~285 libraries need no
      // destructors: leave at once.
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(0);
    } catch (const std::exception& e) {
      std::cerr << "purple-kernel: " << e.what() << "\n";
      if (bridge) ::unlink((connectionFile + ".tmp").c_str());
      return 1;
    }
    return 0;
  });
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(status);
}
