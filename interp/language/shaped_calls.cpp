// The shaped calls (superinstructions): for a call of an inline builtin whose operands are
// constants, locals or calls, the analyzer picks (appShapeFor) one function specialised for the
// operator and the kinds of its operands, so that `(< n 2)` or `(car l)` costs an indirect call
// and a few loads instead of the evaluator's general dispatch. The tree walker is eval.cpp.
#include "interp/language/eval_internal.hpp"
#include "interp/language/inline_ops.hpp"
#include "interp/language/ownership.hpp"
#include "interp/memory/tensor_value.hpp"
#include <array>
#include <utility>

namespace purple {

namespace {

// + - * < > <= >= = whose two operands are each a constant, a local of this frame or the
// enclosing one, or a call of a procedure that was not a builtin when the call was analyzed
// (`(fib (- n 1))`): one function per operator and operand kinds, chosen by the analyzer
// (AppNode::shape), so that `(< n 2)` costs an indirect call and a few loads instead of the
// dispatch through evalSimple, evalCompound and the checks of the general inline call.
enum OperandKind { kConstOperand, kLocal0Operand, kLocal1Operand, kCallOperand, kInlineCallOperand, kOperandKinds };

template <int K> __attribute__((always_inline)) inline Value shapedOperand(Interp& in, Node* a, Frame* env) {
  if constexpr (K == kConstOperand) return static_cast<ConstNode*>(a)->value;
  else if constexpr (K == kLocal0Operand) return env->slots[static_cast<LocalNode*>(a)->index];
  else if constexpr (K == kLocal1Operand) return env->parent->slots[static_cast<LocalNode*>(a)->index];
  else if constexpr (K == kCallOperand) return in.eval(a, env);
  else {
    // nested builtin calls recurse without an eval activation: guard the C++ stack
    if (reinterpret_cast<char*>(__builtin_frame_address(0)) < in.stackLimit) throwRecursionError(in);
    return (a->flags & kAppShaped) ? static_cast<AppNode*>(a)->shape(in, static_cast<AppNode*>(a), env)
                                   : evalCompound(in, a, env);
  }
}

constexpr bool isLocalOperand(int k) { return k == kLocal0Operand || k == kLocal1Operand; }
constexpr bool isCallOperand(int k) { return k == kCallOperand || k == kInlineCallOperand; }

// Operand I of kind K, read from a variable, as the builtin gets it when the inline code
// declines: in place when lent (ownership.hpp), else marked shared. Constants and the results
// of calls (cells in flight, which the builtin call frees) are passed as they are.
template <int K> __attribute__((always_inline)) inline Value asArgument(Value v, uint32_t i, uint32_t lent) {
  if constexpr (isLocalOperand(K)) return argBit(lent, i) ? v : shareValue(v);
  else return v;
}

// A variable's value read before the next operand's call runs: that call could assign the
// variable and free the cell its slot owned, so the value is marked shared now, unless lent
// (ownership.hpp: no other operand of a lent variable's call assigns it).
template <int A, int B> __attribute__((always_inline)) inline Value beforeCallOperand(Value x, uint32_t lent) {
  if constexpr (isLocalOperand(A) && isCallOperand(B)) return argBit(lent, 0) ? x : shareValue(x);
  else return x;
}

// After the inline code computed RESULT on operand X of kind K: a cell in flight that X was
// (the result of a call) dies, when the builtin borrows its arguments.
template <int K> __attribute__((always_inline)) inline void dropInFlight(Value x, Value fn, Value result) {
  if constexpr (isCallOperand(K)) {
    if (x != result && isSoleOwned(x) && (fn.obj()->flags & kPrimBorrowsArgs)) releaseOwned(x, &result, 1);
  }
}

// Not two fixnums (or a bignum product): the builtin FN, on the values X and Y already computed.
// Out of line, so that the fixnum case needs no saved registers.
template <int A, int B> __attribute__((noinline)) Value declinedArithmetic(Interp& in, AppNode* app, Value fn, Value x,
                                                                          Value y) {
  uint32_t lent = lentToBuiltin(app, fn);
  Value argv[2] = {asArgument<A>(x, 0, lent), asArgument<B>(y, 1, lent)};
  return callInlineBuiltin(in, app, fn, argv, 2, lent);
}

template <int Op, int A, int B> Value shapedArithmetic(Interp& in, AppNode* app, Frame* env) {
  Value fn = static_cast<GlobalNode*>(app->fn)->cell->value;
  if (__builtin_expect(fn != app->expected, 0)) return evalCompound(in, app, env);   // rebound
  // (what is lent is read off the call only where it matters before the fixnum case: `(- n 1)`
  // and `(< n 2)` pay nothing for it)
  constexpr bool earlyLent = isLocalOperand(A) && isCallOperand(B);
  uint32_t lent = earlyLent ? lentToBuiltin(app, fn) : 0;
  Value x = beforeCallOperand<A, B>(shapedOperand<A>(in, app->args[0], env), lent);
  Value y = shapedOperand<B>(in, app->args[1], env);
  Value r;
  if (fixnumArithmetic(InlineBuiltin(Op), x, y, &r)) return r;
  return declinedArithmetic<A, B>(in, app, fn, x, y);
}

// car, cdr, null?, not, zero?, vector-length... on one operand; quotient, remainder, modulo,
// eq?, cons, vector-ref on two. They poll, as every builtin call but fixnum arithmetic does;
// what the inline code declines calls the builtin on the values already computed.
template <int Op, int A> Value shapedUnary(Interp& in, AppNode* app, Frame* env) {
  Value fn = static_cast<GlobalNode*>(app->fn)->cell->value;
  if (__builtin_expect(fn != app->expected, 0)) return evalCompound(in, app, env);
  Value argv[1] = {shapedOperand<A>(in, app->args[0], env)}, r;
  in.poll();
  if (inlinePrimitiveBody(InlineBuiltin(Op), 1, argv, &r)) {
    dropInFlight<A>(argv[0], fn, r);
    return r;
  }
  uint32_t lent = lentToBuiltin(app, fn);
  argv[0] = asArgument<A>(argv[0], 0, lent);
  return callInlineBuiltin(in, app, fn, argv, 1, lent);
}

template <int Op, int A, int B> Value shapedBinary(Interp& in, AppNode* app, Frame* env) {
  Value fn = static_cast<GlobalNode*>(app->fn)->cell->value;
  if (__builtin_expect(fn != app->expected, 0)) return evalCompound(in, app, env);
  uint32_t lent = lentToBuiltin(app, fn);
  Value x = beforeCallOperand<A, B>(shapedOperand<A>(in, app->args[0], env), lent);
  Value argv[2] = {x, shapedOperand<B>(in, app->args[1], env)}, r;
  in.poll();
  if (inlinePrimitiveBody(InlineBuiltin(Op), 2, argv, &r)) {
    dropInFlight<A>(argv[0], fn, r);
    dropInFlight<B>(argv[1], fn, r);
    return r;
  }
  argv[0] = asArgument<A>(argv[0], 0, lent);
  argv[1] = asArgument<B>(argv[1], 1, lent);
  return callInlineBuiltin(in, app, fn, argv, 2, lent);
}

// vector-set! and bytevector-u8-set! on three operands of those kinds: `(vector-set! v i x)`,
// `(vector-set! r i (vector-ref x i))`. Each operand goes through evalShapedFirst, which marks
// a variable's cell shared; neither builtin borrows its arguments (the value is kept).
template <int Op> Value shapedTernary(Interp& in, AppNode* app, Frame* env) {
  Value fn = static_cast<GlobalNode*>(app->fn)->cell->value;
  if (__builtin_expect(fn != app->expected, 0)) return evalCompound(in, app, env);
  // nested builtin calls recurse without an eval activation: guard the C++ stack
  if (app->appArgMask && reinterpret_cast<char*>(__builtin_frame_address(0)) < in.stackLimit) throwRecursionError(in);
  Value argv[3], r;
  argv[0] = evalShapedFirst(in, app->args[0], env);
  argv[1] = evalShapedFirst(in, app->args[1], env);
  argv[2] = evalShapedFirst(in, app->args[2], env);
  in.poll();
  if (inlinePrimitiveBody(InlineBuiltin(Op), 3, argv, &r)) return r;
  return callInlineBuiltin(in, app, fn, argv, 3, 0);
}

constexpr bool isUnaryShape(int op) {
  return op == int(InlineBuiltin::Car) || op == int(InlineBuiltin::Cdr) || op == int(InlineBuiltin::Cadr) ||
         op == int(InlineBuiltin::Cddr) || op == int(InlineBuiltin::NullP) || op == int(InlineBuiltin::PairP) ||
         op == int(InlineBuiltin::Not) || op == int(InlineBuiltin::ZeroP) || op == int(InlineBuiltin::VectorLength) ||
         op == int(InlineBuiltin::BytevectorLength);
}
constexpr bool isBinaryShape(int op) {
  return op == int(InlineBuiltin::Quotient) || op == int(InlineBuiltin::Remainder) ||
         op == int(InlineBuiltin::Modulo) || op == int(InlineBuiltin::Eq) || op == int(InlineBuiltin::Cons) ||
         op == int(InlineBuiltin::VectorRef) || op == int(InlineBuiltin::BytevectorU8Ref);
}
constexpr int kInlineBuiltins = int(InlineBuiltin::BytevectorLength) + 1;

template <int Op, int A> constexpr AppShapeFn unaryShape() {
  if constexpr (isUnaryShape(Op)) return shapedUnary<Op, A>;
  else return nullptr;
}
template <int Op, int A, int B> constexpr AppShapeFn binaryShape() {
  if constexpr (isBinaryShape(Op)) return shapedBinary<Op, A, B>;
  else return nullptr;
}
template <int Op> constexpr std::array<AppShapeFn, kOperandKinds> unaryRow() {
  return {unaryShape<Op, 0>(), unaryShape<Op, 1>(), unaryShape<Op, 2>(), unaryShape<Op, 3>(), unaryShape<Op, 4>()};
}
template <int Op, int A> constexpr std::array<AppShapeFn, kOperandKinds> binaryRow() {
  return {binaryShape<Op, A, 0>(), binaryShape<Op, A, 1>(), binaryShape<Op, A, 2>(), binaryShape<Op, A, 3>(),
          binaryShape<Op, A, 4>()};
}
template <int Op> constexpr std::array<std::array<AppShapeFn, kOperandKinds>, kOperandKinds> binaryTable() {
  return {binaryRow<Op, 0>(), binaryRow<Op, 1>(), binaryRow<Op, 2>(), binaryRow<Op, 3>(), binaryRow<Op, 4>()};
}
template <size_t... Ops>
constexpr std::array<std::array<AppShapeFn, kOperandKinds>, kInlineBuiltins> unaryShapes(std::index_sequence<Ops...>) {
  return {unaryRow<int(Ops)>()...};
}
template <size_t... Ops>
constexpr std::array<std::array<std::array<AppShapeFn, kOperandKinds>, kOperandKinds>, kInlineBuiltins> binaryShapes(
    std::index_sequence<Ops...>) {
  return {binaryTable<int(Ops)>()...};
}
constexpr auto kUnaryShapes = unaryShapes(std::make_index_sequence<kInlineBuiltins>());
constexpr auto kBinaryShapes = binaryShapes(std::make_index_sequence<kInlineBuiltins>());

template <int Op, int A> constexpr std::array<AppShapeFn, kOperandKinds> shapeRow() {
  return {shapedArithmetic<Op, A, 0>, shapedArithmetic<Op, A, 1>, shapedArithmetic<Op, A, 2>,
          shapedArithmetic<Op, A, 3>, shapedArithmetic<Op, A, 4>};
}
template <int Op> constexpr std::array<std::array<AppShapeFn, kOperandKinds>, kOperandKinds> shapeTable() {
  return {shapeRow<Op, 0>(), shapeRow<Op, 1>(), shapeRow<Op, 2>(), shapeRow<Op, 3>(), shapeRow<Op, 4>()};
}
constexpr std::array<std::array<AppShapeFn, kOperandKinds>, kOperandKinds> kArithmeticShapes[] = {
    shapeTable<1>(), shapeTable<2>(), shapeTable<3>(), shapeTable<4>(),
    shapeTable<5>(), shapeTable<6>(), shapeTable<7>(), shapeTable<8>()};
static_assert(uint16_t(InlineBuiltin::Add) == 1 && uint16_t(InlineBuiltin::NumEq) == 8);

int operandKind(Node* a) {
  switch (a->op()) {
    case Op::Const: return kConstOperand;
    case Op::Local0: return kLocal0Operand;
    case Op::Local1: return kLocal1Operand;
    case Op::App: {
      // A builtin's result may be a fresh tensor that the general inline call releases at once:
      // only calls of what is not a builtin now (a closure, a name not yet defined, a variable).
      Node* f = static_cast<AppNode*>(a)->fn;
      if (f->op() == Op::Global && static_cast<GlobalNode*>(f)->cell->value.is(Kind::Primitive)) {
        // `(+ (* a x) c)`, `(car (cdr l))`: a call of an inline builtin, evaluated as evalSimple
        // would; a fresh tensor it returns is released after the outer builtin (callInlineBuiltin)
        Value g = static_cast<GlobalNode*>(f)->cell->value;
        auto* inner = static_cast<AppNode*>(a);
        if (g.obj()->small && !(g.obj()->flags & kPrimUnboxedTensor) && inner->argc - 1 < 3 && !inner->tensorArgMask)
          return kInlineCallOperand;
        return -1;
      }
      return kCallOperand;
    }
    default: return -1;
  }
}

}  // namespace

AppShapeFn appShapeFor(AppNode* app, Value* expected) {
  if (app->argc - 1 > 2 || app->fn->op() != Op::Global || app->tensorArgMask) return nullptr;
  Value fn = static_cast<GlobalNode*>(app->fn)->cell->value;
  if (!fn.is(Kind::Primitive)) return nullptr;
  uint16_t op = fn.obj()->small;
  if (op == 0 || op >= kInlineBuiltins) return nullptr;
  int a = operandKind(app->args[0]);
  if (a < 0) return nullptr;
  AppShapeFn shape;
  if (app->argc == 3) {
    if (operandKind(app->args[1]) < 0 || operandKind(app->args[2]) < 0 || (fn.obj()->flags & kPrimBorrowsArgs))
      return nullptr;
    if (op == uint16_t(InlineBuiltin::VectorSet)) shape = shapedTernary<int(InlineBuiltin::VectorSet)>;
    else if (op == uint16_t(InlineBuiltin::BytevectorU8Set)) shape = shapedTernary<int(InlineBuiltin::BytevectorU8Set)>;
    else return nullptr;
  } else if (app->argc == 1) {
    shape = kUnaryShapes[op][a];
  } else {
    int b = operandKind(app->args[1]);
    if (b < 0) return nullptr;
    shape = op <= uint16_t(InlineBuiltin::NumEq) ? kArithmeticShapes[op - 1][a][b] : kBinaryShapes[op][a][b];
  }
  if (shape) *expected = fn;
  return shape;
}

}  // namespace purple
