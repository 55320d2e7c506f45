// Numeric tower. Fixnum arithmetic is inline and overflow-checked; everything exact beyond it
// goes through GMP (mpz for integers, mpq for rationals) on the slow path. Bignum limbs are
// stored inside GC objects, so GMP's own allocator is never replaced (a host may use GMP too).
#include "interp/language/numbers.hpp"
#include "interp/core/error.hpp"
#include "interp/limits/gmp_worker.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_hooks.hpp"
#include <gmp.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace purple {

namespace {

// Exact integers stop at 2^26 bits (8 MB, about 20 million decimal digits). GMP aborts the
// process when a number outgrows its own limit, and one GMP operation cannot be interrupted:
// at this size a gcd takes about 20 s, so operations on big operands run on a worker thread
// while this one polls (interp/limits/gmp_worker.hpp). Operations that can make an integer much larger (*, expt,
// arithmetic-shift, rational arithmetic, reading a numeral) check the size before computing;
// powers and conversions to and from text proceed in steps that poll for interrupts.
constexpr uint64_t kMaxIntegerBits = uint64_t(1) << 26;

uint64_t integerBits(Value v) {
  if (v.isFixnum()) {
    int64_t x = v.fixnum();
    uint64_t m = uint64_t(x < 0 ? -x : x);
    return m ? 64 - uint64_t(__builtin_clzll(m)) : 0;
  }
  if (isBignum(v)) return uint64_t(v.as<Bignum>()->extra) * 64;
  return 0;
}

// Bits of an exact rational's numerator and denominator together (0 for anything else).
uint64_t exactBits(Value v) {
  if (isRatnum(v)) return integerBits(v.as<Ratnum>()->num) + integerBits(v.as<Ratnum>()->den);
  return integerBits(v);
}

[[noreturn]] void integerTooLarge(const char* who) {
  throwError("range-error", std::string(who) + ": the exact result would have more than " +
                                std::to_string(kMaxIntegerBits) + " bits (the limit for exact integers)");
}

void checkBits(uint64_t bits, const char* who) {
  if (bits > kMaxIntegerBits) integerTooLarge(who);
}

struct Z {
  mpz_t z;
  Z() { mpz_init(z); }
  ~Z() { mpz_clear(z); }
  Z(const Z&) = delete;
};
struct Q {
  mpq_t q;
  Q() { mpq_init(q); }
  ~Q() { mpq_clear(q); }
  Q(const Q&) = delete;
};

void setZ(mpz_t z, Value v) {
  if (v.isFixnum()) {
    mpz_set_si(z, long(v.fixnum()));
    return;
  }
  auto* b = v.as<Bignum>();
  size_t n = b->extra;
  mp_limb_t* d = mpz_limbs_write(z, long(n));
  std::memcpy(d, b->limbs, n * sizeof(mp_limb_t));
  mpz_limbs_finish(z, b->small ? -long(n) : long(n));
}

Value fromZ(const mpz_t z) {
  if (mpz_fits_slong_p(z)) {
    long v = mpz_get_si(z);
    if (Value::fitsFixnum(v)) return Value::fixnum(v);
  }
  size_t n = mpz_size(z);
  if (n > kMaxIntegerBits / 64 + 1) integerTooLarge("exact integer");
  auto* b = static_cast<Bignum*>(gcAllocAtomic(sizeof(Bignum) + (n ? n - 1 : 0) * sizeof(uint64_t)));
  b->kind = Kind::Bignum;
  b->flags = 0;
  b->small = mpz_sgn(z) < 0 ? 1 : 0;
  b->extra = uint32_t(n);
  std::memcpy(b->limbs, mpz_limbs_read(z), n * sizeof(mp_limb_t));
  return Value(b);
}

void setQ(mpq_t q, Value v) {
  if (isRatnum(v)) {
    setZ(mpq_numref(q), v.as<Ratnum>()->num);
    setZ(mpq_denref(q), v.as<Ratnum>()->den);
  } else {
    setZ(mpq_numref(q), v);
    mpz_set_ui(mpq_denref(q), 1);
  }
}

// q must be canonical, as everything GMP's rational arithmetic returns is: canonicalizing again
// would compute one more gcd, the most expensive GMP operation.
Value fromQ(mpq_t q) {
  if (mpz_cmp_ui(mpq_denref(q), 1) == 0) return fromZ(mpq_numref(q));
  auto* r = allocObject<Ratnum>(Kind::Ratnum);
  r->num = fromZ(mpq_numref(q));
  r->den = fromZ(mpq_denref(q));
  return Value(r);
}

[[noreturn]] void notANumber(const char* who, int index, Value v) { throwTypeError(who, index, "a number", v); }

Value realPart(Value v) { return isCompnum(v) ? v.as<Compnum>()->re : v; }
Value imagPart(Value v) { return isCompnum(v) ? v.as<Compnum>()->im : Value::fixnum(0); }

enum class ComplexOp { Add, Sub, Mul, Div };

// Complex arithmetic on the parts, which are any reals (exact parts stay exact).
Value complexBinary(ComplexOp op, Value a, Value b) {
  Value ar = realPart(a), ai = imagPart(a), br = realPart(b), bi = imagPart(b);
  switch (op) {
    case ComplexOp::Add: return makeRectangular(numAdd(ar, br), numAdd(ai, bi));
    case ComplexOp::Sub: return makeRectangular(numSub(ar, br), numSub(ai, bi));
    case ComplexOp::Mul:
      return makeRectangular(numSub(numMul(ar, br), numMul(ai, bi)), numAdd(numMul(ar, bi), numMul(ai, br)));
    case ComplexOp::Div: {
      Value den = numAdd(numMul(br, br), numMul(bi, bi));
      if (numIsZero(den)) throwError("error", "/: division by zero");
      Value re = numAdd(numMul(ar, br), numMul(ai, bi));
      Value im = numSub(numMul(ai, br), numMul(ar, bi));
      return makeRectangular(numDiv(re, den), numDiv(im, den));
    }
  }
  return Value::f();
}

// Which representation an operation on a and b runs in.
enum class Rep { Fix, Int, Rat, Flo };
Rep repOf(Value v, const char* who, int index) {
  if (v.isFixnum()) return Rep::Fix;
  if (v.isObject()) {
    switch (v.obj()->kind) {
      case Kind::Flonum: return Rep::Flo;
      case Kind::Bignum: return Rep::Int;
      case Kind::Ratnum: return Rep::Rat;
      default: break;
    }
  }
  notANumber(who, index, v);
}
Rep joinRep(Rep a, Rep b) { return a > b ? a : b; }

// z = z^k, refused up front past the size limit, and squared step by step with a poll between
// steps (one mpz_pow_ui call could run for minutes).
void powInterruptible(mpz_t z, unsigned long k, const char* who) {
  if (k == 0) {
    mpz_set_ui(z, 1);
    return;
  }
  if (mpz_cmpabs_ui(z, 1) <= 0) {   // 0, 1 and -1
    if (mpz_sgn(z) < 0 && !(k & 1)) mpz_neg(z, z);
    return;
  }
  uint64_t bits = mpz_sizeinbase(z, 2);
  if (k > kMaxIntegerBits || (bits - 1) * k + 1 > kMaxIntegerBits) integerTooLarge(who);
  if ((bits - 1) * k < (uint64_t(1) << 20)) {
    mpz_pow_ui(z, z, k);
    return;
  }
  Z base;
  mpz_set(base.z, z);
  mpz_set_ui(z, 1);
  for (int bit = 63 - __builtin_clzl(k); bit >= 0; bit--) {
    bool timesBase = (k >> bit) & 1;
    computeGmp(2 * mpz_sizeinbase(z, 2), kGmpWorkerBitsMultiply, {z, base.z}, {}, [timesBase](mpz_ptr* zs, mpq_ptr*) {
      mpz_mul(zs[0], zs[0], zs[0]);
      if (timesBase) mpz_mul(zs[0], zs[0], zs[1]);
    });
    pollCurrentInterp();
  }
}

// R7RS exponent markers. Not strchr on a literal alone: it finds a NUL character too (the
// terminator), which made "1\0002" read as 100.0 (a fuzz finding).
bool isExponentMarker(char c) { return c != '\0' && std::strchr("eEsSfFdDlL", c) != nullptr; }

// Digits of a non-negative z in `radix`, at least `width` of them (zero-padded). Large numbers
// are split at a power of the radix, halves first, with a poll at each split: mpz_get_str on
// a 20-million-digit number is one call of many seconds.
void appendDigits(std::string& out, const mpz_t z, int radix, size_t width) {
  size_t digits = mpz_sizeinbase(z, radix);
  if (digits < 20000) {
    char* s = mpz_get_str(nullptr, radix, z);
    size_t n = std::strlen(s);
    if (n < width) out.append(width - n, '0');
    out += s;
    free(s);
    return;
  }
  pollCurrentInterp();
  size_t low = digits / 2;
  Z whole, high, rest;
  mpz_set(whole.z, z);
  computeGmp(mpz_sizeinbase(z, 2), kGmpWorkerBitsMultiply, {whole.z, high.z, rest.z}, {},
             [radix, low](mpz_ptr* zs, mpq_ptr*) {
               mpz_t scale;
               mpz_init(scale);
               mpz_ui_pow_ui(scale, (unsigned long)radix, low);
               mpz_tdiv_qr(zs[1], zs[2], zs[0], scale);
               mpz_clear(scale);
             });
  appendDigits(out, high.z, radix, width > low ? width - low : 0);
  appendDigits(out, rest.z, radix, low);
}

std::string integerToString(const mpz_t z, int radix) {
  std::string out;
  if (mpz_sgn(z) < 0) {
    out += '-';
    Z m;
    mpz_neg(m.z, z);
    appendDigits(out, m.z, radix, 0);
  } else {
    appendDigits(out, z, radix, 0);
  }
  return out;
}

// z = the digits in `radix` (all valid). Long numerals are split in halves the same way.
void parseDigits(mpz_t z, std::string_view digits, int radix) {
  if (digits.size() < 20000) {
    mpz_set_str(z, std::string(digits).c_str(), radix);
    return;
  }
  pollCurrentInterp();
  size_t low = digits.size() / 2;
  Z high;
  parseDigits(high.z, digits.substr(0, digits.size() - low), radix);
  parseDigits(z, digits.substr(digits.size() - low), radix);
  computeGmp(uint64_t(double(digits.size()) * std::log2(double(radix))), kGmpWorkerBitsMultiply, {z, high.z}, {},
             [radix, low](mpz_ptr* zs, mpq_ptr*) {
               mpz_t scale;
               mpz_init(scale);
               mpz_ui_pow_ui(scale, (unsigned long)radix, low);
               mpz_addmul(zs[0], zs[1], scale);
               mpz_clear(scale);
             });
}

}  // namespace

Value makeRectangular(Value re, Value im) {
  if (im.isFixnum() && im.fixnum() == 0) return re;
  auto* c = allocObject<Compnum>(Kind::Compnum);
  c->re = re;
  c->im = im;
  return Value(c);
}

Value bignumFromInt64(int64_t i) {
  Z z;
  mpz_set_si(z.z, long(i));
  return fromZ(z.z);
}

// value.hpp's makeInteger, past the fixnum range (declared there so that it can stay inline).
Value makeBignumFromInt64(int64_t i) { return bignumFromInt64(i); }
Value bignumFromUint64(uint64_t u) {
  Z z;
  mpz_set_ui(z.z, (unsigned long)u);
  return fromZ(z.z);
}

double toDouble(Value a) {
  if (a.isFixnum()) return double(a.fixnum());
  if (isFlonum(a)) return flonumValue(a);
  if (isBignum(a)) {
    Z z;
    setZ(z.z, a);
    return mpz_get_d(z.z);
  }
  if (isRatnum(a)) {
    Q q;
    setQ(q.q, a);
    return mpq_get_d(q.q);
  }
  notANumber("inexact", 1, a);
}

void requireNumber(Value v, const char* who, int argIndex) {
  if (!isNumber(v)) notANumber(who, argIndex, v);
}
void requireInteger(Value v, const char* who, int argIndex) {
  if (!numIsInteger(v)) throwTypeError(who, argIndex, "an integer", v);
}

bool numIsExact(Value a) {
  if (isCompnum(a)) return numIsExact(a.as<Compnum>()->re) && numIsExact(a.as<Compnum>()->im);
  return a.isFixnum() || isBignum(a) || isRatnum(a);
}
bool numIsInteger(Value a) {
  if (isExactInteger(a)) return true;
  if (isFlonum(a)) {
    double d = flonumValue(a);
    return std::isfinite(d) && d == std::floor(d);
  }
  return false;
}

#define TENSOR_DISPATCH(op, a, b) \
  if (isTensor(a) || isTensor(b)) return tensorBinary(op, a, b);

Value numAdd(Value a, Value b) {
  if (a.isFixnum() && b.isFixnum()) return makeInteger(a.fixnum() + b.fixnum());
  TENSOR_DISPATCH(TensorBinary::Add, a, b)
  if (isCompnum(a) || isCompnum(b)) return complexBinary(ComplexOp::Add, a, b);
  switch (joinRep(repOf(a, "+", 1), repOf(b, "+", 2))) {
    case Rep::Flo: return makeFlonum(toDouble(a) + toDouble(b));
    case Rep::Rat: {
      uint64_t bits = exactBits(a) + exactBits(b);
      checkBits(bits, "+");
      Q x, y;
      setQ(x.q, a);
      setQ(y.q, b);
      computeGmp(bits, kGmpWorkerBitsGcd, {}, {x.q, y.q}, [](mpz_ptr*, mpq_ptr* q) { mpq_add(q[0], q[0], q[1]); });
      return fromQ(x.q);
    }
    default: {
      Z x, y;
      setZ(x.z, a);
      setZ(y.z, b);
      mpz_add(x.z, x.z, y.z);
      return fromZ(x.z);
    }
  }
}

Value numSub(Value a, Value b) {
  if (a.isFixnum() && b.isFixnum()) return makeInteger(a.fixnum() - b.fixnum());
  TENSOR_DISPATCH(TensorBinary::Sub, a, b)
  if (isCompnum(a) || isCompnum(b)) return complexBinary(ComplexOp::Sub, a, b);
  switch (joinRep(repOf(a, "-", 1), repOf(b, "-", 2))) {
    case Rep::Flo: return makeFlonum(toDouble(a) - toDouble(b));
    case Rep::Rat: {
      uint64_t bits = exactBits(a) + exactBits(b);
      checkBits(bits, "-");
      Q x, y;
      setQ(x.q, a);
      setQ(y.q, b);
      computeGmp(bits, kGmpWorkerBitsGcd, {}, {x.q, y.q}, [](mpz_ptr*, mpq_ptr* q) { mpq_sub(q[0], q[0], q[1]); });
      return fromQ(x.q);
    }
    default: {
      Z x, y;
      setZ(x.z, a);
      setZ(y.z, b);
      mpz_sub(x.z, x.z, y.z);
      return fromZ(x.z);
    }
  }
}

Value numMul(Value a, Value b) {
  if (a.isFixnum() && b.isFixnum()) {
    int64_t r;
    if (!__builtin_mul_overflow(a.fixnum(), b.fixnum(), &r)) return makeInteger(r);
  }
  TENSOR_DISPATCH(TensorBinary::Mul, a, b)
  if (isCompnum(a) || isCompnum(b)) return complexBinary(ComplexOp::Mul, a, b);
  Rep rep = joinRep(repOf(a, "*", 1), repOf(b, "*", 2));
  uint64_t bits = rep == Rep::Flo ? 0 : exactBits(a) + exactBits(b);
  checkBits(bits, "*");
  switch (rep) {
    case Rep::Flo: return makeFlonum(toDouble(a) * toDouble(b));
    case Rep::Rat: {
      Q x, y;
      setQ(x.q, a);
      setQ(y.q, b);
      computeGmp(bits, kGmpWorkerBitsGcd, {}, {x.q, y.q}, [](mpz_ptr*, mpq_ptr* q) { mpq_mul(q[0], q[0], q[1]); });
      return fromQ(x.q);
    }
    default: {
      Z x, y;
      setZ(x.z, a);
      setZ(y.z, b);
      computeGmp(bits, kGmpWorkerBitsMultiply, {x.z, y.z}, {}, [](mpz_ptr* z, mpq_ptr*) { mpz_mul(z[0], z[0], z[1]); });
      return fromZ(x.z);
    }
  }
}

Value numDiv(Value a, Value b) {
  TENSOR_DISPATCH(TensorBinary::Div, a, b)
  if (isCompnum(a) || isCompnum(b)) return complexBinary(ComplexOp::Div, a, b);
  Rep r = joinRep(repOf(a, "/", 1), repOf(b, "/", 2));
  if (r == Rep::Flo) return makeFlonum(toDouble(a) / toDouble(b));
  if (numIsZero(b)) throwError("error", "/: division by zero", listFromArray(&a, 1));
  if (a.isFixnum() && b.isFixnum() && a.fixnum() % b.fixnum() == 0) return makeInteger(a.fixnum() / b.fixnum());
  uint64_t bits = exactBits(a) + exactBits(b);
  checkBits(bits, "/");
  Q x, y;
  setQ(x.q, a);
  setQ(y.q, b);
  computeGmp(bits, kGmpWorkerBitsGcd, {}, {x.q, y.q}, [](mpz_ptr*, mpq_ptr* q) { mpq_div(q[0], q[0], q[1]); });
  return fromQ(x.q);
}

Value numNegate(Value a) {
  if (a.isFixnum()) return makeInteger(-a.fixnum());
  if (isTensor(a)) return tensorUnary(TensorUnary::Neg, a);
  return numSub(Value::fixnum(0), a);
}

bool numIsZero(Value a) {
  if (a.isFixnum()) return a.fixnum() == 0;
  if (isCompnum(a)) return numIsZero(a.as<Compnum>()->re) && numIsZero(a.as<Compnum>()->im);
  if (isFlonum(a)) return flonumValue(a) == 0.0;
  return false;   // bignums and ratnums are never zero
}

int numSign(Value a) {
  if (a.isFixnum()) return (a.fixnum() > 0) - (a.fixnum() < 0);
  if (isCompnum(a)) throwTypeError("sign", 1, "a real number", a);
  if (isFlonum(a)) return (flonumValue(a) > 0) - (flonumValue(a) < 0);
  if (isBignum(a)) return a.as<Bignum>()->small ? -1 : 1;
  if (isRatnum(a)) return numSign(a.as<Ratnum>()->num);
  notANumber("sign", 1, a);
}

int numCompare(Value a, Value b, const char* who) {
  if (a.isFixnum() && b.isFixnum()) return (a.fixnum() > b.fixnum()) - (a.fixnum() < b.fixnum());
  Rep ra = repOf(a, who, 1), rb = repOf(b, who, 2);
  if (ra == Rep::Flo && rb == Rep::Flo) {
    double x = flonumValue(a), y = flonumValue(b);
    return (x > y) - (x < y);
  }
  // Mixed exact/inexact compares exactly, so 2^53+1 and 2^53 (as a flonum) differ.
  if (ra == Rep::Flo || rb == Rep::Flo) {
    double d = ra == Rep::Flo ? flonumValue(a) : flonumValue(b);
    if (std::isinf(d)) {
      int s = d > 0 ? 1 : -1;
      return ra == Rep::Flo ? s : -s;
    }
  }
  Q x, y;
  if (ra == Rep::Flo) mpq_set_d(x.q, flonumValue(a)); else setQ(x.q, a);
  if (rb == Rep::Flo) mpq_set_d(y.q, flonumValue(b)); else setQ(y.q, b);
  // Without a ratnum the comparison is linear (a flonum's denominator is a power of two of at most
  // 1074 bits): a worker would only add latency, and a wait for a free one when abandoned work
  // holds them all.
  if (ra != Rep::Rat && rb != Rep::Rat) {
    int c = mpq_cmp(x.q, y.q);
    return (c > 0) - (c < 0);
  }
  // The sign comes back in an integer the job owns: an abandoned worker must not write into this
  // frame after a raise has left it.
  Z sign;
  computeGmp(exactBits(a) + exactBits(b), kGmpWorkerBitsMultiply, {sign.z}, {x.q, y.q},
             [](mpz_ptr* z, mpq_ptr* q) { mpz_set_si(z[0], mpq_cmp(q[0], q[1])); });
  return mpz_sgn(sign.z);
}

static bool isNan(Value v) { return isFlonum(v) && std::isnan(flonumValue(v)); }

bool numLess(Value a, Value b, const char* who) {
  if (a.isFixnum() && b.isFixnum()) return a.fixnum() < b.fixnum();
  if (isNan(a) || isNan(b)) {
    repOf(a, who, 1);
    repOf(b, who, 2);
    return false;
  }
  return numCompare(a, b, who) < 0;
}

bool numEq(Value a, Value b, const char* who) {
  if (a.isFixnum() && b.isFixnum()) return a == b;
  if (isCompnum(a) || isCompnum(b)) {
    if (!isNumber(a)) notANumber(who, 1, a);
    if (!isNumber(b)) notANumber(who, 2, b);
    return numEq(realPart(a), realPart(b), who) && numEq(imagPart(a), imagPart(b), who);
  }
  if (isNan(a) || isNan(b)) {
    repOf(a, who, 1);
    repOf(b, who, 2);
    return false;
  }
  return numCompare(a, b, who) == 0;
}

Value numExact(Value a) {
  if (numIsExact(a)) return a;
  if (isCompnum(a)) return makeRectangular(numExact(a.as<Compnum>()->re), numExact(a.as<Compnum>()->im));
  if (!isFlonum(a)) notANumber("exact", 1, a);
  double d = flonumValue(a);
  if (!std::isfinite(d)) throwError("error", "exact: no exact representation of " + formatFlonum(d));
  if (d == std::floor(d) && std::fabs(d) < 9.2e18) return makeInteger(int64_t(d));
  Q q;
  mpq_set_d(q.q, d);
  return fromQ(q.q);
}

Value numInexact(Value a) {
  if (isFlonum(a)) return a;
  if (isCompnum(a)) return makeRectangular(numInexact(a.as<Compnum>()->re), numInexact(a.as<Compnum>()->im));
  return makeFlonum(toDouble(a));
}

// Integer division family: exact when both are exact integers, else on doubles.
static Value intDivide(Value a, Value b, const char* who, int kind) {
  requireInteger(a, who, 1);
  requireInteger(b, who, 2);
  if (numIsZero(b)) throwError("error", std::string(who) + ": division by zero", listFromArray(&a, 1));
  if (isFlonum(a) || isFlonum(b)) {
    double x = toDouble(a), y = toDouble(b);
    double r = kind == 0 ? std::trunc(x / y) : kind == 1 ? std::fmod(x, y) : x - y * std::floor(x / y);
    return makeFlonum(r);
  }
  if (a.isFixnum() && b.isFixnum()) {
    int64_t x = a.fixnum(), y = b.fixnum();
    if (kind == 0) return makeInteger(x / y);
    int64_t r = x % y;
    if (kind == 2 && r != 0 && ((r < 0) != (y < 0))) r += y;
    return makeInteger(r);
  }
  Z x, y, r;
  setZ(x.z, a);
  setZ(y.z, b);
  computeGmp(std::max(integerBits(a), integerBits(b)), kGmpWorkerBitsMultiply, {x.z, y.z, r.z}, {},
             [kind](mpz_ptr* z, mpq_ptr*) {
               if (kind == 0) mpz_tdiv_q(z[2], z[0], z[1]);
               else if (kind == 1) mpz_tdiv_r(z[2], z[0], z[1]);
               else mpz_fdiv_r(z[2], z[0], z[1]);
             });
  return fromZ(r.z);
}

Value numQuotient(Value a, Value b, const char* who) { return intDivide(a, b, who, 0); }
Value numRemainder(Value a, Value b, const char* who) { return intDivide(a, b, who, 1); }
Value numModulo(Value a, Value b, const char* who) { return intDivide(a, b, who, 2); }

Value numGcd(Value a, Value b) {
  requireInteger(a, "gcd", 1);
  requireInteger(b, "gcd", 2);
  if (isFlonum(a) || isFlonum(b)) {
    double x = std::fabs(toDouble(a)), y = std::fabs(toDouble(b));
    while (y != 0) {
      double t = std::fmod(x, y);
      x = y;
      y = t;
    }
    return makeFlonum(x);
  }
  Z x, y;
  setZ(x.z, a);
  setZ(y.z, b);
  computeGmp(std::max(integerBits(a), integerBits(b)), kGmpWorkerBitsGcd, {x.z, y.z}, {},
             [](mpz_ptr* z, mpq_ptr*) { mpz_gcd(z[0], z[0], z[1]); });
  return fromZ(x.z);
}

Value numExpt(Value base, Value e) {
  if (isTensor(base) || isTensor(e)) return tensorBinary(TensorBinary::Pow, base, e);
  requireNumber(base, "expt", 1);
  requireNumber(e, "expt", 2);
  if (isCompnum(base) || isCompnum(e)) {
    if (isCompnum(base) && e.isFixnum()) {   // exact integer power by squaring keeps exactness
      int64_t n = e.fixnum();
      Value result = Value::fixnum(1), b = base;
      for (uint64_t k = uint64_t(n < 0 ? -n : n); k; k >>= 1) {
        if (k & 1) result = numMul(result, b);
        if (k > 1) b = numMul(b, b);
        pollCurrentInterp();
      }
      return n < 0 ? numDiv(Value::fixnum(1), result) : result;
    }
    throwError("error", "expt: complex exponents are not supported", listFromArray(&e, 1));
  }
  if (isExactInteger(e) && numIsExact(base)) {
    if (isBignum(e)) {
      if (base == Value::fixnum(1) || base == Value::fixnum(0)) return base;
      if (base == Value::fixnum(-1)) {
        Z z;
        setZ(z.z, e);
        return Value::fixnum(mpz_odd_p(z.z) ? -1 : 1);
      }
      throwError("error", "expt: exponent too large");
    }
    int64_t n = e.fixnum();
    if (n < 0 && numIsZero(base)) throwError("error", "expt: division by zero");
    Q q;
    setQ(q.q, base);
    unsigned long k = (unsigned long)(n < 0 ? -n : n);
    powInterruptible(mpq_numref(q.q), k, "expt");
    powInterruptible(mpq_denref(q.q), k, "expt");
    if (n < 0) mpq_inv(q.q, q.q);
    return fromQ(q.q);
  }
  double x = toDouble(base), y = toDouble(e);
  return makeFlonum(std::pow(x, y));
}

Value numExactIntegerSqrt(Value a, Value* remainder) {
  if (!isExactInteger(a) || numSign(a) < 0) throwTypeError("exact-integer-sqrt", 1, "a non-negative exact integer", a);
  Z x, s, r;
  setZ(x.z, a);
  computeGmp(integerBits(a), kGmpWorkerBitsMultiply, {s.z, r.z, x.z}, {},
             [](mpz_ptr* z, mpq_ptr*) { mpz_sqrtrem(z[0], z[1], z[2]); });
  if (remainder) *remainder = fromZ(r.z);
  return fromZ(s.z);
}

Value numSqrt(Value a) {
  if (isTensor(a)) return tensorUnary(TensorUnary::Sqrt, a);
  requireNumber(a, "sqrt", 1);
  if (isCompnum(a) || numSign(a) < 0) {
    if (!isCompnum(a) && numIsExact(a)) {   // exact negative: exact imaginary root when it exists
      Value root = numSqrt(numNegate(a));
      if (numIsExact(root)) return makeRectangular(Value::fixnum(0), root);
    }
    double re = toDouble(realPart(a)), im = toDouble(imagPart(a));
    double m = std::hypot(re, im);
    double sr = std::sqrt((m + re) / 2), si = std::copysign(std::sqrt((m - re) / 2), im);
    if (!isCompnum(a)) si = std::sqrt(-re);
    return makeRectangular(makeFlonum(sr), makeFlonum(si));
  }
  if (isExactInteger(a) && numSign(a) >= 0) {
    Value rem;
    Value s = numExactIntegerSqrt(a, &rem);
    if (numIsZero(rem)) return s;
  }
  if (isRatnum(a) && numSign(a) > 0) {
    Value rn, rd;
    Value sn = numExactIntegerSqrt(a.as<Ratnum>()->num, &rn);
    Value sd = numExactIntegerSqrt(a.as<Ratnum>()->den, &rd);
    if (numIsZero(rn) && numIsZero(rd)) return numDiv(sn, sd);
  }
  return makeFlonum(std::sqrt(toDouble(a)));
}

static Value roundRational(Value a, int mode) {   // 0 floor, 1 ceiling, 2 truncate, 3 round
  Q q;
  setQ(q.q, a);
  Z r;
  computeGmp(exactBits(a), kGmpWorkerBitsMultiply, {r.z}, {q.q}, [mode](mpz_ptr* z, mpq_ptr* qs) {
    mpz_ptr num = mpq_numref(qs[0]), den = mpq_denref(qs[0]);
    if (mode == 0) mpz_fdiv_q(z[0], num, den);
    else if (mode == 1) mpz_cdiv_q(z[0], num, den);
    else if (mode == 2) mpz_tdiv_q(z[0], num, den);
    else {
      // round half to even: floor(x + 1/2), then fix exact halves to the even neighbour
      mpz_t twice, den2;
      mpz_init(twice);
      mpz_init(den2);
      mpz_mul_2exp(twice, num, 1);
      mpz_add(twice, twice, den);
      mpz_mul_2exp(den2, den, 1);
      mpz_fdiv_q(z[0], twice, den2);
      if (mpz_cmp_ui(den, 2) == 0 && mpz_odd_p(z[0])) mpz_sub_ui(z[0], z[0], 1);
      mpz_clear(twice);
      mpz_clear(den2);
    }
  });
  return fromZ(r.z);
}

#define ROUNDING(name, mode, fn, tensorOp)                                  \
  Value name(Value a) {                                                     \
    if (isExactInteger(a)) return a;                                        \
    if (isFlonum(a)) return makeFlonum(fn(flonumValue(a)));                 \
    if (isRatnum(a)) return roundRational(a, mode);                         \
    if (isTensor(a)) return tensorUnary(TensorUnary::tensorOp, a);          \
    notANumber(#name, 1, a);                                                \
  }
ROUNDING(numFloor, 0, std::floor, Floor)
ROUNDING(numCeiling, 1, std::ceil, Ceiling)
ROUNDING(numTruncate, 2, std::trunc, Truncate)
ROUNDING(numRound, 3, std::nearbyint, Round)

Value numNumerator(Value a) {
  if (isRatnum(a)) return a.as<Ratnum>()->num;
  if (isExactInteger(a)) return a;
  if (isFlonum(a)) return numInexact(numNumerator(numExact(a)));
  notANumber("numerator", 1, a);
}
Value numDenominator(Value a) {
  if (isRatnum(a)) return a.as<Ratnum>()->den;
  if (isExactInteger(a)) return Value::fixnum(1);
  if (isFlonum(a)) return numInexact(numDenominator(numExact(a)));
  notANumber("denominator", 1, a);
}

Value numBitwise(char op, Value a, Value b) {
  if (!isExactInteger(a)) throwTypeError("bitwise", 1, "an exact integer", a);
  if (!isExactInteger(b)) throwTypeError("bitwise", 2, "an exact integer", b);
  if (a.isFixnum() && b.isFixnum()) {
    int64_t x = a.fixnum(), y = b.fixnum();
    return makeInteger(op == '&' ? (x & y) : op == '|' ? (x | y) : (x ^ y));
  }
  Z x, y;
  setZ(x.z, a);
  setZ(y.z, b);
  if (op == '&') mpz_and(x.z, x.z, y.z);
  else if (op == '|') mpz_ior(x.z, x.z, y.z);
  else mpz_xor(x.z, x.z, y.z);
  return fromZ(x.z);
}

Value numShift(Value a, int64_t shift) {
  if (!isExactInteger(a)) throwTypeError("arithmetic-shift", 1, "an exact integer", a);
  if (shift > 0 && !numIsZero(a) && (uint64_t(shift) > kMaxIntegerBits || integerBits(a) + uint64_t(shift) > kMaxIntegerBits))
    integerTooLarge("arithmetic-shift");
  if (shift < 0 && uint64_t(-shift) > integerBits(a) + 1) return Value::fixnum(numSign(a) < 0 ? -1 : 0);
  Z x;
  setZ(x.z, a);
  if (shift >= 0) mpz_mul_2exp(x.z, x.z, (mp_bitcnt_t)shift);
  else mpz_fdiv_q_2exp(x.z, x.z, (mp_bitcnt_t)(-shift));
  return fromZ(x.z);
}

// ---- printing and parsing ----------------------------------------------------------------------

std::string formatFlonum(double d) {
  if (std::isnan(d)) return "+nan.0";
  if (std::isinf(d)) return d > 0 ? "+inf.0" : "-inf.0";
  char buf[40];
  // Shortest digits that read back to the same double, as d.ddde±x.
  for (int prec = 0; prec <= 16; prec++) {
    std::snprintf(buf, sizeof buf, "%.*e", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s(buf);
  bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  size_t e = s.find('e');
  int exp10 = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp10 >= -7 && exp10 < 21) {
    // positional, like 12.5, 0.001, 1e20 -> 100000000000000000000.0
    if (exp10 >= 0) {
      if (digits.size() <= size_t(exp10) + 1) {
        out = digits + std::string(size_t(exp10) + 1 - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, size_t(exp10) + 1) + "." + digits.substr(size_t(exp10) + 1);
      }
    } else {
      out = "0." + std::string(size_t(-exp10 - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1) + "." + (digits.size() > 1 ? digits.substr(1) : "0") + "e" +
          (exp10 > 0 ? "+" : "") + std::to_string(exp10);
  }
  return neg ? "-" + out : out;
}

std::string numberToString(Value n, int radix) {
  if (isCompnum(n)) {
    Value re = n.as<Compnum>()->re, im = n.as<Compnum>()->im;
    std::string out = re == Value::fixnum(0) ? "" : numberToString(re, radix);
    std::string ims = numberToString(im, radix);
    if (ims == "1") ims = "";
    else if (ims == "-1") ims = "-";
    if (ims.empty() || (ims[0] != '-' && ims[0] != '+')) ims = "+" + ims;
    return out + ims + "i";
  }
  if (n.isFixnum()) {
    if (radix == 10) return std::to_string(n.fixnum());
    Z z;
    mpz_set_si(z.z, long(n.fixnum()));
    char* s = mpz_get_str(nullptr, radix, z.z);
    std::string r(s);
    free(s);
    return r;
  }
  if (isFlonum(n)) {
    if (radix != 10) {
      double d = flonumValue(n);
      if (d == std::floor(d) && std::isfinite(d)) return numberToString(numExact(n), radix) + ".";
    }
    return formatFlonum(flonumValue(n));
  }
  if (isBignum(n)) {
    Z z;
    setZ(z.z, n);
    return integerToString(z.z, radix);
  }
  if (isRatnum(n)) return numberToString(n.as<Ratnum>()->num, radix) + "/" + numberToString(n.as<Ratnum>()->den, radix);
  return "#<not-a-number>";
}

static int digitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

static std::optional<Value> parseUInteger(std::string_view s, int radix) {
  if (s.empty()) return std::nullopt;
  for (char c : s)
    if (digitValue(c) >= radix) return std::nullopt;
  if (s.size() < 18 && radix == 10) return Value::fixnum(std::strtoll(std::string(s).c_str(), nullptr, 10));
  // digits * log2(radix) bits, at most: refused before parsing past the size limit
  size_t leading = s.find_first_not_of('0');
  if (leading == std::string_view::npos) return Value::fixnum(0);
  s.remove_prefix(leading);
  double bitsPerDigit = std::log2(double(radix));
  if (double(s.size() - 1) * bitsPerDigit + 1 > double(kMaxIntegerBits)) integerTooLarge("numeral");
  Z z;
  parseDigits(z.z, s, radix);
  return fromZ(z.z);
}

static std::optional<Value> parseReal(std::string_view text, int radix, char exactness);

// a+bi, a-bi, +i, -bi, a@angle (after the prefixes are stripped)
static std::optional<Value> parseComplex(std::string_view t, int radix, char exactness) {
  size_t at = t.find('@');
  if (at != std::string_view::npos) {
    auto m = parseReal(t.substr(0, at), radix, exactness), a = parseReal(t.substr(at + 1), radix, exactness);
    if (!m || !a) return std::nullopt;
    if (numIsZero(*a)) return *m;
    double md = toDouble(*m), ad = toDouble(*a);
    return makeRectangular(makeFlonum(md * std::cos(ad)), makeFlonum(md * std::sin(ad)));
  }
  if (t.size() < 2 || (t.back() != 'i' && t.back() != 'I')) return std::nullopt;
  std::string_view body = t.substr(0, t.size() - 1);
  // split at the last sign that is not the first character and not an exponent's sign
  size_t split = std::string_view::npos;
  for (size_t i = body.size(); i-- > 1;) {
    if ((body[i] == '+' || body[i] == '-') && !isExponentMarker(body[i - 1])) {
      split = i;
      break;
    }
  }
  std::string_view reText = split == std::string_view::npos ? std::string_view() : body.substr(0, split);
  std::string_view imText = split == std::string_view::npos ? body : body.substr(split);
  if (imText.empty() || (imText[0] != '+' && imText[0] != '-')) return std::nullopt;
  std::optional<Value> im;
  if (imText == "+") im = Value::fixnum(1);
  else if (imText == "-") im = Value::fixnum(-1);
  else im = parseReal(imText, radix, exactness);
  std::optional<Value> re = reText.empty() ? std::optional<Value>(Value::fixnum(0)) : parseReal(reText, radix, exactness);
  if (!re || !im) return std::nullopt;
  if (exactness == 'i' || isFlonum(*re) || isFlonum(*im)) {
    // inexact: an exact-zero part written as 0 still becomes 0.0 so the result stays complex
    return makeRectangular(numInexact(*re), numInexact(*im));
  }
  return makeRectangular(*re, *im);
}

std::optional<Value> parseNumber(std::string_view text, int radix) {
  char exactness = 0;
  while (text.size() >= 2 && text[0] == '#') {
    char c = char(std::tolower(text[1]));
    if (c == 'x') radix = 16;
    else if (c == 'b') radix = 2;
    else if (c == 'o') radix = 8;
    else if (c == 'd') radix = 10;
    else if (c == 'e' || c == 'i') exactness = c;
    else return std::nullopt;
    text.remove_prefix(2);
  }
  if (auto r = parseReal(text, radix, exactness)) return r;
  return parseComplex(text, radix, exactness);
}

static std::optional<Value> parseReal(std::string_view text, int radix, char exactness) {
  if (text.empty()) return std::nullopt;
  std::string lower(text);
  for (auto& c : lower) c = char(std::tolower(c));
  if (lower == "+inf.0") return makeFlonum(HUGE_VAL);
  if (lower == "-inf.0") return makeFlonum(-HUGE_VAL);
  if (lower == "+nan.0" || lower == "-nan.0") return makeFlonum(std::nan(""));
  bool neg = false;
  std::string_view body = text;
  if (body[0] == '+' || body[0] == '-') {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body.empty()) return std::nullopt;
  std::optional<Value> result;
  size_t slash = body.find('/');
  if (slash != std::string_view::npos) {
    auto num = parseUInteger(body.substr(0, slash), radix);
    auto den = parseUInteger(body.substr(slash + 1), radix);
    if (!num || !den) return std::nullopt;
    if (numIsZero(*den)) {
      if (exactness == 'i') return makeFlonum(numIsZero(*num) ? std::nan("") : neg ? -HUGE_VAL : HUGE_VAL);
      return std::nullopt;
    }
    result = numDiv(*num, *den);
  } else if (auto whole = parseUInteger(body, radix)) {
    result = *whole;
  } else {
    if (radix != 10) return std::nullopt;
    // decimal: digits [. digits] [e [+-] digits], at least one digit
    size_t i = 0, digits = 0;
    while (i < body.size() && std::isdigit((unsigned char)body[i])) i++, digits++;
    if (i < body.size() && body[i] == '.') {
      i++;
      while (i < body.size() && std::isdigit((unsigned char)body[i])) i++, digits++;
    }
    if (digits == 0) return std::nullopt;
    if (i < body.size() && isExponentMarker(body[i])) {
      i++;
      if (i < body.size() && (body[i] == '+' || body[i] == '-')) i++;
      size_t ed = 0;
      while (i < body.size() && std::isdigit((unsigned char)body[i])) i++, ed++;
      if (ed == 0) return std::nullopt;
    }
    if (i != body.size()) return std::nullopt;
    std::string s(body);
    for (auto& ch : s)   // R7RS's other exponent markers (s f d l) mean e for doubles
      if (ch != 'e' && ch != 'E' && isExponentMarker(ch)) ch = 'e';
    if (exactness == 'e') {
      // exact decimal: mantissa digits over a power of ten
      size_t e = s.find_first_of("eE");
      long exp10 = e == std::string::npos ? 0 : std::strtol(s.c_str() + e + 1, nullptr, 10);
      // past the limit either way (10^exp10 alone has more bits), and keeps labs() defined
      if (exp10 > long(kMaxIntegerBits) || exp10 < -long(kMaxIntegerBits)) integerTooLarge("numeral");
      std::string mant = s.substr(0, e);
      size_t dot = mant.find('.');
      if (dot != std::string::npos) {
        exp10 -= long(mant.size() - dot - 1);
        mant.erase(dot, 1);
      }
      Value m = *parseUInteger(mant.empty() ? "0" : mant, 10);
      Value scale = numExpt(Value::fixnum(10), Value::fixnum(std::labs(exp10)));
      result = exp10 >= 0 ? numMul(m, scale) : numDiv(m, scale);
    } else {
      double d = std::strtod(s.c_str(), nullptr);
      return makeFlonum(neg ? -d : d);
    }
  }
  Value v = neg ? numNegate(*result) : *result;
  if (exactness == 'i') return numInexact(v);
  return v;
}

}  // namespace purple
