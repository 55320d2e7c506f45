// The builtins the evaluator runs inline (their Primitive::small), without the general
// primitive call, on the arguments they usually get: fixnum arithmetic, car, null?,
// vector-ref... A builtin so marked is still called for anything the inline code declines
// (other types, errors, bignum results), and whenever its name is rebound to something else.
#pragma once
#include "interp/core/interp.hpp"
#include "interp/core/value.hpp"
#include <stdexcept>
#include <string>
#include <string_view>

namespace purple {

// Extends value.hpp's InlineOp (the arithmetic, whose codes it keeps) without touching
// value.hpp, which every file includes.
enum class InlineBuiltin : uint16_t {
  None = 0, Add, Sub, Mul, Lt, Gt, Le, Ge, NumEq,              // two fixnums
  Quotient, Remainder, Modulo,                                  // two fixnums, divisor not 0
  ZeroP,                                                        // a fixnum
  Car, Cdr, Cadr, Cddr, NullP, PairP, Not, Eq, Cons,            // any values / pairs
  VectorRef, VectorSet, VectorLength,                           // a vector (and a fixnum index in range)
  BytevectorU8Ref, BytevectorU8Set, BytevectorLength,          // a bytevector (index in range, a byte)
};
static_assert(uint16_t(InlineBuiltin::Add) == uint16_t(InlineOp::Add) &&
              uint16_t(InlineBuiltin::NumEq) == uint16_t(InlineOp::NumEq));

// Marks builtin NAME (already registered) to run inline as OP.
inline void inlineInEvaluator(Interp& in, std::string_view name, InlineBuiltin op) {
  Value v = in.lookupGlobal(name);
  if (!v.is(Kind::Primitive)) throw std::logic_error("inlineInEvaluator: " + std::string(name) + " is not a builtin");
  v.as<Primitive>()->small = uint16_t(op);
}

// + - * < > <= >= = (InlineBuiltin::Add to NumEq) on two fixnums, when the result needs no
// bignum product; false means "call the builtin".
__attribute__((always_inline)) inline bool fixnumArithmetic(InlineBuiltin op, Value x, Value y, Value* out) {
  if (!x.isFixnum() || !y.isFixnum()) return false;
  int64_t a = x.fixnum(), b = y.fixnum(), r;
  switch (op) {
    case InlineBuiltin::Add: *out = makeInteger(a + b); return true;   // fixnums are 62-bit: no overflow
    case InlineBuiltin::Sub: *out = makeInteger(a - b); return true;
    case InlineBuiltin::Mul:
      if (__builtin_mul_overflow(a, b, &r)) return false;
      *out = makeInteger(r);
      return true;
    case InlineBuiltin::Lt: *out = Value::boolean(a < b); return true;
    case InlineBuiltin::Gt: *out = Value::boolean(a > b); return true;
    case InlineBuiltin::Le: *out = Value::boolean(a <= b); return true;
    case InlineBuiltin::Ge: *out = Value::boolean(a >= b); return true;
    case InlineBuiltin::NumEq: *out = Value::boolean(a == b); return true;
    default: return false;
  }
}

// + - * < > <= >= = on two flonums, as the builtins compute them (a NaN compares false), without
// the generic numeric dispatch: `(< n 2.)`, `(+ (fibfp (- n 1.)) (fibfp (- n 2.)))`, mbrot's loop.
inline bool flonumArithmetic(InlineBuiltin op, Value x, Value y, Value* out) {
  if (!x.is(Kind::Flonum) || !y.is(Kind::Flonum)) return false;
  double a = flonumValue(x), b = flonumValue(y);
  switch (op) {
    case InlineBuiltin::Add: *out = makeFlonum(a + b); return true;
    case InlineBuiltin::Sub: *out = makeFlonum(a - b); return true;
    case InlineBuiltin::Mul: *out = makeFlonum(a * b); return true;
    case InlineBuiltin::Lt: *out = Value::boolean(a < b); return true;
    case InlineBuiltin::Gt: *out = Value::boolean(a > b); return true;
    case InlineBuiltin::Le: *out = Value::boolean(a <= b); return true;
    case InlineBuiltin::Ge: *out = Value::boolean(a >= b); return true;
    case InlineBuiltin::NumEq: *out = Value::boolean(a == b); return true;
    default: return false;
  }
}

// The builtins with an InlineBuiltin (Primitive::small) on the arguments they take most often;
// false means "call the builtin": other types or counts, errors, bignum results. A value that
// escapes into a pair or vector is marked shared (shareValue), as reading a variable would.
__attribute__((always_inline)) inline bool inlinePrimitiveBody(InlineBuiltin op, uint32_t argc, const Value* argv,
                                                               Value* out) {
  if (argc == 2) {
    Value x = argv[0], y = argv[1];
    if (op <= InlineBuiltin::NumEq) return fixnumArithmetic(op, x, y, out);
    if (x.isFixnum() && y.isFixnum()) {
      int64_t a = x.fixnum(), b = y.fixnum(), r;
      switch (op) {
        case InlineBuiltin::Quotient:
          if (b == 0) return false;
          *out = makeInteger(a / b);   // only fixnum-min / -1 leaves the fixnum range
          return true;
        case InlineBuiltin::Remainder:
          if (b == 0) return false;
          *out = Value::fixnum(a % b);
          return true;
        case InlineBuiltin::Modulo:
          if (b == 0) return false;
          r = a % b;
          if (r != 0 && (r < 0) != (b < 0)) r += b;
          *out = Value::fixnum(r);
          return true;
        default: break;
      }
    }
    switch (op) {
      case InlineBuiltin::Eq: *out = Value::boolean(x == y); return true;
      case InlineBuiltin::Cons: *out = cons(shareValue(x), shareValue(y)); return true;
      case InlineBuiltin::VectorRef:
        if (!x.is(Kind::Vector) || !y.isFixnum() || uint64_t(y.fixnum()) >= x.obj()->extra) return false;
        *out = x.as<Vector>()->items[y.fixnum()];
        return true;
      case InlineBuiltin::BytevectorU8Ref:
        if (!x.is(Kind::Bytevector) || !y.isFixnum() || uint64_t(y.fixnum()) >= x.obj()->extra) return false;
        *out = Value::fixnum(x.as<Bytevector>()->bytes[y.fixnum()]);
        return true;
      default: return false;
    }
  }
  if (argc == 1) {
    Value x = argv[0];
    switch (op) {
      case InlineBuiltin::Car:
        if (!x.is(Kind::Pair)) return false;
        *out = car(x);
        return true;
      // A tail of a list that owns its tensors (ownership.hpp) is marked shared, with them: the
      // list cannot tell where its pairs went.
      case InlineBuiltin::Cdr:
        if (!x.is(Kind::Pair)) return false;
        *out = shareValue(cdr(x));
        return true;
      case InlineBuiltin::Cadr:
        if (!x.is(Kind::Pair) || !cdr(x).is(Kind::Pair)) return false;
        *out = cadr(x);
        return true;
      case InlineBuiltin::Cddr:
        if (!x.is(Kind::Pair) || !cdr(x).is(Kind::Pair)) return false;
        *out = shareValue(cddr(x));
        return true;
      case InlineBuiltin::VectorLength:
        if (!x.is(Kind::Vector)) return false;
        *out = Value::fixnum(x.obj()->extra);
        return true;
      case InlineBuiltin::BytevectorLength:
        if (!x.is(Kind::Bytevector)) return false;
        *out = Value::fixnum(x.obj()->extra);
        return true;
      case InlineBuiltin::NullP: *out = Value::boolean(x.isNil()); return true;
      case InlineBuiltin::PairP: *out = Value::boolean(x.is(Kind::Pair)); return true;
      case InlineBuiltin::Not: *out = Value::boolean(x.isFalse()); return true;
      case InlineBuiltin::ZeroP:
        if (!x.isFixnum()) return false;
        *out = Value::boolean(x.fixnum() == 0);
        return true;
      default: return false;
    }
  }
  if (argc == 3 && op == InlineBuiltin::VectorSet) {
    Value x = argv[0], k = argv[1];
    if (!x.is(Kind::Vector) || !k.isFixnum() || uint64_t(k.fixnum()) >= x.obj()->extra) return false;
    x.as<Vector>()->items[k.fixnum()] = shareValue(argv[2]);
    *out = Value::unspecified();
    return true;
  }
  if (argc == 3 && op == InlineBuiltin::BytevectorU8Set) {
    Value x = argv[0], k = argv[1], b = argv[2];
    if (!x.is(Kind::Bytevector) || !k.isFixnum() || uint64_t(k.fixnum()) >= x.obj()->extra || !b.isFixnum() ||
        uint64_t(b.fixnum()) > 255)
      return false;
    x.as<Bytevector>()->bytes[k.fixnum()] = uint8_t(b.fixnum());
    *out = Value::unspecified();
    return true;
  }
  return false;
}

}  // namespace purple
