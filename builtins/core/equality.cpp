// eq?, eqv?, equal?: raw primitives, because they sit in hot loops (memv, case, assoc).
#include "builtins/builtins.hpp"
#include "interp/language/inline_ops.hpp"
#include "interp/language/equality.hpp"

namespace purple {

namespace {
Value primEq(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::boolean(argv[0] == argv[1]);
}
Value primEqv(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::boolean(eqv(argv[0], argv[1]));
}
Value primEqual(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::boolean(equalValues(argv[0], argv[1]));
}
}  // namespace

void registerEquality(Registry& r) {
  r.defRaw("eq?", "(obj1 obj2)", primEq,
           "True when OBJ1 and OBJ2 are the same object. Small integers, characters, booleans, "
           "the empty list and symbols with the same name are always eq?.",
           kPrimBorrowsArgs);
  inlineInEvaluator(r.interp(), "eq?", InlineBuiltin::Eq);
  r.defRaw("eqv?", "(obj1 obj2)", primEqv,
           "Like eq?, but numbers are compared by exactness and value: (eqv? 2.0 2.0) is #t, "
           "(eqv? 2 2.0) is #f, (eqv? 0.0 -0.0) is #f. Strings, pairs and vectors compare by identity.",
           kPrimBorrowsArgs);
  r.defRaw("equal?", "(obj1 obj2)", primEqual,
           "Structural equality: pairs, vectors, strings and bytevectors are equal? when their "
           "contents are; other objects as by eqv?. Terminates on circular structures.",
           kPrimBorrowsArgs);
}

}  // namespace purple
