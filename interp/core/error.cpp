#include "interp/core/error.hpp"
#include "interp/core/gc.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/printer.hpp"

namespace purple {

Root::Root(Value v) {
  auto* cell = static_cast<Value*>(gcAllocRoot(sizeof(Value)));
  *cell = v;
  cell_ = std::shared_ptr<Value>(cell, [](Value* p) { gcFreeRoot(p); });
}

void Root::set(Value v) {
  if (!cell_) *this = Root(v);
  else *cell_ = v;
}

PurpleException::PurpleException(Value payload, bool continuable)
    : payload_(payload), continuable_(continuable) {}

const char* PurpleException::what() const noexcept {
  try {
    Value p = payload_.get();
    what_ = p.is(Kind::ErrorObject) ? errorMessage(p) : "raised: " + toWriteStringBounded(p);
  } catch (...) {
    what_ = "purple error";
  }
  return what_.c_str();
}

std::string errorMessage(Value e) {
  if (!e.is(Kind::ErrorObject)) return toWriteStringBounded(e);
  auto* err = e.as<ErrorObject>();
  std::string out;
  if (isString(err->message)) out += stringView(err->message);
  else out += toWriteStringBounded(err->message);
  // Irritants may be anything a script passed to `error`, a circular list of them included.
  size_t shown = 0;
  for (Value p = err->irritants; isPair(p); p = cdr(p)) {
    if (++shown > 20) {
      out += " ...";
      break;
    }
    out += ' ';
    out += toWriteStringBounded(car(p));
  }
  return out;
}

// Every builtin error goes through here, so each one carries the Purple backtrace from the
// moment it was raised.
[[noreturn]] static void throwErrorObject(Value err) {
  if (Interp* in = Interp::current()) err.as<ErrorObject>()->backtrace = in->backtrace();
  throw PurpleException(err);
}

void throwError(std::string_view kind, std::string message, Value irritants) {
  throwErrorObject(makeError(intern(kind), message, irritants));
}

void throwTypeError(std::string_view who, int argIndex, std::string_view expected, Value got) {
  std::string msg = std::string(who) + ": argument " + std::to_string(argIndex) + " must be " +
                    std::string(expected) + ", got " + toWriteStringBounded(got);
  Value err = makeError(intern("type-error"), msg, Value::nil());
  err.as<ErrorObject>()->who = intern(who);
  throwErrorObject(err);
}

void throwArityError(std::string_view who, int got, std::string_view expected) {
  std::string msg = std::string(who) + ": wrong number of arguments (" + std::to_string(got) +
                    " given; expected " + std::string(expected) + ")";
  Value err = makeError(intern("arity-error"), msg, Value::nil());
  err.as<ErrorObject>()->who = intern(who);
  throwErrorObject(err);
}

// FILE:LINE:COL: MESSAGE, with FORM as the irritant (the analyzer's and the checker's errors).
void throwSyntaxError(const SourcePos& pos, const std::string& message, Value form) {
  std::string where;
  if (pos.line > 0) {
    where = (isString(pos.file) ? std::string(stringView(pos.file)) : std::string("<input>")) + ":" +
            std::to_string(pos.line) + ":" + std::to_string(pos.col) + ": ";
  }
  throwError("syntax-error", where + message, listFromArray(&form, 1));
}

}  // namespace purple
