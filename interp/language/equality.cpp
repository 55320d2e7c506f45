// eqv?, equal?, numeric =, and the hashes hash tables build on them.
//
// Invariants the hashes keep: eqv(a, b) implies hashEqv(a) == hashEqv(b), and equalValues(a, b)
// implies hashEqual(a) == hashEqual(b). Boehm never moves objects, so an object's address is a
// stable eqv-hash for every kind compared by identity.
#include "interp/language/equality.hpp"
#include "interp/core/interp.hpp"

#include <gmp.h>

#include <cmath>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

namespace purple {

namespace {

static_assert(sizeof(mp_limb_t) == sizeof(uint64_t), "bignum limbs are GMP limbs");

inline uint64_t mix(uint64_t x) {   // splitmix64 finaliser: cheap, spreads low-entropy keys
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline uint64_t combine(uint64_t h, uint64_t v) { return mix(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2))); }

uint64_t hashBytes(const void* data, size_t n, uint64_t seed) {   // FNV-1a, then mixed
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ULL; }
  return mix(h);
}

// A read-only GMP view of an exact integer (fixnum or bignum); no allocation for bignums.
struct MpzView {
  mpz_t z;
  bool owned = false;
  explicit MpzView(Value v) {
    if (v.isFixnum()) {
      mpz_init_set_si(z, long(v.fixnum()));
      owned = true;
    } else {
      const Bignum* b = v.as<Bignum>();
      mp_size_t n = mp_size_t(b->extra);
      mpz_roinit_n(z, reinterpret_cast<const mp_limb_t*>(b->limbs), b->small ? -n : n);
    }
  }
  ~MpzView() { if (owned) mpz_clear(z); }
  MpzView(const MpzView&) = delete;
  MpzView& operator=(const MpzView&) = delete;
};

bool bignumEqv(const Bignum* a, const Bignum* b) {
  return a->small == b->small && a->extra == b->extra &&
         std::memcmp(a->limbs, b->limbs, sizeof(uint64_t) * a->extra) == 0;
}

// Exact integer compared with a finite, integral double, without rounding either.
int compareIntegerWithIntegralDouble(Value e, double d) {
  if (e.isFixnum()) {
    // Fixnums are below 2^61 in magnitude, so any double outside +-2^62 decides at once and any
    // double inside converts to int64 exactly (it is integral).
    if (d >= 4611686018427387904.0) return -1;
    if (d <= -4611686018427387904.0) return 1;
    int64_t i = int64_t(d);
    int64_t x = e.fixnum();
    return x < i ? -1 : x > i ? 1 : 0;
  }
  MpzView a(e);
  mpz_t t;
  mpz_init_set_d(t, d);
  int c = mpz_cmp(a.z, t);
  mpz_clear(t);
  return c;
}

// Ratnum compared with a finite double, exactly (every finite double is a dyadic rational). A
// ratnum is canonical (only fromQ in numbers.cpp makes them), so no gcd is needed here: on
// numbers near the size limit one takes seconds.
bool ratnumEqualsDouble(Value r, double d) {
  mpq_t q, x;
  mpq_init(q);
  mpq_init(x);
  {
    MpzView n(r.as<Ratnum>()->num), dn(r.as<Ratnum>()->den);
    mpz_set(mpq_numref(q), n.z);
    mpz_set(mpq_denref(q), dn.z);
  }
  mpq_set_d(x, d);
  bool eq = mpq_equal(q, x) != 0;
  mpq_clear(q);
  mpq_clear(x);
  return eq;
}

bool exactIntegerEqual(Value a, Value b) {
  if (a.isFixnum() && b.isFixnum()) return a == b;
  if (isBignum(a) && isBignum(b)) return bignumEqv(a.as<Bignum>(), b.as<Bignum>());
  // Mixed fixnum/bignum: a normalised bignum never fits a fixnum, but compare for real so that
  // an unnormalised value from some corner of the number code does not break `=`.
  MpzView x(a), y(b);
  return mpz_cmp(x.z, y.z) == 0;
}

bool exactEqual(Value a, Value b) {
  bool ra = isRatnum(a), rb = isRatnum(b);
  if (!ra && !rb) return exactIntegerEqual(a, b);
  if (ra && rb) {
    const Ratnum* x = a.as<Ratnum>();
    const Ratnum* y = b.as<Ratnum>();
    return exactIntegerEqual(x->num, y->num) && exactIntegerEqual(x->den, y->den);
  }
  return false;   // a normalised ratnum (den > 1) is never an integer
}

bool flonumEqualsExact(double d, Value e) {
  if (!std::isfinite(d)) return false;
  if (isRatnum(e)) return d != std::floor(d) && ratnumEqualsDouble(e, d);
  if (d != std::floor(d)) return false;
  return compareIntegerWithIntegralDouble(e, d) == 0;
}

bool sameDouble(double a, double b) {   // eqv? on flonums: same bits (so 0.0 and -0.0 differ)
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

uint64_t hashNumber(Value v) {
  if (v.isFixnum()) return mix(v.bits);
  if (isFlonum(v)) {
    double d = flonumValue(v);
    if (std::isnan(d)) return mix(0x7ff8000000000000ULL);   // every NaN is eqv to every NaN here
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    return mix(bits ^ 0x5bd1e995ULL);
  }
  if (isBignum(v)) {
    const Bignum* b = v.as<Bignum>();
    return hashBytes(b->limbs, sizeof(uint64_t) * b->extra, b->small ? 0x1234 : 0x4321);
  }
  const Ratnum* r = v.as<Ratnum>();
  return combine(hashNumber(r->num), hashNumber(r->den));
}

// Union-find over objects, used once equal? has done enough work that the arguments may be
// cyclic (Adams & Dybvig, "Efficient nondestructive equality checking for trees and graphs").
// Two nodes already unioned are assumed equal; a mismatch anywhere still answers #f, so the
// answer is exact for cyclic and acyclic data alike.
class UnionFind {
 public:
  const Object* find(const Object* o) {
    auto it = parent_.find(o);
    if (it == parent_.end()) return o;
    const Object* root = find(it->second);
    it->second = root;
    return root;
  }
  // Returns true when a and b were already known equal.
  bool unite(const Object* a, const Object* b) {
    const Object* ra = find(a);
    const Object* rb = find(b);
    if (ra == rb) return true;
    parent_[ra] = rb;
    return false;
  }
 private:
  std::unordered_map<const Object*, const Object*> parent_;
};

}  // namespace

bool eqv(Value a, Value b) {
  if (a == b) return true;
  if (!a.isObject() || !b.isObject()) return false;
  Kind k = a.obj()->kind;
  if (k != b.obj()->kind) return false;
  switch (k) {
    case Kind::Flonum: return sameDouble(flonumValue(a), flonumValue(b));
    case Kind::Bignum: return bignumEqv(a.as<Bignum>(), b.as<Bignum>());
    case Kind::Ratnum: return eqv(a.as<Ratnum>()->num, b.as<Ratnum>()->num) &&
                              eqv(a.as<Ratnum>()->den, b.as<Ratnum>()->den);
    case Kind::Compnum: return eqv(a.as<Compnum>()->re, b.as<Compnum>()->re) &&
                               eqv(a.as<Compnum>()->im, b.as<Compnum>()->im);
    default: return false;
  }
}

bool numEqual(Value a, Value b) {
  if (a.isFixnum() && b.isFixnum()) return a == b;
  if (isCompnum(a) || isCompnum(b)) {
    // a real equals a complex whose imaginary part is (an inexact) zero
    Value ar = isCompnum(a) ? a.as<Compnum>()->re : a, ai = isCompnum(a) ? a.as<Compnum>()->im : Value::fixnum(0);
    Value br = isCompnum(b) ? b.as<Compnum>()->re : b, bi = isCompnum(b) ? b.as<Compnum>()->im : Value::fixnum(0);
    return numEqual(ar, br) && numEqual(ai, bi);
  }
  bool fa = isFlonum(a), fb = isFlonum(b);
  if (fa && fb) return flonumValue(a) == flonumValue(b);
  if (fa) return isNumber(b) && flonumEqualsExact(flonumValue(a), b);
  if (fb) return isNumber(a) && flonumEqualsExact(flonumValue(b), a);
  if (!isNumber(a) || !isNumber(b)) return false;
  return exactEqual(a, b);
}

bool equalValues(Value a, Value b) {
  if (eqv(a, b)) return true;
  // Explicit work stack: deep car-nesting must not overflow the C stack. Nothing here allocates
  // GC memory, and every object on the stack is reachable from a and b, so plain containers
  // are safe.
  std::vector<std::pair<Value, Value>> work;
  work.emplace_back(a, b);
  UnionFind uf;
  size_t steps = 0;
  const size_t kCycleCheckAfter = 100000;   // acyclic data this small never pays for the map
  while (!work.empty()) {
    Value x = work.back().first;
    Value y = work.back().second;
    work.pop_back();
    for (;;) {   // iterate along cdrs so long lists use no stack
      if (x == y) break;
      if (!x.isObject() || !y.isObject()) return false;
      Kind k = x.obj()->kind;
      if (k != y.obj()->kind) return false;
      bool checkCycles = ++steps > kCycleCheckAfter;
      pollEvery(steps);   // comparing two big structures can take seconds: honour budgets
      if (k == Kind::Pair) {
        if (checkCycles && uf.unite(x.obj(), y.obj())) break;
        work.emplace_back(car(x), car(y));
        x = cdr(x);
        y = cdr(y);
        continue;
      }
      if (k == Kind::Vector) {
        const Vector* vx = x.as<Vector>();
        const Vector* vy = y.as<Vector>();
        if (vx->extra != vy->extra) return false;
        if (checkCycles && uf.unite(x.obj(), y.obj())) break;
        for (uint32_t i = vx->extra; i-- > 0;) work.emplace_back(vx->items[i], vy->items[i]);
        break;
      }
      if (k == Kind::String) {
        if (stringView(x) != stringView(y)) return false;
        break;
      }
      if (k == Kind::Bytevector) {
        const Bytevector* bx = x.as<Bytevector>();
        const Bytevector* by = y.as<Bytevector>();
        if (bx->extra != by->extra || std::memcmp(bx->bytes, by->bytes, bx->extra) != 0) return false;
        break;
      }
      if (k == Kind::Box) {   // boxes print and read as values; compare contents
        if (checkCycles && uf.unite(x.obj(), y.obj())) break;
        x = x.as<Box>()->value;
        y = y.as<Box>()->value;
        continue;
      }
      if (!eqv(x, y)) return false;
      break;
    }
  }
  return true;
}

uint64_t hashEqv(Value v) {
  if (v.isObject()) {
    switch (v.obj()->kind) {
      case Kind::Symbol: return mix(v.as<Symbol>()->hash ^ (uint64_t(v.obj()->flags & 1) << 40));
      case Kind::Flonum: case Kind::Bignum: case Kind::Ratnum: return hashNumber(v);
      case Kind::Compnum: return combine(hashNumber(v.as<Compnum>()->re), hashNumber(v.as<Compnum>()->im));
      default: return mix(v.bits >> 3);
    }
  }
  return mix(v.bits);
}

namespace {
// Hashes at most `budget` nodes of the value's unfolded tree, in a fixed order, so that equal?
// values (including differently shaped cycles) always hash alike and cycles terminate.
uint64_t hashEqualBounded(Value v, int& budget) {
  uint64_t h = 0x2545f4914f6cdd1dULL;
  while (budget-- > 0) {
    if (!v.isObject()) return combine(h, hashEqv(v));
    switch (v.obj()->kind) {
      case Kind::Pair:
        h = combine(h, hashEqualBounded(car(v), budget));
        v = cdr(v);
        continue;
      case Kind::Vector: {
        const Vector* vec = v.as<Vector>();
        h = combine(h, 0x766563ULL + vec->extra);
        for (uint32_t i = 0; i < vec->extra && budget > 0; i++) h = combine(h, hashEqualBounded(vec->items[i], budget));
        return h;
      }
      case Kind::String: {
        std::string_view s = stringView(v);
        return combine(h, hashBytes(s.data(), s.size(), 0x737472));
      }
      case Kind::Bytevector: {
        const Bytevector* b = v.as<Bytevector>();
        return combine(h, hashBytes(b->bytes, b->extra, 0x627974));
      }
      case Kind::Box:
        v = v.as<Box>()->value;
        continue;
      default:
        return combine(h, hashEqv(v));
    }
  }
  return h;
}
}  // namespace

uint64_t hashEqual(Value v) {
  if (isString(v)) {   // the common hash-table key: skip the generic walk
    std::string_view s = stringView(v);
    return combine(0x2545f4914f6cdd1dULL, hashBytes(s.data(), s.size(), 0x737472));
  }
  int budget = 64;
  return hashEqualBounded(v, budget);
}

}  // namespace purple
