// The one error type that crosses C++ frames: a C++ exception carrying a Purple value (an error
// object made by `error` or a builtin, or any object given to `raise`).
#pragma once
#include "interp/core/value.hpp"
#include <exception>
#include <memory>
#include <string>

namespace purple {

// A Value kept alive by the GC while C++ code (an exception, a host, a LibTorch callback) holds it
// where the collector cannot see. Copies share one uncollectable cell.
class Root {
 public:
  Root() = default;
  explicit Root(Value v);
  Value get() const { return cell_ ? *cell_ : Value::unspecified(); }
  void set(Value v);
  explicit operator bool() const { return cell_ != nullptr; }
 private:
  std::shared_ptr<Value> cell_;
};

class PurpleException : public std::exception {
 public:
  PurpleException(Value payload, bool continuable = false);
  Value payload() const { return payload_.get(); }
  bool continuable() const { return continuable_; }
  // True once the exception has been offered to the with-exception-handler handlers between
  // the raise and the nearest guard (raise does that); builtin errors start false, and
  // with-exception-handler offers them to its handler when they pass through.
  bool offered() const { return offered_; }
  void setOffered(bool b) { offered_ = b; }
  const char* what() const noexcept override;   // message plus irritants, one line
 private:
  Root payload_;
  bool continuable_;
  bool offered_ = false;
  mutable std::string what_;
};

// Thrown by an escape continuation; caught by the call/cc that made it.
struct ContinuationInvoked {
  uint64_t id;
  Root values;
};

// Raised when an interrupt, a step budget or a time budget stops evaluation. Not catchable by
// `guard` (a hostile script must not swallow it); the REPL and hosts catch it.
class PurpleInterrupt : public PurpleException {
 public:
  using PurpleException::PurpleException;
};

// Thrown by `exit`: the command-line runner exits with `code`; an embedding host decides.
struct PurpleExit {
  int code;
};

// Builders used by every builtin. `who` names the procedure, as R7RS error objects do.
[[noreturn]] void throwError(std::string_view kind, std::string message, Value irritants = Value::nil());
struct SourcePos;
// A syntax-error whose message starts with POS (file:line:col), FORM as its irritant.
[[noreturn]] void throwSyntaxError(const SourcePos& pos, const std::string& message, Value form);
[[noreturn]] void throwTypeError(std::string_view who, int argIndex, std::string_view expected, Value got);
[[noreturn]] void throwArityError(std::string_view who, int got, std::string_view expected);

std::string errorMessage(Value errorObject);   // "message: irritant ..."

}  // namespace purple
