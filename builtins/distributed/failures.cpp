// How a failed collective is reported. When a rank dies, its peers see only a closed TCP
// connection ("Connection closed by peer [127.0.0.1]:41234"); which rank that was, and why it
// died, only the launcher knows. purple-run writes that into the file named by
// PURPLE_RUN_FAILURE_FILE the moment it reaps the rank, and the survivors' errors quote it.
#include "builtins/distributed/comm.hpp"
#include <c10/util/Exception.h>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace purple::dist {

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool looksLikeLostPeer(const std::string& msg) {
  return contains(msg, "closed by peer") || contains(msg, "Connection reset") || contains(msg, "Broken pipe") ||
         contains(msg, "Read error") || contains(msg, "Write error") || contains(msg, "Connection refused") ||
         contains(msg, "Socket closed") || contains(msg, "ECONNRESET");
}

std::string foreignMessage(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

std::string firstLine(std::string s) {
  auto nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  return s;
}

}  // namespace

std::string launcherFailureReport(std::chrono::milliseconds wait) {
  const char* path = std::getenv("PURPLE_RUN_FAILURE_FILE");
  if (!path || !*path) return "";
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::ifstream f(path);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      std::string text = firstLine(ss.str());
      if (!text.empty()) return text;
    }
    if (std::chrono::steady_clock::now() >= deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string describeCommFailure(std::string_view who, const std::exception& e) {
  std::string raw = firstLine(foreignMessage(e));
  std::string msg = std::string(who) + ": ";
  if (looksLikeLostPeer(raw)) {
    // The launcher reaps a dead rank within milliseconds; give it a moment to say which one.
    std::string report = launcherFailureReport(std::chrono::milliseconds(2000));
    if (!report.empty())
      msg += "lost the connection to another rank: " + report + " (" + raw + ")";
    else
      msg += "lost the connection to another rank; it has probably failed or been killed (" + raw + ")";
  } else if (contains(raw, "Timed out") || contains(raw, "timed out") || contains(raw, "Timeout")) {
    msg += "timed out waiting for the other ranks (the :timeout of dist-init; a rank may be stuck or "
           "calling a different collective): " + raw;
  } else {
    msg += raw;
  }
  return msg;
}

void throwCommError(std::string_view who, const std::exception& e) {
  throwError("dist-error", describeCommFailure(who, e));
}

void rethrowCommError(std::string_view who) {
  try {
    throw;
  } catch (const PurpleException&) {
    throw;
  } catch (const std::exception& e) {
    throwCommError(who, e);
  }
}

void waitWork(const WorkPtr& work, std::string_view who) {
  try {
    work->wait();
  } catch (...) {
    rethrowCommError(who);
  }
}

}  // namespace purple::dist
