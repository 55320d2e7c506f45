#include "kernel/purple_kernel.hpp"
#include "kernel/utf8.hpp"

#include <xeus/xhelper.hpp>


namespace purple::kernel {

namespace {

// The traceback a notebook shows for an error: the report `purple` prints, line by line, with
// the first line in red as Jupyter's own kernels do.
nl::json tracebackOf(const Error& e) {
  nl::json lines = nl::json::array();
  lines.push_back("\x1b[0;31mError\x1b[0m: " + std::string(e.what()));
  for (const std::string& frame : e.backtrace()) lines.push_back(frame);
  return lines;
}

// The execute_reply of an error, built here: xeus 2.4's create_error_reply puts its ename in
// "evalue" and its evalue in "ename".
nl::json errorReply(const std::string& ename, const std::string& evalue, const nl::json& traceback) {
  nl::json reply;
  reply["status"] = "error";
  reply["ename"] = ename;
  reply["evalue"] = evalue;
  reply["traceback"] = traceback;
  return reply;
}

bool blank(const std::string& code) { return code.find_first_not_of(" \t\r\n") == std::string::npos; }

std::string trimmed(const std::string& code) {
  size_t begin = code.find_first_not_of(" \t\r\n"), end = code.find_last_not_of(" \t\r\n");
  return begin == std::string::npos ? std::string() : code.substr(begin, end - begin + 1);
}

std::string base64(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += digits[n >> 18];
    out += digits[(n >> 12) & 63];
    out += digits[(n >> 6) & 63];
    out += digits[n & 63];
  }
  if (i + 1 == bytes.size()) {
    uint32_t n = uint8_t(bytes[i]) << 16;
    out += digits[n >> 18];
    out += digits[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += digits[n >> 18];
    out += digits[(n >> 12) & 63];
    out += digits[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

// A MIME bundle as Jupyter sends it: binary formats in base64, picture sizes in the metadata.
void bundleToJson(const MimeBundle& bundle, nl::json& data, nl::json& metadata) {
  data = nl::json::object();
  metadata = nl::json::object();
  for (const Representation& r : bundle) {
    if (data.contains(r.mimeType)) continue;
    data[r.mimeType] = r.binary ? base64(r.data) : r.data;
    nl::json size = nl::json::object();
    if (r.width > 0) size["width"] = r.width;
    if (r.height > 0) size["height"] = r.height;
    if (!size.empty()) metadata[r.mimeType] = size;
  }
  if (!data.contains("text/plain")) data["text/plain"] = "";
}

}  // namespace

PurpleKernel::PurpleKernel(std::unique_ptr<Backend> backend) : backend_(std::move(backend)) {
  xeus::register_interpreter(this);
  backend_->setDisplay(
      [this](const MimeBundle& bundle, const std::string& id, bool update) { display(bundle, id, update); });
}

void PurpleKernel::flushStreams() {
  if (stdout_) stdout_->flush();
  if (stderr_) stderr_->flush();
}

void PurpleKernel::display(const MimeBundle& bundle, const std::string& displayId, bool update) {
  if (silent_) return;
  flushStreams();
  nl::json data, metadata;
  bundleToJson(bundle, data, metadata);
  nl::json transient = nl::json::object();
  if (!displayId.empty()) transient["display_id"] = displayId;
  if (update) update_display_data(std::move(data), std::move(metadata), std::move(transient));
  else display_data(std::move(data), std::move(metadata), std::move(transient));
}

void PurpleKernel::interruptIfRunning() {
  if (executing_.load()) backend_->interrupt();
}

void PurpleKernel::configure_impl() {
  // JupyterLab and Notebook open a comm to this target whenever a notebook opens, to ask for the
  // kernel's widget protocol; an unknown target is logged as an error by the server. Purple has no
  // widgets: the comm is accepted and closed at once, which front ends take as "none here".
  comm_manager().register_comm_target("jupyter.widget.version", [](xeus::xcomm&& comm, xeus::xmessage) {
    comm.close(nl::json::object(), nl::json::object(), xeus::buffer_sequence());
  });
}

nl::json PurpleKernel::evaluateUserExpressions(const nl::json& expressions) {
  nl::json out = nl::json::object();
  if (!expressions.is_object()) return out;
  for (auto it = expressions.begin(); it != expressions.end(); ++it) {
    nl::json entry;
    try {
      nl::json data, metadata;
      bundleToJson(backend_->evaluate(it.value().get<std::string>()), data, metadata);
      entry = {{"status", "ok"}, {"data", data}, {"metadata", metadata}};
    } catch (const Error& e) {
      entry = {{"status", "error"}, {"ename", e.kind()}, {"evalue", e.what()}, {"traceback", tracebackOf(e)}};
    } catch (const std::exception& e) {
      entry = {{"status", "error"}, {"ename", "error"}, {"evalue", e.what()}, {"traceback", nl::json::array()}};
    }
    out[it.key()] = entry;
  }
  return out;
}

#if XEUS_VERSION_MAJOR >= 5
void PurpleKernel::execute_request_impl(send_reply_callback cb, int executionCount, const std::string& code,
                                        xeus::execute_request_config config, nl::json userExpressions) {
  cb(execute(executionCount, code, config.silent, std::move(userExpressions)));
}
#else
nl::json PurpleKernel::execute_request_impl(int executionCount, const std::string& code, bool silent, bool,
                                            nl::json userExpressions, bool) {
  return execute(executionCount, code, silent, std::move(userExpressions));
}
#endif

nl::json PurpleKernel::execute(int executionCount, const std::string& code, bool silent, nl::json userExpressions) {
  if (blank(code)) return xeus::create_successful_reply(nl::json::array(), evaluateUserExpressions(userExpressions));
  if (backend_->quitShutsDown() && (trimmed(code) == "quit" || trimmed(code) == "exit")) {
    // As IPython's quit: the reply asks the front end to leave and shut the kernel down.
    nl::json askExit = {{"source", "ask_exit"}, {"keepkernel", false}};
    return xeus::create_successful_reply(nl::json::array({askExit}), nl::json::object());
  }
  auto publish = [this, silent](const std::string& name, const std::string& text) {
    if (!silent) publish_stream(name, text);
  };
  StreamPublisher out("stdout", publish), err("stderr", publish);
  stdout_ = &out;
  stderr_ = &err;
  silent_ = silent;
  nl::json reply;
  std::string sourceName = "In[" + std::to_string(executionCount) + "]";
  executing_.store(true);
  try {
    try {
      std::optional<MimeBundle> last = backend_->execute(
          code, sourceName, [&](std::string_view s) { out.write(s); }, [&](std::string_view s) { err.write(s); });
      out.flush();
      err.flush();
      if (!silent && last) {
        nl::json data, metadata;
        bundleToJson(*last, data, metadata);
        publish_execution_result(executionCount, std::move(data), std::move(metadata));
      }
      reply = xeus::create_successful_reply(nl::json::array(), evaluateUserExpressions(userExpressions));
    } catch (const Exit& e) {
      out.flush();
      err.flush();
      std::string message = "exit called with code " + std::to_string(e.code()) +
                            "; the kernel goes on (restart it from the notebook's Kernel menu)";
      nl::json trace = nl::json::array({"\x1b[0;31mExit\x1b[0m: " + message});
      if (!silent) publish_execution_error("exit", message, trace);
      reply = errorReply("exit", message, trace);
    } catch (const Error& e) {
      out.flush();
      err.flush();
      nl::json trace = tracebackOf(e);
      if (!silent) publish_execution_error(e.kind(), e.what(), trace);
      reply = errorReply(e.kind(), e.what(), trace);
    }
  } catch (const std::exception& e) {
    // Only the kernel's own machinery can fail here (a notebook message it could not send).
    reply = errorReply("kernel-error", e.what(), nl::json::array({e.what()}));
  }
  executing_.store(false);
  backend_->settle();   // an interrupt that came as the cell ended
  stdout_ = stderr_ = nullptr;
  silent_ = false;
  return reply;
}

nl::json PurpleKernel::complete_request_impl(const std::string& code, int cursorPos) {
  std::size_t cursor = byteOffset(code, std::size_t(std::max(cursorPos, 0)));
  try {
    Completions c = backend_->complete(code, cursor);
    return xeus::create_complete_reply(c.matches, int(codePoints(code, c.begin)), int(codePoints(code, c.end)));
  } catch (const Error&) {
    return xeus::create_complete_reply(nl::json::array(), cursorPos, cursorPos);
  }
}

nl::json PurpleKernel::inspect_request_impl(const std::string& code, int cursorPos, int) {
  std::size_t cursor = byteOffset(code, std::size_t(std::max(cursorPos, 0)));
  std::string name = Interpreter::identifierAt(code, cursor);
  try {
    std::optional<std::string> doc = backend_->documentation(name);
    if (doc) return xeus::create_inspect_reply(true, {{"text/plain", *doc}});
  } catch (const Error&) {
  }
  return xeus::create_inspect_reply(false);
}

nl::json PurpleKernel::is_complete_request_impl(const std::string& code) {
  InputCheck check = Interpreter::checkInput(code);
  switch (check.status) {
    case InputStatus::complete: return xeus::create_is_complete_reply("complete");
    case InputStatus::invalid: return xeus::create_is_complete_reply("invalid");
    case InputStatus::incomplete: break;
  }
  return xeus::create_is_complete_reply("incomplete", std::string(std::size_t(2 * check.openLists), ' '));
}

nl::json PurpleKernel::kernel_info_request_impl() {
  nl::json info;
  info["status"] = "ok";
  info["protocol_version"] = "5.3";
  info["implementation"] = "purple";
  info["implementation_version"] = PURPLE_VERSION;
  info["banner"] = versionLine() + "\n" + backend_->describe() + " (help 'name) shows documentation; Shift-Tab too.";
  // Purple is a Scheme: notebooks highlight it with CodeMirror's and Pygments' Scheme modes.
  info["language_info"] = {{"name", "scheme"},
                           {"version", "R7RS"},
                           {"mimetype", "text/x-scheme"},
                           {"file_extension", ".purple"},
                           {"pygments_lexer", "scheme"},
                           {"codemirror_mode", "scheme"}};
  info["help_links"] = nl::json::array();
  return info;
}

void PurpleKernel::shutdown_request_impl() {
  try {
    backend_->flush();
  } catch (const Error&) {
  }
}

}  // namespace purple::kernel
