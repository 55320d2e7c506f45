// Strings: R7RS (scheme base) and (scheme char) string procedures, plus the SRFI-13-style
// utilities programs expect (string-index, string-contains, string-split, string-join,
// string-trim, string-pad, string-prefix?, ...).
//
// Strings are UTF-8 with a character count; an all-ASCII string indexes in O(1). Indices are
// character indices everywhere. Substring search works on bytes: a match of valid UTF-8 inside
// valid UTF-8 always starts on a character boundary.
#include "builtins/builtins.hpp"
#include "interp/core/gc.hpp"
#include "builtins/core/checks.hpp"
#include "builtins/core/unicode.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace purple {

using namespace data;

namespace {

// ---- representation helpers -------------------------------------------------------------------

size_t charCount(const String* s) { return s->charCount; }

size_t charIndexOfByte(const String* s, size_t byte) {
  if (s->isAscii()) return byte;
  size_t n = 0;
  for (size_t i = 0; i < byte; i++)
    if ((static_cast<unsigned char>(s->data[i]) & 0xC0) != 0x80) n++;
  return n;
}

uint32_t charAtByte(const String* s, size_t byte) {
  const char* p = s->data + byte;
  return decodeUtf8(p, s->data + s->extra);
}

// A string argument with its optional [start end] character range, resolved to bytes.
struct Slice {
  String* s;
  size_t cstart, cend;   // characters
  size_t bstart, bend;   // bytes
  std::string_view bytes() const { return {s->data + bstart, bend - bstart}; }
  size_t chars() const { return cend - cstart; }
};

Slice sliceArg(std::string_view who, int index, Value str, Value start = Value::missing(),
               Value end = Value::missing()) {
  String* s = stringArg(who, index, str);
  Range r = rangeArgs(who, index + 1, start, end, charCount(s));
  Slice sl{s, r.start, r.end, 0, 0};
  if (s->isAscii()) {
    sl.bstart = r.start;
    sl.bend = r.end;
  } else {
    sl.bstart = utf8Offset(s, r.start);
    // Continue from bstart rather than rescanning from the beginning.
    const char* p = s->data + sl.bstart;
    const char* e = s->data + s->extra;
    for (size_t i = r.start; i < r.end && p < e; i++) decodeUtf8(p, e);
    sl.bend = size_t(p - s->data);
  }
  return sl;
}

std::u32string decode(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  const char* p = bytes.data();
  const char* e = p + bytes.size();
  while (p < e) out.push_back(decodeUtf8(p, e));
  return out;
}

std::string encode(const std::u32string& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) appendUtf8(out, uint32_t(c));
  return out;
}

// Strict UTF-8 check (no overlongs, surrogates or values past U+10FFFF): bytes that pass can be
// stored as they are; anything else is re-encoded with U+FFFD replacements.
bool isValidUtf8(std::string_view b) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(b.data());
  const unsigned char* e = p + b.size();
  while (p < e) {
    unsigned char c = *p;
    if (c < 0x80) { p++; continue; }
    int n;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; min = 0x10000; }
    else return false;
    if (e - p <= n) return false;
    for (int i = 1; i <= n; i++) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += n + 1;
  }
  return true;
}

// Replaces a string's contents in place (string-set!, string-fill!, string-copy!): the String
// object keeps its identity, so every reference sees the change.
void setContents(String* s, std::string_view bytes, size_t chars) {
  if (bytes.size() + 1 <= s->capacity) {
    std::memmove(s->data, bytes.data(), bytes.size());
  } else {
    size_t cap = bytes.size() + bytes.size() / 2 + 8;
    char* buf = static_cast<char*>(gcAllocAtomic(cap + 1));
    std::memcpy(buf, bytes.data(), bytes.size());
    s->data = buf;
    s->capacity = uint32_t(cap);
  }
  s->data[bytes.size()] = '\0';
  s->extra = uint32_t(bytes.size());
  s->charCount = uint32_t(chars);
}

Value stringFromCodepoints(const std::u32string& cps) { return makeString(encode(cps)); }

// ---- comparison -------------------------------------------------------------------------------

std::string folded(std::string_view b) {
  std::string out;
  out.reserve(b.size());
  const char* p = b.data();
  const char* e = p + b.size();
  while (p < e) unicode::appendFold(out, decodeUtf8(p, e));
  return out;
}

// UTF-8 byte order is code point order, so comparing bytes compares strings as R7RS asks.
template <class Cmp>
Value compareStrings(Value* argv, int argc, PrimitiveInfo* info, bool ci, Cmp cmp) {
  checkArity(info, argc);
  for (int i = 0; i < argc; i++) stringArg(info->name, i, argv[i]);
  for (int i = 0; i + 1 < argc; i++) {
    std::string_view a = stringView(argv[i]), b = stringView(argv[i + 1]);
    int c;
    if (ci) {
      std::string fa = folded(a), fb = folded(b);
      c = fa.compare(fb);
    } else {
      c = a.compare(b);
    }
    if (!cmp(c)) return Value::f();
  }
  return Value::t();
}

#define STRING_COMPARE(fname, ci, op)                                                            \
  Value fname(Interp&, Value* argv, int argc, PrimitiveInfo* info) {                             \
    return compareStrings(argv, argc, info, ci, [](int c) { return c op 0; });                   \
  }
STRING_COMPARE(strEq, false, ==)
STRING_COMPARE(strLt, false, <)
STRING_COMPARE(strGt, false, >)
STRING_COMPARE(strLe, false, <=)
STRING_COMPARE(strGe, false, >=)
STRING_COMPARE(strCiEq, true, ==)
STRING_COMPARE(strCiLt, true, <)
STRING_COMPARE(strCiGt, true, >)
STRING_COMPARE(strCiLe, true, <=)
STRING_COMPARE(strCiGe, true, >=)
#undef STRING_COMPARE

// ---- case ------------------------------------------------------------------------------------

bool isCased(uint32_t c) { return unicode::isUppercase(c) || unicode::isLowercase(c); }

std::string downcase(std::string_view b) {
  std::u32string cps = decode(b);
  std::string out;
  out.reserve(b.size());
  for (size_t i = 0; i < cps.size(); i++) {
    uint32_t c = cps[i];
    if (c == 0x3A3) {
      // Final sigma: a capital sigma that ends a word (a cased letter before it, none after)
      // lowers to U+03C2, as Unicode's full lowercasing specifies.
      bool before = false, after = false;
      for (size_t j = i; j-- > 0;) {
        if (isCased(cps[j])) { before = true; break; }
        if (!unicode::isAlphabetic(cps[j]) && cps[j] != 0x27 && cps[j] != 0x2019) break;
      }
      for (size_t j = i + 1; j < cps.size(); j++) {
        if (isCased(cps[j])) { after = true; break; }
        if (!unicode::isAlphabetic(cps[j]) && cps[j] != 0x27 && cps[j] != 0x2019) break;
      }
      appendUtf8(out, before && !after ? 0x3C2 : 0x3C3);
      continue;
    }
    unicode::appendLower(out, c);
  }
  return out;
}

std::string mapCase(std::string_view b, void (*f)(std::string&, uint32_t)) {
  std::string out;
  out.reserve(b.size());
  const char* p = b.data();
  const char* e = p + b.size();
  while (p < e) f(out, decodeUtf8(p, e));
  return out;
}

// ---- searching, trimming, splitting ------------------------------------------------------------

// A character matcher for string-index, string-trim, string-split ...: a char, a predicate,
// or (SRFI-13 char-set stand-in) a string of characters.
struct CharMatcher {
  enum { Char, Pred, Set, Whitespace } kind = Whitespace;
  uint32_t ch = 0;
  Value pred;
  std::u32string set;
  static CharMatcher from(std::string_view who, int index, Value v) {
    CharMatcher m;
    if (v.isMissing()) return m;
    if (v.isChar()) { m.kind = Char; m.ch = v.character(); return m; }
    if (isProcedure(v)) { m.kind = Pred; m.pred = v; return m; }
    if (isString(v)) { m.kind = Set; m.set = decode(stringView(v)); return m; }
    typeError(who, index, "a character, a predicate or a string of characters", v);
  }
  bool operator()(Interp& in, uint32_t c) const {
    switch (kind) {
      case Char: return c == ch;
      case Pred: return in.apply(pred, {Value::character(c)}).isTrue();
      case Set: return set.find(char32_t(c)) != std::u32string::npos;
      default: return unicode::isWhitespace(c);
    }
  }
};

enum class TrimSide { Left, Right, Both };

Value trim(Interp& in, std::string_view who, Value str, Value what, TrimSide side) {
  Slice sl = sliceArg(who, 0, str);
  CharMatcher m = CharMatcher::from(who, 1, what);
  std::u32string cps = decode(sl.bytes());
  size_t b = 0, e = cps.size();
  if (side != TrimSide::Right)
    while (b < e && m(in, cps[b])) b++;
  if (side != TrimSide::Left)
    while (e > b && m(in, cps[e - 1])) e--;
  return stringFromCodepoints(cps.substr(b, e - b));
}

Value splitString(Interp& in, Value str, Value sep, int64_t limit) {
  Slice sl = sliceArg("string-split", 0, str);
  std::string_view b = sl.bytes();
  std::vector<std::string> fields;
  auto tooMany = [&]() { return limit > 0 && int64_t(fields.size()) + 1 >= limit; };
  if (isString(sep)) {
    std::string_view d = stringView(sep);
    if (d.empty()) {
      const char* p = b.data();
      const char* e = p + b.size();
      while (p < e) {
        const char* q = p;
        decodeUtf8(p, e);
        fields.emplace_back(q, size_t(p - q));
      }
    } else {
      size_t pos = 0;
      for (;;) {
        size_t hit = tooMany() ? std::string_view::npos : b.find(d, pos);
        if (hit == std::string_view::npos) { fields.emplace_back(b.substr(pos)); break; }
        fields.emplace_back(b.substr(pos, hit - pos));
        pos = hit + d.size();
      }
    }
  } else if (sep.isMissing()) {
    // No separator: fields separated by runs of whitespace, empty fields dropped.
    std::u32string cps = decode(b);
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && unicode::isWhitespace(cps[i])) i++;
      if (i == cps.size()) break;
      size_t j = i;
      if (tooMany()) j = cps.size();
      else while (j < cps.size() && !unicode::isWhitespace(cps[j])) j++;
      fields.push_back(encode(cps.substr(i, j - i)));
      i = j;
    }
  } else {
    CharMatcher m = CharMatcher::from("string-split", 1, sep);
    std::u32string cps = decode(b);
    size_t start = 0;
    for (size_t i = 0; i <= cps.size(); i++) {
      if (i == cps.size()) { fields.push_back(encode(cps.substr(start))); break; }
      if (!tooMany() && m(in, cps[i])) {
        fields.push_back(encode(cps.substr(start, i - start)));
        start = i + 1;
      }
    }
  }
  Value out = Value::nil();
  for (size_t k = fields.size(); k-- > 0;) {
    Value s = makeString(fields[k]);
    out = cons(s, out);
  }
  return out;
}

// ---- mapping over several strings -------------------------------------------------------------

// The code points of each string argument, gathered before any callback runs, so that a
// callback that mutates a string cannot invalidate an iterator.
std::vector<std::u32string> gatherStrings(std::string_view who, int firstIndex, Value s1, RestArgs more,
                                          size_t& shortest) {
  std::vector<std::u32string> all;
  all.push_back(decode(stringArg(who, firstIndex, s1)->view()));
  int i = firstIndex + 1;
  for (Value p = more.list; isPair(p); p = cdr(p), i++) all.push_back(decode(stringArg(who, i, car(p))->view()));
  shortest = SIZE_MAX;
  for (auto& s : all) shortest = std::min(shortest, s.size());
  return all;
}

std::string joinStrings(std::string_view who, Value list, std::string_view delim, Value grammar) {
  size_t n = listArg(who, 0, list);
  enum { Infix, StrictInfix, Suffix, Prefix } g = Infix;
  if (!grammar.isMissing()) {
    if (grammar == intern("infix")) g = Infix;
    else if (grammar == intern("strict-infix")) g = StrictInfix;
    else if (grammar == intern("suffix")) g = Suffix;
    else if (grammar == intern("prefix")) g = Prefix;
    else typeError(who, 2, "one of the symbols infix, strict-infix, suffix, prefix", grammar);
  }
  if (n == 0 && g == StrictInfix)
    throwError("error", std::string(who) + ": an empty list cannot be joined with the strict-infix grammar");
  size_t bytes = 0;
  for (Value p = list; isPair(p); p = cdr(p)) {
    if (!isString(car(p))) typeError(who, 0, "a list of strings", list);
    bytes += stringView(car(p)).size() + delim.size();
  }
  checkResultBytes(std::string(who).c_str(), bytes);
  std::string out;
  out.reserve(bytes);
  size_t i = 0;
  for (Value p = list; isPair(p); p = cdr(p), i++) {
    if (g == Prefix) out += delim;
    else if (i > 0 && (g == Infix || g == StrictInfix)) out += delim;
    out += stringView(car(p));
    if (g == Suffix) out += delim;
  }
  return out;
}

std::string padString(std::string_view who, Value str, int64_t n, Value fill, bool left) {
  if (n < 0) rangeError(who, 1, Value::fixnum(n), "negative length");
  uint32_t c = fill.isMissing() ? ' ' : charArg(who, 2, fill);
  String* s = stringArg(who, 0, str);
  size_t len = s->charCount, want = size_t(n);
  if (len >= want) {
    // SRFI-13: too long a string is truncated, keeping the side the padding would be on's opposite.
    std::u32string cps = decode(s->view());
    return encode(left ? cps.substr(len - want) : cps.substr(0, want));
  }
  // The padding is made in the collected heap first, so a huge N meets the heap limit (or the
  // string size limit) before any buffer of that size is made outside it.
  if (want > 0x7fffffff) rangeError(who, 1, Value::fixnum(n), "longer than a string can be");
  Value pad = makeStringFill(want - len, c);
  std::string out;
  out.reserve(stringView(pad).size() + s->view().size());
  if (left) out.append(stringView(pad)).append(s->view());
  else out.append(s->view()).append(stringView(pad));
  return out;
}

}  // namespace

void registerStrings(Registry& r) {
  r.def("string?", "(obj)", [](Value v) { return isString(v); }, "True when OBJ is a string.");
  r.def("make-string", "(k :optional char)",
        [](int64_t k, Value fill) {
          if (k < 0 || k > 0x7fffffff) rangeError("make-string", 0, Value::fixnum(k), "bad length");
          uint32_t c = fill.isMissing() ? ' ' : charArg("make-string", 1, fill);
          return makeStringFill(size_t(k), c);
        },
        "A new string of K characters, each CHAR (default space).");
  r.def("string", "(:rest chars)",
        [](RestArgs chars) {
          std::string out;
          int i = 0;
          for (Value p = chars.list; isPair(p); p = cdr(p), i++) appendUtf8(out, charArg("string", i, car(p)));
          return makeString(out);
        },
        "A new string made of the character arguments: (string #\\a #\\b) => \"ab\".", kPrimFreshString);
  r.def("string-length", "(string)",
        [](Value s) { return Value::fixnum(int64_t(charCount(stringArg("string-length", 0, s)))); },
        "The number of characters in STRING.", kPrimBorrowsArgs);
  r.def("string-ref", "(string k)",
        [](Value str, Value k) {
          String* s = stringArg("string-ref", 0, str);
          size_t i = size_t(indexArg("string-ref", 1, k));
          if (i >= charCount(s))
            rangeError("string-ref", 1, k, "valid indices are below " + std::to_string(charCount(s)));
          if (s->isAscii()) return Value::character(static_cast<unsigned char>(s->data[i]));
          return Value::character(charAtByte(s, utf8Offset(s, i)));
        },
        "Character K (counting from 0) of STRING.", kPrimBorrowsArgs);
  r.def("string-set!", "(string k char)",
        [](Value str, Value k, Value ch) {
          String* s = stringArg("string-set!", 0, str);
          checkMutableString("string-set!", 0, str);
          size_t i = size_t(indexArg("string-set!", 1, k));
          uint32_t c = charArg("string-set!", 2, ch);
          if (i >= charCount(s))
            rangeError("string-set!", 1, k, "valid indices are below " + std::to_string(charCount(s)));
          if (s->isAscii() && c < 0x80) {
            s->data[i] = char(c);
            return;
          }
          size_t b = utf8Offset(s, i);
          const char* p = s->data + b;
          decodeUtf8(p, s->data + s->extra);
          size_t oldLen = size_t(p - (s->data + b));
          std::string enc;
          appendUtf8(enc, c);
          std::string bytes;
          bytes.reserve(s->extra + 4);
          bytes.append(s->data, b);
          bytes += enc;
          bytes.append(s->data + b + oldLen, s->extra - b - oldLen);
          setContents(s, bytes, s->charCount);
        },
        "Stores CHAR as character K of STRING (which must be mutable: not a literal).");
  r.def("substring", "(string start :optional end)",
        [](Value str, Value start, Value end) {
          Slice sl = sliceArg("substring", 0, str, start, end);
          return makeString(sl.bytes());
        },
        "A new string of the characters of STRING from START up to (not including) END.", kPrimBorrowsArgs | kPrimFreshString);
  // Raw: the parts are read where the caller left them, with no rest list made per call.
  r.defRaw("string-append", "(:rest strings)",
           [](Interp&, Value* argv, int argc, PrimitiveInfo*) {
             size_t bytes = 0;
             for (int i = 0; i < argc; i++) bytes += stringArg("string-append", i, argv[i])->extra;
             checkResultBytes("string-append", bytes);
             return concatStrings(argv, size_t(argc));
           },
           "A new string whose characters are those of the STRINGS in order.", kPrimBorrowsArgs | kPrimFreshString);
  r.def("string-copy", "(string :optional start end)",
        [](Value str, Value start, Value end) {
          return makeString(sliceArg("string-copy", 0, str, start, end).bytes());
        },
        "A new string with the characters of STRING from START to END (default: all of it).", kPrimBorrowsArgs | kPrimFreshString);
  r.def("string-copy!", "(to at from :optional start end)",
        [](Value to, Value at, Value from, Value start, Value end) {
          String* dst = stringArg("string-copy!", 0, to);
          checkMutableString("string-copy!", 0, to);
          size_t a = size_t(indexArg("string-copy!", 1, at));
          Slice src = sliceArg("string-copy!", 2, from, start, end);
          if (a > charCount(dst) || src.chars() > charCount(dst) - a)
            rangeError("string-copy!", 1, at, "the copied characters do not fit in the destination");
          std::string piece(src.bytes());   // copied first: FROM may be TO itself
          if (dst->isAscii() && piece.size() == src.chars()) {
            std::memmove(dst->data + a, piece.data(), piece.size());
            return;
          }
          size_t b0 = utf8Offset(dst, a);
          size_t b1 = utf8Offset(dst, a + src.chars());
          std::string bytes(dst->data, b0);
          bytes += piece;
          bytes.append(dst->data + b1, dst->extra - b1);
          setContents(dst, bytes, dst->charCount);
        },
        "Copies the characters of FROM (between START and END) into TO starting at index AT. "
        "Overlapping copies within one string work.");
  r.def("string-fill!", "(string char :optional start end)",
        [](Value str, Value ch, Value start, Value end) {
          uint32_t c = charArg("string-fill!", 1, ch);
          Slice sl = sliceArg("string-fill!", 0, str, start, end);
          checkMutableString("string-fill!", 0, str);
          String* s = sl.s;
          if (s->isAscii() && c < 0x80) {
            std::memset(s->data + sl.bstart, int(c), sl.chars());
            return;
          }
          std::string bytes(s->data, sl.bstart);
          for (size_t i = 0; i < sl.chars(); i++) appendUtf8(bytes, c);
          bytes.append(s->data + sl.bend, s->extra - sl.bend);
          setContents(s, bytes, s->charCount);
        },
        "Stores CHAR in every position of STRING from START to END (default: all).");

  // ---- conversion ----
  r.def("string->list", "(string :optional start end)",
        [](Value str, Value start, Value end) {
          std::u32string cps = decode(sliceArg("string->list", 0, str, start, end).bytes());
          Value out = Value::nil();
          for (size_t i = cps.size(); i-- > 0;) {
            out = cons(Value::character(uint32_t(cps[i])), out);
            pollEvery(i);   // forty million characters take seconds
          }
          return out;
        },
        "A new list of the characters of STRING from START to END.", kPrimBorrowsArgs);
  r.def("list->string", "(list)",
        [](Value list) {
          listArg("list->string", 0, list);
          std::string out;
          uint64_t n = 0;
          for (Value p = list; isPair(p); p = cdr(p)) {
            pollEvery(++n);
            if (!car(p).isChar()) typeError("list->string", 0, "a list of characters", list);
            appendUtf8(out, car(p).character());
          }
          return makeString(out);
        },
        "A new string made of the characters in LIST.", kPrimFreshString);
  r.def("string->vector", "(string :optional start end)",
        [](Value str, Value start, Value end) {
          std::u32string cps = decode(sliceArg("string->vector", 0, str, start, end).bytes());
          Value v = makeVector(cps.size());
          for (size_t i = 0; i < cps.size(); i++) v.as<Vector>()->items[i] = Value::character(uint32_t(cps[i]));
          return v;
        },
        "A new vector of the characters of STRING from START to END.");
  r.def("vector->string", "(vector :optional start end)",
        [](Value vec, Value start, Value end) {
          Vector* v = vectorArg("vector->string", 0, vec);
          Range rg = rangeArgs("vector->string", 1, start, end, v->extra);
          std::string out;
          for (size_t i = rg.start; i < rg.end; i++) {
            if (!v->items[i].isChar()) typeError("vector->string", 0, "a vector of characters", vec);
            appendUtf8(out, v->items[i].character());
          }
          return makeString(out);
        },
        "A new string of the characters in VECTOR from START to END.");
  r.def("string->utf8", "(string :optional start end)",
        [](Value str, Value start, Value end) {
          std::string_view b = sliceArg("string->utf8", 0, str, start, end).bytes();
          Value bv = makeBytevector(b.size());
          std::memcpy(bv.as<Bytevector>()->bytes, b.data(), b.size());
          return bv;
        },
        "A new bytevector holding the UTF-8 encoding of STRING from START to END.");
  r.def("utf8->string", "(bytevector :optional start end)",
        [](Value bvv, Value start, Value end) {
          Bytevector* bv = bytevectorArg("utf8->string", 0, bvv);
          Range rg = rangeArgs("utf8->string", 1, start, end, bv->extra);
          std::string_view b(reinterpret_cast<const char*>(bv->bytes) + rg.start, rg.end - rg.start);
          if (isValidUtf8(b)) return makeString(b);
          return makeString(encode(decode(b)));   // invalid sequences become U+FFFD
        },
        "A new string decoded from the UTF-8 bytes of BYTEVECTOR between START and END; invalid "
        "sequences decode to U+FFFD.");

  // ---- comparison ----
  r.defRaw("string=?", "(string1 string2 . strings)", strEq, "True when all the strings are equal.", kPrimBorrowsArgs);
  r.defRaw("string<?", "(string1 string2 . strings)", strLt,
           "True when the strings are strictly increasing in lexicographic (code point) order.", kPrimBorrowsArgs);
  r.defRaw("string>?", "(string1 string2 . strings)", strGt,
           "True when the strings are strictly decreasing in lexicographic order.", kPrimBorrowsArgs);
  r.defRaw("string<=?", "(string1 string2 . strings)", strLe,
           "True when the strings never decrease in lexicographic order.", kPrimBorrowsArgs);
  r.defRaw("string>=?", "(string1 string2 . strings)", strGe,
           "True when the strings never increase in lexicographic order.", kPrimBorrowsArgs);
  r.defRaw("string-ci=?", "(string1 string2 . strings)", strCiEq,
           "Like string=?, comparing case-folded strings.", kPrimBorrowsArgs);
  r.defRaw("string-ci<?", "(string1 string2 . strings)", strCiLt,
           "Like string<?, comparing case-folded strings.", kPrimBorrowsArgs);
  r.defRaw("string-ci>?", "(string1 string2 . strings)", strCiGt,
           "Like string>?, comparing case-folded strings.", kPrimBorrowsArgs);
  r.defRaw("string-ci<=?", "(string1 string2 . strings)", strCiLe,
           "Like string<=?, comparing case-folded strings.", kPrimBorrowsArgs);
  r.defRaw("string-ci>=?", "(string1 string2 . strings)", strCiGe,
           "Like string>=?, comparing case-folded strings.", kPrimBorrowsArgs);

  // ---- case ----
  r.def("string-upcase", "(string)",
        [](Value s) { return makeString(mapCase(stringArg("string-upcase", 0, s)->view(), unicode::appendUpper)); },
        "STRING in upper case (full Unicode mapping: \"straße\" => \"STRASSE\").", kPrimBorrowsArgs | kPrimFreshString);
  r.def("string-downcase", "(string)",
        [](Value s) { return makeString(downcase(stringArg("string-downcase", 0, s)->view())); },
        "STRING in lower case (full Unicode mapping, with Greek final sigma).", kPrimBorrowsArgs | kPrimFreshString);
  r.def("string-foldcase", "(string)",
        [](Value s) { return makeString(mapCase(stringArg("string-foldcase", 0, s)->view(), unicode::appendFold)); },
        "STRING case-folded (full Unicode folding), for case-insensitive comparison.", kPrimBorrowsArgs | kPrimFreshString);

  // ---- higher order ----
  r.def("string-map", "(proc string . strings)",
        [](Interp& in, Procedure f, Value s1, RestArgs more) {
          size_t n;
          std::vector<std::u32string> all = gatherStrings("string-map", 1, s1, more, n);
          int k = int(all.size());
          Value* args = gcValues(size_t(k));
          std::string out;
          for (size_t i = 0; i < n; i++) {
            for (int j = 0; j < k; j++) args[j] = Value::character(uint32_t(all[j][i]));
            Value c = in.apply(f.value, args, k);
            if (!c.isChar()) typeError("string-map", 0, "a procedure that returns characters", c);
            appendUtf8(out, c.character());
          }
          return makeString(out);
        },
        "A new string of (PROC c1 c2 ...) over the characters of the STRINGS in step, up to the "
        "shortest: (string-map char-upcase \"abc\") => \"ABC\".");
  r.def("string-for-each", "(proc string . strings)",
        [](Interp& in, Procedure f, Value s1, RestArgs more) {
          size_t n;
          std::vector<std::u32string> all = gatherStrings("string-for-each", 1, s1, more, n);
          int k = int(all.size());
          Value* args = gcValues(size_t(k));
          for (size_t i = 0; i < n; i++) {
            for (int j = 0; j < k; j++) args[j] = Value::character(uint32_t(all[j][i]));
            in.apply(f.value, args, k);
          }
        },
        "Calls (PROC c1 c2 ...) on the characters of the STRINGS in step, in order, for effect.");
  r.def("string-count", "(string pred :optional start end)",
        [](Interp& in, Value str, Value pred, Value start, Value end) {
          CharMatcher m = CharMatcher::from("string-count", 1, pred);
          std::u32string cps = decode(sliceArg("string-count", 0, str, start, end).bytes());
          int64_t n = 0;
          for (char32_t c : cps)
            if (m(in, uint32_t(c))) n++;
          return n;
        },
        "How many characters of STRING (between START and END) match PRED: a character, a "
        "predicate, or a string of characters.");

  // ---- searching ----
  r.def("string-index", "(string pred :optional start end)",
        [](Interp& in, Value str, Value pred, Value start, Value end) {
          CharMatcher m = CharMatcher::from("string-index", 1, pred);
          Slice sl = sliceArg("string-index", 0, str, start, end);
          std::u32string cps = decode(sl.bytes());
          for (size_t i = 0; i < cps.size(); i++)
            if (m(in, uint32_t(cps[i]))) return Value::fixnum(int64_t(sl.cstart + i));
          return Value::f();
        },
        "The index of the first character of STRING (between START and END) that matches PRED "
        "(a character, a predicate or a string of characters), or #f.");
  r.def("string-index-right", "(string pred :optional start end)",
        [](Interp& in, Value str, Value pred, Value start, Value end) {
          CharMatcher m = CharMatcher::from("string-index-right", 1, pred);
          Slice sl = sliceArg("string-index-right", 0, str, start, end);
          std::u32string cps = decode(sl.bytes());
          for (size_t i = cps.size(); i-- > 0;)
            if (m(in, uint32_t(cps[i]))) return Value::fixnum(int64_t(sl.cstart + i));
          return Value::f();
        },
        "The index of the last character of STRING (between START and END) that matches PRED, or #f.");
  r.alias("string-rindex", "string-index-right");
  r.def("string-contains", "(string pattern)",
        [](Value str, Value pat) {
          String* s = stringArg("string-contains", 0, str);
          std::string_view p = stringArg("string-contains", 1, pat)->view();
          size_t hit = s->view().find(p);
          if (hit == std::string_view::npos) return Value::f();
          return Value::fixnum(int64_t(charIndexOfByte(s, hit)));
        },
        "The index in STRING where PATTERN first occurs, or #f: (string-contains \"hello\" \"ll\") => 2.");
  r.def("string-contains-ci", "(string pattern)",
        [](Value str, Value pat) {
          std::u32string s = decode(folded(stringArg("string-contains-ci", 0, str)->view()));
          std::u32string p = decode(folded(stringArg("string-contains-ci", 1, pat)->view()));
          // Index into the folded text; equal to the original index unless folding expanded a
          // character before the match (rare: ß, ligatures).
          size_t hit = s.find(p);
          return hit == std::u32string::npos ? Value::f() : Value::fixnum(int64_t(hit));
        },
        "Like string-contains, ignoring case.");
  r.def("string-prefix?", "(prefix string)",
        [](Value pre, Value str) {
          std::string_view p = stringArg("string-prefix?", 0, pre)->view();
          std::string_view s = stringArg("string-prefix?", 1, str)->view();
          return s.substr(0, p.size()) == p;
        },
        "True when STRING starts with PREFIX: (string-prefix? \"ab\" \"abc\") => #t.");
  r.def("string-suffix?", "(suffix string)",
        [](Value suf, Value str) {
          std::string_view p = stringArg("string-suffix?", 0, suf)->view();
          std::string_view s = stringArg("string-suffix?", 1, str)->view();
          return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
        },
        "True when STRING ends with SUFFIX: (string-suffix? \"bc\" \"abc\") => #t.");
  r.def("string-null?", "(string)",
        [](Value s) { return stringArg("string-null?", 0, s)->extra == 0; },
        "True when STRING is the empty string.");
  r.def("string-reverse", "(string :optional start end)",
        [](Value str, Value start, Value end) {
          std::u32string cps = decode(sliceArg("string-reverse", 0, str, start, end).bytes());
          std::reverse(cps.begin(), cps.end());
          return stringFromCodepoints(cps);
        },
        "A new string with the characters of STRING (between START and END) in reverse order.");

  // ---- splitting, joining, trimming, padding ----
  r.def("string-split", "(string :optional separator limit)",
        [](Interp& in, Value str, Value sep, Value limit) {
          int64_t lim = 0;
          if (!limit.isMissing() && !limit.isFalse()) lim = indexArg("string-split", 2, limit);
          return splitString(in, str, sep, lim);
        },
        "The list of fields of STRING between occurrences of SEPARATOR, which may be a "
        "character, a string, or a character predicate; empty fields are kept: "
        "(string-split \"a,b,,c\" #\\,) => (\"a\" \"b\" \"\" \"c\"). Without SEPARATOR, splits at "
        "runs of whitespace and drops empty fields. LIMIT, when given, caps the number of fields "
        "(the last holds the rest of the string).");
  r.def("string-join", "(strings :optional delimiter grammar)",
        [](Value list, Value delim, Value grammar) {
          std::string d = " ";
          if (!delim.isMissing()) d = std::string(stringArg("string-join", 1, delim)->view());
          return makeString(joinStrings("string-join", list, d, grammar));
        },
        "The STRINGS concatenated with DELIMITER (default \" \") between them: "
        "(string-join '(\"a\" \"b\") \", \") => \"a, b\". GRAMMAR (SRFI-13) is infix (default), "
        "strict-infix, suffix or prefix.");
  r.def("string-trim", "(string :optional pred)",
        [](Interp& in, Value s, Value pred) { return trim(in, "string-trim", s, pred, TrimSide::Left); },
        "STRING without its leading whitespace (or leading characters matching PRED: a "
        "character, predicate or string of characters). As in SRFI-13, string-trim trims the "
        "left side only; string-trim-both trims both.");
  r.def("string-trim-left", "(string :optional pred)",
        [](Interp& in, Value s, Value pred) { return trim(in, "string-trim-left", s, pred, TrimSide::Left); },
        "STRING without its leading whitespace (or leading characters matching PRED).");
  r.def("string-trim-right", "(string :optional pred)",
        [](Interp& in, Value s, Value pred) { return trim(in, "string-trim-right", s, pred, TrimSide::Right); },
        "STRING without its trailing whitespace (or trailing characters matching PRED).");
  r.def("string-trim-both", "(string :optional pred)",
        [](Interp& in, Value s, Value pred) { return trim(in, "string-trim-both", s, pred, TrimSide::Both); },
        "STRING without leading and trailing whitespace (or characters matching PRED).");
  r.def("string-pad-left", "(string n :optional char)",
        [](Value s, int64_t n, Value c) { return makeString(padString("string-pad-left", s, n, c, true)); },
        "STRING padded on the left with CHAR (default space) to N characters; a longer STRING "
        "keeps its rightmost N characters: (string-pad-left \"42\" 5) => \"   42\".");
  r.alias("string-pad", "string-pad-left");
  r.def("string-pad-right", "(string n :optional char)",
        [](Value s, int64_t n, Value c) { return makeString(padString("string-pad-right", s, n, c, false)); },
        "STRING padded on the right with CHAR (default space) to N characters; a longer STRING "
        "keeps its leftmost N characters.");
}

}  // namespace purple
