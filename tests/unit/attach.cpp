// The REPL server and its client through the embedding API, in one process as a host would use
// them (Interpreter::serveRepl, AttachClient), and the wire format's reader on broken frames.
#include <purple/attach.hpp>
#include <purple/purple.hpp>

#include "interp/language/attach_wire.hpp"
#include "tests/unit/doctest_after_torch.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string tempSocket() {
  char dir[] = "/tmp/purple-attach-unit-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  return std::string(dir) + "/s.sock";
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("attach: a client's forms run in the host's loop and change what it does") {
  purple::Interpreter interp;
  std::string path = tempSocket();
  interp.serveRepl(path);
  interp.eval("(define stop #f) (define turns 0) (define (my-step) 1)");
  std::string sum, completed, failure, interrupted, doc;
  std::thread client([&] {
    try {
      purple::AttachClient c(path);
      purple::AttachClient::Handlers h;
      h.result = [&](const purple::MimeBundle& b, std::size_t) { sum = b.at(0).data; };
      c.eval("(+ 1 2)", h);
      completed = c.complete("(my-st", 6).matches.at(0);
      doc = c.documentation("car").value_or("");
      try {
        c.eval("(car 1)", h);
      } catch (const purple::Error& e) {
        failure = e.kind() + ": " + e.message();
      }
      std::thread stopper([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        c.interrupt();
      });
      try {
        c.eval("(let loop () (loop))", h);
      } catch (const purple::Error& e) {
        interrupted = e.kind();
      }
      stopper.join();
      c.eval("(define (my-step) 10)", h);
      c.eval("(set! stop #t)", h);
    } catch (const purple::Error& e) {
      failure = std::string("client: ") + e.what();
      interp.interrupt();
    }
  });
  interp.eval("(let loop () (unless stop (set! turns (+ turns (my-step))) (loop)))");
  client.join();
  CHECK(sum == "3");
  CHECK(completed == "my-step");
  CHECK(doc.find("pair") != std::string::npos);
  CHECK(failure.rfind("type-error: car", 0) == 0);
  CHECK(interrupted == "interrupt");
  CHECK(interp.get<int64_t>("turns") > 0);
  CHECK(interp.eval("(my-step)").to<int64_t>() == 10);
  interp.stopServingRepl();
  CHECK_FALSE(exists(path));
  ::rmdir(path.substr(0, path.rfind('/')).c_str());
}

TEST_CASE("attach: an idle host runs requests in serveClients") {
  purple::Interpreter interp;
  std::string path = tempSocket();
  interp.serveRepl(path);
  std::atomic<bool> done{false};
  std::string answer;
  std::thread client([&] {
    purple::AttachClient c(path);
    purple::AttachClient::Handlers h;
    h.result = [&](const purple::MimeBundle& b, std::size_t) { answer = b.at(0).data; };
    c.eval("(define from-client 'yes) from-client", h);
    done = true;
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done && std::chrono::steady_clock::now() < deadline) interp.serveClients(0.1);
  client.join();
  CHECK(answer == "yes");
  CHECK(interp.get("from-client").repr() == "yes");
  CHECK_THROWS_AS(purple::AttachClient(path + ".missing"), purple::Error);
  interp.stopServingRepl();
  ::rmdir(path.substr(0, path.rfind('/')).c_str());
}

TEST_CASE("attach: the wire reader refuses broken frames") {
  using namespace purple::attach;
  std::string frame = FrameWriter(Tag::Eval).field("1").field("(+ 1 2)").field(int64_t(42)).finish();
  std::string buffer = frame.substr(0, frame.size() - 1), error;
  CHECK_FALSE(takeFrame(buffer, error));   // not whole yet
  CHECK(error.empty());
  buffer = frame;
  std::optional<RawFrame> f = takeFrame(buffer, error);
  REQUIRE(f);
  CHECK(buffer.empty());
  FrameReader r(f->type, f->body);
  CHECK(r.field() == std::optional<std::string>("1"));
  CHECK(r.field() == std::optional<std::string>("(+ 1 2)"));
  CHECK(r.number() == std::optional<int64_t>(42));
  CHECK(r.atEnd());
  CHECK_FALSE(r.field());   // past the end
  CHECK_FALSE(r.ok());
  FrameReader bad(Tag::Eval, std::string("\x00\x00\x00\x09" "abc", 7));   // a field longer than the frame
  CHECK_FALSE(bad.field());
  FrameReader notNumber(Tag::Eval, std::string("\x00\x00\x00\x02" "4x", 6));
  CHECK_FALSE(notNumber.number());
  buffer = std::string("\xff\xff\xff\xff" "E", 5);
  CHECK_FALSE(takeFrame(buffer, error));
  CHECK(error.find("at most") != std::string::npos);
  buffer = std::string("\x00\x00\x00\x00", 4);
  error.clear();
  CHECK_FALSE(takeFrame(buffer, error));
  CHECK(error == "an empty frame");
}
