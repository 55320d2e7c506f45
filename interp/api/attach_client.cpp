// The client side of the attach protocol (include/purple/attach.hpp): blocking reads on the
// socket, with a pipe beside it so that interrupt() (from a signal handler too) wakes the wait
// and sends the interrupt frame from the client's own thread.
#define PURPLE_IMPLEMENTATION
#include "purple/attach.hpp"

#include "interp/language/attach_wire.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>

namespace purple::embed {

using namespace ::purple::attach;
using Clock = std::chrono::steady_clock;

struct AttachClient::State {
  std::string path, version, program;
  int64_t pid = 0;
  int fd = -1;
  int wake[2] = {-1, -1};
  std::atomic<bool> interruptWanted{false};
  std::string buffer;
  uint64_t nextId = 1;

  ~State() {
    for (int f : {fd, wake[0], wake[1]})
      if (f >= 0) ::close(f);
  }

  [[noreturn]] void fail(const std::string& message) {
    throw Error("attach-error", path + ": " + message);
  }
  [[noreturn]] void malformed() { fail("the server sent a malformed reply"); }

  // Waits for the socket to be readable (or for TIMEOUT ms; -1: forever), sending an interrupt
  // frame for request ID when interrupt() asked meanwhile. False on timeout.
  bool waitReadable(int timeout, const std::string& id) {
    while (true) {
      pollfd fds[2] = {{fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
      int n = ::poll(fds, 2, timeout);
      if (n < 0 && errno == EINTR) {
        if (!interruptWanted.load()) continue;
      } else if (n < 0) {
        fail(std::string("poll failed: ") + std::strerror(errno));
      } else if (n == 0) {
        return false;
      }
      if (fds[1].revents & POLLIN) {
        char drain[64];
        while (::read(wake[0], drain, sizeof drain) > 0) {
        }
      }
      if (interruptWanted.exchange(false) && !id.empty()) {
        if (!writeAll(fd, FrameWriter(Tag::Interrupt).field(id).finish()))
          fail("the program closed the connection (it has ended)");
      }
      if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) return true;
    }
  }

  // Reads more bytes; fails when the program has gone.
  void receive() {
    char buf[65536];
    ssize_t n;
    do n = ::recv(fd, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) fail("the program closed the connection (it has ended)");
    buffer.append(buf, size_t(n));
  }

  // The next frame; waiting at most TIMEOUT ms before the first byte (-1: forever), with
  // std::nullopt on timeout.
  std::optional<RawFrame> next(int timeout, const std::string& id) {
    while (true) {
      std::string error;
      std::optional<RawFrame> f = takeFrame(buffer, error);
      if (!error.empty()) fail("the server sent " + error);
      if (f) {
        if (!isServerFrame(uint8_t(f->type))) fail("the server sent a frame of unknown type");
        if (f->type == Tag::Refusal) {
          FrameReader r(f->type, f->body);
          std::optional<std::string> why = r.field();
          fail("the server closed the connection: " + (why ? *why : std::string("(no reason)")));
        }
        return f;
      }
      if (!waitReadable(timeout, id)) return std::nullopt;
      receive();
    }
  }

  // Reads request ID's frames up to its Done, each (after its id) to ON_FRAME, and returns the
  // forms Done counts; a Failure is thrown then. When the request has not started after
  // WAITING_AFTER seconds (< 0: never), calls ON_WAITING once. Late frames of earlier requests
  // are skipped.
  std::size_t await(const std::string& id, double waitingAfter, const std::function<void()>& onWaiting,
                    const std::function<void(Tag, FrameReader&)>& onFrame) {
    std::optional<Error> failure;
    bool started = waitingAfter < 0;
    auto sent = Clock::now();
    while (true) {
      int timeout = -1;
      if (!started) {
        auto left = std::chrono::duration<double>(waitingAfter) - (Clock::now() - sent);
        timeout = std::max(0, int(std::chrono::duration_cast<std::chrono::milliseconds>(left).count()));
      }
      std::optional<RawFrame> f = next(timeout, id);
      if (!f) {
        started = true;   // say it once
        onWaiting();
        continue;
      }
      FrameReader r(f->type, f->body);
      std::optional<std::string> fid = r.field();
      if (!fid) malformed();
      if (*fid != id) continue;
      if (f->type == Tag::Started) {
        started = true;
      } else if (f->type == Tag::Failure) {
        std::optional<std::string> kind = r.field(), message = r.field();
        if (!kind || !message) malformed();
        failure.emplace(*kind, *message, std::vector<Value>{}, r.rest());
      } else if (f->type == Tag::Done) {
        std::optional<int64_t> forms = r.number();
        if (!forms || *forms < 0) malformed();
        if (failure) throw *failure;
        return std::size_t(*forms);
      } else {
        onFrame(f->type, r);
      }
    }
  }

  std::string send(Tag type, std::initializer_list<std::string_view> fields) {
    std::string id = std::to_string(nextId++);
    FrameWriter w(type);
    w.field(id);
    for (std::string_view f : fields) w.field(f);
    if (!writeAll(fd, w.finish())) fail("the program closed the connection (it has ended)");
    return id;
  }
};

namespace {

MimeBundle toBundle(WireBundle&& b) {
  MimeBundle out;
  for (WireRepresentation& r : b)
    out.push_back(Representation{std::move(r.mimeType), std::move(r.data), r.binary, r.width, r.height});
  return out;
}

}  // namespace

AttachClient::AttachClient(const std::string& socketPath, double timeoutSeconds) : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.path = socketPath;
  sockaddr_un a{};
  if (socketPath.empty() || socketPath.size() >= sizeof a.sun_path) s.fail("not a usable socket path (too long)");
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, socketPath.c_str(), socketPath.size() + 1);
  s.fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s.fd < 0 || ::pipe2(s.wake, O_CLOEXEC | O_NONBLOCK) != 0) s.fail(std::string("cannot make a socket: ") + std::strerror(errno));
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int e = errno;
    if (e == ENOENT) s.fail("no such socket: start the program with purple --listen SOCKET, or call (serve-repl SOCKET) in it");
    if (e == ECONNREFUSED) s.fail("nothing listens there: the program that served it has ended");
    s.fail(std::string("cannot connect: ") + std::strerror(e));
  }
  // Only a program of this user gets this user's code: a socket another user put at the path
  // (in /tmp, say) is refused here, as the server refuses other users' clients.
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(s.fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != ::geteuid())
    s.fail("refused: the program serving it runs as uid " + std::to_string(peer.uid) + ", not as you (uid " +
           std::to_string(::geteuid()) + ")");
  // A server that refuses has written why and closed, perhaps before the greeting went out:
  // what it wrote is read below whether or not this write succeeded.
  bool greeted = writeAll(s.fd, kMagic);
  int timeout = int(timeoutSeconds * 1000);
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout);
  // The magic, then the banner. A server that refuses answers with a line of text instead.
  while (s.buffer.size() < kMagic.size() || s.buffer.compare(0, kMagic.size(), kMagic) != 0) {
    size_t k = std::min(s.buffer.size(), kMagic.size());
    if (s.buffer.compare(0, k, kMagic.substr(0, k)) != 0) break;
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0 || !s.waitReadable(left, "")) s.fail("the server did not answer");
    char buf[4096];
    ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (s.buffer.empty()) s.fail(greeted ? "the server closed the connection without a word" : "the program closed the connection");
      break;
    }
    s.buffer.append(buf, size_t(n));
  }
  if (s.buffer.compare(0, kMagic.size(), kMagic) != 0) {
    // Whatever the refusal said (read to its end of line or 1 KB).
    std::string text = s.buffer.substr(0, s.buffer.find('\n'));
    if (text.size() > 1024) text.resize(1024);
    if (text.rfind("purple: ", 0) == 0) text = text.substr(8);
    s.fail(text.empty() ? "the server refused the connection" : text);
  }
  s.buffer.erase(0, kMagic.size());
  std::optional<RawFrame> banner = s.next(std::max(1, timeout), "");
  if (!banner) s.fail("the server did not answer");
  FrameReader r(banner->type, banner->body);
  std::optional<std::string> version = r.field();
  std::optional<int64_t> pid = r.number();
  std::optional<std::string> program = r.field();
  if (banner->type != Tag::Banner || !version || !pid || !program) s.fail("the server's banner is malformed");
  s.version = *version;
  s.pid = *pid;
  s.program = *program;
}

AttachClient::~AttachClient() = default;

const std::string& AttachClient::versionLine() const { return s_->version; }
int64_t AttachClient::pid() const { return s_->pid; }
const std::string& AttachClient::program() const { return s_->program; }
const std::string& AttachClient::socketPath() const { return s_->path; }

void AttachClient::interrupt() {
  s_->interruptWanted.store(true);
  char b = 'i';
  if (::write(s_->wake[1], &b, 1) < 0) {
  }
}

std::size_t AttachClient::eval(std::string_view code, const Handlers& h, std::string_view sourceName, bool liveDisplays) {
  State& s = *s_;
  s.interruptWanted.store(false);
  std::string id = s.send(Tag::Eval, {code, sourceName, liveDisplays ? "1" : "0"});
  return s.await(id, h.waiting ? h.waitingAfter : -1, h.waiting, [&](Tag type, FrameReader& r) {
    switch (type) {
      case Tag::Out:
      case Tag::Err: {
        std::optional<std::string> text = r.field();
        if (!text) s.malformed();
        const OutputCallback& sink = type == Tag::Out ? h.out : h.err;
        if (sink) sink(*text);
        break;
      }
      case Tag::Display: {
        std::optional<std::string> displayId = r.field(), update = r.field();
        std::optional<WireBundle> b = r.bundle();
        if (!displayId || !update || !b) s.malformed();
        if (h.display) h.display(toBundle(std::move(*b)), *displayId, *update == "1");
        break;
      }
      case Tag::Result: {
        std::optional<int64_t> form = r.number();
        std::optional<WireBundle> b = r.bundle();
        if (!form || !b || *form < 0) s.malformed();
        if (h.result) h.result(toBundle(std::move(*b)), std::size_t(*form));
        break;
      }
      default:
        break;
    }
  });
}

Completions AttachClient::complete(std::string_view code, std::size_t cursor) {
  State& s = *s_;
  std::string id = s.send(Tag::Complete, {code, std::to_string(std::min(cursor, code.size()))});
  Completions out;
  s.await(id, -1, nullptr, [&](Tag type, FrameReader& r) {
    if (type != Tag::Completions) return;
    std::optional<int64_t> begin = r.number(), end = r.number();
    if (!begin || !end) s.malformed();
    out.begin = size_t(std::max<int64_t>(0, *begin));
    out.end = size_t(std::max<int64_t>(0, *end));
    out.matches = r.rest();
  });
  return out;
}

std::optional<std::string> AttachClient::documentation(std::string_view name) {
  State& s = *s_;
  std::string id = s.send(Tag::Document, {name});
  std::optional<std::string> out;
  s.await(id, -1, nullptr, [&](Tag type, FrameReader& r) {
    if (type != Tag::Documentation) return;
    std::optional<std::string> found = r.field(), text = r.field();
    if (!found || !text) s.malformed();
    if (*found == "1") out = *text;
  });
  return out;
}

}  // namespace purple::embed
