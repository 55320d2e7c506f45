// The builtins the evaluator runs inline (Primitive::small) beyond the fixnum arithmetic and
// comparisons named in InlineOp (value.hpp): car, null?, vector-ref... on the arguments they
// usually get. A builtin so marked is still called for anything the inline code declines (other
// types, errors, bignum results), and whenever its name is rebound to something else.
#pragma once
#include "interp/interp.hpp"
#include "interp/value.hpp"
#include <stdexcept>
#include <string>
#include <string_view>

namespace purple {

// InlineOp's named values end at NumEq (8); these continue its numbering.
namespace inline_op {
constexpr InlineOp Quotient = InlineOp(9), Remainder = InlineOp(10), Modulo = InlineOp(11);   // fixnums, divisor not 0
constexpr InlineOp ZeroP = InlineOp(12);                                                       // a fixnum
constexpr InlineOp Car = InlineOp(13), Cdr = InlineOp(14), Cadr = InlineOp(15), Cddr = InlineOp(16);   // pairs
constexpr InlineOp NullP = InlineOp(17), PairP = InlineOp(18), Not = InlineOp(19), Eq = InlineOp(20);  // any values
constexpr InlineOp Cons = InlineOp(21);
constexpr InlineOp VectorRef = InlineOp(22), VectorSet = InlineOp(23), VectorLength = InlineOp(24);    // a vector, an index in range
}  // namespace inline_op

// Marks builtin NAME (already registered) to run inline as OP.
inline void inlineInEvaluator(Interp& in, std::string_view name, InlineOp op) {
  Value v = in.lookupGlobal(name);
  if (!v.is(Kind::Primitive)) throw std::logic_error("inlineInEvaluator: " + std::string(name) + " is not a builtin");
  v.as<Primitive>()->small = uint16_t(op);
}

}  // namespace purple
