// (scheme char) and the character parts of (scheme base): predicates, comparisons, case
// mappings and digit values, Unicode-aware through generated tables (see unicode.hpp).
#include "builtins/builtins.hpp"
#include "builtins/core/checks.hpp"
#include "builtins/core/unicode.hpp"
#include "builtins/core/unicode_categories.hpp"
#include "builtins/core/unicode_tables.hpp"

#include <algorithm>
#include <iterator>

namespace purple {

namespace unicode {
namespace {

// An inversion list holds range starts and ends alternately: a code point is in the set when
// the number of entries <= cp is odd.
template <size_t N>
bool inList(const uint32_t (&list)[N], uint32_t cp) {
  const uint32_t* p = std::upper_bound(list, list + N, cp);
  return (p - list) & 1;
}

template <size_t N>
uint32_t lookupMap(const uint32_t (&map)[N][2], uint32_t cp) {
  size_t lo = 0, hi = N;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (map[mid][0] < cp) lo = mid + 1;
    else hi = mid;
  }
  return lo < N && map[lo][0] == cp ? map[lo][1] : cp;
}

template <size_t N>
const FullMapping* lookupFull(const FullMapping (&map)[N], uint32_t cp) {
  const FullMapping* p = std::lower_bound(map, map + N, cp,
                                          [](const FullMapping& m, uint32_t c) { return m.cp < c; });
  return p != map + N && p->cp == cp ? p : nullptr;
}

void appendMapped(std::string& out, const FullMapping* full, uint32_t simple) {
  if (!full) { appendUtf8(out, simple); return; }
  for (uint32_t c : full->to) if (c) appendUtf8(out, c);
}

}  // namespace

bool isAlphabetic(uint32_t cp) {
  if (cp < 128) return (cp | 32) - 'a' < 26;
  return inList(kAlphabetic, cp);
}
bool isUppercase(uint32_t cp) {
  if (cp < 128) return cp - 'A' < 26;
  return inList(kUppercase, cp);
}
bool isLowercase(uint32_t cp) {
  if (cp < 128) return cp - 'a' < 26;
  return inList(kLowercase, cp);
}
bool isWhitespace(uint32_t cp) {
  if (cp < 128) return cp == ' ' || (cp >= 9 && cp <= 13);
  return inList(kWhiteSpace, cp);
}
int digitValue(uint32_t cp) {
  if (cp < 128) return cp - '0' < 10 ? int(cp - '0') : -1;
  const uint32_t* end = kDecimalDigit + std::size(kDecimalDigit);
  const uint32_t* p = std::upper_bound(kDecimalDigit, end, cp);
  if (!((p - kDecimalDigit) & 1)) return -1;
  // Every Nd range starts at a digit zero (the mathematical digits are five runs of ten).
  return int((cp - p[-1]) % 10);
}

uint32_t toUpper(uint32_t cp) {
  if (cp < 128) return cp - 'a' < 26 ? cp - 32 : cp;
  return lookupMap(kToUpper, cp);
}
uint32_t toLower(uint32_t cp) {
  if (cp < 128) return cp - 'A' < 26 ? cp + 32 : cp;
  return lookupMap(kToLower, cp);
}
uint32_t foldCase(uint32_t cp) {
  if (cp < 128) return cp - 'A' < 26 ? cp + 32 : cp;
  return lookupMap(kFold, cp);
}

void appendUpper(std::string& out, uint32_t cp) {
  if (cp < 128) { out.push_back(char(toUpper(cp))); return; }
  appendMapped(out, lookupFull(kFullUpper, cp), toUpper(cp));
}
void appendLower(std::string& out, uint32_t cp) {
  if (cp < 128) { out.push_back(char(toLower(cp))); return; }
  appendMapped(out, lookupFull(kFullLower, cp), toLower(cp));
}
void appendFold(std::string& out, uint32_t cp) {
  if (cp < 128) { out.push_back(char(foldCase(cp))); return; }
  appendMapped(out, lookupFull(kFullFold, cp), foldCase(cp));
}

const char* generalCategory(uint32_t cp) {
  const CategoryRun* end = kCategoryRuns + std::size(kCategoryRuns);
  const CategoryRun* p = std::upper_bound(kCategoryRuns, end, cp,
                                          [](uint32_t c, const CategoryRun& run) { return c < run.start; });
  return kCategoryNames[p == kCategoryRuns ? 29 : (p - 1)->category];
}

}  // namespace unicode

namespace {

using data::charArg;

// n-ary comparisons: every argument is checked to be a character, even after the answer is
// known, so that (char<? #\a #\b 1) is an error as R7RS requires.
template <class Key, class Cmp>
Value compareChars(Value* argv, int argc, PrimitiveInfo* info, Key key, Cmp cmp) {
  checkArity(info, argc);
  for (int i = 0; i < argc; i++) charArg(info->name, i, argv[i]);
  for (int i = 0; i + 1 < argc; i++)
    if (!cmp(key(argv[i].character()), key(argv[i + 1].character()))) return Value::f();
  return Value::t();
}

inline uint32_t same(uint32_t c) { return c; }
inline uint32_t folded(uint32_t c) { return unicode::foldCase(c); }

#define CHAR_COMPARE(fname, key, op)                                                        \
  Value fname(Interp&, Value* argv, int argc, PrimitiveInfo* info) {                        \
    return compareChars(argv, argc, info, key, [](uint32_t a, uint32_t b) { return a op b; }); \
  }
CHAR_COMPARE(charEq, same, ==)
CHAR_COMPARE(charLt, same, <)
CHAR_COMPARE(charGt, same, >)
CHAR_COMPARE(charLe, same, <=)
CHAR_COMPARE(charGe, same, >=)
CHAR_COMPARE(charCiEq, folded, ==)
CHAR_COMPARE(charCiLt, folded, <)
CHAR_COMPARE(charCiGt, folded, >)
CHAR_COMPARE(charCiLe, folded, <=)
CHAR_COMPARE(charCiGe, folded, >=)
#undef CHAR_COMPARE

}  // namespace

void registerChars(Registry& r) {
  r.def("char?", "(obj)", [](Value v) { return v.isChar(); }, "True when OBJ is a character.");
  r.def("char->integer", "(char)",
        [](Value c) { return Value::fixnum(charArg("char->integer", 0, c)); },
        "The Unicode code point of CHAR, as an exact integer.");
  r.def("integer->char", "(n)",
        [](Value n) {
          if (!n.isFixnum()) data::typeError("integer->char", 0, "an exact integer", n);
          int64_t cp = n.fixnum();
          if (cp < 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            data::rangeError("integer->char", 0, n, "not a Unicode scalar value");
          return Value::character(uint32_t(cp));
        },
        "The character whose Unicode code point is N (0..#x10FFFF, excluding surrogates).");

  r.defRaw("char=?", "(char1 char2 . chars)", charEq, "True when all the characters are the same.", kPrimBorrowsArgs);
  r.defRaw("char<?", "(char1 char2 . chars)", charLt, "True when the code points strictly increase.", kPrimBorrowsArgs);
  r.defRaw("char>?", "(char1 char2 . chars)", charGt, "True when the code points strictly decrease.", kPrimBorrowsArgs);
  r.defRaw("char<=?", "(char1 char2 . chars)", charLe, "True when the code points never decrease.", kPrimBorrowsArgs);
  r.defRaw("char>=?", "(char1 char2 . chars)", charGe, "True when the code points never increase.", kPrimBorrowsArgs);
  r.defRaw("char-ci=?", "(char1 char2 . chars)", charCiEq,
           "Like char=?, comparing the case-folded characters.", kPrimBorrowsArgs);
  r.defRaw("char-ci<?", "(char1 char2 . chars)", charCiLt,
           "Like char<?, comparing the case-folded characters.", kPrimBorrowsArgs);
  r.defRaw("char-ci>?", "(char1 char2 . chars)", charCiGt,
           "Like char>?, comparing the case-folded characters.", kPrimBorrowsArgs);
  r.defRaw("char-ci<=?", "(char1 char2 . chars)", charCiLe,
           "Like char<=?, comparing the case-folded characters.", kPrimBorrowsArgs);
  r.defRaw("char-ci>=?", "(char1 char2 . chars)", charCiGe,
           "Like char>=?, comparing the case-folded characters.", kPrimBorrowsArgs);

  r.def("char-alphabetic?", "(char)",
        [](Value c) { return unicode::isAlphabetic(charArg("char-alphabetic?", 0, c)); },
        "True when CHAR has the Unicode Alphabetic property (letters of any script).");
  r.def("char-numeric?", "(char)",
        [](Value c) { return unicode::digitValue(charArg("char-numeric?", 0, c)) >= 0; },
        "True when CHAR is a decimal digit (Unicode general category Nd) in any script.");
  r.def("char-general-category", "(char)",
        [](Value c) { return intern(unicode::generalCategory(charArg("char-general-category", 0, c))); },
        "CHAR's Unicode general category as a symbol (R6RS): Lu Ll Lt Lm Lo (letters), Mn Mc Me (marks), Nd Nl No "
        "(numbers), Pc Pd Ps Pe Pi Pf Po (punctuation), Sm Sc Sk So (symbols), Zs Zl Zp (separators), Cc Cf Cs Co Cn.");
  r.def("char-whitespace?", "(char)",
        [](Value c) { return unicode::isWhitespace(charArg("char-whitespace?", 0, c)); },
        "True when CHAR has the Unicode White_Space property (space, tab, newline, NBSP, ...).");
  r.def("char-upper-case?", "(char)",
        [](Value c) { return unicode::isUppercase(charArg("char-upper-case?", 0, c)); },
        "True when CHAR is an uppercase letter (Unicode Uppercase property).");
  r.def("char-lower-case?", "(char)",
        [](Value c) { return unicode::isLowercase(charArg("char-lower-case?", 0, c)); },
        "True when CHAR is a lowercase letter (Unicode Lowercase property).");
  r.def("digit-value", "(char)",
        [](Value c) {
          int d = unicode::digitValue(charArg("digit-value", 0, c));
          return d < 0 ? Value::f() : Value::fixnum(d);
        },
        "The value (0-9) of CHAR when it is a decimal digit in any script, else #f. "
        "(digit-value #\\3) => 3, (digit-value #\\x0664) => 4, (digit-value #\\a) => #f.");
  r.def("char-upcase", "(char)",
        [](Value c) { return Value::character(unicode::toUpper(charArg("char-upcase", 0, c))); },
        "The uppercase form of CHAR (simple Unicode mapping), or CHAR itself when it has none.");
  r.def("char-downcase", "(char)",
        [](Value c) { return Value::character(unicode::toLower(charArg("char-downcase", 0, c))); },
        "The lowercase form of CHAR (simple Unicode mapping), or CHAR itself when it has none.");
  r.def("char-foldcase", "(char)",
        [](Value c) { return Value::character(unicode::foldCase(charArg("char-foldcase", 0, c))); },
        "CHAR after simple Unicode case folding, for case-insensitive comparison.");
}

}  // namespace purple
