#include "launcher/supervisor.hpp"
#include "launcher/output.hpp"
#include "launcher/rendezvous.hpp"
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
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace purple::launcher {

namespace {

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
    char dirTemplate[] = "/tmp/purple-run-XXXXXX";
    if (!::mkdtemp(dirTemplate)) throw std::runtime_error("cannot create a temporary directory");
    runDir_ = dirTemplate;
    failureFile_ = runDir_ + "/failure";
    installHandlers();
    if (!o_.listenDir.empty() && ::mkdir(o_.listenDir.c_str(), 0700) != 0 && errno != EEXIST)
      throw std::runtime_error("--listen-dir: cannot make " + o_.listenDir + ": " + std::strerror(errno));
    relay_ = o_.prefixOutput || !o_.localRanksShown.empty();
    int status = 0;
    try {
      status = o_.agentMode() ? runAgent() : runOnce();
    } catch (...) {
      killRanks();
      cleanup();
      throw;
    }
    cleanup();
    return status;
  }

 private:
  const Options& o_;
  bool relay_ = false;
  std::vector<Rank> ranks_;
  std::string runDir_, failureFile_;
  int firstFailure_ = -1;             // in ranks_, this round
  int interruptSignal_ = 0;
  enum class Phase { Running, Grace, Terminated, Killed } phase_ = Phase::Running;
  Clock::time_point deadline_;

  // With restarts or a rendezvous (rendezvous.hpp): the coordinator, when this launcher hosts
  // it, and this launcher's connection to it.
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<LineChannel> agent_;
  Assignment round_;
  bool roundEnded_ = true;            // no ranks of the current round are left
  enum class Stop { None, Restart, Final } stop_ = Stop::None;
  int exitStatus_ = -1;               // from the coordinator's EXIT
  bool finished_ = false;

  // ---- one machine, once (no restarts, no rendezvous) ------------------------------------------

  int runOnce() {
    Assignment a;
    a.nodeRank = o_.nodeRank;
    a.nnodes = o_.nnodes;
    a.world = o_.nnodes * o_.nprocPerNode;
    a.firstRank = o_.nodeRank * o_.nprocPerNode;
    a.masterAddr = o_.masterAddr;
    a.masterPort = o_.masterPort > 0 ? o_.masterPort : freePort();
    startRound(a);
    while (!roundEnded_) pollOnce();
    if (interruptSignal_) return 128 + interruptSignal_;
    return failureStatus();
  }

  // ---- restarts and rendezvous -------------------------------------------------------------------

  int runAgent() {
    bool alone = o_.nnodes == 1 && (o_.rdzvBackend == "static" || !o_.rdzvEndpointGiven || o_.rdzvPort == 0);
    std::string host = o_.rdzvBackend == "c10d" ? o_.rdzvHost : o_.masterAddr;
    int port = o_.rdzvBackend == "c10d" ? o_.rdzvPort : o_.masterPort;
    int listen = -1;
    bool hosting = alone;
    if (!alone) {
      if (o_.rdzvBackend == "static") {
        if (o_.nodeRank == 0) {
          listen = listenForLaunchers(host, port, true);
          hosting = true;
        }
      } else {
        listen = listenForLaunchers(host, port, false);
        hosting = listen >= 0;
      }
    }
    if (hosting) {
      coordinator_ = std::make_unique<Coordinator>(o_, listen);
      agent_ = std::make_unique<LineChannel>(coordinator_->connectLocal());
    } else {
      auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(o_.joinTimeout * 1000));
      int fd = connectToCoordinator(host, port, deadline, gWake[0]);
      if (fd < 0) return 130;   // interrupted while waiting
      agent_ = std::make_unique<LineChannel>(fd);
    }
    join();
    while (!finished_) pollOnce();
    if (interruptSignal_) return 128 + interruptSignal_;
    if (exitStatus_ == 0) return 0;
    int local = failureStatus();
    if (local) return local;
    return exitStatus_ > 0 && exitStatus_ != 130 ? exitStatus_ : 1;
  }

  void join() {
    agent_->send("JOIN " + o_.rdzvId + " " + std::to_string(o_.rdzvBackend == "static" ? o_.nodeRank : -1) + " " +
                 std::to_string(o_.nprocPerNode));
  }

  void onMessage(const std::string& line) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    auto rest = [&]() {
      std::string r;
      std::getline(in, r);
      return r.empty() ? r : r.substr(1);
    };
    if (cmd == "ROUND") {
      std::vector<std::string> w{cmd};
      for (std::string x; in >> x;) w.push_back(x);
      Assignment a;
      if (!roundEnded_ || !parseAssignment(w, a)) return;
      if (a.restarts > 0 || a.round > 0 || a.nnodes != o_.nnodes || o_.minNodes < o_.nnodes)
        say("round " + std::to_string(a.round) + ": node " + std::to_string(a.nodeRank) + " of " +
            std::to_string(a.nnodes) + ", ranks " + std::to_string(a.firstRank) + ".." +
            std::to_string(a.firstRank + o_.nprocPerNode - 1) + " of " + std::to_string(a.world) +
            " (restart " + std::to_string(a.restarts) + " of " + std::to_string(o_.maxRestarts) + ")");
      startRound(a);
    } else if (cmd == "STOP") {
      int r = -1;
      std::string kind;
      in >> r >> kind;
      std::string why = rest();
      if (r != round_.round || stop_ != Stop::None) return;
      stop_ = kind == "final" ? Stop::Final : Stop::Restart;
      if (firstFailure_ < 0) writeFileAtomically(failureFile_, why + "\n");
      if (kind == "restart")
        say("restarting every rank (restart " + std::to_string(round_.restarts + 1) + " of " +
            std::to_string(o_.maxRestarts) + "): " + why);
      else if (kind == "regroup")
        say("restarting every rank with new members: " + why);
      else if (firstFailure_ < 0)
        say("the job stops: " + why);
      if (roundEnded_) afterRound();
      else startStopping();
    } else if (cmd == "EXIT") {
      in >> exitStatus_;
      std::string why = rest();
      if (exitStatus_ != 0 && exitStatus_ != 130 && firstFailure_ < 0) say(why);
      if (roundEnded_) finished_ = true;
      else startStopping();
    }
  }

  void onCoordinatorGone() {
    agent_->close();
    if (finished_ || exitStatus_ >= 0) return;
    say("lost the connection to the rendezvous (the launcher that hosts it, node 0's, is gone); stopping");
    exitStatus_ = 1;
    if (roundEnded_) finished_ = true;
    else startStopping();
  }

  // Every rank of the round has ended.
  void afterRound() {
    if (!agent_) {
      finished_ = true;
      return;
    }
    if (interruptSignal_ || exitStatus_ >= 0) {
      finished_ = true;
    } else if (stop_ == Stop::Restart) {
      stop_ = Stop::None;
      join();
    } else if (stop_ == Stop::Final) {
      finished_ = true;
    } else if (firstFailure_ < 0) {
      agent_->send("DONE " + std::to_string(round_.round));   // then EXIT 0, or STOP if another node fails
    }   // else FAILED was sent: the coordinator answers with STOP
  }

  // ---- ranks -------------------------------------------------------------------------------------

  void startRound(const Assignment& a) {
    round_ = a;
    ranks_.clear();
    firstFailure_ = -1;
    phase_ = Phase::Running;
    stop_ = Stop::None;
    ::unlink(failureFile_.c_str());
    for (int local = 0; local < o_.nprocPerNode; local++) {
      Rank r;
      r.localRank = local;
      r.rank = a.firstRank + local;
      spawn(r);
      ranks_.push_back(std::move(r));
    }
    roundEnded_ = false;
  }

  int failureStatus() const {
    if (firstFailure_ < 0) return 0;
    int st = ranks_[size_t(firstFailure_)].status;
    return WIFEXITED(st) && WEXITSTATUS(st) != 0 ? WEXITSTATUS(st) : 1;
  }

  std::vector<std::string> environment(const Rank& r) {
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
    set("WORLD_SIZE", std::to_string(round_.world));
    set("LOCAL_WORLD_SIZE", std::to_string(o_.nprocPerNode));
    set("GROUP_RANK", std::to_string(round_.nodeRank));
    set("GROUP_WORLD_SIZE", std::to_string(round_.nnodes));
    set("ROLE_RANK", std::to_string(r.rank));
    set("ROLE_WORLD_SIZE", std::to_string(round_.world));
    set("ROLE_NAME", "default");
    set("MASTER_ADDR", round_.masterAddr);
    set("MASTER_PORT", std::to_string(round_.masterPort));
    set("TORCHELASTIC_RESTART_COUNT", std::to_string(round_.restarts));
    set("TORCHELASTIC_MAX_RESTARTS", std::to_string(o_.maxRestarts));
    set("TORCHELASTIC_RUN_ID", o_.rdzvId);
    set("PURPLE_RUN_FAILURE_FILE", failureFile_);
    // As torchrun: one intra-op thread per rank unless told otherwise, so that N ranks on one
    // machine do not oversubscribe its cores.
    if (!hasOmp && o_.nprocPerNode > 1) set("OMP_NUM_THREADS", "1");
    return env;
  }

  void spawn(Rank& r) {
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
    std::vector<std::string> env = environment(r);
    int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1};
    if (relay_ && (::pipe(outPipe) != 0 || ::pipe(errPipe) != 0)) throw std::runtime_error("cannot create a pipe");
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("cannot start a rank: ") + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaction(s, &dfl, nullptr);
      if (relay_) {
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
    if (relay_) {
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

  void killRanks() {
    signalRunning(SIGKILL);
    for (auto& r : ranks_)
      if (r.running) ::waitpid(r.pid, nullptr, 0);
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
        // The round's first failure, unless the ranks are being stopped (Ctrl-C, or a stop the
        // coordinator ordered): then ranks failing is what stopping them does.
        if (firstFailure_ < 0 && !interruptSignal_ && stop_ == Stop::None && exitStatus_ < 0) {
          firstFailure_ = int(k);
          writeFileAtomically(failureFile_, what + "\n");
          say(what + (running() ? "; stopping the other ranks (" + runningList() + ")" : ""));
          if (agent_) agent_->send("FAILED " + std::to_string(round_.round) + " " + what);
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
    if (agent_) agent_->send(std::string("ABORT a launcher got ") + signalName(sig));
    signalRunning(sig == SIGHUP ? SIGTERM : sig);
    startStopping();
    if (roundEnded_) finished_ = true;
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

  // One turn of the loop: ranks that ended, stops that are due, then wait for a signal, a
  // rank's output or a message.
  void pollOnce() {
    reap();
    escalate();
    if (!roundEnded_ && !running()) {
      drain();
      roundEnded_ = true;
      afterRound();
    }
    if (finished_ || (!agent_ && roundEnded_)) return;
    std::vector<pollfd> fds{{gWake[0], POLLIN, 0}};
    std::vector<LineRelay*> relays;
    for (auto& r : ranks_)
      for (LineRelay* l : {r.out.get(), r.err.get()})
        if (l && l->open()) {
          fds.push_back({l->fd(), POLLIN, 0});
          relays.push_back(l);
        }
    size_t agentAt = fds.size();
    if (agent_ && agent_->open()) fds.push_back({agent_->fd(), POLLIN, 0});
    size_t coordinatorAt = fds.size();
    int timeout = 200;
    if (coordinator_) {
      for (int fd : coordinator_->fds()) fds.push_back({fd, POLLIN, 0});
      timeout = std::min(timeout, coordinator_->tick());
    }
    if (phase_ != Phase::Running) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      timeout = int(std::max<int64_t>(1, std::min<int64_t>(timeout, left + 1)));
    }
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("poll failed: ") + std::strerror(errno));
    if (n <= 0) return;
    if (fds[0].revents & POLLIN) {
      unsigned char sigs[64];
      ssize_t got = ::read(gWake[0], sigs, sizeof sigs);
      for (ssize_t k = 0; k < got; k++)
        if (sigs[k] == SIGINT || sigs[k] == SIGTERM || sigs[k] == SIGHUP) onInterrupt(sigs[k]);
    }
    for (size_t k = 1; k < agentAt; k++)
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) relays[k - 1]->pump();
    for (size_t k = coordinatorAt; k < fds.size(); k++)
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) coordinator_->ready(fds[k].fd);
    if (agentAt < coordinatorAt && (fds[agentAt].revents & (POLLIN | POLLHUP | POLLERR))) {
      std::vector<std::string> lines;
      bool open = agent_->pump(lines);
      for (auto& l : lines) onMessage(l);
      if (!open) onCoordinatorGone();
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
