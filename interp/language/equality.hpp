// eq?, eqv? and equal?, and the hashes that agree with them (hash tables use these).
#pragma once
#include "interp/core/value.hpp"
#include <cstdint>

namespace purple {

inline bool eq(Value a, Value b) { return a == b; }
bool eqv(Value a, Value b);              // numbers by exactness and value, chars, empty strings ...
bool equalValues(Value a, Value b);      // structural; terminates on cycles of pairs/vectors
uint64_t hashEqv(Value v);
uint64_t hashEqual(Value v);
// Numeric comparison used by `=`: exact/inexact mixed, bignums, ratnums.
bool numEqual(Value a, Value b);

}  // namespace purple
