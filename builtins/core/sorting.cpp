// Sorting: sort, sort!, list-sort and merge, stable merge sorts over lists and vectors. The
// comparison dominates the cost, so the common builtin orders over homogeneous data (< > on
// numbers, string<? ...) are compared in C++; any other predicate is called.
#include "builtins/builtins.hpp"
#include "builtins/core/checks.hpp"
#include "interp/language/numbers.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace purple {

using namespace data;

namespace {

// What a comparison costs dominates sorting, so the builtins < > string<? char<? ... over
// homogeneous data are compared in C++; anything else calls the predicate.
enum class FastOrder { None, FixnumLess, FixnumGreater, FlonumLess, FlonumGreater, StringLess, StringGreater };

FastOrder fastOrderFor(Value less, const Value* items, size_t n) {
  bool lt = isBuiltin(less, "<"), gt = isBuiltin(less, ">");
  if (lt || gt) {
    bool allFix = true, allFlo = true;
    for (size_t i = 0; i < n && (allFix || allFlo); i++) {
      if (!items[i].isFixnum()) allFix = false;
      if (!isFlonum(items[i]) || std::isnan(flonumValue(items[i]))) allFlo = false;
    }
    if (allFix) return lt ? FastOrder::FixnumLess : FastOrder::FixnumGreater;
    if (allFlo) return lt ? FastOrder::FlonumLess : FastOrder::FlonumGreater;
    return FastOrder::None;
  }
  bool slt = isBuiltin(less, "string<?"), sgt = isBuiltin(less, "string>?");
  if (slt || sgt) {
    for (size_t i = 0; i < n; i++)
      if (!isString(items[i])) return FastOrder::None;
    return slt ? FastOrder::StringLess : FastOrder::StringGreater;   // UTF-8 byte order = code point order
  }
  return FastOrder::None;
}

bool fastLess(FastOrder o, Value a, Value b) {
  switch (o) {
    case FastOrder::FixnumLess: return a.fixnum() < b.fixnum();
    case FastOrder::FixnumGreater: return a.fixnum() > b.fixnum();
    case FastOrder::FlonumLess: return flonumValue(a) < flonumValue(b);
    case FastOrder::FlonumGreater: return flonumValue(a) > flonumValue(b);
    case FastOrder::StringLess: return stringView(a) < stringView(b);
    case FastOrder::StringGreater: return stringView(a) > stringView(b);
    default: return false;
  }
}

}  // namespace

namespace data {

void stableSort(Interp& in, Value* items, size_t n, Value less, std::string_view /*who*/) {
  if (n < 2) return;
  FastOrder fast = fastOrderFor(less, items, n);
  if (fast != FastOrder::None) {
    // No allocation happens in these comparisons, so sorting in place is GC-safe.
    std::stable_sort(items, items + n, [fast](Value a, Value b) { return fastLess(fast, a, b); });
    return;
  }
  auto lessThan = [&](Value a, Value b) { return in.apply(less, {a, b}).isTrue(); };
  // Insertion sort on short runs, then bottom-up merging between items and a scratch array.
  const size_t kRun = 12;
  for (size_t lo = 0; lo < n; lo += kRun) {
    size_t hi = std::min(n, lo + kRun);
    for (size_t i = lo + 1; i < hi; i++) {
      Value x = items[i];
      size_t j = i;
      while (j > lo && lessThan(x, items[j - 1])) {   // strict: equal keys keep their order
        items[j] = items[j - 1];
        j--;
      }
      items[j] = x;
    }
  }
  if (n <= kRun) return;
  Value* scratch = gcValues(n);
  Value* src = items;
  Value* dst = scratch;
  for (size_t width = kRun; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = std::min(n, lo + width), hi = std::min(n, lo + 2 * width);
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        // Take from the right run only when strictly less: stability.
        if (lessThan(src[j], src[i])) dst[k++] = src[j++];
        else dst[k++] = src[i++];
      }
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    std::swap(src, dst);
  }
  if (src != items) std::copy(src, src + n, items);
}

}  // namespace data

namespace {

// (sort seq less?) or (sort less? seq): both orders exist in the wild (Guile/SRFI-95 vs
// R6RS/SRFI-132), so the procedure argument tells which is which.
void sortArgs(std::string_view who, Value a, Value b, Value& seq, Value& less) {
  if (isProcedure(a) && !isProcedure(b)) { less = a; seq = b; }
  else { seq = a; less = b; }
  if (!isProcedure(less)) typeError(who, 1, "a procedure (the ordering predicate)", less);
}

Value sortList(Interp& in, std::string_view who, Value list, Value less) {
  size_t n = listArg(who, 0, list);
  Value* items = gcValues(n);
  size_t i = 0;
  for (Value p = list; isPair(p); p = cdr(p)) items[i++] = car(p);
  stableSort(in, items, n, less, who);
  return listFromArray(items, n);
}

Value sortAny(Interp& in, std::string_view who, Value a, Value b, bool inPlace) {
  Value seq, less;
  sortArgs(who, a, b, seq, less);
  if (seq.is(Kind::Vector)) {
    Vector* v = seq.as<Vector>();
    size_t n = v->extra;
    Value* items = gcValues(n);
    std::copy(v->items, v->items + n, items);
    stableSort(in, items, n, less, who);
    if (inPlace) {
      // The predicate may have resized nothing, but it may have mutated the vector: copy back
      // only what still fits.
      std::copy(items, items + std::min<size_t>(n, v->extra), v->items);
      return seq;
    }
    Value out = makeVector(n);
    std::copy(items, items + n, out.as<Vector>()->items);
    return out;
  }
  if (seq.isNil() || isPair(seq)) {
    Value sorted = sortList(in, who, seq, less);
    if (inPlace) {
      // sort! on a list reuses the original pairs, as SRFI-95 allows; callers use the result.
      Value p = seq, q = sorted;
      for (; isPair(p) && isPair(q); p = cdr(p), q = cdr(q)) p.as<Pair>()->car = car(q);
      return seq;
    }
    return sorted;
  }
  typeError(who, 0, "a list or vector", seq);
}

// Stable "merge" of two sorted lists.
Value mergeLists(Interp& in, Value a, Value b, Value less) {
  ListBuilder out;
  while (isPair(a) && isPair(b)) {
    if (in.apply(less, {car(b), car(a)}).isTrue()) { out.add(car(b)); b = cdr(b); }
    else { out.add(car(a)); a = cdr(a); }
  }
  for (; isPair(a); a = cdr(a)) out.add(car(a));
  for (; isPair(b); b = cdr(b)) out.add(car(b));
  return out.finish();
}

}  // namespace

void registerSorting(Registry& r) {
  r.def("sort", "(seq less?)",
        [](Interp& in, Value a, Value b) { return sortAny(in, "sort", a, b, false); },
        "A new list or vector with the elements of SEQ in the order given by LESS? (stable merge "
        "sort). Both (sort seq less?) and (sort less? seq) are accepted.");
  r.def("sort!", "(seq less?)",
        [](Interp& in, Value a, Value b) { return sortAny(in, "sort!", a, b, true); },
        "Sorts the list or vector SEQ in place by LESS? (stable) and returns it.");
  r.def("list-sort", "(less? list)",
        [](Interp& in, Value a, Value b) {
          Value seq, less;
          sortArgs("list-sort", a, b, seq, less);
          return sortList(in, "list-sort", seq, less);
        },
        "A new list with the elements of LIST sorted by LESS? (stable). Either argument order.");
  r.def("merge", "(list1 list2 less?)",
        [](Interp& in, Value a, Value b, Procedure less) {
          listArg("merge", 0, a);
          listArg("merge", 1, b);
          return mergeLists(in, a, b, less.value);
        },
        "Merges the sorted lists LIST1 and LIST2 into one sorted list (stable: ties favour LIST1).");
}

}  // namespace purple
