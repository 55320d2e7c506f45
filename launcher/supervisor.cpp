#include "launcher/supervisor.hpp"
#include "launcher/output.hpp"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace purple::launcher {

namespace {

using Clock = std::chrono::steady_clock;

int gWake[2] = {-1, -1};   // self-pipe: signal handlers write the signal number

void onSignal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  if (::write(gWake[1], &b, 1) < 0) {
  }
  errno = saved;
}

void installHandlers() {
  if (::pipe(gWake) != 0) throw std::runtime_error("cannot create a pipe");
  for (int fd : gWake) ::fcntl(fd, F_SETFD, FD_CLOEXEC), ::fcntl(fd, F_SETFL, O_NONBLOCK);
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaction(s, &sa, nullptr);
}

std::string signalName(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGQUIT: return "SIGQUIT";
    default: return "signal " + std::to_string(sig);
  }
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int s = WTERMSIG(status);
    return "was killed by signal " + std::to_string(s) + " (" + signalName(s) + ")";
  }
  return "ended (status " + std::to_string(status) + ")";
}

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free port; give --master-port");
  }
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

std::string siblingPurple() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "purple";
  buf[n] = 0;
  std::string self(buf);
  auto slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/purple";
}

struct Rank {
  int rank = 0, localRank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  std::unique_ptr<LineRelay> out, err;
};

void writeFileAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;
  std::fputs(text.c_str(), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

class Supervisor {
 public:
  explicit Supervisor(const Options& o) : o_(o) {}

  int run() {
    int world = o_.nnodes * o_.nprocPerNode;
    int port = o_.masterPort > 0 ? o_.masterPort : freePort();
    char dirTemplate[] = "/tmp/purple-run-XXXXXX";
    if (!::mkdtemp(dirTemplate)) throw std::runtime_error("cannot create a temporary directory");
    runDir_ = dirTemplate;
    failureFile_ = runDir_ + "/failure";
    installHandlers();
    if (!o_.listenDir.empty() && ::mkdir(o_.listenDir.c_str(), 0700) != 0 && errno != EEXIST)
      throw std::runtime_error("--listen-dir: cannot make " + o_.listenDir + ": " + std::strerror(errno));
    bool relay = o_.prefixOutput || !o_.localRanksShown.empty();
    for (int local = 0; local < o_.nprocPerNode; local++) {
      Rank r;
      r.localRank = local;
      r.rank = o_.nodeRank * o_.nprocPerNode + local;
      spawn(r, world, port, relay);
      ranks_.push_back(std::move(r));
    }
    loop();
    cleanup();
    if (interruptSignal_) return 128 + interruptSignal_;
    if (firstFailure_ >= 0) {
      int st = ranks_[firstFailure_].status;
      return WIFEXITED(st) && WEXITSTATUS(st) != 0 ? WEXITSTATUS(st) : 1;
    }
    return 0;
  }

 private:
  const Options& o_;
  std::vector<Rank> ranks_;
  std::string runDir_, failureFile_;
  int firstFailure_ = -1;
  int interruptSignal_ = 0;
  enum class Phase { Running, Grace, Terminated, Killed } phase_ = Phase::Running;
  Clock::time_point deadline_;

  std::vector<std::string> environment(const Rank& r, int world, int port) {
    std::vector<std::string> env;
    auto overridden = [](const std::string& entry) {
      static const char* names[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                    "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
                                    "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                                    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "PURPLE_RUN_FAILURE_FILE"};
      for (const char* n : names) {
        size_t len = std::strlen(n);
        if (entry.compare(0, len, n) == 0 && entry.size() > len && entry[len] == '=') return true;
      }
      return false;
    };
    bool hasOmp = false;
    for (char** e = environ; e && *e; e++) {
      std::string entry(*e);
      if (entry.rfind("OMP_NUM_THREADS=", 0) == 0) hasOmp = true;
      if (!overridden(entry)) env.push_back(entry);
    }
    auto set = [&](const char* k, const std::string& v) { env.push_back(std::string(k) + "=" + v); };
    set("RANK", std::to_string(r.rank));
    set("LOCAL_RANK", std::to_string(r.localRank));
    set("WORLD_SIZE", std::to_string(world));
    set("LOCAL_WORLD_SIZE", std::to_string(o_.nprocPerNode));
    set("GROUP_RANK", std::to_string(o_.nodeRank));
    set("GROUP_WORLD_SIZE", std::to_string(o_.nnodes));
    set("ROLE_RANK", std::to_string(r.rank));
    set("ROLE_WORLD_SIZE", std::to_string(world));
    set("ROLE_NAME", "default");
    set("MASTER_ADDR", o_.masterAddr);
    set("MASTER_PORT", std::to_string(port));
    set("TORCHELASTIC_RESTART_COUNT", "0");
    set("TORCHELASTIC_MAX_RESTARTS", "0");
    set("TORCHELASTIC_RUN_ID", "none");
    set("PURPLE_RUN_FAILURE_FILE", failureFile_);
    // As torchrun: one intra-op thread per rank unless told otherwise, so that N ranks on one
    // machine do not oversubscribe its cores.
    if (!hasOmp && o_.nprocPerNode > 1) set("OMP_NUM_THREADS", "1");
    return env;
  }

  void spawn(Rank& r, int world, int port, bool relay) {
    std::vector<std::string> argv;
    if (o_.runAsIs) {
      argv = o_.command;
    } else {
      argv.push_back(o_.purple.empty() ? siblingPurple() : o_.purple);
      if (!o_.listenDir.empty()) {
        argv.push_back("--listen");
        argv.push_back(o_.listenDir + "/rank-" + std::to_string(r.rank) + ".sock");
      }
      argv.insert(argv.end(), o_.command.begin(), o_.command.end());
    }
    std::vector<std::string> env = environment(r, world, port);
    int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1};
    if (relay && (::pipe(outPipe) != 0 || ::pipe(errPipe) != 0)) throw std::runtime_error("cannot create a pipe");
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("cannot start a rank: ") + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaction(s, &dfl, nullptr);
      if (relay) {
        ::dup2(outPipe[1], 1);
        ::dup2(errPipe[1], 2);
        for (int fd : {outPipe[0], outPipe[1], errPipe[0], errPipe[1]}) ::close(fd);
      }
      std::vector<char*> cargv, cenv;
      for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
      cargv.push_back(nullptr);
      for (auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
      cenv.push_back(nullptr);
      ::execvpe(cargv[0], cargv.data(), cenv.data());
      std::string msg = "purple-run: cannot run " + argv[0] + ": " + std::strerror(errno) + "\n";
      if (::write(2, msg.data(), msg.size()) < 0) {
      }
      ::_exit(127);
    }
    r.pid = pid;
    r.running = true;
    if (relay) {
      ::close(outPipe[1]);
      ::close(errPipe[1]);
      std::string prefix = o_.prefixOutput ? "[rank" + std::to_string(r.rank) + "]: " : "";
      bool shown = o_.localRanksShown.empty() || o_.localRanksShown.count(r.localRank);
      r.out = std::make_unique<LineRelay>(outPipe[0], 1, prefix, shown);
      r.err = std::make_unique<LineRelay>(errPipe[0], 2, prefix, shown);
    }
  }

  void say(const std::string& line) {
    std::string s = "purple-run: " + line + "\n";
    if (::write(2, s.data(), s.size()) < 0) {
    }
  }

  int running() const {
    int n = 0;
    for (auto& r : ranks_) n += r.running;
    return n;
  }

  void signalRunning(int sig) {
    for (auto& r : ranks_)
      if (r.running) ::kill(r.pid, sig);
  }

  std::string runningList() const {
    std::string s;
    for (auto& r : ranks_)
      if (r.running) s += (s.empty() ? "" : ", ") + std::to_string(r.rank);
    return s;
  }

  void startStopping() {
    if (phase_ != Phase::Running) return;
    phase_ = Phase::Grace;
    deadline_ = Clock::now() + std::chrono::milliseconds(int64_t(o_.stopTimeout * 1000));
  }

  void reap() {
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (size_t k = 0; k < ranks_.size(); k++) {
        Rank& r = ranks_[k];
        if (r.pid != pid || !r.running) continue;
        r.running = false;
        r.status = status;
        bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (!failed) break;
        std::string what = "rank " + std::to_string(r.rank) + " (local rank " + std::to_string(r.localRank) + ", pid " +
                           std::to_string(r.pid) + ") " + describeStatus(status);
        if (firstFailure_ < 0 && !interruptSignal_) {
          firstFailure_ = int(k);
          writeFileAtomically(failureFile_, what + "\n");
          say(what + (running() ? "; stopping the other ranks (" + runningList() + ")" : ""));
          startStopping();
        } else {
          say(what);
        }
        break;
      }
    }
  }

  void onInterrupt(int sig) {
    if (interruptSignal_) {   // a second Ctrl-C: no more waiting
      signalRunning(SIGKILL);
      phase_ = Phase::Killed;
      return;
    }
    interruptSignal_ = sig;
    say(std::string("got ") + signalName(sig) + "; stopping every rank");
    signalRunning(sig == SIGHUP ? SIGTERM : sig);
    startStopping();
  }

  void escalate() {
    if (phase_ == Phase::Running || Clock::now() < deadline_) return;
    auto step = std::chrono::milliseconds(int64_t(o_.stopTimeout * 1000));
    if (phase_ == Phase::Grace) {
      if (running()) say("sending SIGTERM to rank(s) " + runningList());
      signalRunning(SIGTERM);
      phase_ = Phase::Terminated;
      deadline_ = Clock::now() + step;
    } else if (phase_ == Phase::Terminated) {
      if (running()) say("sending SIGKILL to rank(s) " + runningList());
      signalRunning(SIGKILL);
      phase_ = Phase::Killed;
      deadline_ = Clock::now() + step;
    }
  }

  void loop() {
    for (;;) {
      reap();
      escalate();
      bool pipesOpen = false;
      for (auto& r : ranks_) pipesOpen = pipesOpen || (r.out && r.out->open()) || (r.err && r.err->open());
      if (!running()) {
        drain();
        return;
      }
      std::vector<pollfd> fds{{gWake[0], POLLIN, 0}};
      std::vector<LineRelay*> relays;
      for (auto& r : ranks_)
        for (LineRelay* l : {r.out.get(), r.err.get()})
          if (l && l->open()) {
            fds.push_back({l->fd(), POLLIN, 0});
            relays.push_back(l);
          }
      (void)pipesOpen;
      int timeout = 200;
      if (phase_ != Phase::Running) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
        timeout = int(std::max<int64_t>(1, std::min<int64_t>(timeout, left + 1)));
      }
      int n = ::poll(fds.data(), fds.size(), timeout);
      if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("poll failed: ") + std::strerror(errno));
      if (n <= 0) continue;
      if (fds[0].revents & POLLIN) {
        unsigned char sigs[64];
        ssize_t got = ::read(gWake[0], sigs, sizeof sigs);
        for (ssize_t k = 0; k < got; k++)
          if (sigs[k] == SIGINT || sigs[k] == SIGTERM || sigs[k] == SIGHUP) onInterrupt(sigs[k]);
      }
      for (size_t k = 1; k < fds.size(); k++)
        if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) relays[k - 1]->pump();
    }
  }

  // After the last rank has exited: what is left in the pipes (a rank's own child could keep
  // one open forever, so give up after a second).
  void drain() {
    auto until = Clock::now() + std::chrono::seconds(1);
    for (;;) {
      std::vector<pollfd> fds;
      std::vector<LineRelay*> relays;
      for (auto& r : ranks_)
        for (LineRelay* l : {r.out.get(), r.err.get()})
          if (l && l->open()) {
            fds.push_back({l->fd(), POLLIN, 0});
            relays.push_back(l);
          }
      if (fds.empty()) return;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0 || ::poll(fds.data(), fds.size(), int(left)) <= 0) {
        for (auto* l : relays) l->finish();
        return;
      }
      for (size_t k = 0; k < fds.size(); k++)
        if (fds[k].revents) relays[k]->pump();
    }
  }

  void cleanup() {
    ::unlink(failureFile_.c_str());
    ::unlink((failureFile_ + ".tmp").c_str());
    ::rmdir(runDir_.c_str());
  }
};

}  // namespace

int supervise(const Options& o) {
  Supervisor s(o);
  return s.run();
}

}  // namespace purple::launcher
