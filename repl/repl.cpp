#include "repl/repl.hpp"
#include "interp/port.hpp"
#include "interp/printer.hpp"
#include "interp/reader.hpp"
#include "interp/version.hpp"
#include <editline/readline.h>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

namespace purple {

namespace {
Interp* gReplInterp = nullptr;
volatile std::sig_atomic_t gEvaluating = 0;

void onInterrupt(int) {
  // Only sets flags: the evaluator notices at its next safe point.
  if (gEvaluating && gReplInterp) gReplInterp->requestInterrupt();
}

void printResult(Interp& in, Value v) {
  if (v.isUnspecified()) return;
  Value port = in.currentOutputPort();
  if (v.is(Kind::MultipleValues)) {
    auto* m = v.as<MultipleValues>();
    for (uint32_t i = 0; i < m->extra; i++) portWrite(port, toWriteString(m->items[i]) + "\n");
    return;
  }
  portWrite(port, toWriteString(v) + "\n");
}

std::vector<std::string> gCompletions;

char* completionGenerator(const char* text, int state) {
  static size_t index;
  static std::string prefix;
  if (state == 0) {
    index = 0;
    prefix = text;
    gCompletions.clear();
    Value names = gReplInterp->apply(gReplInterp->lookupGlobal("%global-names"), nullptr, 0);
    for (Value p = names; isPair(p); p = cdr(p)) {
      std::string_view n = symbolName(car(p));
      if (n.substr(0, prefix.size()) == prefix && n.substr(0, 1) != "%") gCompletions.emplace_back(n);
    }
  }
  while (index < gCompletions.size()) return strdup(gCompletions[index++].c_str());
  return nullptr;
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1;
  return rl_completion_matches(text, completionGenerator);
}

std::string historyPath() {
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.purple_history" : std::string();
}
}  // namespace

void reportError(Interp& in, const PurpleException& e) {
  Value port = in.currentErrorPort();
  portFlush(in.currentOutputPort());
  portWrite(port, in.formatError(e.payload()) + "\n");
  portFlush(port);
}

bool evalAndPrint(Interp& in, const std::string& text, const std::string& sourceName, bool printValues) {
  Value source = makeString(sourceName);
  PositionTable positions;
  Reader reader(text, source, &positions);
  bool ok = true;
  while (true) {
    Value form;
    positions.clear();
    try {
      if (!reader.read(form)) break;
    } catch (const PurpleException& e) {
      reportError(in, e);
      return false;
    }
    gEvaluating = 1;
    try {
      in.resetBudgets();
      Value v = in.evalForm(form, &positions);
      gEvaluating = 0;
      if (printValues) printResult(in, v);
    } catch (const PurpleException& e) {
      gEvaluating = 0;
      in.interruptRequested_.store(false);   // an interrupt is consumed once reported
      reportError(in, e);
      ok = false;
    } catch (const ContinuationInvoked&) {
      gEvaluating = 0;
      portWrite(in.currentErrorPort(), "Error: continuation invoked outside its extent\n");
      ok = false;
    }
    portFlush(in.currentOutputPort());
  }
  return ok;
}

int runRepl(Interp& in) {
  gReplInterp = &in;
  struct sigaction sa {};
  sa.sa_handler = onInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  bool tty = isatty(STDIN_FILENO);
  if (!tty) {
    // Piped input: read forms as they complete, print values, keep going after errors.
    std::string buffer, line;
    int firstLine = 1;
    while (std::getline(std::cin, line)) {
      buffer += line + "\n";
      if (!Reader::isComplete(buffer)) continue;
      evalAndPrint(in, buffer, "<stdin>", true);
      buffer.clear();
      (void)firstLine;
    }
    if (!buffer.empty()) evalAndPrint(in, buffer, "<stdin>", true);
    return 0;
  }
  std::cout << versionLine() << "\nType (help 'name) for documentation, Ctrl-D to leave.\n";
  rl_attempted_completion_function = complete;
  rl_basic_word_break_characters = " \t\n()[]'`,\"";
  std::string hist = historyPath();
  if (!hist.empty()) read_history(hist.c_str());
  std::string buffer;
  while (true) {
    char* raw = readline(buffer.empty() ? "purple> " : "...     ");
    if (!raw) {
      std::cout << "\n";
      break;
    }
    std::string line(raw);
    std::free(raw);
    if (buffer.empty() && line.find_first_not_of(" \t") == std::string::npos) continue;
    buffer += line + "\n";
    if (!Reader::isComplete(buffer)) continue;
    std::string entry = buffer;
    while (!entry.empty() && entry.back() == '\n') entry.pop_back();
    add_history(entry.c_str());
    if (!hist.empty()) write_history(hist.c_str());
    try {
      evalAndPrint(in, buffer, "<repl>", true);
    } catch (const PurpleExit& e) {
      return e.code;
    }
    buffer.clear();
  }
  return 0;
}

}  // namespace purple
