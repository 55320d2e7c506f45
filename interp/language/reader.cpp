#include "interp/language/reader.hpp"
#include "interp/core/symbol_table.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/numbers.hpp"
#include "interp/memory/tensor_hooks.hpp"
#include <cctype>
#include <limits>
#include <vector>
#include <gc/gc_allocator.h>

namespace purple {

namespace {
bool isDelimiter(int c) {
  return c == -1 || std::isspace(c) || c == '(' || c == ')' || c == '[' || c == ']' || c == '"' ||
         c == ';' || c == '\'' || c == '`' || c == ',';
}
using ValueVec = std::vector<Value, traceable_allocator<Value>>;

struct NamedChar { const char* name; uint32_t code; };
const NamedChar kNamedChars[] = {
    {"space", ' '},    {"newline", '\n'}, {"tab", '\t'},       {"nul", 0},     {"null", 0},
    {"alarm", 7},      {"backspace", 8},  {"delete", 127},     {"escape", 27}, {"return", '\r'},
    {"linefeed", '\n'}, {"altmode", 27},  {"rubout", 127},     {"page", 12},
};
}  // namespace

Reader::Reader(std::string_view text, Value sourceName, PositionTable* positions, int firstLine)
    : text_(text), line_(firstLine), source_(sourceName), positions_(positions) {}

int Reader::next() {
  if (pos_ >= text_.size()) return -1;
  int c = static_cast<unsigned char>(text_[pos_++]);
  if (c == '\n') {
    line_++;
    col_ = 1;
  } else if ((c & 0xC0) != 0x80) {
    col_++;
  }
  return c;
}

void Reader::fail(const std::string& message, int line, int col) {
  failLine_ = line;
  failCol_ = col;
  std::string where = isString(source_) ? std::string(stringView(source_)) : "<input>";
  throwError("read-error", where + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + message);
}

void Reader::failEof(const std::string& what, int line, int col) {
  incomplete_ = true;
  fail("unexpected end of input in " + what + " starting here", line, col);
}

void Reader::record(Value pair, int line, int col) {
  if (positions_ && isPair(pair)) (*positions_)[pair.obj()] = SourcePos{source_, line, col};
}

void Reader::blockComment() {
  int line = line_, col = col_ - 2;
  int depth = 1;
  while (depth > 0) {
    int c = next();
    if (c == -1) failEof("block comment", line, col);
    if (c == '|' && peek() == '#') {
      next();
      depth--;
    } else if (c == '#' && peek() == '|') {
      next();
      depth++;
    }
  }
}

void Reader::skipAtmosphere() {
  while (true) {
    int c = peek();
    if (c == -1) return;
    if (std::isspace(c)) {
      next();
    } else if (c == ';') {
      while (peek() != -1 && peek() != '\n') next();
    } else if (c == '#' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '|') {
      next();
      next();
      blockComment();
    } else if (c == '#' && pos_ + 1 < text_.size() && text_[pos_ + 1] == ';') {
      next();
      next();
      skipAtmosphere();
      int line = line_, col = col_;
      if (peek() == -1) failEof("datum comment", line, col);
      datum();
    } else {
      return;
    }
  }
}

bool Reader::read(Value& out) {
  skipAtmosphere();
  if (peek() == -1) return false;
  start_ = pos_;
  startLine_ = line_;
  startCol_ = col_;
  out = datum();
  // A variable read as a whole form (`counter` alone in a notebook cell) has no pair around it
  // to carry its position: it is recorded itself, for the unbound-variable error.
  if (positions_ && out.is(Kind::Symbol)) (*positions_)[out.obj()] = SourcePos{source_, startLine_, startCol_};
  return true;
}

std::string Reader::token() {
  std::string t;
  while (!isDelimiter(peek())) t += char(next());
  return t;
}

Value Reader::datum() {
  skipAtmosphere();
  int line = line_, col = col_;
  if (stackNearlyFull()) fail("data nested too deeply", line, col);
  int c = peek();
  if (c == -1) failEof("datum", line, col);
  switch (c) {
    case '(':
      next();
      return list(')', line, col);
    case '[':
      next();
      return list(']', line, col);
    case ')':
    case ']':
      next();
      fail(std::string("unexpected '") + char(c) + "'", line, col);
    case '"':
      next();
      return stringLiteral();
    case '\'':
    case '`':
    case ',': {
      next();
      const char* name = c == '\'' ? "quote" : c == '`' ? "quasiquote" : "unquote";
      if (c == ',' && peek() == '@') {
        next();
        name = "unquote-splicing";
      }
      skipAtmosphere();
      if (peek() == -1) failEof(std::string(name), line, col);
      Value d = datum();
      Value form = cons(intern(name), cons(d, Value::nil()));
      record(form, line, col);
      return form;
    }
    case '#':
      return hashSyntax(line, col);
    case '|': {
      next();
      std::string name;
      while (true) {
        int ch = next();
        if (ch == -1) failEof("|symbol|", line, col);
        if (ch == '|') break;
        if (ch == '\\') {
          int e = next();
          if (e == 'x') {
            std::string hex;
            while (peek() != ';' && peek() != -1) hex += char(next());
            next();
            appendUtf8(name, uint32_t(std::strtoul(hex.c_str(), nullptr, 16)));
            continue;
          }
          ch = e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
        name += char(ch);
      }
      return internCollectable(name);
    }
    default:
      return atom(line, col);
  }
}

Value Reader::list(char close, int line, int col) {
  ValueVec items;
  std::vector<std::pair<int, int>> itemStarts;   // filled only when elements_ is set
  Value tail = Value::nil();
  while (true) {
    skipAtmosphere();
    int c = peek();
    if (c == -1) failEof("list", line, col);
    if (c == ')' || c == ']') {
      next();
      if (c != close) fail(std::string("expected '") + close + "' to close the list", line_, col_ - 1);
      break;
    }
    if (c == '.' && pos_ + 1 <= text_.size() && isDelimiter(pos_ + 1 < text_.size() ? (unsigned char)text_[pos_ + 1] : -1)) {
      int dl = line_, dc = col_;
      next();
      if (items.empty()) fail("'.' with nothing before it", dl, dc);
      skipAtmosphere();
      if (peek() == -1) failEof("list", line, col);
      tail = datum();
      skipAtmosphere();
      int e = next();
      if (e == -1) failEof("list", line, col);
      if (e != close) fail("expected one datum after '.'", dl, dc);
      break;
    }
    if (elements_) itemStarts.emplace_back(line_, col_);
    items.push_back(datum());
  }
  Value result = tail;
  for (size_t i = items.size(); i-- > 0;) {
    result = cons(items[i], result);
    if (elements_) (*elements_)[result.obj()] = SourcePos{source_, itemStarts[i].first, itemStarts[i].second};
  }
  record(result, line, col);
  return result;
}

Value Reader::stringLiteral() {
  int line = line_, col = col_ - 1;
  std::string s;
  while (true) {
    int c = next();
    if (c == -1) failEof("string", line, col);
    if (c == '"') break;
    if (c != '\\') {
      s += char(c);
      continue;
    }
    int e = next();
    switch (e) {
      case -1: failEof("string", line, col);
      case 'n': s += '\n'; break;
      case 't': s += '\t'; break;
      case 'r': s += '\r'; break;
      case 'a': s += '\a'; break;
      case 'b': s += '\b'; break;
      case '0': s += '\0'; break;
      case '\\': s += '\\'; break;
      case '"': s += '"'; break;
      case '|': s += '|'; break;
      case 'x': case 'X': {
        std::string hex;
        while (peek() != ';' && peek() != -1 && std::isxdigit(peek())) hex += char(next());
        if (peek() != ';' || hex.empty()) fail("bad \\x escape in string (write \\x41;)", line_, col_);
        next();
        appendUtf8(s, uint32_t(std::strtoul(hex.c_str(), nullptr, 16)));
        break;
      }
      default:
        if (e == ' ' || e == '\t' || e == '\n' || e == '\r') {
          // \ at the end of a line: skip the line break and the next line's indentation
          while (peek() == ' ' || peek() == '\t') next();
          if (e != '\n' && peek() == '\r') next();
          if (e != '\n' && peek() == '\n') next();
          while (peek() == ' ' || peek() == '\t') next();
          break;
        }
        fail(std::string("unknown string escape \\") + char(e), line_, col_ - 1);
    }
  }
  return makeString(s);
}

Value Reader::character() {
  int line = line_, col = col_ - 2;
  if (peek() == -1) failEof("character", line, col);
  // first char always belongs to the character, even a delimiter: #\( #\space
  std::string t;
  const char* start = text_.data() + pos_;
  const char* p = start;
  decodeUtf8(p, text_.data() + text_.size());
  size_t len = size_t(p - start);
  for (size_t i = 0; i < len; i++) t += char(next());
  while (!isDelimiter(peek())) t += char(next());
  const char* q = t.data();
  uint32_t first = decodeUtf8(q, t.data() + t.size());
  if (q == t.data() + t.size()) return Value::character(first);
  std::string lower = t;
  for (auto& ch : lower) ch = char(std::tolower(ch));
  for (const auto& nc : kNamedChars)
    if (lower == nc.name) return Value::character(nc.code);
  if ((t[0] == 'x' || t[0] == 'U' || t[0] == 'u') && t.size() > 1) {
    char* end = nullptr;
    unsigned long v = std::strtoul(t.c_str() + 1, &end, 16);
    if (*end == '\0' && v <= 0x10FFFF) return Value::character(uint32_t(v));
  }
  fail("unknown character name #\\" + t, line, col);
}

Value Reader::hashSyntax(int line, int col) {
  next();   // '#'
  int c = peek();
  if (c == -1) failEof("# syntax", line, col);
  if (c == '(') {
    next();
    Value items = list(')', line, col);
    size_t n = listLength(items);
    Value v = makeVector(n);
    size_t i = 0;
    for (Value p = items; isPair(p); p = cdr(p)) v.as<Vector>()->items[i++] = car(p);
    return v;
  }
  if (c == '[') {
    next();
    return tensorLiteral(line, col);
  }
  if (c == '\\') {
    next();
    return character();
  }
  if (std::isdigit(c)) {
    size_t save = pos_;
    int saveLine = line_, saveCol = col_;
    long n = 0;
    bool huge = false;   // more digits than a label can have (found by fuzz-reader)
    while (std::isdigit(peek())) {
      int d = next() - '0';
      if (n > (std::numeric_limits<long>::max() - d) / 10) huge = true;
      else n = n * 10 + d;
    }
    if (huge && (peek() == '=' || peek() == '#')) fail("datum label is too large", line, col);
    if (peek() == '=') {
      next();
      Value placeholder = makeBox(Value::f());
      labels_.push_back({n, placeholder});
      size_t slot = labels_.size() - 1;
      skipAtmosphere();
      if (peek() == -1) failEof("labelled datum", line, col);
      Value d = datum();
      std::unordered_set<const void*> seen;
      d = patchLabel(d, placeholder, d, 0, seen);
      labels_[slot].second = d;
      return d;
    }
    if (peek() == '#') {
      next();
      for (size_t i = labels_.size(); i-- > 0;)
        if (labels_[i].first == n) return labels_[i].second;
      fail("undefined datum label #" + std::to_string(n) + "#", line, col);
    }
    pos_ = save;
    line_ = saveLine;
    col_ = saveCol;
  }
  if (c == '!') {
    next();
    std::string t = token();
    if (t == "fold-case") foldCase_ = true;
    else if (t == "no-fold-case") foldCase_ = false;
    else if (t == "eof") return Value::eof();
    else if (t == "optional") return internKeyword("optional");
    else if (t == "rest") return internKeyword("rest");
    else if (t == "key") return internKeyword("key");
    else if (t == "default") return Value::missing();
    else fail("unknown directive #!" + t, line, col);
    skipAtmosphere();
    if (peek() == -1) return Value::unspecified();
    return datum();
  }
  std::string t = token();
  if (t == "t" || t == "true") return Value::t();
  if (t == "f" || t == "false") return Value::f();
  if (t == "u8" && peek() == '(') {
    next();
    Value items = list(')', line, col);
    size_t n = listLength(items);
    Value bv = makeBytevector(n);
    size_t i = 0;
    for (Value p = items; isPair(p); p = cdr(p)) {
      Value b = car(p);
      if (!b.isFixnum() || b.fixnum() < 0 || b.fixnum() > 255) fail("bytevector element must be 0..255", line, col);
      bv.as<Bytevector>()->bytes[i++] = uint8_t(b.fixnum());
    }
    return bv;
  }
  if (auto n = parseNumber("#" + t)) return *n;
  fail("bad # syntax: #" + t, line, col);
}

// #[[1 2] [3 4]]: rows in brackets; elements are numbers or booleans.
Value Reader::tensorRow(int line, int col) {
  ValueVec items;
  while (true) {
    skipAtmosphere();
    int c = peek();
    int l = line_, cl = col_;
    if (c == -1) failEof("tensor literal", line, col);
    if (c == ']') {
      next();
      break;
    }
    if (c == '[') {
      next();
      items.push_back(tensorRow(l, cl));
      continue;
    }
    if (c == ')' || c == '(') fail("unexpected parenthesis in tensor literal", l, cl);
    Value d = datum();
    if (!isNumber(d) && !d.isBool()) fail("tensor literal elements must be numbers or booleans", l, cl);
    items.push_back(d);
  }
  Value v = makeVector(items.size());
  for (size_t i = 0; i < items.size(); i++) v.as<Vector>()->items[i] = items[i];
  return v;
}

Value Reader::tensorLiteral(int line, int col) {
  Value rows = tensorRow(line, col);
  try {
    return tensorFromLiteral(rows);
  } catch (const PurpleException& e) {
    fail(std::string("bad tensor literal: ") + e.what(), line, col);
  }
}

Value Reader::atom(int line, int col) {
  std::string t = token();
  if (t.empty()) {
    next();
    fail("unexpected character", line, col);
  }
  if (foldCase_)
    for (auto& ch : t) ch = char(std::tolower(ch));
  char c0 = t[0];
  if (std::isdigit((unsigned char)c0) || ((c0 == '+' || c0 == '-' || c0 == '.') && t.size() > 1)) {
    if (auto n = parseNumber(t)) return *n;
  }
  if (c0 == ':' && t.size() > 1) return internCollectable(std::string_view(t).substr(1), true);
  if (t == ".") fail("unexpected '.'", line, col);
  return internCollectable(t);
}

Value Reader::patchLabel(Value x, Value placeholder, Value target, int depth,
                         std::unordered_set<const void*>& seen) {
  if (x == placeholder) return target;
  if (depth > 100000) return x;
  if (isPair(x)) {
    for (Value p = x; isPair(p); p = cdr(p)) {
      if (!seen.insert(p.as<Pair>()).second) break;
      p.as<Pair>()->car = patchLabel(car(p), placeholder, target, depth + 1, seen);
      if (cdr(p) == placeholder) p.as<Pair>()->cdr = target;
      else if (!isPair(cdr(p))) p.as<Pair>()->cdr = patchLabel(cdr(p), placeholder, target, depth + 1, seen);
      if (cdr(p) == target) break;
    }
  } else if (x.is(Kind::Vector)) {
    auto* v = x.as<Vector>();
    if (!seen.insert(v).second) return x;
    for (uint32_t i = 0; i < v->extra; i++) v->items[i] = patchLabel(v->items[i], placeholder, target, depth + 1, seen);
  }
  return x;
}

bool Reader::isComplete(std::string_view text) {
  Reader r(text, Value::f(), nullptr);
  try {
    Value v;
    while (r.read(v)) {
    }
    return true;
  } catch (const PurpleException&) {
    return !r.hitEndOfInput();
  }
}

Value readAll(std::string_view text, Value sourceName, PositionTable* positions) {
  Reader r(text, sourceName, positions);
  ValueVec forms;
  Value v;
  while (r.read(v)) forms.push_back(v);
  return listFromArray(forms.data(), forms.size());
}

}  // namespace purple
