#include "builtins/extensions/source_scan.hpp"
#include <cctype>

namespace purple::extensions {

namespace {

bool identStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// SOURCE with comments, string and character literals and preprocessor lines replaced by spaces
// (newlines kept), so that what remains is declarations and code only.
std::string blankedSource(std::string_view s) {
  std::string out(s);
  size_t n = s.size();
  bool lineStart = true;
  for (size_t i = 0; i < n;) {
    char c = s[i];
    if (c == '\n') {
      lineStart = true;
      i++;
      continue;
    }
    if (lineStart && c == '#') {   // a preprocessor line, with its continuations
      while (i < n && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\n') out[i++] = ' ';
        out[i++] = ' ';
      }
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(c))) lineStart = false;
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') out[i++] = ' ';
    } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      end = end == std::string_view::npos ? n : end + 2;
      for (; i < end; i++)
        if (s[i] != '\n') out[i] = ' ';
    } else if (c == 'R' && i + 1 < n && s[i + 1] == '"' && (i == 0 || !identChar(s[i - 1]))) {
      size_t open = s.find('(', i + 2);   // raw string R"delim( ... )delim"
      if (open == std::string_view::npos) break;
      std::string close = ")" + std::string(s.substr(i + 2, open - i - 2)) + "\"";
      size_t end = s.find(close, open);
      end = end == std::string_view::npos ? n : end + close.size();
      for (; i < end; i++)
        if (s[i] != '\n') out[i] = ' ';
    } else if (c == '"' || (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(s[i - 1]))))) {
      // (a ' between digits is a digit separator: 1'000)
      out[i++] = ' ';
      while (i < n && s[i] != c && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < n) out[i++] = ' ';
        out[i++] = ' ';
      }
      if (i < n && s[i] == c) out[i++] = ' ';
    } else {
      i++;
    }
  }
  return out;
}

size_t skipSpace(const std::string& s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) i++;
  return i;
}

// The index after the bracket that closes the one at OPEN, or npos.
size_t matching(const std::string& s, size_t open) {
  char o = s[open], c = o == '(' ? ')' : o == '[' ? ']' : '}';
  int depth = 0;
  for (size_t i = open; i < s.size(); i++) {
    if (s[i] == o) depth++;
    else if (s[i] == c && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

// After a parameter list: qualifiers, attributes, a trailing return type, then `{` for a definition.
bool definitionFollows(const std::string& s, size_t i) {
  for (;;) {
    i = skipSpace(s, i);
    if (i >= s.size()) return false;
    char c = s[i];
    if (c == '{') return true;
    if (identChar(c) || c == ':' || c == '<' || c == '>' || c == '*' || c == '&' || c == ',' || c == '.') {
      i++;
    } else if (c == '-' && i + 1 < s.size() && s[i + 1] == '>') {
      i += 2;
    } else if (c == '(' || c == '[') {   // noexcept(...), __attribute__((...)), [[...]]
      i = matching(s, i);
      if (i == std::string::npos) return false;
    } else {
      return false;   // ; = ) and anything else: a declaration or a call
    }
  }
}

// One space between words and after * & , >; none before * and &: "const float *  x" -> "const float* x".
std::string normalised(std::string_view t) {
  std::string out;
  bool pendingSpace = false;
  for (char c : t) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      pendingSpace = !out.empty();
      continue;
    }
    char prev = out.empty() ? ' ' : out.back();
    if (pendingSpace && identChar(c) && (identChar(prev) || prev == '*' || prev == '&' || prev == ',' || prev == '>'))
      out += ' ';
    pendingSpace = false;
    out += c;
  }
  return out;
}

bool isTypeKeyword(const std::string& w) {
  static const char* const kWords[] = {"int", "long", "short", "char", "float", "double", "bool", "void", "unsigned",
                                       "signed", "const", "volatile", "auto", "__restrict__", "__restrict", "restrict",
                                       "size_t", "half", "__half"};
  for (const char* k : kWords)
    if (w == k) return true;
  return false;
}

DeclaredParam parseParam(std::string_view text) {
  std::string t(text);
  // drop a default argument (the first top-level '=')
  int depth = 0;
  for (size_t i = 0; i < t.size(); i++) {
    char c = t[i];
    if (c == '(' || c == '<' || c == '[' || c == '{') depth++;
    else if (c == ')' || c == '>' || c == ']' || c == '}') depth--;
    else if (c == '=' && depth == 0) {
      t.resize(i);
      break;
    }
  }
  // drop array brackets after the name: float x[3]
  while (true) {
    size_t end = t.find_last_not_of(" \t\r\n");
    if (end == std::string::npos || t[end] != ']') break;
    size_t open = t.rfind('[', end);
    if (open == std::string::npos) break;
    t.resize(open);
  }
  size_t end = t.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return {};
  t.resize(end + 1);
  size_t start = end + 1;
  while (start > 0 && identChar(t[start - 1])) start--;
  std::string last = t.substr(start);
  std::string before = t.substr(0, start);
  size_t prev = before.find_last_not_of(" \t\r\n");
  bool hasType = prev != std::string::npos;
  bool qualifiedPart = hasType && prev >= 1 && before[prev] == ':' && before[prev - 1] == ':';
  if (last.empty() || !identStart(last[0]) || !hasType || qualifiedPart || isTypeKeyword(last))
    return DeclaredParam{normalised(t), ""};
  return DeclaredParam{normalised(before), last};
}

// The top-level comma-separated parts of TEXT.
std::vector<std::string> splitTopLevel(const std::string& text) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t from = 0;
  for (size_t i = 0; i <= text.size(); i++) {
    char c = i < text.size() ? text[i] : ',';
    if (c == '(' || c == '<' || c == '[' || c == '{') depth++;
    else if (c == ')' || c == '>' || c == ']' || c == '}') depth--;
    else if (c == ',' && depth == 0) {
      parts.push_back(text.substr(from, i - from));
      from = i + 1;
    }
  }
  return parts;
}

// The names declared by a `template <...>` that starts the declaration ending before AT.
std::vector<std::string> templateParamsBefore(const std::string& s, size_t at) {
  size_t start = s.find_last_of(";}", at == 0 ? 0 : at - 1);
  start = start == std::string::npos ? 0 : start + 1;
  size_t t = s.find("template", start);
  if (t == std::string::npos || t >= at || (t > 0 && identChar(s[t - 1]))) return {};
  size_t open = skipSpace(s, t + 8);
  if (open >= at || s[open] != '<') return {};
  int depth = 0;
  size_t close = open;
  for (; close < at; close++) {
    if (s[close] == '<') depth++;
    else if (s[close] == '>' && --depth == 0) break;
  }
  if (close >= at) return {};
  std::vector<std::string> names;
  for (const auto& part : splitTopLevel(s.substr(open + 1, close - open - 1))) names.push_back(parseParam(part).name);
  return names;
}

}  // namespace

bool isIdentifier(std::string_view text, bool qualified) {
  if (text.empty()) return false;
  size_t i = 0;
  if (qualified && text.rfind("::", 0) == 0) i = 2;
  bool expectStart = true;
  for (; i < text.size(); i++) {
    char c = text[i];
    if (expectStart) {
      if (!identStart(c)) return false;
      expectStart = false;
    } else if (c == ':' && qualified && i + 1 < text.size() && text[i + 1] == ':') {
      i++;
      expectStart = true;
    } else if (!identChar(c)) {
      return false;
    }
  }
  return !expectStart;
}

std::optional<FoundFunction> findFunction(std::string_view source, std::string_view name) {
  size_t colon = name.rfind("::");
  std::string simple(colon == std::string_view::npos ? name : name.substr(colon + 2));
  if (simple.empty()) return std::nullopt;
  std::string s = blankedSource(source);
  for (size_t at = s.find(simple); at != std::string::npos; at = s.find(simple, at + 1)) {
    if (at > 0 && identChar(s[at - 1])) continue;
    size_t after = at + simple.size();
    if (after < s.size() && identChar(s[after])) continue;
    size_t open = skipSpace(s, after);
    if (open >= s.size() || s[open] != '(') continue;
    size_t close = matching(s, open);
    if (close == std::string::npos || !definitionFollows(s, close)) continue;
    FoundFunction f;
    f.templateParams = templateParamsBefore(s, at);
    std::string inside = s.substr(open + 1, close - open - 2);
    if (normalised(inside).empty() || normalised(inside) == "void") return f;
    for (const auto& part : splitTopLevel(inside)) f.params.push_back(parseParam(part));
    return f;
  }
  return std::nullopt;
}

std::optional<std::vector<DeclaredParam>> findParameters(std::string_view source, std::string_view name) {
  auto f = findFunction(source, name);
  if (!f) return std::nullopt;
  return f->params;
}

std::vector<std::string> templateArguments(std::string_view nameExpression) {
  size_t open = nameExpression.find('<');
  size_t close = nameExpression.rfind('>');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return {};
  std::vector<std::string> out;
  for (const auto& part : splitTopLevel(std::string(nameExpression.substr(open + 1, close - open - 1))))
    out.push_back(normalised(part));
  return out;
}

std::string substituteWords(const std::string& type, const std::vector<std::string>& from,
                            const std::vector<std::string>& to) {
  std::string out;
  for (size_t i = 0; i < type.size();) {
    if (identStart(type[i]) && (i == 0 || !identChar(type[i - 1]))) {
      size_t j = i;
      while (j < type.size() && identChar(type[j])) j++;
      std::string word = type.substr(i, j - i);
      for (size_t k = 0; k < from.size() && k < to.size(); k++)
        if (!from[k].empty() && word == from[k]) {
          word = to[k];
          break;
        }
      out += word;
      i = j;
    } else {
      out += type[i++];
    }
  }
  return out;
}

}  // namespace purple::extensions
