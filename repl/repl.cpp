#include "repl/repl.hpp"
#include "repl/figures.hpp"
#include <editline/readline.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <poll.h>
#include <unistd.h>
#include <vector>

namespace purple::repl {

namespace {
Session* gSession = nullptr;
volatile std::sig_atomic_t gEvaluating = 0;
volatile std::sig_atomic_t gInterruptedAtPrompt = 0;

void onInterrupt(int) {
  // Only flags: the evaluator notices at its next safe point, the line reader at its next read.
  if (gEvaluating && gSession) gSession->interrupt();
  else gInterruptedAtPrompt = 1;
}

// libedit's character source. SIGINT is installed without SA_RESTART, so a Ctrl-C at the prompt
// ends the blocking read with EINTR: the reader echoes ^C and ends the line, which runRepl then
// drops. libedit's own signal handling is off (rl_catch_signals = 0): it would take the line
// down with it (readline returns NULL, as at end of input). A session with idle work (a
// --listen REPL serving attached clients) gets it every 100 ms while no key comes.
int readCharInterruptibly(FILE* in) {
  while (true) {
    if (gInterruptedAtPrompt) {
      std::fputs("^C", stdout);
      std::fflush(stdout);
      return '\n';
    }
    if (gSession && gSession->wantsIdle()) {
      pollfd p{fileno(in), POLLIN, 0};
      int ready = ::poll(&p, 1, 100);
      if (ready == 0) {
        gSession->idle();
        continue;
      }
      if (ready < 0) continue;   // EINTR: the flag above says why
    }
    unsigned char c;
    ssize_t n = read(fileno(in), &c, 1);
    if (n == 1) return c;
    if (n == 0) return EOF;
    if (errno != EINTR) return EOF;
  }
}

// Each value as the display protocol shows it on a terminal: its text, and pictures as files.
void printResults(Interpreter& interp, const std::vector<Value>& results) {
  for (const Value& v : results) {
    MimeBundle bundle;
    try {
      bundle = interp.represent(v);
    } catch (const Error& e) {
      // A broken define-representation must not hide the value.
      bundle = {Representation{"text/plain", v.repr()}};
    }
    showOnTerminal(bundle);
  }
}

std::vector<std::string> gCompletions;

char* completionGenerator(const char* text, int state) {
  static size_t index;
  if (state == 0) {
    index = 0;
    try {
      gCompletions = gSession->complete(text);
    } catch (const Error&) {
      gCompletions.clear();
    }
  }
  if (index < gCompletions.size()) return strdup(gCompletions[index++].c_str());
  return nullptr;
}

char** completeWord(const char* text, int, int) {
  rl_attempted_completion_over = 1;
  return rl_completion_matches(text, completionGenerator);
}

std::string historyPath() {
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.purple_history" : std::string();
}

// Evaluates one complete input; Ctrl-C during it interrupts the evaluation.
void evalInput(Session& session, const std::string& text, const std::string& sourceName) {
  gEvaluating = 1;
  try {
    session.evaluate(text, sourceName);
  } catch (...) {
    gEvaluating = 0;
    throw;
  }
  gEvaluating = 0;
}

// This process's interpreter.
class LocalSession final : public Session {
 public:
  LocalSession(Interpreter& interp, bool serveClients) : interp_(interp), serveClients_(serveClients) {}
  void evaluate(const std::string& text, const std::string& sourceName) override {
    try {
      evalAndPrint(interp_, text, sourceName, true);
    } catch (...) {
      interp_.cancelInterrupt();
      throw;
    }
    interp_.cancelInterrupt();   // a Ctrl-C that came as the evaluation ended
  }
  std::vector<std::string> complete(const std::string& word) override {
    return interp_.complete(word, word.size()).matches;
  }
  void interrupt() override { interp_.interrupt(); }
  bool wantsIdle() const override { return serveClients_; }
  void idle() override {
    try {
      interp_.serveClients(0);
    } catch (const Error&) {
    }
  }

 private:
  Interpreter& interp_;
  bool serveClients_;
};
}  // namespace

void reportError(Interpreter& interp, const Error& e) {
  try {
    interp.flush();
  } catch (const Error&) {
  }
  std::fflush(stdout);
  std::string text = e.report() + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

bool evalAndPrint(Interpreter& interp, const std::string& text, const std::string& sourceName, bool printValues) {
  try {
    interp.evalForms(text, sourceName, [&](const std::vector<Value>& results, const FormSource&) {
      if (printValues) printResults(interp, results);
      std::fflush(stdout);
    });
    interp.flush();
    return true;
  } catch (const Exit&) {
    throw;
  } catch (const Error& e) {
    reportError(interp, e);
    return false;
  }
}

int runRepl(Interpreter& interp, bool serveClients) {
  LocalSession session(interp, serveClients);
  return runRepl(session, versionLine() + "\nType (help 'name) for documentation, Ctrl-D to leave.");
}

int runRepl(Session& session, const std::string& banner) {
  gSession = &session;
  struct sigaction sa {};
  sa.sa_handler = onInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;   // no SA_RESTART: a read at the prompt must end
  sigaction(SIGINT, &sa, nullptr);
  try {
    if (!isatty(STDIN_FILENO)) {
      // Piped input: read forms as they complete, print values, keep going after errors.
      std::string buffer, line;
      while (std::getline(std::cin, line)) {
        buffer += line + "\n";
        if (Interpreter::checkInput(buffer).status == InputStatus::incomplete) continue;
        evalInput(session, buffer, "<stdin>");
        buffer.clear();
      }
      if (!buffer.empty()) evalInput(session, buffer, "<stdin>");
      return 0;
    }
    std::cout << banner << "\n" << std::flush;
    rl_catch_signals = 0;
    rl_getc_function = readCharInterruptibly;
    rl_attempted_completion_function = completeWord;
    rl_basic_word_break_characters = const_cast<char*>(" \t\n()[]'`,\"");
    std::string hist = historyPath();
    if (!hist.empty()) read_history(hist.c_str());
    std::string buffer;
    while (true) {
      gInterruptedAtPrompt = 0;
      char* raw = readline(buffer.empty() ? "purple> " : "...     ");
      if (gInterruptedAtPrompt) {
        // Ctrl-C: the line (and any unfinished form above it) is dropped; a fresh prompt.
        std::free(raw);
        buffer.clear();
        continue;
      }
      if (!raw) {
        std::cout << "\n";
        break;
      }
      std::string line(raw);
      std::free(raw);
      if (buffer.empty() && line.find_first_not_of(" \t") == std::string::npos) continue;
      buffer += line + "\n";
      if (Interpreter::checkInput(buffer).status == InputStatus::incomplete) continue;
      std::string entry = buffer;
      while (!entry.empty() && entry.back() == '\n') entry.pop_back();
      add_history(entry.c_str());
      if (!hist.empty()) write_history(hist.c_str());
      evalInput(session, buffer, "<repl>");
      buffer.clear();
    }
  } catch (const Exit& e) {
    return e.code();
  }
  return 0;
}

}  // namespace purple::repl
