#include "builtins/formats/unpickler.hpp"
#include "builtins/formats/format_error.hpp"
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace purple::formats {

namespace {

// How an opcode's operand is encoded after the opcode byte.
enum class Arg : uint8_t {
  None,
  U1, U2, U4, I4, U8,     // little-endian integers
  F8,                     // big-endian double (BINFLOAT)
  Line,                   // text up to a newline (protocol 0)
  TwoLines,               // "module\nname\n" (GLOBAL, INST)
  Bytes1, Bytes4, Bytes8, // a length of 1, 4 or 8 bytes, then that many bytes
};

struct Operand {
  uint64_t u = 0;
  double f = 0;
  std::string_view s, s2;
};

class VM;
struct Op {
  const char* name;
  Arg arg;
  void (*run)(VM&, const Operand&);
};

class VM {
 public:
  VM(std::string_view in, const UnpickleOptions& o) : in_(in), opt_(o) {}

  PyRef run(size_t* consumed);

  // ---- stack helpers used by the opcode table ----
  void push(PyRef x) { stack_.push_back(std::move(x)); }
  PyRef pop() {
    if (stack_.size() <= base()) fail(where() + "pops an empty stack");
    PyRef x = std::move(stack_.back());
    stack_.pop_back();
    return x;
  }
  PyRef& top() {
    if (stack_.size() <= base()) fail(where() + "reads an empty stack");
    return stack_.back();
  }
  void mark() { marks_.push_back(stack_.size()); }
  std::vector<PyRef> popMark() {
    if (marks_.empty()) fail(where() + "needs a MARK that is not there");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> out(std::make_move_iterator(stack_.begin() + long(m)), std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return out;
  }
  PyRef& memo(uint64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) fail(where() + "reads memo entry " + std::to_string(k) + ", which was never stored");
    return it->second;
  }
  void put(uint64_t k) { memo_[k] = top(); }
  void memoize() { memo_[memo_.size()] = top(); }
  void stop() { stopped_ = true; }
  void frame(uint64_t n) {
    if (frameEnd_ && pos_ < frameEnd_)
      fail(where() + "starts a new frame " + std::to_string(frameEnd_ - pos_) + " bytes before the end of the current one");
    if (n > in_.size() - pos_)
      fail("truncated pickle: " + where() + "announces a frame of " + std::to_string(n) + " bytes, and " + std::to_string(in_.size() - pos_) +
           " remain");
    frameEnd_ = pos_ + size_t(n);
  }
  void protocol(uint64_t p) {
    if (p > 5) fail("pickle protocol " + std::to_string(p) + " is newer than this reader (0 to 5)");
  }
  PyRef global(std::string_view module, std::string_view name);
  PyRef apply(const PyRef& callable, const PyRef& args);
  PyRef persistent(const PyRef& pid) {
    if (!opt_.persistentLoad) fail(where() + "has a persistent id, which only torch files may have");
    return opt_.persistentLoad(pid);
  }
  std::string where() const { return std::string("pickle opcode ") + opName_ + " at byte " + std::to_string(opPos_) + " "; }

 private:
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void inFrame(size_t end) const {   // a read from pos_ up to END must not cross the frame's end
    if (frameEnd_ && pos_ < frameEnd_ && end > frameEnd_)
      fail("corrupt pickle: " + std::string(opName_) + " at byte " + std::to_string(opPos_) + " runs past the end of its frame (byte " +
           std::to_string(frameEnd_) + "): the FRAME length lies");
  }
  const uint8_t* need(size_t n) {
    if (n <= in_.size() - pos_) inFrame(pos_ + n);
    if (n > in_.size() - pos_) fail("truncated pickle: " + std::string(opName_) + " at byte " + std::to_string(opPos_) + " needs " +
                                    std::to_string(n) + " more bytes than the file has");
    auto* p = reinterpret_cast<const uint8_t*>(in_.data() + pos_);
    pos_ += n;
    return p;
  }
  uint64_t le(size_t n) {
    const uint8_t* p = need(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
  }
  std::string_view line() {
    size_t nl = in_.find('\n', pos_);
    if (nl == std::string_view::npos) fail("truncated pickle: " + std::string(opName_) + " at byte " + std::to_string(opPos_) + " has no end of line");
    inFrame(nl + 1);
    std::string_view s = in_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return s;
  }
  std::string_view bytes(uint64_t n) { return {reinterpret_cast<const char*>(need(size_t(std::min<uint64_t>(n, in_.size() + 1)))), size_t(n)}; }
  Operand operand(Arg a);

  std::string_view in_;
  size_t pos_ = 0, opPos_ = 0;
  const char* opName_ = "";
  const UnpickleOptions& opt_;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyRef> memo_;
  bool stopped_ = false;
  // FRAME: the end of the current frame (0: none). No operand or line may cross it, and a new
  // FRAME may start only where the previous one ends, as Python's unpickler insists.
  size_t frameEnd_ = 0;
  // Elements copied by allow-listed constructors (OrderedDict(list), set(list), torch.Size):
  // each opcode makes O(1) objects, but a constructor called on a shared list copies it, so a
  // small pickle calling set(L) a million times on one long L would copy it a million times.
  uint64_t copied_ = 0;
  friend struct OpTable;
};

Operand VM::operand(Arg a) {
  Operand o;
  switch (a) {
    case Arg::None: break;
    case Arg::U1: o.u = le(1); break;
    case Arg::U2: o.u = le(2); break;
    case Arg::U4: o.u = le(4); break;
    case Arg::I4: o.u = uint64_t(int64_t(int32_t(uint32_t(le(4))))); break;
    case Arg::U8: o.u = le(8); break;
    case Arg::F8: {
      const uint8_t* p = need(8);
      uint64_t bits = 0;
      for (int i = 0; i < 8; i++) bits = bits << 8 | p[i];
      std::memcpy(&o.f, &bits, 8);
      break;
    }
    case Arg::Line: o.s = line(); break;
    case Arg::TwoLines: o.s = line(), o.s2 = line(); break;
    case Arg::Bytes1: o.s = bytes(le(1)); break;
    case Arg::Bytes4: {
      int64_t n = int32_t(uint32_t(le(4)));
      if (n < 0) fail(where() + "has a negative length");
      o.s = bytes(uint64_t(n));
      break;
    }
    case Arg::Bytes8: o.s = bytes(le(8)); break;
  }
  return o;
}

// ---- operand decoding helpers ----

PyRef intFromLE(std::string_view b) {
  if (b.size() <= 8) {
    uint64_t v = 0;
    for (size_t i = b.size(); i-- > 0;) v = v << 8 | uint8_t(b[i]);
    if (!b.empty() && b.size() < 8 && (uint8_t(b.back()) & 0x80)) v |= ~uint64_t(0) << (8 * b.size());   // sign-extend
    return PyObject::integer_(int64_t(v));
  }
  auto o = PyObject::make(PyType::Long);
  o->text = std::string(b);
  return o;
}

// Decimal text (INT, LONG, and PUT/GET indices) to an Int or a Long.
PyRef intFromDecimal(std::string_view s, const VM& vm) {
  if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
  bool neg = !s.empty() && s[0] == '-';
  if (neg || (!s.empty() && s[0] == '+')) s.remove_prefix(1);
  if (s.empty() || s.size() > 100000) fail(vm.where() + "has a malformed integer");
  std::vector<uint8_t> mag(1, 0);   // little-endian magnitude
  for (char c : s) {
    if (c < '0' || c > '9') fail(vm.where() + "has a malformed integer");
    unsigned carry = unsigned(c - '0');
    for (auto& byte : mag) {
      unsigned v = byte * 10u + carry;
      byte = uint8_t(v);
      carry = v >> 8;
    }
    if (carry) mag.push_back(uint8_t(carry));
  }
  mag.push_back(0);   // room for the sign bit
  if (neg) {           // two's complement
    unsigned carry = 1;
    for (auto& byte : mag) {
      unsigned v = unsigned(uint8_t(~byte)) + carry;
      byte = uint8_t(v);
      carry = v >> 8;
    }
  }
  return intFromLE(std::string_view(reinterpret_cast<const char*>(mag.data()), mag.size()));
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) out += char(cp);
  else if (cp < 0x800) out += char(0xC0 | cp >> 6), out += char(0x80 | (cp & 0x3F));
  else if (cp < 0x10000) out += char(0xE0 | cp >> 12), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
  else out += char(0xF0 | cp >> 18), out += char(0x80 | ((cp >> 12) & 0x3F)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
}

// S itself when it is well-formed UTF-8 (no overlong forms, no surrogates, nothing past
// U+10FFFF); otherwise an error. Python would decode such bytes with 'surrogatepass' into a str
// that holds lone surrogates, which a Purple string cannot: refuse rather than substitute U+FFFD.
std::string checkedUtf8(std::string_view s, const VM& vm) {
  auto bad = [&](size_t i, const char* what) {
    fail(vm.where() + "has a string that is not valid UTF-8 (" + what + " at its byte " + std::to_string(i) + ")");
  };
  for (size_t i = 0; i < s.size();) {
    uint8_t c = uint8_t(s[i]);
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!n) bad(i, "a stray byte");
    if (i + n > s.size()) bad(i, "a truncated sequence");
    uint32_t cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < n; k++) {
      uint8_t cc = uint8_t(s[i + k]);
      if ((cc & 0xC0) != 0x80) bad(i, "a truncated sequence");
      cp = cp << 6 | (cc & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000)) bad(i, "an overlong sequence");
    if (cp >= 0xD800 && cp <= 0xDFFF) bad(i, "a lone surrogate");
    if (cp > 0x10FFFF) bad(i, "a code point past U+10FFFF");
    i += n;
  }
  return std::string(s);
}

int64_t hexValue(std::string_view s) {   // -1 when S is not all hex digits
  int64_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// Protocol 0 UNICODE: raw-unicode-escape (\uXXXX and \UXXXXXXXX; other bytes are Latin-1).
std::string rawUnicodeEscape(std::string_view s, const VM& vm) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
      size_t n = s[i + 1] == 'u' ? 4 : 8;
      if (i + 2 + n <= s.size()) {
        int64_t cp = hexValue(s.substr(i + 2, n));
        if (cp < 0) fail(vm.where() + "has a malformed \\u escape");
        if (cp > 0x10FFFF) fail(vm.where() + "has a code point past U+10FFFF");
        if (cp >= 0xD800 && cp <= 0xDFFF) fail(vm.where() + "has a lone surrogate, which a Purple string cannot hold");
        appendUtf8(out, uint32_t(cp));
        i += 1 + n;
        continue;
      }
    }
    appendUtf8(out, uint8_t(s[i]));
  }
  return out;
}

// Protocol 0 STRING: a Python repr, quoted, with backslash escapes.
std::string unquote(std::string_view s, const VM& vm) {
  if (s.size() < 2 || (s[0] != '\'' && s[0] != '"') || s.back() != s[0]) fail(vm.where() + "has a string that is not quoted");
  s = s.substr(1, s.size() - 2);
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'x':
        if (i + 2 < s.size() && hexValue(s.substr(i + 1, 2)) >= 0) {
          out += char(hexValue(s.substr(i + 1, 2)));
          i += 2;
        } else {
          out += "\\x";
        }
        break;
      default: out += '\\', out += c;
    }
  }
  return out;
}

// APPEND and APPENDS extend a list; ADDITEMS adds to a set (Python calls list.extend and set.add,
// so each on the other kind of container fails there too).
std::vector<PyRef>& listTarget(PyObject& o, const VM& vm, PyType kind) {
  if (o.type == kind) return o.items;
  if (o.type == PyType::Object) {
    if (o.items.size() < 2) o.items.resize(2);
    return o.items;   // list items of an unknown object follow its arguments and state
  }
  fail(vm.where() + "appends to a " + pyTypeName(o));
}

void setItem(PyObject& d, PyRef k, PyRef v, const VM& vm) {
  if (d.type != PyType::Dict && d.type != PyType::Object) fail(vm.where() + "sets an item of a " + pyTypeName(d));
  d.entries.emplace_back(std::move(k), std::move(v));
}

// ---- the opcode table ----

#define OP(code, name, arg, ...) \
  t[uint8_t(code)] = Op{name, Arg::arg, []([[maybe_unused]] VM & vm, [[maybe_unused]] const Operand & o) __VA_ARGS__};

struct OpTable {
  Op t[256] = {};
  OpTable() {
    // structure
    OP(0x80, "PROTO", U1, { vm.protocol(o.u); })
    OP(0x95, "FRAME", U8, { vm.frame(o.u); })
    OP('.', "STOP", None, { vm.stop(); })
    OP('(', "MARK", None, { vm.mark(); })
    OP('0', "POP", None, { vm.pop(); })
    OP('1', "POP_MARK", None, { vm.popMark(); })
    OP('2', "DUP", None, { vm.push(vm.top()); })
    // memo
    OP('p', "PUT", Line, { vm.put(uint64_t(intFromDecimal(o.s, vm)->integer)); })
    OP('q', "BINPUT", U1, { vm.put(o.u); })
    OP('r', "LONG_BINPUT", U4, { vm.put(o.u); })
    OP(0x94, "MEMOIZE", None, { vm.memoize(); })
    OP('g', "GET", Line, { vm.push(vm.memo(uint64_t(intFromDecimal(o.s, vm)->integer))); })
    OP('h', "BINGET", U1, { vm.push(vm.memo(o.u)); })
    OP('j', "LONG_BINGET", U4, { vm.push(vm.memo(o.u)); })
    // atoms
    OP('N', "NONE", None, { vm.push(PyObject::none()); })
    OP(0x88, "NEWTRUE", None, { vm.push(PyObject::boolean(true)); })
    OP(0x89, "NEWFALSE", None, { vm.push(PyObject::boolean(false)); })
    OP('I', "INT", Line, {
      if (o.s == "00" || o.s == "01") vm.push(PyObject::boolean(o.s == "01"));
      else vm.push(intFromDecimal(o.s, vm));
    })
    OP('J', "BININT", I4, { vm.push(PyObject::integer_(int64_t(o.u))); })
    OP('K', "BININT1", U1, { vm.push(PyObject::integer_(int64_t(o.u))); })
    OP('M', "BININT2", U2, { vm.push(PyObject::integer_(int64_t(o.u))); })
    OP('L', "LONG", Line, { vm.push(intFromDecimal(o.s, vm)); })
    OP(0x8a, "LONG1", Bytes1, { vm.push(intFromLE(o.s)); })
    OP(0x8b, "LONG4", Bytes4, { vm.push(intFromLE(o.s)); })
    OP('F', "FLOAT", Line, {
      std::string s(o.s);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (s.empty() || *end) fail(vm.where() + "has a malformed float");
      vm.push(PyObject::floating(d));
    })
    OP('G', "BINFLOAT", F8, { vm.push(PyObject::floating(o.f)); })
    OP('S', "STRING", Line, { vm.push(PyObject::str(checkedUtf8(unquote(o.s, vm), vm))); })
    OP('T', "BINSTRING", Bytes4, { vm.push(PyObject::str(checkedUtf8(o.s, vm))); })
    OP('U', "SHORT_BINSTRING", Bytes1, { vm.push(PyObject::str(checkedUtf8(o.s, vm))); })
    OP('V', "UNICODE", Line, { vm.push(PyObject::str(rawUnicodeEscape(o.s, vm))); })
    OP('X', "BINUNICODE", Bytes4, { vm.push(PyObject::str(checkedUtf8(o.s, vm))); })
    OP(0x8c, "SHORT_BINUNICODE", Bytes1, { vm.push(PyObject::str(checkedUtf8(o.s, vm))); })
    OP(0x8d, "BINUNICODE8", Bytes8, { vm.push(PyObject::str(checkedUtf8(o.s, vm))); })
    OP('B', "BINBYTES", Bytes4, { vm.push(PyObject::bytes(std::string(o.s))); })
    OP('C', "SHORT_BINBYTES", Bytes1, { vm.push(PyObject::bytes(std::string(o.s))); })
    OP(0x8e, "BINBYTES8", Bytes8, { vm.push(PyObject::bytes(std::string(o.s))); })
    OP(0x96, "BYTEARRAY8", Bytes8, { vm.push(PyObject::bytes(std::string(o.s))); })
    // containers
    OP(']', "EMPTY_LIST", None, { vm.push(PyObject::list({})); })
    OP(')', "EMPTY_TUPLE", None, { vm.push(PyObject::tuple({})); })
    OP('}', "EMPTY_DICT", None, { vm.push(PyObject::dict()); })
    OP(0x8f, "EMPTY_SET", None, { vm.push(PyObject::make(PyType::Set)); })
    OP('l', "LIST", None, { vm.push(PyObject::list(vm.popMark())); })
    OP('t', "TUPLE", None, { vm.push(PyObject::tuple(vm.popMark())); })
    OP(0x85, "TUPLE1", None, {
      PyRef a = vm.pop();
      vm.push(PyObject::tuple({a}));
    })
    OP(0x86, "TUPLE2", None, {
      PyRef b = vm.pop(), a = vm.pop();
      vm.push(PyObject::tuple({a, b}));
    })
    OP(0x87, "TUPLE3", None, {
      PyRef c = vm.pop(), b = vm.pop(), a = vm.pop();
      vm.push(PyObject::tuple({a, b, c}));
    })
    OP(0x91, "FROZENSET", None, {
      auto s = PyObject::make(PyType::Set);
      s->items = vm.popMark();
      vm.push(s);
    })
    OP('d', "DICT", None, {
      std::vector<PyRef> kv = vm.popMark();
      if (kv.size() % 2) fail(vm.where() + "has an odd number of keys and values");
      PyRef d = PyObject::dict();
      for (size_t i = 0; i < kv.size(); i += 2) setItem(*d, kv[i], kv[i + 1], vm);
      vm.push(d);
    })
    OP('a', "APPEND", None, {
      PyRef x = vm.pop();
      listTarget(*vm.top(), vm, PyType::List).push_back(std::move(x));
    })
    OP('e', "APPENDS", None, {
      std::vector<PyRef> xs = vm.popMark();
      auto& target = listTarget(*vm.top(), vm, PyType::List);
      for (auto& x : xs) target.push_back(std::move(x));
    })
    OP(0x90, "ADDITEMS", None, {
      std::vector<PyRef> xs = vm.popMark();
      auto& target = listTarget(*vm.top(), vm, PyType::Set);
      for (auto& x : xs) target.push_back(std::move(x));
    })
    OP('s', "SETITEM", None, {
      PyRef v = vm.pop(), k = vm.pop();
      setItem(*vm.top(), std::move(k), std::move(v), vm);
    })
    OP('u', "SETITEMS", None, {
      std::vector<PyRef> kv = vm.popMark();
      if (kv.size() % 2) fail(vm.where() + "has an odd number of keys and values");
      for (size_t i = 0; i < kv.size(); i += 2) setItem(*vm.top(), kv[i], kv[i + 1], vm);
    })
    // objects
    OP('c', "GLOBAL", TwoLines, { vm.push(vm.global(o.s, o.s2)); })
    OP(0x93, "STACK_GLOBAL", None, {
      PyRef name = vm.pop(), module = vm.pop();
      if (name->type != PyType::Str || module->type != PyType::Str) fail(vm.where() + "needs two strings");
      vm.push(vm.global(module->text, name->text));
    })
    OP('R', "REDUCE", None, {
      PyRef args = vm.pop(), f = vm.pop();
      vm.push(vm.apply(f, args));
    })
    OP(0x81, "NEWOBJ", None, {
      PyRef args = vm.pop(), cls = vm.pop();
      vm.push(vm.apply(cls, args));
    })
    OP(0x92, "NEWOBJ_EX", None, {
      PyRef kwargs = vm.pop(), args = vm.pop(), cls = vm.pop();
      if (kwargs->type != PyType::Dict || !kwargs->entries.empty()) fail(vm.where() + "passes keyword arguments to " + pyTypeName(*cls));
      vm.push(vm.apply(cls, args));
    })
    OP('i', "INST", TwoLines, {
      PyRef cls = vm.global(o.s, o.s2);
      vm.push(vm.apply(cls, PyObject::tuple(vm.popMark())));
    })
    OP('o', "OBJ", None, {
      std::vector<PyRef> xs = vm.popMark();
      if (xs.empty()) fail(vm.where() + "has no class");
      PyRef cls = xs[0];
      xs.erase(xs.begin());
      vm.push(vm.apply(cls, PyObject::tuple(std::move(xs))));
    })
    OP('b', "BUILD", None, {
      PyRef state = vm.pop();
      buildObject(*vm.top(), state);
    })
    OP('P', "PERSID", Line, { vm.push(vm.persistent(PyObject::str(checkedUtf8(o.s, vm)))); })
    OP('Q', "BINPERSID", None, { vm.push(vm.persistent(vm.pop())); })
    OP(0x82, "EXT1", U1, { fail(vm.where() + "uses the copyreg extension registry, which torch files never use"); })
    OP(0x83, "EXT2", U2, { fail(vm.where() + "uses the copyreg extension registry, which torch files never use"); })
    OP(0x84, "EXT4", U4, { fail(vm.where() + "uses the copyreg extension registry, which torch files never use"); })
    OP(0x97, "NEXT_BUFFER", None, { fail(vm.where() + "uses out-of-band buffers, which torch files never use"); })
    OP(0x98, "READONLY_BUFFER", None, { fail(vm.where() + "uses out-of-band buffers, which torch files never use"); })
  }
};
#undef OP

const OpTable& opTable() {
  static const OpTable table;
  return table;
}

PyRef VM::global(std::string_view module, std::string_view name) {
  std::string m(module), n(name);
  // Protocol 2 writes Python 2 module names for builtins.
  if (m == "__builtin__") m = "builtins";
  if (m == "copy_reg") m = "copyreg";
  std::string full = m + "." + n;
  if (m == "__torch__" || m.rfind("__torch__.", 0) == 0)
    fail("refers to the TorchScript class " + full + ": this is TorchScript (torch.jit.save) data, which torch-load never reads, "
         "in either mode; load a TorchScript archive with load-torchscript");
  PyRef g = lookupGlobal(m, n);
  if (g) return g;
  if (opt_.safe)
    fail("refers to the Python global " + full + ", which safe mode refuses (loading it in Python could run code). "
         "Only tensors, containers, numbers, strings and torch/NumPy data types are allowed; pass :safe #f to read "
         "other objects as inert python-object values (nothing is ever run)");
  auto o = PyObject::global(full);
  o->flag = true;   // unknown: calling it makes an Object
  return o;
}

PyRef VM::apply(const PyRef& f, const PyRef& args) {
  if (args->type != PyType::Tuple) fail(where() + "calls " + pyTypeName(*f) + " with arguments that are not a tuple");
  if (f->type == PyType::Global && f->flag) {
    auto o = PyObject::make(PyType::Object);
    o->text = f->text;
    o->items = {args, PyObject::none()};
    return o;
  }
  if (f->type != PyType::Global) fail(where() + "calls a " + pyTypeName(*f) + ", which is not callable");
  PyRef r = callGlobal(*f, args->items);
  copied_ += r->items.size() + r->entries.size();
  if (copied_ > 4 * uint64_t(in_.size()) + (uint64_t(1) << 20))
    fail(where() + "makes containers holding " + std::to_string(copied_) + " elements in all from a pickle of " + std::to_string(in_.size()) +
         " bytes: refusing a probable memory bomb (a constructor called again and again on one shared list)");
  return r;
}

PyRef VM::run(size_t* consumed) {
  const OpTable& table = opTable();
  while (!stopped_) {
    opPos_ = pos_;
    if (pos_ >= in_.size()) fail("truncated pickle: it ends at byte " + std::to_string(pos_) + " without a STOP");
    uint8_t code = uint8_t(in_[pos_++]);
    const Op& op = table.t[code];
    if (!op.run) {
      opName_ = "?";
      fail("corrupt pickle: byte " + std::to_string(opPos_) + " is 0x" + "0123456789abcdef"[code >> 4] + "0123456789abcdef"[code & 15] +
           ", which is no pickle opcode");
    }
    opName_ = op.name;
    Operand o = operand(op.arg);
    op.run(*this, o);
  }
  if (stack_.size() != 1 || !marks_.empty()) fail("corrupt pickle: STOP with " + std::to_string(stack_.size()) + " values on the stack");
  if (consumed) *consumed = pos_;
  return stack_.back();
}

}  // namespace

PyRef unpickle(std::string_view bytes, const UnpickleOptions& options, size_t* consumed) {
  VM vm(bytes, options);
  return vm.run(consumed);
}

}  // namespace purple::formats
