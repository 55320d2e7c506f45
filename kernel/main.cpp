// `purple-kernel -f CONNECTION_FILE`: the Jupyter kernel, started by Jupyter from the kernelspec
// that `purple --install-kernel` writes. xeus speaks the protocol (Debian 12's 2.4 with its own
// ZeroMQ server, Debian 13's 5.x with xeus-zmq's); Purple runs on the main thread switched to a
// big stack, as in the `purple` command, so deep recursion ends in Purple's depth limit.
//
// Interrupts: Jupyter sends SIGINT (interrupt_mode "signal"). It is blocked in every thread and
// received by one that waits for it, so no ZeroMQ poll ever sees EINTR; that thread only asks
// the interpreter to stop at its next safe point.
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

#include <cerrno>
#include <chrono>
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
void exitWithParent() {
  pid_t parentAtStart = getppid();
  pid_t named = 0;
  if (const char* e = std::getenv("JPY_PARENT_PID")) named = pid_t(std::atol(e));
  std::thread([parentAtStart, named] {
    while (true) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      bool gone = named > 1 ? kill(named, 0) == -1 && errno == ESRCH : getppid() != parentAtStart;
      if (gone) {
        std::fprintf(stderr, "purple-kernel: the process that started it (pid %ld) is gone; exiting\n",
                     long(named > 1 ? named : parentAtStart));
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  }).detach();
}

}  // namespace

int main(int argc, char* argv[]) {
  if (xeus::should_print_version(argc, argv)) {
    std::cout << purple::versionLine() << "\n";
    return 0;
  }
  std::string connectionFile = xeus::extract_filename(argc, argv);
  if (connectionFile.empty()) {
    std::cerr << "usage: purple-kernel -f CONNECTION_FILE\n"
                 "  Jupyter starts it; install the kernelspec with: purple --install-kernel\n";
    return 2;
  }
  sigset_t interrupts;
  sigemptyset(&interrupts);
  sigaddset(&interrupts, SIGINT);
  pthread_sigmask(SIG_BLOCK, &interrupts, nullptr);   // before any thread exists: all inherit it
  exitWithParent();

  int status = purple::runOnLargeStack([&] {
    try {
      xeus::xconfiguration config = xeus::load_configuration(connectionFile);
      auto interpreter = std::make_unique<purple::kernel::PurpleKernel>();
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
      kernel.start();   // returns after a shutdown request
      // The signal thread still refers to the kernel, and LibTorch's ~285 libraries need no
      // destructors: leave at once.
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(0);
    } catch (const std::exception& e) {
      std::cerr << "purple-kernel: " << e.what() << "\n";
      return 1;
    }
    return 0;
  });
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(status);
}
