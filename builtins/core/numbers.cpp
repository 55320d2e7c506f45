// Numeric procedures of R7RS (scheme base), (scheme inexact), plus bitwise operations and
// random numbers. Generic arithmetic also accepts tensors (numbers broadcast).
#include "builtins/builtins.hpp"
#include "interp/language/inline_ops.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_hooks.hpp"
#include <complex>
#include <cmath>
#include <random>

namespace purple {

namespace {

constexpr uint8_t kArith = kPrimReturnsFresh | kPrimBorrowsArgs;

Value fold(Value* a, int n, Value (*op)(Value, Value), Value identity) {
  if (n == 0) return identity;
  Value acc = a[0];
  if (n == 1) return op(identity, acc);   // (+ x) and (* x) still check the type (and copy a tensor cell)
  for (int i = 1; i < n; i++) acc = op(acc, a[i]);
  return acc;
}

Value compareChain(Value* a, int n, const char* who, int (*test)(Value, Value, const char*)) {
  if (n >= 1 && (isTensor(a[0]) || (n >= 2 && isTensor(a[1])))) {
    if (n != 2) throwError("type-error", std::string(who) + ": tensors are compared two at a time");
    static const TensorBinary ops[] = {TensorBinary::Eq, TensorBinary::Lt, TensorBinary::Gt, TensorBinary::Le, TensorBinary::Ge};
    int k = std::string_view(who) == "=" ? 0 : std::string_view(who) == "<" ? 1 : std::string_view(who) == ">" ? 2
          : std::string_view(who) == "<=" ? 3 : 4;
    return tensorBinary(ops[k], a[0], a[1]);
  }
  for (int i = 0; i < n; i++) requireNumber(a[i], who, i + 1);
  bool ok = true;
  for (int i = 0; i + 1 < n; i++)
    if (!test(a[i], a[i + 1], who)) ok = false;   // keep checking types of the rest
  return Value::boolean(ok);
}

int testEq(Value x, Value y, const char* w) { return numEq(x, y, w); }
int testLt(Value x, Value y, const char* w) { return numLess(x, y, w); }
int testGt(Value x, Value y, const char* w) { return numLess(y, x, w); }
int testLe(Value x, Value y, const char* w) {
  if (isFlonum(x) && std::isnan(flonumValue(x))) return 0;
  if (isFlonum(y) && std::isnan(flonumValue(y))) return 0;
  return !numLess(y, x, w);
}
int testGe(Value x, Value y, const char* w) { return testLe(y, x, w); }

Value minMax(Value* a, int n, bool isMax, const char* who) {
  Value best = a[0];
  bool inexact = false;
  for (int i = 0; i < n; i++) {
    if (isTensor(a[i])) {
      Value acc = a[0];
      for (int k = 1; k < n; k++) acc = tensorBinary(isMax ? TensorBinary::Max : TensorBinary::Min, acc, a[k]);
      return acc;
    }
    requireNumber(a[i], who, i + 1);
    if (isFlonum(a[i])) inexact = true;
  }
  for (int i = 1; i < n; i++) {
    if (isFlonum(a[i]) && std::isnan(flonumValue(a[i]))) return a[i];
    if (isMax ? numLess(best, a[i], who) : numLess(a[i], best, who)) best = a[i];
  }
  return inexact ? numInexact(best) : best;
}

double realArg(Value v, const char* who, int index = 1) {
  if (!isRealNumber(v)) throwTypeError(who, index, "a real number", v);
  return toDouble(v);
}

// The complex function of a complex argument (std::complex's principal branches, as R7RS and
// Python's cmath use).
Value complexMath(Value v, TensorUnary op, const char* who) {
  std::complex<double> z(toDouble(v.as<Compnum>()->re), toDouble(v.as<Compnum>()->im)), r;
  switch (op) {
    case TensorUnary::Exp: r = std::exp(z); break;
    case TensorUnary::Sin: r = std::sin(z); break;
    case TensorUnary::Cos: r = std::cos(z); break;
    case TensorUnary::Tan: r = std::tan(z); break;
    case TensorUnary::Asin: r = std::asin(z); break;
    case TensorUnary::Acos: r = std::acos(z); break;
    case TensorUnary::Atan: r = std::atan(z); break;
    default: throwTypeError(who, 1, "a real number", v);
  }
  return makeRectangular(makeFlonum(r.real()), makeFlonum(r.imag()));
}

Value unaryMath(Value v, TensorUnary op, double (*fn)(double), const char* who) {
  if (isTensor(v)) return tensorUnary(op, v);
  if (isCompnum(v)) return complexMath(v, op, who);
  if (!isNumber(v)) throwTypeError(who, 1, "a number", v);
  return makeFlonum(fn(realArg(v, who)));
}

std::mt19937_64& rng() {
  if (Interp* in = Interp::current()) {
    if (!in->randomGenerator) in->randomGenerator = std::make_shared<std::mt19937_64>(std::random_device{}());
    return *static_cast<std::mt19937_64*>(in->randomGenerator.get());
  }
  static thread_local std::mt19937_64 g(std::random_device{}());
  return g;
}

}  // namespace

void registerNumbers(Registry& r) {
  r.defRaw("+", "(:rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo*) { return fold(a, n, numAdd, Value::fixnum(0)); },
           "Sum of the NUMBERS (tensors broadcast elementwise).", kArith);
  r.defRaw("*", "(:rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo*) { return fold(a, n, numMul, Value::fixnum(1)); },
           "Product of the NUMBERS (tensors multiply elementwise).", kArith);
  r.defRaw("-", "(number :rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo* info) {
    checkArity(info, n);
    if (n == 1) return numNegate(a[0]);
    Value acc = a[0];
    for (int i = 1; i < n; i++) acc = numSub(acc, a[i]);
    return acc;
  }, "Difference of the NUMBERS, or the negation of a single one.", kArith);
  r.defRaw("/", "(number :rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo* info) {
    checkArity(info, n);
    if (n == 1) return numDiv(Value::fixnum(1), a[0]);
    Value acc = a[0];
    for (int i = 1; i < n; i++) acc = numDiv(acc, a[i]);
    return acc;
  }, "Quotient of the NUMBERS (exact division of exact numbers gives a rational), or the reciprocal of one.", kArith);
  r.defRaw("=", "(number :rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo* info) {
    checkArity(info, n); return compareChain(a, n, "=", testEq); }, "True if all NUMBERS are numerically equal.", kArith);
  r.defRaw("<", "(number :rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo* info) {
    checkArity(info, n); return compareChain(a, n, "<", testLt); }, "True if the NUMBERS increase strictly.", kArith);
  r.defRaw(">", "(number :rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo* info) {
    checkArity(info, n); return compareChain(a, n, ">", testGt); }, "True if the NUMBERS decrease strictly.", kArith);
  r.defRaw("<=", "(number :rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo* info) {
    checkArity(info, n); return compareChain(a, n, "<=", testLe); }, "True if the NUMBERS never decrease.", kArith);
  r.defRaw(">=", "(number :rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo* info) {
    checkArity(info, n); return compareChain(a, n, ">=", testGe); }, "True if the NUMBERS never increase.", kArith);
  r.defRaw("max", "(number :rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo* info) {
    checkArity(info, n); return minMax(a, n, true, "max"); }, "Largest of the NUMBERS (inexact if any is); elementwise for tensors.", kArith);
  r.defRaw("min", "(number :rest numbers)", [](Interp&, Value* a, int n, PrimitiveInfo* info) {
    checkArity(info, n); return minMax(a, n, false, "min"); }, "Smallest of the NUMBERS (inexact if any is); elementwise for tensors.", kArith);

  r.def("number?", "(obj)", [](Value v) { return isNumber(v); }, "True if OBJ is a number.");
  r.alias("complex?", "number?");
  r.def("real?", "(obj)", [](Value v) { return isRealNumber(v); }, "True if OBJ is a real number.");
  r.def("rational?", "(obj)", [](Value v) {
    return isExactRational(v) || (isFlonum(v) && std::isfinite(flonumValue(v)));
  }, "True if OBJ is a rational number (finite reals are).");
  r.def("integer?", "(obj)", [](Value v) { return isNumber(v) && numIsInteger(v); }, "True if OBJ is an integer (2 and 2.0 are).");
  r.def("exact?", "(z)", [](Value v) { requireNumber(v, "exact?", 1); return numIsExact(v); }, "True if Z is exact.");
  r.def("inexact?", "(z)", [](Value v) { requireNumber(v, "inexact?", 1); return !numIsExact(v); }, "True if Z is inexact.");
  r.def("exact-integer?", "(obj)", [](Value v) { return isExactInteger(v); }, "True if OBJ is an exact integer.");
  r.def("exact-rational?", "(obj)", [](Value v) { return isExactRational(v); }, "True if OBJ is an exact rational.");
  // Complex numbers: NaN or infinite when either part is; finite when both parts are.
  auto parts = [](Value v, const char* who, auto test, bool any) {
    requireNumber(v, who, 1);
    Value re = isCompnum(v) ? v.as<Compnum>()->re : v, im = isCompnum(v) ? v.as<Compnum>()->im : Value::fixnum(0);
    bool a = test(re), b = test(im);
    return any ? (a || b) : (a && b);
  };
  r.def("nan?", "(z)", [parts](Value v) {
    return parts(v, "nan?", [](Value x) { return isFlonum(x) && std::isnan(flonumValue(x)); }, true);
  }, "True if Z is a NaN (or has a NaN part).");
  r.def("infinite?", "(z)", [parts](Value v) {
    return parts(v, "infinite?", [](Value x) { return isFlonum(x) && std::isinf(flonumValue(x)); }, true);
  }, "True if Z is an infinity (or has an infinite part).");
  r.def("finite?", "(z)", [parts](Value v) {
    return parts(v, "finite?", [](Value x) { return !isFlonum(x) || std::isfinite(flonumValue(x)); }, false);
  }, "True if Z is finite (both parts, for a complex number).");
  r.def("zero?", "(z)", [](Value v) { requireNumber(v, "zero?", 1); return numIsZero(v); }, "True if Z is zero.");
  r.def("positive?", "(x)", [](Value v) { requireNumber(v, "positive?", 1); return numSign(v) > 0; }, "True if X is positive.");
  r.def("negative?", "(x)", [](Value v) { requireNumber(v, "negative?", 1); return numSign(v) < 0; }, "True if X is negative.");
  r.def("odd?", "(n)", [](Value v) { requireInteger(v, "odd?", 1); return !numIsZero(numRemainder(v, Value::fixnum(2), "odd?")); }, "True if N is odd.");
  r.def("even?", "(n)", [](Value v) { requireInteger(v, "even?", 1); return numIsZero(numRemainder(v, Value::fixnum(2), "even?")); }, "True if N is even.");
  r.def("abs", "(x)", [](Value v) {
    if (isTensor(v)) return tensorUnary(TensorUnary::Abs, v);
    requireNumber(v, "abs", 1);
    return numSign(v) < 0 ? numNegate(v) : v;
  }, "Absolute value of X (elementwise for a tensor).");
  r.def("magnitude", "(z)", [](Value v) -> Value {
    if (isCompnum(v)) return makeFlonum(std::hypot(toDouble(v.as<Compnum>()->re), toDouble(v.as<Compnum>()->im)));
    requireNumber(v, "magnitude", 1);
    return numSign(v) < 0 ? numNegate(v) : v;
  }, "The magnitude of Z: the absolute value of a real.");
  r.def("make-rectangular", "(x y)", [](Value x, Value y) {
    if (!isRealNumber(x)) throwTypeError("make-rectangular", 1, "a real number", x);
    if (!isRealNumber(y)) throwTypeError("make-rectangular", 2, "a real number", y);
    return makeRectangular(x, y);
  }, "The complex number X + Yi.");
  r.def("make-polar", "(magnitude angle)", [](Value m, Value a) -> Value {
    if (!isRealNumber(m)) throwTypeError("make-polar", 1, "a real number", m);
    if (!isRealNumber(a)) throwTypeError("make-polar", 2, "a real number", a);
    if (numIsExact(a) && numIsZero(a)) return m;
    double md = toDouble(m), ad = toDouble(a);
    return makeRectangular(makeFlonum(md * std::cos(ad)), makeFlonum(md * std::sin(ad)));
  }, "The complex number with MAGNITUDE and ANGLE (radians).");
  r.def("real-part", "(z)", [](Value v) -> Value {
    requireNumber(v, "real-part", 1);
    return isCompnum(v) ? v.as<Compnum>()->re : v;
  }, "The real part of Z.");
  r.def("imag-part", "(z)", [](Value v) -> Value {
    requireNumber(v, "imag-part", 1);
    return isCompnum(v) ? v.as<Compnum>()->im : Value::fixnum(0);
  }, "The imaginary part of Z (exact 0 for a real).");
  r.def("angle", "(z)", [](Value v) -> Value {
    requireNumber(v, "angle", 1);
    if (isCompnum(v)) return makeFlonum(std::atan2(toDouble(v.as<Compnum>()->im), toDouble(v.as<Compnum>()->re)));
    if (numSign(v) < 0) return makeFlonum(M_PI);
    return numIsExact(v) ? Value::fixnum(0) : makeFlonum(0.0);
  }, "The angle of Z in radians.");
  r.def("quotient", "(n1 n2)", [](Value a, Value b) { return numQuotient(a, b, "quotient"); }, "N1 divided by N2, truncated.");
  r.def("remainder", "(n1 n2)", [](Value a, Value b) { return numRemainder(a, b, "remainder"); }, "Remainder of truncated division; sign of N1.");
  r.def("modulo", "(n1 n2)", [](Value a, Value b) { return numModulo(a, b, "modulo"); }, "Remainder of floored division; sign of N2.");
  r.alias("truncate-quotient", "quotient");
  r.alias("truncate-remainder", "remainder");
  r.alias("floor-remainder", "modulo");
  r.def("floor-quotient", "(n1 n2)", [](Value a, Value b) {
    return numQuotient(numSub(a, numModulo(a, b, "floor-quotient")), b, "floor-quotient");
  }, "N1 divided by N2, rounded toward negative infinity.");
  r.def("floor/", "(n1 n2)", [](Value a, Value b) {
    Value m = numModulo(a, b, "floor/");
    Value q = numQuotient(numSub(a, m), b, "floor/");
    Value vs[2] = {q, m};
    return makeValues(vs, 2);
  }, "Floored quotient and remainder of N1 and N2, as two values.");
  r.def("truncate/", "(n1 n2)", [](Value a, Value b) {
    Value vs[2] = {numQuotient(a, b, "truncate/"), numRemainder(a, b, "truncate/")};
    return makeValues(vs, 2);
  }, "Truncated quotient and remainder of N1 and N2, as two values.");
  r.defRaw("gcd", "(:rest integers)", [](Interp&, Value* a, int n, PrimitiveInfo*) {
    Value acc = Value::fixnum(0);
    for (int i = 0; i < n; i++) acc = numGcd(acc, a[i]);
    return acc;
  }, "Greatest common divisor of the INTEGERS (0 for none).");
  r.defRaw("lcm", "(:rest integers)", [](Interp&, Value* a, int n, PrimitiveInfo*) {
    Value acc = Value::fixnum(1);
    for (int i = 0; i < n; i++) {
      if (numIsZero(a[i])) return isFlonum(a[i]) ? makeFlonum(0.0) : Value::fixnum(0);
      Value g = numGcd(acc, a[i]);
      acc = numQuotient(numMul(acc, a[i]), g, "lcm");
      if (numSign(acc) < 0) acc = numNegate(acc);
    }
    return acc;
  }, "Least common multiple of the INTEGERS (1 for none).");
  r.def("floor", "(x)", [](Value v) { return numFloor(v); }, "Largest integer not above X.");
  r.def("ceiling", "(x)", [](Value v) { return numCeiling(v); }, "Smallest integer not below X.");
  r.def("round", "(x)", [](Value v) { return numRound(v); }, "X rounded to the nearest integer, ties to even.");
  r.def("truncate", "(x)", [](Value v) { return numTruncate(v); }, "X rounded toward zero.");
  r.def("numerator", "(q)", [](Value v) { return numNumerator(v); }, "Numerator of Q in lowest terms.");
  r.def("denominator", "(q)", [](Value v) { return numDenominator(v); }, "Denominator of Q in lowest terms.");
  r.def("exact", "(z)", [](Value v) { return numExact(v); }, "The exact number nearest Z.");
  r.def("inexact", "(z)", [](Value v) { requireNumber(v, "inexact", 1); return numInexact(v); }, "The inexact number nearest Z.");
  r.alias("inexact->exact", "exact");
  r.alias("exact->inexact", "inexact");
  r.def("rationalize", "(x y)", [](Value x, Value y) {
    // simplest rational within y of x (Stern-Brocot search on exact values)
    bool inexact = isFlonum(x) || isFlonum(y);
    Value ex = numExact(x), ey = numExact(y);
    if (numSign(ey) < 0) ey = numNegate(ey);
    Value lo = numSub(ex, ey), hi = numAdd(ex, ey);
    std::function<Value(Value, Value)> simplest = [&](Value a, Value b) -> Value {
      Value fa = numFloor(a);
      if (numEq(fa, a, "rationalize")) return fa;
      if (numLess(fa, numFloor(b), "rationalize")) return numAdd(fa, Value::fixnum(1));
      Value rest = simplest(numDiv(Value::fixnum(1), numSub(b, fa)), numDiv(Value::fixnum(1), numSub(a, fa)));
      return numAdd(fa, numDiv(Value::fixnum(1), rest));
    };
    Value result;
    if (numSign(lo) > 0) result = simplest(lo, hi);
    else if (numSign(hi) < 0) result = numNegate(simplest(numNegate(hi), numNegate(lo)));
    else result = Value::fixnum(0);
    return inexact ? numInexact(result) : result;
  }, "The simplest rational within Y of X.");
  r.def("square", "(z)", [](Value v) { return numMul(v, v); }, "Z times Z.");
  r.def("exact-integer-sqrt", "(k)", [](Value v) {
    Value rem;
    Value s = numExactIntegerSqrt(v, &rem);
    Value vs[2] = {s, rem};
    return makeValues(vs, 2);
  }, "Integer square root S of K and K - S*S, as two values.");
  r.def("sqrt", "(z)", [](Value v) { return numSqrt(v); },
        "Square root of Z: exact for exact squares, complex for negative numbers; elementwise for a tensor.");
  r.def("expt", "(z1 z2)", [](Value a, Value b) { return numExpt(a, b); }, "Z1 raised to the power Z2 (exact when both are exact and Z2 an integer).");
  r.def("exp", "(z)", [](Value v) { return unaryMath(v, TensorUnary::Exp, std::exp, "exp"); }, "e to the power Z.");
  r.def("log", "(z :optional base)", [](Value v, Value base) {
    if (isTensor(v)) {
      Value l = tensorUnary(TensorUnary::Log, v);
      return base.isMissing() ? l : tensorBinary(TensorBinary::Div, l, makeFlonum(std::log(realArg(base, "log", 2))));
    }
    if (isCompnum(v) || (isRealNumber(v) && numSign(v) < 0)) {
      double re = toDouble(isCompnum(v) ? v.as<Compnum>()->re : v), im = isCompnum(v) ? toDouble(v.as<Compnum>()->im) : 0.0;
      Value l = makeRectangular(makeFlonum(std::log(std::hypot(re, im))), makeFlonum(std::atan2(im, re)));
      return base.isMissing() ? l : numDiv(l, makeFlonum(std::log(realArg(base, "log", 2))));
    }
    double x = realArg(v, "log");
    if (base.isMissing()) return makeFlonum(std::log(x));
    return makeFlonum(std::log(x) / std::log(realArg(base, "log", 2)));
  }, "Natural logarithm of Z, or its logarithm in BASE.");
  r.def("sin", "(z)", [](Value v) { return unaryMath(v, TensorUnary::Sin, std::sin, "sin"); }, "Sine of Z (radians).");
  r.def("cos", "(z)", [](Value v) { return unaryMath(v, TensorUnary::Cos, std::cos, "cos"); }, "Cosine of Z (radians).");
  r.def("tan", "(z)", [](Value v) { return unaryMath(v, TensorUnary::Tan, std::tan, "tan"); }, "Tangent of Z (radians).");
  r.def("asin", "(z)", [](Value v) { return unaryMath(v, TensorUnary::Asin, std::asin, "asin"); }, "Arc sine of Z.");
  r.def("acos", "(z)", [](Value v) { return unaryMath(v, TensorUnary::Acos, std::acos, "acos"); }, "Arc cosine of Z.");
  r.def("atan", "(y :optional x)", [](Value y, Value x) {
    if (x.isMissing()) return unaryMath(y, TensorUnary::Atan, std::atan, "atan");
    return makeFlonum(std::atan2(realArg(y, "atan"), realArg(x, "atan", 2)));
  }, "Arc tangent of Y, or of Y/X using both signs to pick the quadrant.");
  r.def("number->string", "(z :optional (radix 10))", [](Value v, int radix) {
    requireNumber(v, "number->string", 1);
    if (radix != 2 && radix != 8 && radix != 10 && radix != 16) throwError("error", "number->string: radix must be 2, 8, 10 or 16");
    return makeString(numberToString(v, radix));
  }, "Z written in RADIX.", kPrimFreshString);
  r.def("string->number", "(string :optional (radix 10))", [](std::string s, int radix) {
    auto v = parseNumber(s, radix);
    return v ? *v : Value::f();
  }, "The number STRING spells in RADIX, or #f.");
  r.def("bitwise-and", "(:rest ints)", [](RestArgs a) {
    Value acc = Value::fixnum(-1);
    for (Value p = a.list; isPair(p); p = cdr(p)) acc = numBitwise('&', acc, car(p));
    return acc;
  }, "Bitwise and of exact integers.");
  r.def("bitwise-or", "(:rest ints)", [](RestArgs a) {
    Value acc = Value::fixnum(0);
    for (Value p = a.list; isPair(p); p = cdr(p)) acc = numBitwise('|', acc, car(p));
    return acc;
  }, "Bitwise inclusive or of exact integers.");
  r.def("bitwise-xor", "(:rest ints)", [](RestArgs a) {
    Value acc = Value::fixnum(0);
    for (Value p = a.list; isPair(p); p = cdr(p)) acc = numBitwise('^', acc, car(p));
    return acc;
  }, "Bitwise exclusive or of exact integers.");
  r.def("bitwise-not", "(n)", [](Value v) { return numSub(Value::fixnum(-1), v); }, "Bitwise complement of N.");
  r.def("arithmetic-shift", "(n count)", [](Value v, int64_t c) { return numShift(v, c); },
        "N shifted left by COUNT bits (right when COUNT is negative).");
  r.def("random", "(n)", [](Value v) -> Value {
    if (isFlonum(v)) return makeFlonum(std::uniform_real_distribution<double>(0.0, flonumValue(v))(rng()));
    if (!v.isFixnum() || v.fixnum() <= 0) throwTypeError("random", 1, "a positive integer or real", v);
    return Value::fixnum(int64_t(std::uniform_int_distribution<uint64_t>(0, uint64_t(v.fixnum() - 1))(rng())));
  }, "A random integer in [0, N), or a random real in [0, N) when N is inexact.");
  // Fixnum fast paths the evaluator runs without calling these builtins (see interp/language/inline_ops.hpp).
  const std::pair<const char*, InlineBuiltin> inlined[] = {
      {"+", InlineBuiltin::Add}, {"-", InlineBuiltin::Sub}, {"*", InlineBuiltin::Mul}, {"<", InlineBuiltin::Lt},
      {">", InlineBuiltin::Gt},  {"<=", InlineBuiltin::Le}, {">=", InlineBuiltin::Ge}, {"=", InlineBuiltin::NumEq},
      {"quotient", InlineBuiltin::Quotient}, {"remainder", InlineBuiltin::Remainder}, {"modulo", InlineBuiltin::Modulo},
      {"zero?", InlineBuiltin::ZeroP}};
  for (const auto& [name, op] : inlined) inlineInEvaluator(r.interp(), name, op);
  r.def("random-seed!", "(seed)", [](int64_t s) { rng().seed(uint64_t(s)); }, "Seeds the generator used by random. Each interpreter has its own.");
}

}  // namespace purple
