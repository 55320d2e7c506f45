// The builtins the evaluator runs inline (their Primitive::small), without the general
// primitive call, on the arguments they usually get: fixnum arithmetic, car, null?,
// vector-ref... A builtin so marked is still called for anything the inline code declines
// (other types, errors, bignum results), and whenever its name is rebound to something else.
#pragma once
#include "interp/interp.hpp"
#include "interp/value.hpp"
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

}  // namespace purple
