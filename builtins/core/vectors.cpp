// Vectors and bytevectors: R7RS (scheme base), plus vector sorting and a few common extras
// (vector-count, vector-index, vector-grow, subvector, bytevector->list ...).
#include "builtins/builtins.hpp"
#include "interp/language/ownership.hpp"
#include "builtins/core/checks.hpp"
#include "interp/language/inline_ops.hpp"

#include <algorithm>
#include <cstring>

namespace purple {

using namespace data;

namespace {

Value newVector(size_t n, Value fill = Value::f()) {
  if (n > 0xffffffffu) throwError("range-error", "vector too large: " + std::to_string(n) + " elements");
  return makeVector(n, fill);
}

Value primVectorP(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::boolean(argv[0].is(Kind::Vector));
}
Value primVector(Interp&, Value* argv, int argc, PrimitiveInfo*) {
  Value v = newVector(size_t(argc));
  std::copy(argv, argv + argc, v.as<Vector>()->items);
  return v;
}
Value primVectorLength(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::fixnum(vectorArg("vector-length", 0, argv[0])->extra);
}

inline size_t vectorIndex(std::string_view who, Vector* v, Value k) {
  if (!k.isFixnum()) typeError(who, 1, "an exact integer index", k);
  int64_t i = k.fixnum();
  if (i < 0 || uint64_t(i) >= v->extra)
    rangeError(who, 1, k, v->extra ? "valid indices are 0 to " + std::to_string(v->extra - 1)
                                   : std::string("the vector is empty"));
  return size_t(i);
}
Value primVectorRef(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  Vector* v = vectorArg("vector-ref", 0, argv[0]);
  return v->items[vectorIndex("vector-ref", v, argv[1])];
}
Value primVectorSet(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  Vector* v = vectorArg("vector-set!", 0, argv[0]);
  v->items[vectorIndex("vector-set!", v, argv[1])] = argv[2];
  return Value::unspecified();
}

inline size_t byteIndex(std::string_view who, Bytevector* b, Value k) {
  if (!k.isFixnum()) typeError(who, 1, "an exact integer index", k);
  int64_t i = k.fixnum();
  if (i < 0 || uint64_t(i) >= b->extra)
    rangeError(who, 1, k, b->extra ? "valid indices are 0 to " + std::to_string(b->extra - 1)
                                   : std::string("the bytevector is empty"));
  return size_t(i);
}
inline uint8_t byteArg(std::string_view who, int index, Value v) {
  if (!v.isFixnum() || v.fixnum() < 0 || v.fixnum() > 255) typeError(who, index, "a byte (an exact integer 0-255)", v);
  return uint8_t(v.fixnum());
}
Value primBytevector(Interp&, Value* argv, int argc, PrimitiveInfo*) {
  Value b = makeBytevector(size_t(argc));
  for (int i = 0; i < argc; i++) b.as<Bytevector>()->bytes[i] = byteArg("bytevector", i, argv[i]);
  return b;
}
Value primBytevectorRef(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  Bytevector* b = bytevectorArg("bytevector-u8-ref", 0, argv[0]);
  return Value::fixnum(b->bytes[byteIndex("bytevector-u8-ref", b, argv[1])]);
}
Value primBytevectorSet(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  Bytevector* b = bytevectorArg("bytevector-u8-set!", 0, argv[0]);
  size_t i = byteIndex("bytevector-u8-set!", b, argv[1]);
  b->bytes[i] = byteArg("bytevector-u8-set!", 2, argv[2]);
  return Value::unspecified();
}

// The vectors of (proc v1 v2 ...), checked, and the length of the shortest.
size_t gatherVectors(std::string_view who, Value v1, RestArgs more, Value*& vecs, int& k) {
  k = 1;
  for (Value p = more.list; isPair(p); p = cdr(p)) k++;
  vecs = gcValues(size_t(k));
  vecs[0] = v1;
  int i = 1;
  for (Value p = more.list; isPair(p); p = cdr(p)) vecs[i++] = car(p);
  size_t n = SIZE_MAX;
  for (int j = 0; j < k; j++) n = std::min<size_t>(n, vectorArg(who, j + 1, vecs[j])->extra);
  return n;
}

// Fills args with element i of each vector; false when a callback has shrunk nothing but the
// index is past a vector (vectors never shrink, so this only guards against misuse).
bool stepVectors(Value* vecs, int k, size_t i, Value* args) {
  for (int j = 0; j < k; j++) {
    Vector* v = vecs[j].as<Vector>();
    if (i >= v->extra) return false;
    args[j] = v->items[i];
  }
  return true;
}

Value sortVector(Interp& in, std::string_view who, Value a, Value b, bool inPlace) {
  // (vector-sort vec less?) or (vector-sort less? vec): SRFI-132 puts the procedure first.
  Value vec = a, less = b;
  if (isProcedure(a) && !isProcedure(b)) { vec = b; less = a; }
  Vector* v = vectorArg(who, 0, vec);
  procArg(who, 1, less);
  size_t n = v->extra;
  Value* items = gcValues(n);
  std::copy(v->items, v->items + n, items);
  stableSort(in, items, n, less, who);
  if (inPlace) {
    std::copy(items, items + n, v->items);
    return Value::unspecified();
  }
  Value out = newVector(n);
  std::copy(items, items + n, out.as<Vector>()->items);
  return out;
}

}  // namespace

void registerVectors(Registry& r) {
  // ---- vectors ----
  r.defRaw("vector?", "(obj)", primVectorP, "True when OBJ is a vector.", kPrimBorrowsArgs);
  r.def("make-vector", "(k :optional fill)",
        [](int64_t k, Value fill) {
          if (k < 0) rangeError("make-vector", 0, Value::fixnum(k), "negative length");
          return newVector(size_t(k), fill.isMissing() ? Value::f() : fill);
        },
        "A new vector of K elements, each FILL (default #f).");
  r.defRaw("vector", "(:rest objs)", primVector, "A new vector whose elements are the arguments.");
  r.defRaw("vector-length", "(vector)", primVectorLength, "The number of elements in VECTOR.", kPrimBorrowsArgs);
  r.defRaw("vector-ref", "(vector k)", primVectorRef, "Element K (counting from 0) of VECTOR.");
  r.defRaw("vector-set!", "(vector k obj)", primVectorSet, "Stores OBJ as element K of VECTOR.");
  inlineInEvaluator(r.interp(), "vector-length", InlineBuiltin::VectorLength);
  inlineInEvaluator(r.interp(), "vector-ref", InlineBuiltin::VectorRef);
  inlineInEvaluator(r.interp(), "vector-set!", InlineBuiltin::VectorSet);
  r.def("vector->list", "(vector :optional start end)",
        [](Value vec, Value start, Value end) {
          Vector* v = vectorArg("vector->list", 0, vec);
          Range rg = rangeArgs("vector->list", 1, start, end, v->extra);
          return listFromArray(v->items + rg.start, rg.end - rg.start);
        },
        "A new list of the elements of VECTOR from START to END (default: all).");
  r.def("list->vector", "(list)",
        [](Value l) {
          size_t n = listArg("list->vector", 0, l);
          Value v = newVector(n);
          size_t i = 0;
          for (Value p = l; isPair(p) && i < n; p = cdr(p)) v.as<Vector>()->items[i++] = car(p);
          return v;
        },
        "A new vector with the elements of LIST.");
  r.def("vector-fill!", "(vector fill :optional start end)",
        [](Value vec, Value fill, Value start, Value end) {
          Vector* v = vectorArg("vector-fill!", 0, vec);
          Range rg = rangeArgs("vector-fill!", 2, start, end, v->extra);
          std::fill(v->items + rg.start, v->items + rg.end, fill);
        },
        "Stores FILL in the elements of VECTOR from START to END (default: all).");
  r.def("vector-copy", "(vector :optional start end)",
        [](Value vec, Value start, Value end) {
          Vector* v = vectorArg("vector-copy", 0, vec);
          Range rg = rangeArgs("vector-copy", 1, start, end, v->extra);
          Value out = newVector(rg.end - rg.start);
          std::copy(v->items + rg.start, v->items + rg.end, out.as<Vector>()->items);
          return out;
        },
        "A new vector with the elements of VECTOR from START to END (default: all).");
  r.def("subvector", "(vector start end)",
        [](Value vec, Value start, Value end) {
          Vector* v = vectorArg("subvector", 0, vec);
          Range rg = rangeArgs("subvector", 1, start, end, v->extra);
          Value out = newVector(rg.end - rg.start);
          std::copy(v->items + rg.start, v->items + rg.end, out.as<Vector>()->items);
          return out;
        },
        "A new vector with the elements of VECTOR from START to END.");
  r.def("vector-copy!", "(to at from :optional start end)",
        [](Value to, Value at, Value from, Value start, Value end) {
          Vector* dst = vectorArg("vector-copy!", 0, to);
          size_t a = size_t(indexArg("vector-copy!", 1, at));
          Vector* src = vectorArg("vector-copy!", 2, from);
          Range rg = rangeArgs("vector-copy!", 3, start, end, src->extra);
          size_t n = rg.end - rg.start;
          if (a > dst->extra || n > dst->extra - a)
            rangeError("vector-copy!", 1, at, "the copied elements do not fit in the destination");
          // memmove: TO and FROM may be the same vector with overlapping ranges.
          std::memmove(static_cast<void*>(dst->items + a), src->items + rg.start, n * sizeof(Value));
        },
        "Copies the elements of FROM between START and END into TO starting at index AT. "
        "Overlapping copies within one vector work.");
  r.def("vector-append", "(:rest vectors)",
        [](RestArgs vs) {
          size_t total = 0;
          int i = 0;
          for (Value p = vs.list; isPair(p); p = cdr(p), i++) total += vectorArg("vector-append", i, car(p))->extra;
          Value out = newVector(total);
          size_t k = 0;
          for (Value p = vs.list; isPair(p); p = cdr(p)) {
            Vector* v = car(p).as<Vector>();
            std::copy(v->items, v->items + v->extra, out.as<Vector>()->items + k);
            k += v->extra;
          }
          return out;
        },
        "A new vector with the elements of the VECTORS in order.");
  r.def("vector-grow", "(vector k)",
        [](Value vec, int64_t k) {
          Vector* v = vectorArg("vector-grow", 0, vec);
          if (k < int64_t(v->extra)) rangeError("vector-grow", 1, Value::fixnum(k), "smaller than the vector");
          Value out = newVector(size_t(k));
          std::copy(v->items, v->items + v->extra, out.as<Vector>()->items);
          return out;
        },
        "A new vector of length K whose first elements are those of VECTOR; the rest are #f.");
  r.def("vector-map", "(proc vector . vectors)",
        [](Interp& in, Procedure f, Value v1, RestArgs more) {
          Value* vecs;
          int k;
          size_t n = gatherVectors("vector-map", v1, more, vecs, k);
          Value* args = gcValues(size_t(k));
          Value* results = gcValues(n);
          size_t done = 0;
          for (; done < n && stepVectors(vecs, k, done, args); done++) results[done] = in.apply(f.value, args, k);
          Value out = newVector(done);
          std::copy(results, results + done, out.as<Vector>()->items);
          return out;
        },
        "A new vector of (PROC e1 e2 ...) over the elements of the VECTORS in step, up to the "
        "shortest: (vector-map + #(1 2) #(10 20)) => #(11 22).");
  r.def("vector-for-each", "(proc vector . vectors)",
        [](Interp& in, Procedure f, Value v1, RestArgs more) {
          Value* vecs;
          int k;
          size_t n = gatherVectors("vector-for-each", v1, more, vecs, k);
          Value* args = gcValues(size_t(k));
          for (size_t i = 0; i < n && stepVectors(vecs, k, i, args); i++) applyForEffect(in, f.value, args, k);
        },
        "Calls (PROC e1 e2 ...) on the elements of the VECTORS in step, in order, for effect.");
  r.def("vector-count", "(pred vector . vectors)",
        [](Interp& in, Procedure f, Value v1, RestArgs more) {
          Value* vecs;
          int k;
          size_t n = gatherVectors("vector-count", v1, more, vecs, k);
          Value* args = gcValues(size_t(k));
          int64_t count = 0;
          for (size_t i = 0; i < n && stepVectors(vecs, k, i, args); i++)
            if (in.apply(f.value, args, k).isTrue()) count++;
          return count;
        },
        "How many times (PRED e1 e2 ...) is true over the elements of the VECTORS in step.");
  r.def("vector-index", "(pred vector . vectors)",
        [](Interp& in, Procedure f, Value v1, RestArgs more) {
          Value* vecs;
          int k;
          size_t n = gatherVectors("vector-index", v1, more, vecs, k);
          Value* args = gcValues(size_t(k));
          for (size_t i = 0; i < n && stepVectors(vecs, k, i, args); i++)
            if (in.apply(f.value, args, k).isTrue()) return Value::fixnum(int64_t(i));
          return Value::f();
        },
        "The index of the first elements of the VECTORS (in step) satisfying PRED, or #f.");
  r.def("vector-sort", "(vector less?)",
        [](Interp& in, Value a, Value b) { return sortVector(in, "vector-sort", a, b, false); },
        "A new vector with the elements of VECTOR sorted by LESS? (stable). Either argument order.");
  r.def("vector-sort!", "(vector less?)",
        [](Interp& in, Value a, Value b) { return sortVector(in, "vector-sort!", a, b, true); },
        "Sorts VECTOR in place by LESS? (stable). Either argument order.");

  // ---- bytevectors ----
  r.def("bytevector?", "(obj)", [](Value v) { return v.is(Kind::Bytevector); },
        "True when OBJ is a bytevector.");
  r.def("make-bytevector", "(k :optional byte)",
        [](int64_t k, Value fill) {
          if (k < 0 || k > 0xffffffffLL) rangeError("make-bytevector", 0, Value::fixnum(k), "bad length");
          return makeBytevector(size_t(k), fill.isMissing() ? 0 : byteArg("make-bytevector", 1, fill));
        },
        "A new bytevector of K bytes, each BYTE (default 0).");
  r.defRaw("bytevector", "(:rest bytes)", primBytevector,
           "A new bytevector of the arguments, exact integers 0-255.");
  r.def("bytevector-length", "(bytevector)",
        [](Value b) { return Value::fixnum(bytevectorArg("bytevector-length", 0, b)->extra); },
        "The number of bytes in BYTEVECTOR.");
  r.defRaw("bytevector-u8-ref", "(bytevector k)", primBytevectorRef,
           "Byte K (counting from 0) of BYTEVECTOR, as an exact integer.", kPrimBorrowsArgs);
  r.defRaw("bytevector-u8-set!", "(bytevector k byte)", primBytevectorSet,
           "Stores BYTE (0-255) as byte K of BYTEVECTOR.", kPrimBorrowsArgs);
  inlineInEvaluator(r.interp(), "bytevector-length", InlineBuiltin::BytevectorLength);
  inlineInEvaluator(r.interp(), "bytevector-u8-ref", InlineBuiltin::BytevectorU8Ref);
  inlineInEvaluator(r.interp(), "bytevector-u8-set!", InlineBuiltin::BytevectorU8Set);
  r.def("bytevector-copy", "(bytevector :optional start end)",
        [](Value bv, Value start, Value end) {
          Bytevector* b = bytevectorArg("bytevector-copy", 0, bv);
          Range rg = rangeArgs("bytevector-copy", 1, start, end, b->extra);
          Value out = makeBytevector(rg.end - rg.start);
          std::memcpy(out.as<Bytevector>()->bytes, b->bytes + rg.start, rg.end - rg.start);
          return out;
        },
        "A new bytevector with the bytes of BYTEVECTOR from START to END (default: all).");
  r.def("bytevector-copy!", "(to at from :optional start end)",
        [](Value to, Value at, Value from, Value start, Value end) {
          Bytevector* dst = bytevectorArg("bytevector-copy!", 0, to);
          size_t a = size_t(indexArg("bytevector-copy!", 1, at));
          Bytevector* src = bytevectorArg("bytevector-copy!", 2, from);
          Range rg = rangeArgs("bytevector-copy!", 3, start, end, src->extra);
          size_t n = rg.end - rg.start;
          if (a > dst->extra || n > dst->extra - a)
            rangeError("bytevector-copy!", 1, at, "the copied bytes do not fit in the destination");
          std::memmove(dst->bytes + a, src->bytes + rg.start, n);
        },
        "Copies the bytes of FROM between START and END into TO starting at index AT.");
  r.def("bytevector-append", "(:rest bytevectors)",
        [](RestArgs bs) {
          size_t total = 0;
          int i = 0;
          for (Value p = bs.list; isPair(p); p = cdr(p), i++) total += bytevectorArg("bytevector-append", i, car(p))->extra;
          Value out = makeBytevector(total);
          size_t k = 0;
          for (Value p = bs.list; isPair(p); p = cdr(p)) {
            Bytevector* b = car(p).as<Bytevector>();
            std::memcpy(out.as<Bytevector>()->bytes + k, b->bytes, b->extra);
            k += b->extra;
          }
          return out;
        },
        "A new bytevector with the bytes of the BYTEVECTORS in order.");
  r.def("bytevector-fill!", "(bytevector byte :optional start end)",
        [](Value bv, Value byte, Value start, Value end) {
          Bytevector* b = bytevectorArg("bytevector-fill!", 0, bv);
          uint8_t x = byteArg("bytevector-fill!", 1, byte);
          Range rg = rangeArgs("bytevector-fill!", 2, start, end, b->extra);
          std::memset(b->bytes + rg.start, x, rg.end - rg.start);
        },
        "Stores BYTE in the bytes of BYTEVECTOR from START to END (default: all).");
  r.def("bytevector->list", "(bytevector :optional start end)",
        [](Value bv, Value start, Value end) {
          Bytevector* b = bytevectorArg("bytevector->list", 0, bv);
          Range rg = rangeArgs("bytevector->list", 1, start, end, b->extra);
          Value out = Value::nil();
          for (size_t i = rg.end; i-- > rg.start;) out = cons(Value::fixnum(b->bytes[i]), out);
          return out;
        },
        "A new list of the bytes of BYTEVECTOR (exact integers) from START to END.");
  r.alias("bytevector->u8-list", "bytevector->list");
  r.def("list->bytevector", "(list)",
        [](Value l) {
          size_t n = listArg("list->bytevector", 0, l);
          Value out = makeBytevector(n);
          size_t i = 0;
          for (Value p = l; isPair(p) && i < n; p = cdr(p), i++) {
            if (!car(p).isFixnum() || car(p).fixnum() < 0 || car(p).fixnum() > 255)
              typeError("list->bytevector", 0, "a list of bytes (exact integers 0-255)", l);
            out.as<Bytevector>()->bytes[i] = uint8_t(car(p).fixnum());
          }
          return out;
        },
        "A new bytevector of the bytes (exact integers 0-255) in LIST.");
  r.alias("u8-list->bytevector", "list->bytevector");
}

}  // namespace purple
