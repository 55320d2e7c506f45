#include "interp/language/attach_server.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/core/port.hpp"
#include "interp/language/attach_wire.hpp"
#include "interp/language/printer.hpp"
#include "interp/language/reader.hpp"
#include "interp/language/repl_services.hpp"
#include "interp/memory/tensor_scope.hpp"
#include "interp/platform/version.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace purple {

using namespace attach;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxClients = 16;                  // connections at once; more are refused
constexpr size_t kMaxQueued = 64;                   // requests one connection may have waiting
constexpr size_t kMaxOutbox = size_t(64) << 20;     // unsent bytes before a client counts as gone
constexpr auto kGreetingTime = std::chrono::seconds(10);   // to send the magic after connecting
// While the program is inside with-tensor-scope, a client's tensors would be freed with the
// scope's: requests wait this long for a safe point outside every scope before running anyway.
constexpr auto kScopeWait = std::chrono::seconds(2);

const char* kNotAClient =
    "purple: this socket serves Purple's attach protocol; connect with: purple --attach SOCKET\n";

// ---- socket files removed on a fatal signal --------------------------------------------------
// The handler may only make async-signal-safe calls: the paths live in fixed slots.
struct SocketSlot {
  std::atomic<bool> used{false};
  char path[sizeof(sockaddr_un::sun_path)];
  dev_t dev;
  ino_t ino;
  pid_t owner;
};
SocketSlot gSlots[8];

void removeSocketsAndDie(int sig) {
  for (SocketSlot& s : gSlots) {
    struct stat st;
    if (s.used.load() && s.owner == getpid() && lstat(s.path, &st) == 0 && st.st_ino == s.ino && st.st_dev == s.dev)
      unlink(s.path);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void installCleanupHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGTERM, SIGHUP, SIGINT}) {
      struct sigaction now {};
      sigaction(sig, nullptr, &now);
      // A host (or the REPL) that handles the signal itself keeps it.
      if (now.sa_handler != SIG_DFL || (now.sa_flags & SA_SIGINFO)) continue;
      struct sigaction sa {};
      sa.sa_handler = removeSocketsAndDie;
      sigemptyset(&sa.sa_mask);
      sigaction(sig, &sa, nullptr);
    }
  });
}

SocketSlot* claimSlot(const std::string& path, const struct stat& st) {
  for (SocketSlot& s : gSlots) {
    if (s.used.load()) continue;
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.dev = st.st_dev;
    s.ino = st.st_ino;
    s.owner = getpid();
    s.used.store(true);
    return &s;
  }
  return nullptr;   // more servers than slots: those sockets are removed only at a normal end
}

[[noreturn]] void fileError(const std::string& message) { throwError("file-error", message); }

sockaddr_un addressOf(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// Whether a server answers at PATH (a socket file left by a program that died does not).
bool socketIsLive(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un a = addressOf(path);
  bool live = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 || errno == EAGAIN;
  ::close(fd);
  return live;
}

// A listening socket at PATH, mode 0600 from the moment it is there: bound inside a private
// directory beside PATH and renamed onto it (which also replaces a stale socket atomically).
int bindListener(const std::string& path, struct stat& bound) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path))
    fileError("cannot serve a REPL on a socket path of " + std::to_string(path.size()) + " bytes (1 to " +
              std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes)");
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) fileError("cannot serve a REPL on " + path + ": it exists and is not a socket");
    if (socketIsLive(path)) fileError("cannot serve a REPL on " + path + ": a running program serves there");
  }
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string privateDir = dir + "/.purple-attach-XXXXXX";
  std::string tempPath = privateDir + "/s";
  bool viaDir = tempPath.size() < sizeof(sockaddr_un::sun_path) && ::mkdtemp(&privateDir[0]) != nullptr;
  if (viaDir) tempPath = privateDir + "/s";
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) fileError(std::string("cannot make a socket: ") + std::strerror(errno));
  const std::string& bindPath = viaDir ? tempPath : path;
  if (!viaDir) ::unlink(path.c_str());   // the stale socket checked above
  sockaddr_un a = addressOf(bindPath);
  std::string failure;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) failure = "bind";
  else if (::chmod(bindPath.c_str(), 0600) != 0) failure = "chmod";
  else if (::listen(fd, 16) != 0) failure = "listen";
  else if (viaDir && ::rename(tempPath.c_str(), path.c_str()) != 0) failure = "rename";
  int saved = errno;
  if (viaDir) {
    ::unlink(tempPath.c_str());
    ::rmdir(privateDir.c_str());
  }
  if (failure.empty() && ::lstat(path.c_str(), &bound) != 0) failure = "stat";
  if (!failure.empty()) {
    ::close(fd);
    if (!viaDir) ::unlink(path.c_str());
    fileError("cannot serve a REPL on " + path + " (" + failure + "): " + std::strerror(saved));
  }
  return fd;
}

// A stop that Purple code cannot catch, like an interrupt, carrying where it found the request.
[[noreturn]] void throwRequestStop(Interp& in, const char* message) {
  Value err = makeError(intern("interrupt"), message, Value::nil());
  err.as<ErrorObject>()->backtrace = in.backtrace();
  throw PurpleInterrupt(err);
}

}  // namespace

// ---- the server ---------------------------------------------------------------------------------

// One request waiting for, or running at, a safe point.
struct Job {
  uint64_t conn = 0;
  Tag kind = Tag::Eval;
  std::string id, code, sourceName;
  size_t cursor = 0;
  bool liveDisplays = false;
};

// Wakes the server's thread (its eventfd); -1 once the server has stopped.
struct Waker {
  std::atomic<int> fd{-1};
  void wake() {
    uint64_t one = 1;
    int f = fd.load();
    if (f >= 0 && ::write(f, &one, sizeof one) < 0) {
    }
  }
};

// One connection's bytes to send: the interpreter's thread adds frames, the server's thread
// sends them. `gone` once the client has left, or stopped reading while more than kMaxOutbox
// bytes waited for it: frames are then dropped, and the server's thread drops the connection.
struct Outbox {
  std::mutex m;
  std::string bytes;
  bool gone = false;
  std::shared_ptr<Waker> waker;
  void push(std::string_view frame) {
    {
      std::lock_guard<std::mutex> lock(m);
      if (gone) return;
      if (bytes.size() + frame.size() > kMaxOutbox) {
        gone = true;
        bytes.clear();
      } else {
        bytes.append(frame.data(), frame.size());
      }
    }
    waker->wake();
  }
};

class AttachServer {
 public:
  AttachServer(Interp& in, std::string path) : in_(in), path_(std::move(path)) {}
  ~AttachServer() { stop(); }

  void start();
  void stop();
  const std::string& path() const { return path_; }
  pid_t owner() const { return owner_; }
  bool busy() const { return running_; }
  // The interpreter's thread.
  void atSafePoint(bool canRun);
  int serveWaiting(double seconds);
  void display(Value reps, Value id, bool update);

 private:
  struct Conn {
    int fd = -1;
    std::string in;
    bool greeted = false;
    Clock::time_point since = Clock::now();
    std::shared_ptr<Outbox> out;
    std::string sending;   // taken from the outbox, not yet all sent
    bool closing = false;  // close once `sending` and the outbox are empty
  };

  void loop();
  void accept();
  void refuseRaw(int fd, const std::string& text);
  bool readFrom(uint64_t id, Conn& c);
  bool handle(uint64_t id, Conn& c, RawFrame&& f);
  void protocolError(Conn& c, const std::string& message);
  bool flush(Conn& c);
  void drop(uint64_t id, Conn& c);
  void enqueue(Job&& job);
  void send(uint64_t conn, std::string_view frame);
  std::shared_ptr<Outbox> outboxOf(uint64_t conn);

  bool takeJob(Job& job);
  void run(Job& job);
  std::string runEval(Job& job);

  Interp& in_;
  std::string path_;
  pid_t owner_ = getpid();
  std::string banner_;
  int listenFd_ = -1, wakeFd_ = -1;
  std::shared_ptr<Waker> waker_ = std::make_shared<Waker>();
  SocketSlot* slot_ = nullptr;
  struct stat bound_ {};
  std::unique_ptr<std::thread> thread_;
  std::atomic<bool> stopping_{false};

  // Shared by both threads, under m_.
  std::mutex m_;
  std::condition_variable jobReady_;
  std::deque<Job> queue_;
  std::map<uint64_t, std::shared_ptr<Outbox>> outboxes_;
  uint64_t runningConn_ = 0;
  std::string runningId_;
  std::atomic<bool> stopRunning_{false};
  const char* stopReason_ = "interrupted";

  // The interpreter's thread only.
  bool running_ = false;
  Clock::time_point waitingSince_{};
  bool waiting_ = false;
  std::shared_ptr<Outbox> jobOut_;
  std::string jobId_;

  // The server's thread only.
  std::map<uint64_t, Conn> conns_;
  uint64_t nextConn_ = 1;
};

void AttachServer::start() {
  listenFd_ = bindListener(path_, bound_);
  wakeFd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd_ < 0) {
    ::close(listenFd_);
    ::unlink(path_.c_str());
    fileError(std::string("cannot make an eventfd: ") + std::strerror(errno));
  }
  waker_->fd.store(wakeFd_);
  std::string program;
  for (const std::string& a : in_.commandLine) program += (program.empty() ? "" : " ") + a;
  banner_ = std::string(kMagic) + FrameWriter(Tag::Banner).field(versionLine()).field(int64_t(getpid())).field(program).finish();
  slot_ = claimSlot(path_, bound_);
  installCleanupHandlers();
  thread_ = std::make_unique<std::thread>([this] { loop(); });
}

void AttachServer::stop() {
  if (listenFd_ < 0) return;
  if (getpid() != owner_) {   // a forked child (a data-loader worker): the thread is not here
    (void)thread_.release();
    return;
  }
  stopping_.store(true);
  waker_->wake();
  thread_->join();
  thread_.reset();
  waker_->fd.store(-1);
  for (auto& [id, c] : conns_) {
    flush(c);
    ::close(c.fd);
  }
  conns_.clear();
  if (slot_) slot_->used.store(false);
  struct stat st;
  if (::lstat(path_.c_str(), &st) == 0 && st.st_ino == bound_.st_ino && st.st_dev == bound_.st_dev)
    ::unlink(path_.c_str());
  ::close(listenFd_);
  ::close(wakeFd_);
  listenFd_ = wakeFd_ = -1;
  std::lock_guard<std::mutex> lock(m_);
  queue_.clear();
  for (auto& [id, box] : outboxes_) {
    std::lock_guard<std::mutex> l(box->m);
    box->gone = true;
  }
  outboxes_.clear();
}

// ---- the server's thread ----

void AttachServer::loop() {
  while (!stopping_.load()) {
    std::vector<pollfd> fds{{listenFd_, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
    std::vector<uint64_t> ids;
    auto now = Clock::now();
    for (auto it = conns_.begin(); it != conns_.end();) {
      Conn& c = it->second;
      if (!c.greeted && now - c.since > kGreetingTime) {
        refuseRaw(c.fd, "purple: no greeting within 10 seconds\n");
        drop(it->first, c);
        it = conns_.erase(it);
        continue;
      }
      bool pending = !c.sending.empty(), gone;
      {
        std::lock_guard<std::mutex> lock(c.out->m);
        pending = pending || !c.out->bytes.empty();
        gone = c.out->gone;
      }
      if (gone) {   // it stopped reading while its requests wrote on
        drop(it->first, c);
        it = conns_.erase(it);
        continue;
      }
      if (c.closing && !pending) {
        drop(it->first, c);
        it = conns_.erase(it);
        continue;
      }
      fds.push_back({c.fd, short((c.closing ? 0 : POLLIN) | (pending ? POLLOUT : 0)), 0});
      ids.push_back(it->first);
      ++it;
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) {
      uint64_t n;
      while (::read(wakeFd_, &n, sizeof n) > 0) {
      }
    }
    if (fds[0].revents & POLLIN) accept();
    for (size_t k = 2; k < fds.size(); k++) {
      auto it = conns_.find(ids[k - 2]);
      if (it == conns_.end()) continue;
      Conn& c = it->second;
      bool alive = true;
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) alive = c.closing || readFrom(it->first, c);
      if (alive && (fds[k].revents & POLLOUT)) alive = flush(c);
      if (!alive) {
        drop(it->first, c);
        conns_.erase(it);
      }
    }
  }
}

void AttachServer::refuseRaw(int fd, const std::string& text) {
  if (::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
  }
}

void AttachServer::accept() {
  while (true) {
    int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    ucred peer{};
    socklen_t len = sizeof peer;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != ::geteuid()) {
      refuseRaw(fd, "purple: refused: this program serves only its own user (uid " + std::to_string(::geteuid()) + ")\n");
      ::close(fd);
      continue;
    }
    if (conns_.size() >= kMaxClients) {
      refuseRaw(fd, "purple: refused: " + std::to_string(kMaxClients) + " clients are attached already\n");
      ::close(fd);
      continue;
    }
    uint64_t id = nextConn_++;
    Conn& c = conns_[id];
    c.fd = fd;
    c.out = std::make_shared<Outbox>();
    c.out->waker = waker_;
    std::lock_guard<std::mutex> lock(m_);
    outboxes_[id] = c.out;
  }
}

// Reads what CONN sent (a megabyte at most, so that one client cannot hold the others up) and
// handles the frames it completes. False when the client has gone.
bool AttachServer::readFrom(uint64_t id, Conn& c) {
  char buf[65536];
  for (int rounds = 0; rounds < 16; rounds++) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n == 0) return false;   // the client left
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.in.append(buf, size_t(n));
    if (!c.greeted) {
      size_t k = std::min(c.in.size(), kMagic.size());
      if (c.in.compare(0, k, kMagic.substr(0, k)) != 0) {
        refuseRaw(c.fd, kNotAClient);
        return false;
      }
      if (c.in.size() < kMagic.size()) continue;
      c.in.erase(0, kMagic.size());
      c.greeted = true;
      c.out->push(banner_);
    }
    while (!c.closing) {
      std::string error;
      std::optional<RawFrame> f = takeFrame(c.in, error);
      if (!error.empty()) {
        protocolError(c, error);
        break;
      }
      if (!f) break;
      if (!handle(id, c, std::move(*f))) break;
    }
    if (c.closing) return true;
  }
  return true;   // more may wait: the next poll says so
}

void AttachServer::protocolError(Conn& c, const std::string& message) {
  c.out->push(FrameWriter(Tag::Refusal).field("protocol error: " + message + "; closing the connection").finish());
  c.closing = true;
  c.in.clear();
}

bool AttachServer::handle(uint64_t id, Conn& c, RawFrame&& f) {
  if (!isClientFrame(uint8_t(f.type))) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", unsigned(uint8_t(f.type)));
    protocolError(c, std::string("unknown request type ") + hex);
    return false;
  }
  FrameReader r(f.type, f.body);
  std::optional<std::string> requestId = r.field();
  Job job;
  job.conn = id;
  job.kind = f.type;
  if (requestId) job.id = *requestId;
  if (f.type == Tag::Interrupt) {
    if (!r.ok() || !r.atEnd()) return protocolError(c, "a malformed interrupt"), false;
    bool dropped = false;
    {
      std::lock_guard<std::mutex> lock(m_);
      if (runningConn_ == id && runningId_ == job.id) {
        stopReason_ = "interrupted";
        stopRunning_.store(true);
        in_.requestWork();
      }
      for (auto it = queue_.begin(); it != queue_.end(); ++it)
        if (it->conn == id && it->id == job.id) {
          queue_.erase(it);
          dropped = true;
          break;
        }
    }
    if (dropped)
      c.out->push(FrameWriter(Tag::Failure).field(job.id).field("interrupt").field("interrupted before it ran").finish() +
                  FrameWriter(Tag::Done).field(job.id).field(int64_t(0)).finish());
    return true;
  }
  if (f.type == Tag::Eval) {
    std::optional<std::string> code = r.field(), source = r.field(), live = r.field();
    if (code) job.code = std::move(*code);
    if (source) job.sourceName = std::move(*source);
    job.liveDisplays = live && *live == "1";
  } else if (f.type == Tag::Complete) {
    std::optional<std::string> code = r.field();
    std::optional<int64_t> cursor = r.number();
    if (code) job.code = std::move(*code);
    if (cursor && *cursor >= 0) job.cursor = std::min(size_t(*cursor), job.code.size());
  } else {
    std::optional<std::string> name = r.field();
    if (name) job.code = std::move(*name);
  }
  if (!r.ok() || !r.atEnd() || job.id.empty() || job.id.size() > 64)
    return protocolError(c, "a malformed request"), false;
  if (job.sourceName.empty() || job.sourceName.size() > 256) job.sourceName = "<attach>";
  size_t waiting = 0;
  {
    std::lock_guard<std::mutex> lock(m_);
    for (const Job& j : queue_) waiting += j.conn == id;
  }
  if (waiting >= kMaxQueued) {
    c.out->push(FrameWriter(Tag::Failure).field(job.id).field("error").field("too many requests waiting").finish() +
                FrameWriter(Tag::Done).field(job.id).field(int64_t(0)).finish());
    return true;
  }
  enqueue(std::move(job));
  return true;
}

void AttachServer::enqueue(Job&& job) {
  std::lock_guard<std::mutex> lock(m_);
  queue_.push_back(std::move(job));
  in_.requestWork();
  jobReady_.notify_all();
}

bool AttachServer::flush(Conn& c) {
  while (true) {
    if (c.sending.empty()) {
      std::lock_guard<std::mutex> lock(c.out->m);
      c.sending.swap(c.out->bytes);
    }
    if (c.sending.empty()) return true;
    ssize_t n = ::send(c.fd, c.sending.data(), c.sending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.sending.erase(0, size_t(n));
  }
}

// The client is gone (or refused): its waiting requests are dropped and its running one stopped.
void AttachServer::drop(uint64_t id, Conn& c) {
  ::close(c.fd);
  std::lock_guard<std::mutex> lock(m_);
  {
    std::lock_guard<std::mutex> l(c.out->m);
    c.out->gone = true;
    c.out->bytes.clear();
  }
  outboxes_.erase(id);
  for (auto it = queue_.begin(); it != queue_.end();) it = it->conn == id ? queue_.erase(it) : it + 1;
  if (runningConn_ == id) {
    stopReason_ = "interrupted: the client disconnected";
    stopRunning_.store(true);
    in_.requestWork();
  }
}

std::shared_ptr<Outbox> AttachServer::outboxOf(uint64_t conn) {
  std::lock_guard<std::mutex> lock(m_);
  auto it = outboxes_.find(conn);
  return it == outboxes_.end() ? nullptr : it->second;
}

void AttachServer::send(uint64_t conn, std::string_view frame) {
  if (std::shared_ptr<Outbox> box = outboxOf(conn)) box->push(frame);
}

// ---- the interpreter's thread ----

bool AttachServer::takeJob(Job& job) {
  std::lock_guard<std::mutex> lock(m_);
  if (queue_.empty()) {
    in_.pendingWork.store(0);
    return false;
  }
  job = std::move(queue_.front());
  queue_.pop_front();
  runningConn_ = job.conn;
  runningId_ = job.id;
  stopRunning_.store(false);
  return true;
}

void AttachServer::atSafePoint(bool canRun) {
  if (running_) {
    // Inside a request: its stop is due here; nothing else runs until it ends.
    if (stopRunning_.load()) throwRequestStop(in_, stopReason_);
    return;
  }
  if (!canRun) {
    in_.stepsLeft = 0;   // the next procedure call is a safe point
    return;
  }
  // A library's body is running (its own namespace), or a tensor scope is open: wait for a
  // better safe point (the next comes 1024 calls later: asking sooner would also charge a step
  // budget 1024 steps for each).
  if (in_.currentNamespace() != nullptr || tensorScopeOpen()) {
    auto now = Clock::now();
    if (!waiting_) waitingSince_ = now, waiting_ = true;
    if (in_.currentNamespace() != nullptr || now - waitingSince_ < kScopeWait) return;
  }
  waiting_ = false;
  Job job;
  while (takeJob(job)) run(job);
}

int AttachServer::serveWaiting(double seconds) {
  {
    std::unique_lock<std::mutex> lock(m_);
    jobReady_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return !queue_.empty() || stopping_.load(); });
  }
  int ran = 0;
  Job job;
  while (!running_ && takeJob(job)) {
    run(job);
    ran++;
  }
  return ran;
}

namespace {

// What a request changes for its extent, put back when it ends: the exception handlers (the
// program's must not see the client's errors), the output and error ports (the client's), the
// input port (empty: the program's standard input is the program's), and the display hook
// (show goes to the client).
struct RequestScope {
  Interp& in;
  Value handlers, out, err, input, displayHook, displayLive;
  GlobalCell* hookCell;
  GlobalCell* liveCell;
  RequestScope(Interp& in, Value outPort, Value errPort, Value hook, bool live)
      : in(in), hookCell(in.globalCell(intern("%display-hook"))), liveCell(in.globalCell(intern("%display-live?"))) {
    handlers = in.st->handlers;
    out = in.currentOutputPort();
    err = in.currentErrorPort();
    input = in.currentInputPort();
    displayHook = hookCell->value;
    displayLive = liveCell->value;
    in.st->handlers = Value::nil();
    setPort(in.st->outputPort, outPort);
    setPort(in.st->errorPort, errPort);
    setPort(in.st->inputPort, makeStringInputPort(""));
    hookCell->value = hook;
    liveCell->value = Value::boolean(live);
  }
  ~RequestScope() {
    in.st->handlers = handlers;
    setPort(in.st->outputPort, out);
    setPort(in.st->errorPort, err);
    setPort(in.st->inputPort, input);
    hookCell->value = displayHook;
    liveCell->value = displayLive;
  }
  static void setPort(Value param, Value port) {
    if (param.is(Kind::Parameter)) param.as<Parameter>()->value = port;
  }
};

// The lines of a backtrace that belong to the request: those down to the last one in its own
// source; the program's frames below it are not the client's business.
std::vector<std::string> requestTrace(Value trace, const std::string& sourceName) {
  std::vector<std::string> lines;
  size_t keep = 0;
  for (Value p = trace; isPair(p); p = cdr(p)) {
    if (!isString(car(p))) continue;
    lines.emplace_back(stringView(car(p)));
    if (lines.back().find(sourceName) != std::string::npos) keep = lines.size();
  }
  lines.resize(keep);
  return lines;
}

std::string failureFrame(const std::string& id, Value payload, const std::string& sourceName) {
  FrameWriter w(Tag::Failure);
  w.field(id);
  if (payload.is(Kind::ErrorObject)) {
    auto* e = payload.as<ErrorObject>();
    w.field(e->errorKind.is(Kind::Symbol) ? std::string(symbolName(e->errorKind)) : "error").field(errorMessage(payload));
    for (const std::string& line : requestTrace(e->backtrace, sourceName)) w.field(line);
  } else {
    w.field("raise").field("uncaught exception: " + toWriteStringBounded(payload));
  }
  return w.finish();
}

std::string failureFrame(const std::string& id, const std::string& kind, const std::string& message) {
  return FrameWriter(Tag::Failure).field(id).field(kind).field(message).finish();
}

}  // namespace

void AttachServer::run(Job& job) {
  jobOut_ = outboxOf(job.conn);
  running_ = jobOut_ != nullptr;
  jobId_ = job.id;
  struct Finish {
    AttachServer& s;
    ~Finish() {
      s.running_ = false;
      s.jobOut_.reset();
      std::lock_guard<std::mutex> lock(s.m_);
      s.runningConn_ = 0;
      s.runningId_.clear();
      s.stopRunning_.store(false);
      if (!s.queue_.empty()) s.in_.requestWork();
    }
  } finish{*this};
  if (!running_) return;   // its client has left
  std::shared_ptr<Outbox> out = jobOut_;
  out->push(FrameWriter(Tag::Started).field(job.id).finish());
  std::string done = FrameWriter(Tag::Done).field(job.id).field(int64_t(0)).finish();
  if (job.kind == Tag::Eval) {
    out->push(runEval(job));
    return;
  }
  std::string reply;
  try {
    if (job.kind == Tag::Complete) {
      size_t begin = identifierStart(job.code, job.cursor);
      FrameWriter w(Tag::Completions);
      w.field(job.id).field(int64_t(begin)).field(int64_t(job.cursor));
      for (const std::string& m : completionCandidates(in_, std::string_view(job.code).substr(begin, job.cursor - begin)))
        w.field(m);
      reply = w.finish();
    } else {
      std::optional<std::string> doc = documentationText(in_, job.code);
      reply = FrameWriter(Tag::Documentation).field(job.id).field(doc ? "1" : "0").field(doc ? *doc : "").finish();
    }
  } catch (const PurpleInterrupt& e) {
    if (!stopRunning_.load() || in_.interruptRequested_.load() || in_.deadlinePassed.load()) throw;
    reply = failureFrame(job.id, e.payload(), job.sourceName);
  } catch (const PurpleException& e) {
    reply = failureFrame(job.id, e.payload(), job.sourceName);
  }
  out->push(reply + done);
}

namespace {
// A request's output port: text reaches the client a line (or 4 KB) at a time, and at every
// flush. It holds the connection's outbox, not the server: a port the client's code kept in a
// global writes into nothing once the client has left.
struct Stream {
  std::shared_ptr<Outbox> box;
  std::string id;
  Tag type;
  std::string pending;
  void write(std::string_view text) {
    pending.append(text.data(), text.size());
    if (text.empty() || pending.size() >= 4096 || text.find('\n') != std::string_view::npos) flush();
  }
  void flush() {
    if (pending.empty()) return;
    box->push(FrameWriter(type).field(id).field(pending).finish());
    pending.clear();
  }
};
}  // namespace

// Evaluates the request's forms one at a time, sending each value; returns the frames that end
// it (its failure, if any, and Done). The program's own interrupt or budget going off meanwhile
// goes on to the program once the client is told.
std::string AttachServer::runEval(Job& job) {
  size_t forms = 0;
  const std::string& id = job.id;
  std::shared_ptr<Outbox> box = jobOut_;
  auto out = std::make_shared<Stream>(Stream{box, id, Tag::Out, {}});
  auto err = std::make_shared<Stream>(Stream{box, id, Tag::Err, {}});
  Value outPort = makeCallbackOutputPort([out](std::string_view s) { out->write(s); });
  Value errPort = makeCallbackOutputPort([err](std::string_view s) { err->write(s); });
  auto flushPorts = [&] {
    out->flush();
    err->flush();
  };
  std::string ending;
  RequestScope scope(in_, outPort, errPort, in_.lookupGlobal("%attach-display"), job.liveDisplays);
  try {
    Value source = makeString(job.sourceName);
    {
      Reader check(job.code, source, nullptr);   // a read error anywhere runs nothing
      Value ignored;
      while (check.read(ignored)) {
      }
    }
    PositionTable positions;
    Reader reader(job.code, source, &positions);
    for (;; forms++) {
      positions.clear();
      Value form;
      if (!reader.read(form)) break;
      Value v = in_.evalForm(form, &positions);
      flushPorts();
      auto result = [&](Value x) {
        box->push(FrameWriter(Tag::Result).field(id).field(int64_t(forms)).bundle(representationsOf(in_, x)).finish());
      };
      if (v.is(Kind::MultipleValues)) {
        auto* m = v.as<MultipleValues>();
        for (uint32_t i = 0; i < m->extra; i++) result(m->items[i]);
      } else if (!v.isUnspecified()) {
        result(v);
      }
    }
  } catch (const PurpleInterrupt& e) {
    flushPorts();
    ending = failureFrame(id, e.payload(), job.sourceName);
    if (!stopRunning_.load() || in_.interruptRequested_.load() || in_.deadlinePassed.load()) {
      box->push(ending + FrameWriter(Tag::Done).field(id).field(int64_t(forms)).finish());
      throw;
    }
  } catch (const PurpleException& e) {
    ending = failureFrame(id, e.payload(), job.sourceName);
  } catch (const PurpleExit&) {
    ending = failureFrame(id, "error", "exit: an attached client cannot end the program (Ctrl-D leaves the REPL)");
  } catch (const ContinuationInvoked&) {
    ending = failureFrame(id, "error", "a continuation of the program cannot be invoked from an attached client");
  } catch (const std::bad_alloc&) {
    ending = failureFrame(id, "memory-error", "out of memory");
  } catch (const std::exception& e) {
    ending = failureFrame(id, "error", e.what());
  }
  flushPorts();
  return ending + FrameWriter(Tag::Done).field(id).field(int64_t(forms)).finish();
}

void AttachServer::display(Value reps, Value id, bool update) {
  if (!running_ || !jobOut_) return;
  jobOut_->push(FrameWriter(Tag::Display)
                    .field(jobId_)
                    .field(isString(id) ? std::string(stringView(id)) : std::string())
                    .field(update ? "1" : "0")
                    .bundle(bundleFromList(reps))
                    .finish());
}

// ---- the interpreter's entry points ----------------------------------------------------------

void (*Interp::pendingWorkHook)(Interp&, bool) = nullptr;

namespace {
// Set for the process when the first server starts; attach_server owns the interpreter's work.
void onPendingWork(Interp& in, bool atSafePoint) {
  AttachServer* s = in.attachServer;
  if (!s || getpid() != s->owner()) {   // no server, or a forked child (a data-loader worker)
    in.pendingWork.store(0);
    return;
  }
  s->atSafePoint(atSafePoint);
}
}  // namespace

void startAttachServer(Interp& in, const std::string& path) {
  if (in.attachServer) {
    if (in.attachServer->path() == path) return;
    throwError("error", "serve-repl: this program serves a REPL on " + in.attachServer->path() + " already");
  }
  auto server = std::make_unique<AttachServer>(in, path);
  server->start();
  Interp::pendingWorkHook = onPendingWork;
  in.attachServer = server.release();
  in.onDestroy.push_back([](Interp& i) { stopAttachServer(i); });
}

void stopAttachServer(Interp& in) {
  AttachServer* s = in.attachServer;
  if (s && s->busy())
    throwError("error", "stop-repl-server: a client's request cannot stop the server it runs in (it stops when the program ends)");
  in.attachServer = nullptr;
  delete s;
}

std::string attachServerPath(Interp& in) { return in.attachServer ? in.attachServer->path() : std::string(); }

int serveAttachedClients(Interp& in, double seconds) {
  return in.attachServer ? in.attachServer->serveWaiting(seconds) : 0;
}

void attachDisplay(Interp& in, Value reps, Value id, bool update) {
  if (in.attachServer) in.attachServer->display(reps, id, update);
}

}  // namespace purple
