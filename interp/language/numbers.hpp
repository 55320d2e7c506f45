// The numeric tower: fixnums, bignums (GMP), exact rationals, flonums; tensors join in through
// tensor_hooks.hpp. Exact integers never wrap.
#pragma once
#include "interp/core/value.hpp"
#include <optional>
#include <string>

namespace purple {

Value bignumFromInt64(int64_t i);
Value makeRectangular(Value re, Value im);            // a real when im is an exact 0
Value bignumFromUint64(uint64_t u);

// Generic operations. `who` names the procedure for type errors.
Value numAdd(Value a, Value b);
Value numSub(Value a, Value b);
Value numMul(Value a, Value b);
Value numDiv(Value a, Value b);
Value numNegate(Value a);
int numCompare(Value a, Value b, const char* who);   // -1, 0, 1; both real, neither NaN
bool numLess(Value a, Value b, const char* who);     // false when either is NaN
bool numEq(Value a, Value b, const char* who);
bool numIsZero(Value a);
int numSign(Value a);                                 // of a real
bool numIsInteger(Value a);                           // 2, 2.0
bool numIsExact(Value a);
double toDouble(Value a);                             // any real
Value numExact(Value a);                              // inexact->exact
Value numInexact(Value a);

Value numQuotient(Value a, Value b, const char* who);
Value numRemainder(Value a, Value b, const char* who);
Value numModulo(Value a, Value b, const char* who);
Value numGcd(Value a, Value b);
Value numExpt(Value base, Value exponent);
Value numSqrt(Value a);                               // exact for exact perfect squares
Value numExactIntegerSqrt(Value a, Value* remainder);
Value numFloor(Value a);
Value numCeiling(Value a);
Value numRound(Value a);                              // to even
Value numTruncate(Value a);
Value numNumerator(Value a);
Value numDenominator(Value a);
Value numBitwise(char op, Value a, Value b);          // '&' '|' '^'
Value numShift(Value a, int64_t shift);

std::string numberToString(Value n, int radix = 10);
std::optional<Value> parseNumber(std::string_view text, int radix = 10);

// Checks used by builtins: throw a Purple type error naming `who`.
void requireNumber(Value v, const char* who, int argIndex);
void requireInteger(Value v, const char* who, int argIndex);

}  // namespace purple
