// The tools' Purple source is in the generated tool_sources.cpp (cmake/embed_prelude.cmake).
#include "repl/tools.hpp"
#include "repl/repl.hpp"
#include <purple/purple.hpp>
#include <cstddef>
#include <iostream>

namespace purple {
struct PreludeSource { const char* name; const char* text; };
extern const PreludeSource kToolSources[];
extern const std::size_t kToolSourceCount;
}  // namespace purple

namespace purple::repl {

namespace {
// A Purple string literal holding TEXT.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}
}  // namespace

int runTool(const std::string& entry, const std::vector<std::string>& args) {
  Options options;
  options.commandLine.push_back("purple");
  for (auto& a : args) options.commandLine.push_back(a);
  try {
    Interpreter in(options);
    try {
      for (std::size_t i = 0; i < kToolSourceCount; i++)
        in.eval(kToolSources[i].text, std::string("tools/") + kToolSources[i].name);
      std::string call = "(" + entry + " (list";
      for (auto& a : args) call += " " + quoted(a);
      in.eval(call + "))", "<" + entry + ">");
      in.flush();
      return 0;
    } catch (const Exit& e) {
      in.flush();
      return e.code();
    } catch (const Error& e) {
      reportError(in, e);
      return 2;
    }
  } catch (const Error& e) {
    std::cerr << "purple: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace purple::repl
