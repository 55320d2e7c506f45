#include "repl/attach.hpp"
#include "repl/figures.hpp"
#include "repl/repl.hpp"

#include <purple/attach.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace purple::repl {

namespace {

const char* kAttachUsage =
    "usage: purple --attach SOCKET              an interactive REPL inside the program serving SOCKET\n"
    "       purple --attach SOCKET -e EXPR      evaluate EXPR there and print its values\n"
    "       purple --attach DIR --all -e EXPR   the same on every rank of a job (purple-run --listen-dir DIR)\n";

void writeOut(std::string_view text, FILE* f) {
  std::fwrite(text.data(), 1, text.size(), f);
  std::fflush(f);
}

// Output, values and pictures as the local REPL shows them.
AttachClient::Handlers terminalHandlers() {
  AttachClient::Handlers h;
  h.out = [](std::string_view s) { writeOut(s, stdout); };
  h.err = [](std::string_view s) { writeOut(s, stderr); };
  h.result = [](const MimeBundle& b, std::size_t) { showOnTerminal(b); };
  h.display = [](const MimeBundle& b, const std::string&, bool) { showOnTerminal(b); };
  h.waiting = [] {
    writeOut("purple: waiting for the program to reach a safe point (it is inside a long operation or a blocking "
             "read); Ctrl-C gives up\n",
             stderr);
  };
  return h;
}

// A program attached to: the REPL's loop evaluates there.
class RemoteSession final : public Session {
 public:
  explicit RemoteSession(AttachClient& client) : client_(client) {}
  void evaluate(const std::string& text, const std::string& sourceName) override {
    try {
      client_.eval(text, terminalHandlers(), sourceName == "<repl>" ? "<attach>" : sourceName);
    } catch (const Error& e) {
      if (e.kind() == "attach-error") {
        writeOut("purple: " + std::string(e.what()) + "\n", stderr);
        throw Exit(1);
      }
      writeOut(e.report() + "\n", stderr);
    }
  }
  std::vector<std::string> complete(const std::string& word) override {
    return client_.complete(word, word.size()).matches;
  }
  void interrupt() override { client_.interrupt(); }

 private:
  AttachClient& client_;
};

AttachClient* gClient = nullptr;
std::vector<AttachClient*> gClients;
void interruptClients(int) {
  if (gClient) gClient->interrupt();
  for (AttachClient* c : gClients) c->interrupt();
}

void onCtrlC(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

// `purple --attach SOCKET -e EXPR`: 0 when it ran, 1 when it failed there or could not run.
int evalOnce(const std::string& socket, const std::string& expr) {
  try {
    AttachClient client(socket);
    gClient = &client;
    onCtrlC(interruptClients);
    try {
      client.eval(expr, terminalHandlers(), "<command line>");
    } catch (const Error& e) {
      gClient = nullptr;
      if (e.kind() == "attach-error") throw;
      writeOut(e.report() + "\n", stderr);
      return 1;
    }
    gClient = nullptr;
    return 0;
  } catch (const Error& e) {
    gClient = nullptr;
    writeOut("purple: " + std::string(e.what()) + "\n", stderr);
    return 1;
  }
}

// DIR/rank-N.sock, by N.
std::vector<std::pair<int, std::string>> rankSockets(const std::string& dir) {
  std::vector<std::pair<int, std::string>> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    const std::string prefix = "rank-", suffix = ".sock";
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace_back(std::stoi(digits), dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Prefixes every line of TEXT (the last one may be unfinished) with PREFIX.
std::string prefixed(const std::string& prefix, const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    out += prefix + text.substr(start, end - start);
    start = end;
  }
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

// `purple --attach DIR --all -e EXPR`: EXPR on every rank at once (so a collective in it meets
// every rank), then each rank's output and values, by rank, each line "[rankN]: ...".
int evalOnAll(const std::string& dir, const std::string& expr) {
  std::vector<std::pair<int, std::string>> sockets = rankSockets(dir);
  if (sockets.empty()) {
    writeOut("purple: no rank-N.sock in " + dir + " (start the job with purple-run --listen-dir " + dir + ")\n", stderr);
    return 1;
  }
  struct Answer {
    std::string out, err;
    bool ok = true;
  };
  std::vector<Answer> answers(sockets.size());
  std::vector<std::unique_ptr<AttachClient>> clients(sockets.size());
  for (size_t k = 0; k < sockets.size(); k++) {
    try {
      clients[k] = std::make_unique<AttachClient>(sockets[k].second);
      gClients.push_back(clients[k].get());
    } catch (const Error& e) {
      answers[k].err = std::string("purple: ") + e.what() + "\n";
      answers[k].ok = false;
    }
  }
  onCtrlC(interruptClients);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < sockets.size(); k++) {
    if (!clients[k]) continue;
    threads.emplace_back([&, k] {
      Answer& a = answers[k];
      AttachClient::Handlers h;
      h.out = [&a](std::string_view s) { a.out.append(s.data(), s.size()); };
      h.err = [&a](std::string_view s) { a.err.append(s.data(), s.size()); };
      auto text = [&a](const MimeBundle& b) {
        for (const Representation& r : b)
          if (r.mimeType == "text/plain") a.out += r.data + "\n";
      };
      h.result = [text](const MimeBundle& b, std::size_t) { text(b); };
      h.display = [text](const MimeBundle& b, const std::string&, bool) { text(b); };
      try {
        clients[k]->eval(expr, h, "<command line>");
      } catch (const Error& e) {
        a.err += (e.kind() == "attach-error" ? "purple: " + std::string(e.what()) : e.report()) + "\n";
        a.ok = false;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  gClients.clear();
  int status = 0;
  for (size_t k = 0; k < sockets.size(); k++) {
    std::string prefix = "[rank" + std::to_string(sockets[k].first) + "]: ";
    writeOut(prefixed(prefix, answers[k].out), stdout);
    writeOut(prefixed(prefix, answers[k].err), stderr);
    if (!answers[k].ok) status = 1;
  }
  return status;
}

bool isDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int runAttach(const std::vector<std::string>& args) {
  std::string target, expr;
  bool all = false, hasExpr = false;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--all") {
      all = true;
    } else if (a == "-e" && i + 1 < args.size()) {
      expr = args[++i];
      hasExpr = true;
    } else if (a == "--help" || a == "-h") {
      std::cout << kAttachUsage;
      return 0;
    } else if (target.empty() && !(a.size() > 1 && a[0] == '-')) {
      target = a;
    } else {
      std::cerr << "purple: --attach: unexpected argument " << a << "\n" << kAttachUsage;
      return 2;
    }
  }
  if (target.empty()) {
    std::cerr << "purple: --attach needs a socket\n" << kAttachUsage;
    return 2;
  }
  if (all) {
    if (!hasExpr) {
      std::cerr << "purple: --attach DIR --all needs -e EXPR\n" << kAttachUsage;
      return 2;
    }
    return evalOnAll(target, expr);
  }
  if (isDirectory(target)) {
    std::cerr << "purple: " << target << " is a directory: give --all -e EXPR for every rank, or "
              << target << "/rank-N.sock for one\n";
    return 2;
  }
  if (hasExpr) return evalOnce(target, expr);
  try {
    AttachClient client(target);
    RemoteSession session(client);
    std::string banner = "Attached to " + client.program() + " (pid " + std::to_string(client.pid()) + "), " +
                         client.versionLine() +
                         "\nForms run inside that program at its next safe point; Ctrl-C stops them, Ctrl-D "
                         "leaves (the program goes on).";
    return runRepl(session, banner);
  } catch (const Error& e) {
    std::cerr << "purple: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace purple::repl
