#include "launcher/rendezvous.hpp"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace purple::launcher {

namespace {

std::vector<std::string> words(const std::string& line, size_t most) {
  // The first MOST-1 words split at spaces; the last keeps the rest of the line (a message).
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size() && out.size() + 1 < most) {
    size_t j = line.find(' ', i);
    if (j == std::string::npos) j = line.size();
    out.push_back(line.substr(i, j - i));
    i = j + 1;
  }
  if (i < line.size()) out.push_back(line.substr(i));
  return out;
}

bool toInt(const std::string& s, int& out) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end) return false;
  out = int(v);
  return true;
}

void setNonBlocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// HOST's IPv4 addresses (names resolved), in the resolver's order.
std::vector<sockaddr_in> resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<sockaddr_in> out;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return out;
  for (addrinfo* a = res; a; a = a->ai_next) {
    sockaddr_in s = *reinterpret_cast<sockaddr_in*>(a->ai_addr);
    s.sin_port = htons(uint16_t(port));
    out.push_back(s);
  }
  ::freeaddrinfo(res);
  return out;
}

std::string seconds(double s) {
  std::ostringstream o;
  o << s << " s";
  return o.str();
}

}  // namespace

// ---- LineChannel ------------------------------------------------------------------------------

LineChannel::LineChannel(int fd) : fd_(fd) {
  if (fd_ >= 0) setNonBlocking(fd_);
}

LineChannel::~LineChannel() { close(); }

void LineChannel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool LineChannel::pump(std::vector<std::string>& lines) {
  if (fd_ < 0) return false;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n > 0) {
      partial_.append(buf, size_t(n));
      continue;
    }
    bool more = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
      lines.push_back(partial_.substr(start, nl - start));
    partial_.erase(0, start);
    if (partial_.size() > 65536) partial_.clear();   // not our protocol: drop the junk
    return more;
  }
}

void LineChannel::send(const std::string& line) {
  if (fd_ < 0) return;
  std::string s = line + "\n";
  const char* p = s.data();
  size_t left = s.size();
  auto until = Clock::now() + std::chrono::seconds(5);
  while (left > 0) {
    ssize_t w = ::send(fd_, p, left, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      left -= size_t(w);
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR) && Clock::now() < until) {
      pollfd pf{fd_, POLLOUT, 0};
      ::poll(&pf, 1, 100);
    } else {
      return;   // the peer is gone; reading will say so
    }
  }
}

bool parseAssignment(const std::vector<std::string>& w, Assignment& a) {
  // ROUND round node-rank nnodes world first-rank restarts master-port master-addr
  return w.size() == 9 && w[0] == "ROUND" && toInt(w[1], a.round) && toInt(w[2], a.nodeRank) &&
         toInt(w[3], a.nnodes) && toInt(w[4], a.world) && toInt(w[5], a.firstRank) && toInt(w[6], a.restarts) &&
         toInt(w[7], a.masterPort) && !(a.masterAddr = w[8]).empty();
}

// ---- sockets ------------------------------------------------------------------------------------

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
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

int listenForLaunchers(const std::string& host, int port, bool required) {
  std::vector<sockaddr_in> addrs = resolve(host, port);
  if (addrs.empty() && !required)
    throw std::runtime_error("cannot resolve the rendezvous host \"" + host + "\"");
  if (required) {   // node 0 of a static job: on HOST when it is ours, else on every address
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    any.sin_port = htons(uint16_t(port));
    addrs.push_back(any);
  }
  for (auto& a : addrs) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error(std::string("cannot open a socket: ") + std::strerror(errno));
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 64) == 0) {
      setNonBlocking(fd);
      return fd;
    }
    int err = errno;
    ::close(fd);
    if (err == EADDRINUSE) {
      if (required)
        throw std::runtime_error("cannot listen for the other launchers on port " + std::to_string(port) +
                                 ": the port is already in use");
      return -1;   // another launcher of this machine hosts the rendezvous
    }
    if (err != EADDRNOTAVAIL)
      throw std::runtime_error("cannot listen for the other launchers on " + host + ":" + std::to_string(port) + ": " +
                               std::strerror(err));
  }
  return -1;   // the endpoint is another machine's
}

int connectToCoordinator(const std::string& host, int port, Clock::time_point deadline, int wake) {
  std::string lastError = "no address";
  for (;;) {
    for (auto& a : resolve(host, port)) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) throw std::runtime_error(std::string("cannot open a socket: ") + std::strerror(errno));
      setNonBlocking(fd);
      int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd pf{fd, POLLOUT, 0};
        if (::poll(&pf, 1, 2000) == 1) {
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          rc = err == 0 ? 0 : -1;
          errno = err;
        } else {
          errno = ETIMEDOUT;
        }
      }
      if (rc == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      lastError = std::strerror(errno);
      ::close(fd);
    }
    if (Clock::now() >= deadline)
      throw std::runtime_error("no rendezvous at " + host + ":" + std::to_string(port) + " (" + lastError +
                               "): the launcher of node 0 (or the one on the endpoint's machine) is not running");
    pollfd pf{wake, POLLIN, 0};
    if (::poll(&pf, 1, 500) > 0) return -1;
  }
}

// ---- the coordinator ----------------------------------------------------------------------------

struct Coordinator::Client {
  std::unique_ptr<LineChannel> ch;
  bool local = false;         // the host launcher's own connection
  bool joined = false;        // has sent JOIN for the round being formed
  bool member = false;        // in the running round
  bool done = false;          // its ranks all exited 0 in the running round
  int wantedRank = -1;        // static node rank (-1 with c10d)
  int nproc = 0;
  int nodeRank = -1;
  uint64_t order = 0;         // when it joined (c10d assigns node ranks in this order)
  std::string peer;           // its address, for messages
};

Coordinator::Coordinator(const Options& o, int listen) : o_(o), listen_(listen), formingSince_(Clock::now()) {}

Coordinator::~Coordinator() {
  if (listen_ >= 0) ::close(listen_);
}

int Coordinator::connectLocal() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) throw std::runtime_error("cannot create a socket pair");
  auto c = std::make_unique<Client>();
  c->ch = std::make_unique<LineChannel>(sv[0]);
  c->local = true;
  c->peer = "this machine";
  clients_.push_back(std::move(c));
  setNonBlocking(sv[1]);
  return sv[1];
}

std::vector<int> Coordinator::fds() const {
  std::vector<int> out;
  if (listen_ >= 0) out.push_back(listen_);
  for (auto& c : clients_)
    if (c->ch->open()) out.push_back(c->ch->fd());
  return out;
}

void Coordinator::accept() {
  for (;;) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    int fd = ::accept(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    if (fd < 0) return;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Client>();
    c->ch = std::make_unique<LineChannel>(fd);
    char buf[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    c->peer = buf;
    clients_.push_back(std::move(c));
  }
}

void Coordinator::ready(int fd) {
  if (fd == listen_) {
    accept();
    return;
  }
  for (size_t k = 0; k < clients_.size(); k++) {
    Client& c = *clients_[k];
    if (c.ch->fd() != fd) continue;
    std::vector<std::string> lines;
    bool alive = c.ch->pump(lines);
    for (auto& l : lines) onLine(c, l);
    if (!alive) {
      c.ch->close();
      onGone(c);
      clients_.erase(clients_.begin() + long(k));
    }
    return;
  }
}

void Coordinator::broadcast(const std::string& line, bool membersOnly) {
  for (auto& c : clients_)
    if (!membersOnly || c->member) c->ch->send(line);
}

void Coordinator::onLine(Client& c, const std::string& line) {
  std::vector<std::string> w = words(line, 2);
  const std::string cmd = w.empty() ? "" : w[0];
  if (cmd == "JOIN") {
    std::vector<std::string> j = words(line, 5);
    int wanted = -1, nproc = 0;
    if (j.size() != 4 || !toInt(j[2], wanted) || !toInt(j[3], nproc) || nproc < 1) {
      c.ch->send("EXIT 2 the rendezvous did not understand \"" + line + "\" (a different purple-run version?)");
      c.ch->close();
      return;
    }
    if (j[1] != o_.rdzvId) {
      c.ch->send("EXIT 2 this rendezvous is job \"" + o_.rdzvId + "\", not \"" + j[1] + "\" (--rdzv-id)");
      c.ch->close();
      return;
    }
    if (state_ == State::Over) {
      c.ch->send("EXIT 1 the job is over");
      return;
    }
    if (state_ == State::Running && c.member) return;   // not before its ranks have stopped
    if (o_.rdzvBackend == "static") {
      if (wanted < 0 || wanted >= o_.nnodes) {
        c.ch->send("EXIT 2 node rank " + std::to_string(wanted) + " is outside 0.." + std::to_string(o_.nnodes - 1));
        c.ch->close();
        return;
      }
      for (auto& other : clients_)
        if (other.get() != &c && other->wantedRank == wanted && (other->joined || other->member)) {
          c.ch->send("EXIT 2 two launchers were started with --node-rank " + std::to_string(wanted));
          c.ch->close();
          return;
        }
    }
    c.wantedRank = wanted;
    c.nproc = nproc;
    c.joined = true;
    c.order = joinOrder_++;
    if (state_ == State::Running && !c.member) {
      // A node that was not in the round: with room for it (elastic membership), the round
      // stops so that the next one includes it, without using a restart (torchrun's agents do
      // the same); a static job that is full keeps it waiting for a stop.
      int members = 0;
      for (auto& x : clients_) members += x->member;
      if (o_.rdzvBackend == "c10d" && members < o_.nnodes)
        stopRound("a new node (" + c.peer + ") joins the job", false);
      return;
    }
    tryStart();
  } else if (cmd == "FAILED") {
    std::vector<std::string> f = words(line, 3);
    int round = -1;
    if (state_ == State::Running && c.member && f.size() == 3 && toInt(f[1], round) && round == round_)
      stopRound(f[2], true);
  } else if (cmd == "DONE") {
    std::vector<std::string> f = words(line, 2);
    int round = -1;
    if (state_ != State::Running || !c.member || f.size() != 2 || !toInt(f[1], round) || round != round_) return;
    c.done = true;
    bool all = true;
    for (auto& x : clients_)
      if (x->member && !x->done) all = false;
    if (all) finish(0, "every rank exited 0");
  } else if (cmd == "ABORT") {
    finish(130, w.size() > 1 ? w[1] : "a launcher was interrupted");
  }
}

void Coordinator::onGone(Client& c) {
  if (state_ == State::Running && c.member) {
    c.member = false;
    stopRound("node " + std::to_string(c.nodeRank) + "'s launcher (" + c.peer + ") is gone", true);
  }
  c.joined = false;
}

void Coordinator::stopRound(const std::string& why, bool countsAsRestart) {
  if (state_ != State::Running) return;
  if (countsAsRestart && restarts_ >= o_.maxRestarts) {
    finish(1, why);
    return;
  }
  if (countsAsRestart) restarts_++;
  broadcast("STOP " + std::to_string(round_) + (countsAsRestart ? " restart " : " regroup ") + why, true);
  for (auto& c : clients_) {
    // members join again once their ranks have stopped; a launcher that joined while the
    // round ran is already waiting for the next one
    if (c->member) c->joined = false;
    c->member = false;
    c->done = false;
  }
  round_++;
  state_ = State::Forming;
  formingSince_ = Clock::now();
  minReached_ = false;
}

void Coordinator::finish(int status, const std::string& why) {
  if (state_ == State::Over) return;
  if (state_ == State::Running && status != 0) broadcast("STOP " + std::to_string(round_) + " final " + why, true);
  broadcast("EXIT " + std::to_string(status) + " " + why, false);
  state_ = State::Over;
}

void Coordinator::tryStart() {
  if (state_ != State::Forming) return;
  std::vector<Client*> joined;
  for (auto& c : clients_)
    if (c->joined && c->ch->open()) joined.push_back(c.get());
  std::vector<Client*> members;
  if (o_.rdzvBackend == "static") {
    members.assign(size_t(o_.nnodes), nullptr);
    for (Client* c : joined) members[size_t(c->wantedRank)] = c;
    for (Client* c : members)
      if (!c) return;
  } else {
    if (int(joined.size()) < o_.minNodes) {
      minReached_ = false;
      return;
    }
    if (!minReached_) {
      minReached_ = true;
      minReachedAt_ = Clock::now();
    }
    bool lastCallOver = Clock::now() - minReachedAt_ >= std::chrono::duration<double>(o_.lastCallTimeout);
    if (int(joined.size()) < o_.nnodes && !lastCallOver) return;
    // the host's launcher first (rank 0's store is on its machine), then in the order of joining
    std::stable_sort(joined.begin(), joined.end(), [](Client* a, Client* b) {
      if (a->local != b->local) return a->local;
      return a->order < b->order;
    });
    bool hostIn = !joined.empty() && joined[0]->local;
    if (!hostIn) return;   // cannot happen while the host's launcher runs: it always rejoins
    members.assign(joined.begin(), joined.begin() + std::min<long>(long(joined.size()), o_.nnodes));
  }
  int world = 0;
  for (Client* c : members) world += c->nproc;
  // Rank 0's store: in a job of one machine, the port given (or a free one); otherwise a free
  // port on the coordinator's machine, which is node 0's, for each round.
  std::string masterAddr = o_.rdzvBackend == "c10d" ? o_.rdzvHost : o_.masterAddr;
  int masterPort = (listen_ < 0 && o_.masterPort > 0) ? o_.masterPort : freePort();
  int first = 0;
  for (size_t k = 0; k < members.size(); k++) {
    Client* c = members[k];
    c->member = true;
    c->done = false;
    c->joined = false;
    c->nodeRank = int(k);
    c->ch->send("ROUND " + std::to_string(round_) + " " + std::to_string(k) + " " + std::to_string(members.size()) +
                " " + std::to_string(world) + " " + std::to_string(first) + " " + std::to_string(restarts_) + " " +
                std::to_string(masterPort) + " " + masterAddr);
    first += c->nproc;
  }
  state_ = State::Running;
}

int Coordinator::tick() {
  if (state_ != State::Forming) return 1000;
  tryStart();
  if (state_ != State::Forming) return 1000;
  auto now = Clock::now();
  if (now - formingSince_ >= std::chrono::duration<double>(o_.joinTimeout)) {
    int joined = 0;
    for (auto& c : clients_) joined += c->joined;
    std::string need = o_.minNodes == o_.nnodes ? std::to_string(o_.nnodes) : "at least " + std::to_string(o_.minNodes);
    finish(1, "the rendezvous timed out: " + std::to_string(joined) + " node(s) joined within " +
                  seconds(o_.joinTimeout) + ", the job needs " + need + " (--rdzv-conf join_timeout=S)");
    return 1000;
  }
  return minReached_ ? 100 : 500;
}

}  // namespace purple::launcher
