// The Jupyter kernel's interpreter: each xeus request is answered by a Backend (backend.hpp):
// an interpreter of its own, or a running program attached to (serve-kernel).
#pragma once
#include "kernel/backend.hpp"
#include "kernel/stream_publisher.hpp"
#include <purple/purple.hpp>

#include <xeus/xinterpreter.hpp>

#include <atomic>
#include <memory>
#include <string>

namespace purple::kernel {

class PurpleKernel final : public xeus::xinterpreter {
 public:
  explicit PurpleKernel(std::unique_ptr<Backend> backend);
  // From the signal thread (SIGINT, Jupyter's "interrupt kernel"): stops the cell that is
  // running at its next safe point. Ignored between cells.
  void interruptIfRunning();

 private:
  void configure_impl() override;
  // xeus 5 (Debian 13) hands the reply to a callback and groups the flags in a struct; xeus 2.4
  // (Debian 12) returns it. Both run execute().
#if XEUS_VERSION_MAJOR >= 5
  void execute_request_impl(send_reply_callback cb, int execution_counter, const std::string& code,
                            xeus::execute_request_config config, nl::json user_expressions) override;
#else
  nl::json execute_request_impl(int execution_counter, const std::string& code, bool silent, bool store_history,
                                nl::json user_expressions, bool allow_stdin) override;
#endif
  nl::json execute(int executionCount, const std::string& code, bool silent, nl::json userExpressions);
  nl::json complete_request_impl(const std::string& code, int cursor_pos) override;
  nl::json inspect_request_impl(const std::string& code, int cursor_pos, int detail_level) override;
  nl::json is_complete_request_impl(const std::string& code) override;
  nl::json kernel_info_request_impl() override;
  void shutdown_request_impl() override;

  // (show x): display_data, or update_display_data for a display shown before with that id.
  void display(const MimeBundle& bundle, const std::string& displayId, bool update);
  nl::json evaluateUserExpressions(const nl::json& expressions);
  void flushStreams();

  std::unique_ptr<Backend> backend_;
  std::atomic<bool> executing_{false};
  // The running request's output streams, flushed before a display so that output keeps its order.
  StreamPublisher* stdout_ = nullptr;
  StreamPublisher* stderr_ = nullptr;
  bool silent_ = false;
};

}  // namespace purple::kernel
