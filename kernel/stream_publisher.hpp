// One output stream of a request (stdout or stderr), sent to the notebook as `stream` messages.
// Whole lines go out as soon as they are written; a partial line waits for its newline, a
// flush (flush-output), 8 KB more text, or the end of the request. So output appears while a
// cell runs, without one message per `display` call.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace purple::kernel {

class StreamPublisher {
 public:
  using Publish = std::function<void(const std::string& name, const std::string& text)>;
  StreamPublisher(std::string name, Publish publish) : name_(std::move(name)), publish_(std::move(publish)) {}
  ~StreamPublisher() { flush(); }
  StreamPublisher(const StreamPublisher&) = delete;
  StreamPublisher& operator=(const StreamPublisher&) = delete;

  // What an OutputCallback receives: text, or "" for a flush.
  void write(std::string_view text) {
    if (text.empty()) {
      flush();
      return;
    }
    pending_.append(text);
    if (text.find_first_of("\n\r") != std::string_view::npos || pending_.size() >= 8192) flush();
  }
  void flush() {
    if (pending_.empty()) return;
    std::string text;
    text.swap(pending_);
    publish_(name_, text);
  }

 private:
  std::string name_;
  Publish publish_;
  std::string pending_;
};

}  // namespace purple::kernel
