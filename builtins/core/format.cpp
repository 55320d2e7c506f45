// `format`: SRFI-28 / SRFI-48 formatted output, with Common Lisp's column padding.
//
//   (format "loss ~,4f after ~a steps~%" loss n)       => a string
//   (format #t "...")  writes to the current output port; (format port "...") to PORT;
//   (format #f "...")  returns a string (SRFI-48).
//
// Directives (case-insensitive), with optional comma-separated parameters before the letter
// (an integer or 'c for a character):
//   ~a ~s ~w     display / write / write with shared structure; ~Na pads on the right to N columns
//   ~d ~x ~o ~b  an integer in base 10/16/8/2; ~N,'cd pads on the left to N columns with c
//   ~f           fixed point: ~W,Df (width W, D digits after the point), ~,4f, ~8f
//   ~e ~g        exponent notation / %g, with the same W,D parameters
//   ~c           a character
//   ~% ~n        newline; ~& newline unless at the start of a line; ~t tab; ~~ a tilde
//   ~? ~k        indirection: the next two arguments are a format string and a list of its arguments
//   ~y           pretty-print (written form)
// Numeric directives also take tensors with one element (a loss, an accuracy), so training logs
// need no tensor-item.
#include "builtins/builtins.hpp"
#include "interp/core/gc.hpp"
#include "interp/language/numbers.hpp"
#include "interp/core/port.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <ATen/ATen.h>
#include <cmath>
#include <cstdio>

namespace purple {

namespace {

[[noreturn]] void formatError(const std::string& message, Value irritants = Value::nil()) {
  throwError("error", "format: " + message, irritants);
}

struct Param {
  bool given = false;
  bool isChar = false;
  int64_t number = 0;
  uint32_t ch = ' ';
};

// A number argument for the numeric directives: Purple reals, and tensors of one element.
bool numericArg(Value v, double& out, bool& exactInt, Value& exactValue) {
  exactInt = false;
  if (isExactInteger(v)) {
    exactInt = true;
    exactValue = v;
    out = toDouble(v);
    return true;
  }
  if (isRealNumber(v)) {
    out = toDouble(v);
    return true;
  }
  if (isTensor(v)) {
    const at::Tensor& t = tensorOf(v);
    if (!t.defined() || t.numel() != 1 || t.is_complex()) return false;
    at::Tensor c = t.detach().cpu();
    if (at::isIntegralType(c.scalar_type(), /*includeBool=*/true)) {
      exactInt = true;
      exactValue = makeInteger(c.to(at::kLong).item<int64_t>());
      out = double(exactValue.fixnum());
      return true;
    }
    out = c.to(at::kDouble).item<double>();
    return true;
  }
  return false;
}

size_t displayWidth(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// N copies of a character. The count comes from the format string, so the size is checked
// before anything is built (~1000000000a took 24 s and 2 GB).
std::string padding(int64_t n, uint32_t ch, size_t alongside) {
  std::string one;
  appendUtf8(one, ch);
  checkResultBytes("format", alongside + size_t(n) * one.size());
  if (one.size() == 1) return std::string(size_t(n), one[0]);
  std::string pad;
  pad.reserve(size_t(n) * one.size());
  for (int64_t i = 0; i < n; i++) pad += one;
  return pad;
}

std::string padLeft(std::string s, const Param& width, const Param& fill) {
  int64_t have = int64_t(displayWidth(s));
  if (width.given && have < width.number)
    s = padding(width.number - have, fill.given && fill.isChar ? fill.ch : ' ', s.size()) + s;
  return s;
}

std::string padRight(std::string s, const Param& width) {
  int64_t have = int64_t(displayWidth(s));
  if (width.given && have < width.number) s += padding(width.number - have, ' ', s.size());
  return s;
}

std::string printfDouble(char conv, double x, const Param& digits) {
  if (std::isnan(x)) return "+nan.0";
  if (std::isinf(x)) return x > 0 ? "+inf.0" : "-inf.0";
  char spec[16];
  int d = digits.given ? int(std::max<int64_t>(0, std::min<int64_t>(digits.number, 100))) : 6;
  std::snprintf(spec, sizeof spec, "%%.%d%c", d, conv);
  char buf[512];
  std::snprintf(buf, sizeof buf, spec, x);
  return buf;
}

class Formatter {
 public:
  Formatter(Interp& in, std::string& out) : in_(in), out_(out) {}

  // Formats FMT with ARGS (a list); returns the arguments left over.
  Value run(std::string_view fmt, Value args) {
    size_t i = 0;
    while (i < fmt.size()) {
      char c = fmt[i++];
      if (c != '~') {
        out_ += c;
        continue;
      }
      Param params[3];
      int nParams = 0;
      // parameters: [N | 'c] {, [N | 'c]}
      while (i < fmt.size()) {
        Param p;
        if (fmt[i] == '\'') {
          if (i + 1 >= fmt.size()) formatError("the format string ends inside a ~ directive", cons(makeString(fmt), Value::nil()));
          const char* s = fmt.data() + i + 1;
          p.ch = decodeUtf8(s, fmt.data() + fmt.size());
          p.isChar = p.given = true;
          i = size_t(s - fmt.data());
        } else if (std::isdigit((unsigned char)fmt[i]) || ((fmt[i] == '-' || fmt[i] == '+') && i + 1 < fmt.size() &&
                                                            std::isdigit((unsigned char)fmt[i + 1]))) {
          size_t start = i++;
          while (i < fmt.size() && std::isdigit((unsigned char)fmt[i])) i++;
          p.number = std::stoll(std::string(fmt.substr(start, i - start)));
          p.given = true;
        }
        if (nParams < 3) params[nParams] = p;
        nParams++;
        if (i < fmt.size() && fmt[i] == ',') {
          i++;
          continue;
        }
        break;
      }
      if (i >= fmt.size()) formatError("the format string ends inside a ~ directive", cons(makeString(fmt), Value::nil()));
      char d = char(std::tolower((unsigned char)fmt[i++]));
      switch (d) {
        case '~': out_ += '~'; break;
        case '%': case 'n': out_ += '\n'; break;
        case '&':
          if (!atLineStart()) out_ += '\n';
          break;
        case 't': out_ += '\t'; break;
        case '_': out_ += ' '; break;
        case 'a': out_ += padRight(toDisplayString(next(args, d)), params[0]); break;
        case 's': case 'y': out_ += padRight(toWriteString(next(args, d)), params[0]); break;
        case 'w': {
          std::string s;
          printShared(s, next(args, d));
          out_ += padRight(s, params[0]);
          break;
        }
        case 'c': {
          Value ch = next(args, d);
          if (!ch.isChar()) formatError("~c needs a character, got", cons(ch, Value::nil()));
          appendUtf8(out_, ch.character());
          break;
        }
        case 'd': case 'x': case 'o': case 'b': {
          Value v = next(args, d);
          double x;
          bool exact;
          Value ev;
          std::string s;
          if (numericArg(v, x, exact, ev) && exact) s = numberToString(ev, d == 'd' ? 10 : d == 'x' ? 16 : d == 'o' ? 8 : 2);
          else if (isNumber(v) && d == 'd') s = numberToString(v);
          else if (d == 'd' && numericArg(v, x, exact, ev)) s = numberToString(makeFlonum(x));
          else if (!isNumber(v) && d == 'd') s = toDisplayString(v);
          else formatError(std::string("~") + d + " needs an exact integer, got", cons(v, Value::nil()));
          out_ += padLeft(s, params[0], params[1]);
          break;
        }
        case 'f': case 'e': case 'g': {
          Value v = next(args, d);
          double x;
          bool exact;
          Value ev;
          std::string s;
          if (isString(v)) s = std::string(stringView(v));   // SRFI-48: a string is padded as is
          else if (!numericArg(v, x, exact, ev))
            formatError(std::string("~") + d + " needs a real number (or a one-element tensor), got", cons(v, Value::nil()));
          else if (d == 'f' && !params[1].given)
            s = exact ? numberToString(ev) : std::isfinite(x) ? formatFlonum(x) : printfDouble('f', x, params[1]);
          else s = printfDouble(d, x, params[1]);
          out_ += padLeft(s, params[0], Param{});
          break;
        }
        case '?': case 'k': {
          Value sub = next(args, d);
          Value subArgs = next(args, d);
          if (!isString(sub)) formatError("~? needs a format string, got", cons(sub, Value::nil()));
          if (!isList(subArgs)) formatError("~? needs a list of arguments, got", cons(subArgs, Value::nil()));
          Value rest = run(stringView(sub), subArgs);
          if (!rest.isNil()) formatError("too many arguments for the format string " + toWriteString(sub), rest);
          break;
        }
        case 'h':
          out_ += "format directives: ~a ~s ~w ~d ~x ~o ~b ~f ~e ~g ~c ~% ~n ~& ~t ~~ ~? ~y";
          break;
        default:
          formatError(std::string("unknown directive ~") + fmt[i - 1] + " in " + toWriteString(makeString(fmt)));
      }
    }
    return args;
  }

  int startColumn = 0;

 private:
  Value next(Value& args, char directive) {
    if (!isPair(args)) formatError(std::string("too few arguments for the format string (at ~") + directive + ")");
    Value v = car(args);
    args = cdr(args);
    return v;
  }
  bool atLineStart() const {
    if (!out_.empty()) return out_.back() == '\n';
    return startColumn == 0;
  }
  Interp& in_;
  std::string& out_;
};

}  // namespace

void registerFormat(Registry& r) {
  r.def("format", "(dest . args)",
        [](Interp& in, Value dest, RestArgs rest) -> Value {
          Value port = Value::f();
          Value fmt = dest;
          Value args = rest.list;
          if (!isString(dest)) {
            if (dest.isTrue() && !isPort(dest) && dest != Value::t())
              throwTypeError("format", 1, "a format string, #t, #f or an output port", dest);
            if (!isPair(args)) throwError("error", "format: missing the format string");
            fmt = car(args);
            args = cdr(args);
            if (dest == Value::t()) port = in.currentOutputPort();
            else if (isPort(dest)) port = dest;
          }
          if (!isString(fmt)) throwTypeError("format", isString(dest) ? 1 : 2, "a format string", fmt);
          if (isPort(port) && (!portImpl(port)->output || !portImpl(port)->open))
            throwTypeError("format", 1, "an open output port", port);
          std::string out;
          Formatter f(in, out);
          if (isPort(port)) f.startColumn = portImpl(port)->column;
          Value left = f.run(stringView(fmt), args);
          if (!left.isNil()) throwError("error", "format: too many arguments for the format string " + toWriteString(fmt), left);
          if (isPort(port)) {
            portWrite(port, out);
            return Value::unspecified();
          }
          return makeString(out);
        },
        "(format [dest] format-string arg ...): formats ARGs by FORMAT-STRING (SRFI-28/48). Without DEST, "
        "or with DEST #f, returns the string; with #t writes to the current output port; with a port "
        "writes there. Directives: ~a (display), ~s (write), ~d ~x ~o ~b (integers), ~,4f (fixed, 4 "
        "digits), ~8,2f (width 8), ~e ~g, ~c, ~% (newline), ~& (fresh line), ~t, ~~, ~? (a format "
        "string and a list of arguments). ~10a pads to 10 columns; ~5,'0d pads a number with zeros. "
        "Numeric directives accept one-element tensors: (format #t \"loss ~,4f~%\" loss).", kPrimBorrowsArgs);
}

}  // namespace purple
