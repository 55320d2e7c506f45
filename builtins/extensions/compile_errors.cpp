#include "builtins/extensions/compile_errors.hpp"
#include "interp/core/error.hpp"
#include "interp/core/value.hpp"
#include <sstream>

namespace purple::extensions {

namespace {

bool namesFile(const std::string& line, const std::vector<std::string>& files) {
  for (const auto& f : files)
    for (const char* after : {":", "("})
      if (line.find(f + after) != std::string::npos) return true;
  return false;
}

// What a compiler prints under a message, indented: gcc's source excerpt ("    3 |   return x +;")
// and caret line, its "  required from here" context; NVRTC's and nvcc's source line and caret.
bool isExcerpt(const std::string& line) { return !line.empty() && line[0] == ' '; }

}  // namespace

std::string compilerOutputSummary(const std::string& output, const std::vector<std::string>& userFiles,
                                  const std::vector<std::string>& alsoKeep, size_t maxLines) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  size_t kept = 0;
  for (size_t i = 0; i < lines.size() && kept < maxLines; i++) {
    const std::string& line = lines[i];
    bool wanted = namesFile(line, userFiles) || line.find("error") != std::string::npos;
    for (const auto& k : alsoKeep) wanted = wanted || line.find(k) != std::string::npos;
    if (!wanted) continue;
    out += line + "\n";
    kept++;
    while (i + 1 < lines.size() && isExcerpt(lines[i + 1]) && kept < maxLines) {
      out += lines[++i] + "\n";
      kept++;
    }
  }
  if (kept == 0)
    for (size_t i = 0; i < lines.size() && i < maxLines; i++) out += lines[i] + "\n";
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string colonLineNumbers(const std::string& log, const std::string& file) {
  std::istringstream in(log);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(file + "(", 0) == 0) {
      size_t close = line.find("):", file.size());
      std::string number = close == std::string::npos ? "" : line.substr(file.size() + 1, close - file.size() - 1);
      bool digits = !number.empty() && number.find_first_not_of("0123456789") == std::string::npos;
      if (digits) line = file + ":" + number + ":" + line.substr(close + 2);
    }
    out += line + "\n";
  }
  return out;
}

void throwCompileError(const std::string& who, const std::string& what, const std::string& summary,
                       const std::string& logPath) {
  std::string message = who + ": compiling " + what + " failed:\n" + summary;
  if (!logPath.empty()) message += "\n(the compiler's whole output: " + logPath + ")";
  throwError("compile-error", message, logPath.empty() ? Value::nil() : cons(makeString(logPath), Value::nil()));
}

}  // namespace purple::extensions
