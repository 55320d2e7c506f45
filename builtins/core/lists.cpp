// Pairs and lists: R7RS (scheme base) and (scheme cxr), plus the SRFI-1 utilities programs reach
// for (fold, reduce, filter, delete, iota, any/every, ...). Sorting is sorting.cpp.
//
// map, for-each and apply belong to the evaluator (control.cpp). Everything here copes with
// improper and circular arguments by raising a Purple error that names the procedure.
#include "builtins/builtins.hpp"
#include "interp/language/ownership.hpp"
#include "builtins/core/checks.hpp"
#include "interp/language/inline_ops.hpp"
#include "interp/language/equality.hpp"
#include "interp/language/numbers.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

namespace purple {

using namespace data;

namespace {

inline bool truthy(Value v) { return v.isTrue(); }

Value call1(Interp& in, Value f, Value a) { return in.apply(f, {a}); }
// (F A B) in a fold whose accumulator is B: a value in flight B was dies when F is done with it,
// once the fold owns it (interp/language/ownership.hpp).
Value call2(Interp& in, Value f, Value a, Value b, bool& ownsB) {
  Value args[2] = {a, b};
  return applyReplacing(in, f, args, 2, b, ownsB);
}

// Walks several lists in step (SRFI-1 semantics: stops at the end of the shortest). The cursors
// live in GC memory because the callbacks between steps allocate.
class Cursors {
 public:
  Cursors(std::string_view who, int firstIndex, Value lists, int extraSlots = 1)
      : who_(who), first_(firstIndex) {
    n_ = 0;
    for (Value p = lists; isPair(p); p = cdr(p)) n_++;
    cur_ = gcValues(n_);
    args_ = gcValues(n_ + extraSlots);
    int i = 0;
    for (Value p = lists; isPair(p); p = cdr(p)) cur_[i++] = car(p);
  }
  int count() const { return n_; }
  // Fills args()[offset..offset+n) with the next elements; false at the end of any list.
  bool next(int offset = 0) {
    if (n_ == 0) return false;
    for (int i = 0; i < n_; i++) {
      Value c = cur_[i];
      if (!isPair(c)) {
        if (!c.isNil()) badList(who_, first_ + i, c);
        return false;
      }
    }
    for (int i = 0; i < n_; i++) {
      args_[offset + i] = car(cur_[i]);
      cur_[i] = cdr(cur_[i]);
    }
    return true;
  }
  Value* args() { return args_; }
  Value current(int i) const { return cur_[i]; }

 private:
  std::string_view who_;
  int first_;
  int n_;
  Value* cur_;
  Value* args_;
};

// Prepends L to the rest-argument list REST: (f l1 . more) gathers l1 and more into one list.
Value listsOf(Value l1, RestArgs more) { return cons(l1, more.list); }

// ---- pairs -----------------------------------------------------------------------------------

Value primCons(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return cons(argv[0], argv[1]);
}
Value primCar(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  if (!isPair(argv[0])) typeError("car", 0, "a pair", argv[0]);
  return car(argv[0]);
}
Value primCdr(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  if (!isPair(argv[0])) typeError("cdr", 0, "a pair", argv[0]);
  return shareValue(cdr(argv[0]));   // a tail leaves with the result: see primCxr
}
// caar ... cddddr: the path is read from the builtin's own name, right to left.
Value primCxr(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  const std::string& name = info->name;
  Value v = argv[0];
  for (size_t i = name.size() - 2; i >= 1; i--) {
    if (!isPair(v)) typeError(name, 0, "a list structure deep enough for " + name, argv[0]);
    v = name[i] == 'a' ? car(v) : cdr(v);
  }
  // (cddr x) may be a tail of a list that owns its tensors: the tail is marked shared, as the
  // evaluator's inline cdr does (interp/language/ownership.hpp); an element is returned as it is.
  if (name[1] == 'd' && isPair(v)) shareValue(v);
  return v;
}
Value primSetCar(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  if (!isPair(argv[0])) typeError("set-car!", 0, "a pair", argv[0]);
  argv[0].as<Pair>()->car = argv[1];
  return Value::unspecified();
}
Value primSetCdr(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  if (!isPair(argv[0])) typeError("set-cdr!", 0, "a pair", argv[0]);
  argv[0].as<Pair>()->cdr = argv[1];
  return Value::unspecified();
}
Value primPairP(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::boolean(isPair(argv[0]));
}
Value primNullP(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::boolean(argv[0].isNil());
}
Value primListP(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::boolean(isList(argv[0]));
}
Value primList(Interp&, Value* argv, int argc, PrimitiveInfo*) {
  return listFromArray(argv, size_t(argc));
}
Value primConsStar(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return listFromArray(argv, size_t(argc - 1), argv[argc - 1]);
}
Value primLength(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::fixnum(int64_t(listArg("length", 0, argv[0])));
}

// (append l1 ... ln): copies all but the last, which is shared (and may be any object).
Value primAppend(Interp&, Value* argv, int argc, PrimitiveInfo*) {
  if (argc == 0) return Value::nil();
  ListBuilder b;
  for (int i = 0; i + 1 < argc; i++) {
    listArg("append", i, argv[i]);
    for (Value p = argv[i]; isPair(p); p = cdr(p)) b.add(car(p));
  }
  return b.finish(argv[argc - 1]);
}

// (append! l1 ... ln): links the lists destructively; empty lists are skipped.
Value primAppendBang(Interp&, Value* argv, int argc, PrimitiveInfo*) {
  Value result = Value::nil();
  Value lastPair = Value::nil();
  for (int i = 0; i < argc; i++) {
    Value l = argv[i];
    if (l.isNil()) continue;
    if (i + 1 < argc) listArg("append!", i, l);
    if (lastPair.isNil()) result = l;
    else lastPair.as<Pair>()->cdr = l;
    if (isPair(l) && i + 1 < argc) {
      Value p = l;
      while (isPair(cdr(p))) p = cdr(p);
      lastPair = p;
    } else if (i + 1 < argc) {
      lastPair = Value::nil();
    }
  }
  return result;
}

// Floyd's cycle check along cdrs; improper tails are fine.
bool isCircular(Value l) {
  Value slow = l, fast = l;
  while (isPair(fast) && isPair(cdr(fast))) {
    fast = cddr(fast);
    slow = cdr(slow);
    if (fast == slow) return true;
  }
  return false;
}

Value reverseChecked(std::string_view who, int index, Value l) {
  listArg(who, index, l);
  return reverseList(l);
}

// ---- membership and association --------------------------------------------------------------

template <class Same>
Value memberGeneric(std::string_view who, Value x, Value list, Same same) {
  CycleCheck cycle(list);
  for (Value p = list; !p.isNil();) {
    if (!isPair(p)) badList(who, 1, list);
    if (same(x, car(p))) return p;
    p = cdr(p);
    if (cycle.step(p)) badList(who, 1, list);
  }
  return Value::f();
}

template <class Same>
Value assocGeneric(std::string_view who, Value x, Value alist, Same same) {
  CycleCheck cycle(alist);
  for (Value p = alist; !p.isNil();) {
    if (!isPair(p)) badList(who, 1, alist);
    Value entry = car(p);
    if (!isPair(entry)) typeError(who, 1, "an association list (a list of pairs)", alist);
    if (same(x, car(entry))) return entry;
    p = cdr(p);
    if (cycle.step(p)) badList(who, 1, alist);
  }
  return Value::f();
}

Value primMemq(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return memberGeneric("memq", argv[0], argv[1], [](Value a, Value b) { return a == b; });
}
Value primMemv(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return memberGeneric("memv", argv[0], argv[1], eqv);
}
Value primAssq(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return assocGeneric("assq", argv[0], argv[1], [](Value a, Value b) { return a == b; });
}
Value primAssv(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return assocGeneric("assv", argv[0], argv[1], eqv);
}

// ---- numbers for iota ------------------------------------------------------------------------

Value addNumbers(Interp&, Value a, Value b) { return numAdd(a, b); }
Value mulNumbers(Interp&, Value a, Value b) { return numMul(a, b); }

// ---- equality predicates for delete, member, assoc --------------------------------------------

// An equivalence given to member/assoc/delete: the built-in ones are compared in C++.
struct Equiv {
  enum { Eq, Eqv, Equal, Proc } kind = Equal;
  Value proc;
  static Equiv from(std::string_view who, int index, Value v) {
    Equiv e;
    if (v.isMissing()) return e;
    if (!isProcedure(v)) typeError(who, index, "an equivalence procedure", v);
    if (isBuiltin(v, "eq?")) e.kind = Eq;
    else if (isBuiltin(v, "eqv?")) e.kind = Eqv;
    else if (isBuiltin(v, "equal?")) e.kind = Equal;
    else { e.kind = Proc; e.proc = v; }
    return e;
  }
  bool operator()(Interp& in, Value a, Value b) const {
    switch (kind) {
      case Eq: return a == b;
      case Eqv: return eqv(a, b);
      case Equal: return equalValues(a, b);
      default: return in.apply(proc, {a, b}).isTrue();
    }
  }
};

Value deleteDuplicates(Interp& in, Value list, Value eqArg) {
  size_t n = listArg("delete-duplicates", 0, list);
  Equiv same = Equiv::from("delete-duplicates", 1, eqArg);
  Value* items = gcValues(n);
  size_t i = 0;
  for (Value p = list; isPair(p); p = cdr(p)) items[i++] = car(p);
  std::vector<bool> keep(n, true);
  if (same.kind != Equiv::Proc && n > 32) {
    // Hash set over the built-in equivalences: O(n) rather than O(n^2). Nothing allocates
    // while the set holds Values, and every one is in `items`.
    auto hash = [&](Value v) { return size_t(same.kind == Equiv::Equal ? hashEqual(v) : hashEqv(v)); };
    auto eq = [&](Value a, Value b) { return same(in, a, b); };
    std::unordered_set<Value, decltype(hash), decltype(eq)> seen(n * 2, hash, eq);
    for (size_t k = 0; k < n; k++) keep[k] = seen.insert(items[k]).second;
  } else {
    for (size_t k = 0; k < n; k++) {
      if (!keep[k]) continue;
      for (size_t j = k + 1; j < n; j++)
        if (keep[j] && same(in, items[k], items[j])) keep[j] = false;
    }
  }
  ListBuilder b;
  for (size_t k = 0; k < n; k++)
    if (keep[k]) b.add(items[k]);
  return b.finish();
}

// Elements of a single proper list, copied into GC-visible memory.
Value* listItems(std::string_view who, int index, Value list, size_t& n) {
  n = listArg(who, index, list);
  Value* items = gcValues(n);
  size_t i = 0;
  for (Value p = list; isPair(p); p = cdr(p)) items[i++] = car(p);
  return items;
}

// The tail of LIST after K pairs. On a circular list the walk goes round the cycle only once:
// the rest of K is taken modulo the cycle's length, so (list-tail circular (expt 10 15)) ends.
Value nth(std::string_view who, Value list, int64_t k) {
  Value p = list;
  CycleCheck cycle(list);
  for (int64_t i = 0; i < k; i++) {
    if (!isPair(p)) rangeError(who, 1, Value::fixnum(k), "the list is too short");
    p = cdr(p);
    if (cycle.step(p)) {
      int64_t length = 1;
      for (Value q = cdr(p); q != p; q = cdr(q)) length++;
      for (int64_t rest = (k - i - 1) % length; rest > 0; rest--) p = cdr(p);
      return p;
    }
  }
  return p;
}

}  // namespace

void registerLists(Registry& r) {
  // ---- pairs ----
  r.defRaw("cons", "(obj1 obj2)", primCons, "A new pair whose car is OBJ1 and whose cdr is OBJ2.");
  r.defRaw("car", "(pair)", primCar, "The first field (car) of PAIR.", kPrimBorrowsArgs);
  r.defRaw("cdr", "(pair)", primCdr, "The second field (cdr) of PAIR.", kPrimBorrowsArgs);
  r.defRaw("set-car!", "(pair obj)", primSetCar, "Stores OBJ in the car of PAIR.");
  r.defRaw("set-cdr!", "(pair obj)", primSetCdr, "Stores OBJ in the cdr of PAIR.");
  static const char* const kCxr[] = {
      "caar", "cadr", "cdar", "cddr", "caaar", "caadr", "cadar", "caddr", "cdaar", "cdadr", "cddar", "cdddr",
      "caaaar", "caaadr", "caadar", "caaddr", "cadaar", "cadadr", "caddar", "cadddr",
      "cdaaar", "cdaadr", "cdadar", "cdaddr", "cddaar", "cddadr", "cdddar", "cddddr"};
  for (const char* name : kCxr) {
    std::string path(name + 1, std::char_traits<char>::length(name) - 2);
    std::string expansion;
    for (char c : path) expansion += std::string("(c") + c + "r ";
    r.defRaw(name, "(pair)", primCxr,
             "Composition of car and cdr: (" + std::string(name) + " x) is " + expansion + "x" +
                 std::string(path.size(), ')') + ".",
             kPrimBorrowsArgs);
  }
  r.defRaw("pair?", "(obj)", primPairP, "True when OBJ is a pair.", kPrimBorrowsArgs);
  r.defRaw("null?", "(obj)", primNullP, "True when OBJ is the empty list.", kPrimBorrowsArgs);
  r.defRaw("list?", "(obj)", primListP,
           "True when OBJ is a proper list: finite and ending in the empty list.", kPrimBorrowsArgs);
  r.alias("proper-list?", "list?");
  for (auto [name, op] : {std::pair{"cons", InlineBuiltin::Cons}, {"car", InlineBuiltin::Car}, {"cdr", InlineBuiltin::Cdr},
                          {"cadr", InlineBuiltin::Cadr}, {"cddr", InlineBuiltin::Cddr}, {"pair?", InlineBuiltin::PairP},
                          {"null?", InlineBuiltin::NullP}})
    inlineInEvaluator(r.interp(), name, op);

  // ---- construction ----
  r.defRaw("list", "(:rest objs)", primList, "A newly allocated list of the arguments.", kPrimMakesList);
  r.defRaw("cons*", "(obj . objs)", primConsStar,
           "Like list, but the last argument is the tail: (cons* 1 2 '(3 4)) => (1 2 3 4).");
  r.alias("list*", "cons*");
  r.def("make-list", "(k :optional fill)",
        [](int64_t k, Value fill) {
          if (k < 0) rangeError("make-list", 0, Value::fixnum(k), "negative length");
          if (fill.isMissing()) fill = Value::f();
          Value l = Value::nil();
          for (int64_t i = 0; i < k; i++) {
            pollEvery(uint64_t(i));
            l = cons(fill, l);
          }
          return l;
        },
        "A list of K elements, each FILL (default #f).");
  r.def("list-tabulate", "(k proc)",
        [](Interp& in, int64_t k, Procedure f) {
          if (k < 0) rangeError("list-tabulate", 0, Value::fixnum(k), "negative length");
          Value l = Value::nil();
          for (int64_t i = k - 1; i >= 0; i--) {
            Value x = call1(in, f.value, Value::fixnum(i));
            l = cons(x, l);
          }
          return l;
        },
        "The list ((PROC 0) (PROC 1) ... (PROC K-1)).");
  r.def("iota", "(count :optional start step)",
        [](Interp& in, int64_t count, Value start, Value step) {
          if (count < 0) rangeError("iota", 0, Value::fixnum(count), "negative count");
          if (start.isMissing()) start = Value::fixnum(0);
          if (step.isMissing()) step = Value::fixnum(1);
          if (!isNumber(start)) typeError("iota", 1, "a number", start);
          if (!isNumber(step)) typeError("iota", 2, "a number", step);
          Value l = Value::nil();
          // start + i*step for each i (not repeated addition), as SRFI-1 specifies, so that
          // inexact steps do not accumulate error.
          bool fixnums = start.isFixnum() && step.isFixnum();
          bool floats = (isFlonum(start) || start.isFixnum()) && (isFlonum(step) || step.isFixnum()) && !fixnums;
          for (int64_t i = count - 1; i >= 0; i--) {
            pollEvery(uint64_t(i));
            Value x;
            int64_t prod, sum;
            if (fixnums && !__builtin_mul_overflow(i, step.fixnum(), &prod) &&
                !__builtin_add_overflow(prod, start.fixnum(), &sum)) {
              x = makeInteger(sum);
            } else if (floats) {
              double s = start.isFixnum() ? double(start.fixnum()) : flonumValue(start);
              double d = step.isFixnum() ? double(step.fixnum()) : flonumValue(step);
              x = makeFlonum(s + double(i) * d);
            } else {
              x = addNumbers(in, start, mulNumbers(in, Value::fixnum(i), step));
            }
            l = cons(x, l);
          }
          return l;
        },
        "The list of COUNT numbers START, START+STEP, ... (defaults 0 and 1): (iota 5) => (0 1 2 3 4), "
        "(iota 3 1) => (1 2 3), (iota 3 0 0.5) => (0 0.5 1.0).");
  r.def("list-copy", "(obj)",
        [](Value l) {
          ListBuilder b;
          Value p = l, slow = l;
          for (size_t steps = 0; isPair(p); p = cdr(p), steps++) {
            if (steps & 1) {   // Floyd: a circular list would never end
              slow = cdr(slow);
              if (slow == cdr(p)) typeError("list-copy", 0, "a non-circular list", l);
            }
            b.add(car(p));
          }
          return b.finish(p);
        },
        "A copy of the spine of list OBJ (the elements are shared; an improper tail is kept). "
        "Any non-pair is returned as it is.");

  // ---- length, append, reverse ----
  r.defRaw("length", "(list)", primLength, "The number of elements of LIST (a proper list).", kPrimBorrowsArgs);
  r.def("length+", "(obj)",
        [](Value l) {
          size_t n = 0;
          Value slow = l, fast = l;
          while (isPair(fast)) {
            fast = cdr(fast);
            n++;
            if (!isPair(fast)) break;
            fast = cdr(fast);
            n++;
            slow = cdr(slow);
            if (fast == slow) return Value::f();
          }
          return Value::fixnum(int64_t(n));
        },
        "The length of OBJ counted up to its first non-pair, or #f when OBJ is circular.");
  r.defRaw("append", "(:rest lists)", primAppend,
           "The concatenation of the LISTS. All but the last are copied; the last is shared and "
           "may be any object: (append '(1) '(2) 3) => (1 2 . 3).");
  r.defRaw("append!", "(:rest lists)", primAppendBang,
           "Like append, but links the lists destructively instead of copying them.");
  r.def("reverse", "(list)", [](Value l) { return reverseChecked("reverse", 0, l); },
        "A new list with the elements of LIST in reverse order.");
  r.def("reverse!", "(list)",
        [](Value l) {
          listArg("reverse!", 0, l);
          Value prev = Value::nil();
          while (isPair(l)) {
            Value next = cdr(l);
            l.as<Pair>()->cdr = prev;
            prev = l;
            l = next;
          }
          return prev;
        },
        "Reverses LIST destructively, reusing its pairs, and returns the new head.");
  r.def("append-reverse", "(rev-head tail)",
        [](Value head, Value tail) {
          listArg("append-reverse", 0, head);
          for (Value p = head; isPair(p); p = cdr(p)) tail = cons(car(p), tail);
          return tail;
        },
        "(append (reverse REV-HEAD) TAIL), without building the intermediate list.");

  // ---- indexing ----
  r.def("list-tail", "(list k)",
        [](Value l, Value k) { return nth("list-tail", l, indexArg("list-tail", 1, k)); },
        "LIST without its first K elements (shares structure with LIST).");
  r.def("list-ref", "(list k)",
        [](Value l, Value k) {
          Value p = nth("list-ref", l, indexArg("list-ref", 1, k));
          if (!isPair(p)) rangeError("list-ref", 1, k, "the list is too short");
          return car(p);
        },
        "Element K (counting from 0) of LIST.", kPrimBorrowsArgs);
  r.def("list-set!", "(list k obj)",
        [](Value l, Value k, Value obj) {
          Value p = nth("list-set!", l, indexArg("list-set!", 1, k));
          if (!isPair(p)) rangeError("list-set!", 1, k, "the list is too short");
          p.as<Pair>()->car = obj;
        },
        "Stores OBJ as element K (counting from 0) of LIST.");
  r.def("list-head", "(list k)",
        [](Value l, Value k) {
          int64_t n = indexArg("list-head", 1, k);
          ListBuilder b;
          Value p = l;
          for (int64_t i = 0; i < n; i++, p = cdr(p)) {
            if (!isPair(p)) rangeError("list-head", 1, k, "the list is too short");
            pollEvery(uint64_t(i));
            b.add(car(p));
          }
          return b.finish();
        },
        "A new list of the first K elements of LIST.");
  r.alias("take", "list-head");
  r.def("drop", "(list k)", [](Value l, Value k) { return nth("drop", l, indexArg("drop", 1, k)); },
        "LIST without its first K elements (same as list-tail).");
  r.def("take-right", "(list k)",
        [](Value l, Value k) {
          int64_t n = indexArg("take-right", 1, k);
          if (isCircularList(l)) typeError("take-right", 0, "a non-circular list", l);
          Value lead = nth("take-right", l, n), lag = l;
          for (; isPair(lead); lead = cdr(lead)) lag = cdr(lag);
          return lag;
        },
        "The last K elements of LIST (shared with LIST).");
  r.def("drop-right", "(list k)",
        [](Value l, Value k) {
          int64_t n = indexArg("drop-right", 1, k);
          if (isCircularList(l)) typeError("drop-right", 0, "a non-circular list", l);
          Value lead = nth("drop-right", l, n), lag = l;
          ListBuilder b;
          for (; isPair(lead); lead = cdr(lead), lag = cdr(lag)) b.add(car(lag));
          return b.finish();
        },
        "A new list of all but the last K elements of LIST.");
  r.def("last-pair", "(list)",
        [](Value l) {
          if (!isPair(l)) typeError("last-pair", 0, "a non-empty list", l);
          if (isCircular(l)) typeError("last-pair", 0, "a non-circular list", l);
          while (isPair(cdr(l))) l = cdr(l);
          return l;
        },
        "The last pair of the non-empty LIST.");
  r.def("last", "(list)",
        [](Value l) {
          if (!isPair(l)) typeError("last", 0, "a non-empty list", l);
          if (isCircular(l)) typeError("last", 0, "a non-circular list", l);
          while (isPair(cdr(l))) l = cdr(l);
          return car(l);
        },
        "The last element of the non-empty LIST.", kPrimBorrowsArgs);
  static const char* const kOrdinals[] = {"first", "second", "third", "fourth", "fifth",
                                          "sixth", "seventh", "eighth", "ninth", "tenth"};
  for (int i = 0; i < 10; i++) {
    std::string name = kOrdinals[i];
    r.def(name, "(list)",
          [i, name](Value l) {
            Value p = l;
            for (int k = 0; k < i && isPair(p); k++) p = cdr(p);
            if (!isPair(p)) typeError(name, 0, "a list of at least " + std::to_string(i + 1) + (i ? " elements" : " element"), l);
            return car(p);
          },
          "Element " + std::to_string(i + 1) + " of LIST: (" + name + " l) is (list-ref l " +
              std::to_string(i) + ").",
          kPrimBorrowsArgs);
  }

  // ---- membership and association ----
  // (a tail may leave with the result: memq and memv keep their list)
  r.defRaw("memq", "(obj list)", primMemq, "The first tail of LIST whose car is eq? to OBJ, or #f.");
  r.defRaw("memv", "(obj list)", primMemv, "The first tail of LIST whose car is eqv? to OBJ, or #f.");
  r.def("member", "(obj list :optional compare)",
        [](Interp& in, Value x, Value l, Value cmp) {
          Equiv same = Equiv::from("member", 2, cmp);
          return memberGeneric("member", x, l, [&](Value a, Value b) { return same(in, a, b); });
        },
        "The first tail of LIST whose car is equal? to OBJ (or satisfies (COMPARE OBJ elem)), or #f.");
  r.defRaw("assq", "(obj alist)", primAssq,
           "The first pair in ALIST whose car is eq? to OBJ, or #f.", kPrimBorrowsArgs);
  r.defRaw("assv", "(obj alist)", primAssv,
           "The first pair in ALIST whose car is eqv? to OBJ, or #f.", kPrimBorrowsArgs);
  r.def("assoc", "(obj alist :optional compare)",
        [](Interp& in, Value x, Value l, Value cmp) {
          Equiv same = Equiv::from("assoc", 2, cmp);
          return assocGeneric("assoc", x, l, [&](Value a, Value b) { return same(in, a, b); });
        },
        "The first pair in ALIST whose car is equal? to OBJ (or satisfies (COMPARE OBJ key)), or #f.");
  r.def("assoc-ref", "(alist key :optional default)",
        [](Value l, Value key, Value dflt) {
          Value e = assocGeneric("assoc-ref", key, l, equalValues);
          if (e.isFalse()) return dflt.isMissing() ? Value::f() : dflt;
          return cdr(e);
        },
        "The value (cdr) of the first entry of ALIST whose key is equal? to KEY, or DEFAULT (#f).");
  r.def("alist-copy", "(alist)",
        [](Value l) {
          listArg("alist-copy", 0, l);
          ListBuilder b;
          for (Value p = l; isPair(p); p = cdr(p)) {
            Value e = car(p);
            b.add(isPair(e) ? cons(car(e), cdr(e)) : e);
          }
          return b.finish();
        },
        "A copy of ALIST with fresh pairs for the spine and for each entry.");
  r.def("alist-delete", "(key alist :optional compare)",
        [](Interp& in, Value key, Value l, Value cmp) {
          listArg("alist-delete", 1, l);
          Equiv same = Equiv::from("alist-delete", 2, cmp);
          ListBuilder b;
          for (Value p = l; isPair(p); p = cdr(p)) {
            Value e = car(p);
            if (!isPair(e)) typeError("alist-delete", 1, "an association list (a list of pairs)", l);
            if (!same(in, key, car(e))) b.add(e);
          }
          return b.finish();
        },
        "ALIST without the entries whose key is equal? to KEY (or satisfies (COMPARE KEY k)).");

  // ---- filtering and searching ----
  r.def("filter", "(pred list)",
        [](Interp& in, Procedure pred, Value l) {
          listArg("filter", 1, l);
          ListBuilder b;
          for (Value p = l; isPair(p); p = cdr(p))
            if (truthy(call1(in, pred.value, car(p)))) b.add(car(p));
          return b.finish();
        },
        "A new list of the elements of LIST that satisfy PRED, in order.");
  r.alias("filter!", "filter");
  r.def("remove", "(pred list)",
        [](Interp& in, Procedure pred, Value l) {
          listArg("remove", 1, l);
          ListBuilder b;
          for (Value p = l; isPair(p); p = cdr(p))
            if (!truthy(call1(in, pred.value, car(p)))) b.add(car(p));
          return b.finish();
        },
        "A new list of the elements of LIST that do not satisfy PRED, in order.");
  r.alias("remove!", "remove");
  r.def("partition", "(pred list)",
        [](Interp& in, Procedure pred, Value l) {
          listArg("partition", 1, l);
          ListBuilder yes, no;
          for (Value p = l; isPair(p); p = cdr(p)) {
            if (truthy(call1(in, pred.value, car(p)))) yes.add(car(p));
            else no.add(car(p));
          }
          Value both[2] = {yes.finish(), no.finish()};
          return makeValues(both, 2);
        },
        "Two values: the elements of LIST that satisfy PRED and those that do not, in order.");
  r.def("delete", "(obj list :optional compare)",
        [](Interp& in, Value x, Value l, Value cmp) {
          listArg("delete", 1, l);
          Equiv same = Equiv::from("delete", 2, cmp);
          ListBuilder b;
          for (Value p = l; isPair(p); p = cdr(p))
            if (!same(in, x, car(p))) b.add(car(p));
          return b.finish();
        },
        "A new list of the elements of LIST not equal? to OBJ (or not satisfying (COMPARE OBJ elem)).");
  r.alias("delete!", "delete");
  r.def("delete-duplicates", "(list :optional compare)",
        [](Interp& in, Value l, Value cmp) { return deleteDuplicates(in, l, cmp); },
        "LIST without later duplicates (by equal? or COMPARE); the first occurrence of each "
        "element is kept, in order.");
  r.def("find", "(pred list)",
        [](Interp& in, Procedure pred, Value l) {
          for (Value p = l; !p.isNil(); p = cdr(p)) {
            if (!isPair(p)) badList("find", 1, l);
            if (truthy(call1(in, pred.value, car(p)))) return car(p);
          }
          return Value::f();
        },
        "The first element of LIST that satisfies PRED, or #f.");
  r.def("find-tail", "(pred list)",
        [](Interp& in, Procedure pred, Value l) {
          for (Value p = l; !p.isNil(); p = cdr(p)) {
            if (!isPair(p)) badList("find-tail", 1, l);
            if (truthy(call1(in, pred.value, car(p)))) return p;
          }
          return Value::f();
        },
        "The first tail of LIST whose car satisfies PRED, or #f.");
  r.def("take-while", "(pred list)",
        [](Interp& in, Procedure pred, Value l) {
          ListBuilder b;
          for (Value p = l; isPair(p) && truthy(call1(in, pred.value, car(p))); p = cdr(p)) b.add(car(p));
          return b.finish();
        },
        "The longest prefix of LIST whose elements all satisfy PRED.");
  r.def("drop-while", "(pred list)",
        [](Interp& in, Procedure pred, Value l) {
          Value p = l;
          while (isPair(p) && truthy(call1(in, pred.value, car(p)))) p = cdr(p);
          return p;
        },
        "LIST without its longest prefix whose elements all satisfy PRED.");
  r.def("span", "(pred list)",
        [](Interp& in, Procedure pred, Value l) {
          ListBuilder b;
          Value p = l;
          for (; isPair(p) && truthy(call1(in, pred.value, car(p))); p = cdr(p)) b.add(car(p));
          Value both[2] = {b.finish(), p};
          return makeValues(both, 2);
        },
        "Two values: the longest prefix of LIST satisfying PRED, and the rest.");
  r.def("break", "(pred list)",
        [](Interp& in, Procedure pred, Value l) {
          ListBuilder b;
          Value p = l;
          for (; isPair(p) && !truthy(call1(in, pred.value, car(p))); p = cdr(p)) b.add(car(p));
          Value both[2] = {b.finish(), p};
          return makeValues(both, 2);
        },
        "Two values: the longest prefix of LIST not satisfying PRED, and the rest.");
  r.def("any", "(pred list . lists)",
        [](Interp& in, Procedure pred, Value l1, RestArgs more) {
          Cursors c("any", 1, listsOf(l1, more));
          while (c.next()) {
            Value v = in.apply(pred.value, c.args(), c.count());
            if (truthy(v)) return v;
          }
          return Value::f();
        },
        "The first true value of (PRED e1 e2 ...) over the elements of the LISTS taken in step, or #f.");
  r.def("every", "(pred list . lists)",
        [](Interp& in, Procedure pred, Value l1, RestArgs more) {
          Cursors c("every", 1, listsOf(l1, more));
          Value last = Value::t();
          while (c.next()) {
            last = in.apply(pred.value, c.args(), c.count());
            if (!truthy(last)) return Value::f();
          }
          return last;
        },
        "#f if (PRED e1 e2 ...) is false for some elements of the LISTS taken in step, else the "
        "last value of PRED (#t when the lists are empty).");
  r.def("count", "(pred list . lists)",
        [](Interp& in, Procedure pred, Value l1, RestArgs more) {
          Cursors c("count", 1, listsOf(l1, more));
          int64_t n = 0;
          while (c.next())
            if (truthy(in.apply(pred.value, c.args(), c.count()))) n++;
          return n;
        },
        "How many times (PRED e1 e2 ...) is true over the elements of the LISTS taken in step.");
  r.def("list-index", "(pred list . lists)",
        [](Interp& in, Procedure pred, Value l1, RestArgs more) {
          Cursors c("list-index", 1, listsOf(l1, more));
          int64_t i = 0;
          while (c.next()) {
            if (truthy(in.apply(pred.value, c.args(), c.count()))) return Value::fixnum(i);
            i++;
          }
          return Value::f();
        },
        "The index of the first elements of the LISTS (taken in step) that satisfy PRED, or #f.");
  r.def("filter-map", "(f list . lists)",
        [](Interp& in, Procedure f, Value l1, RestArgs more) {
          Cursors c("filter-map", 1, listsOf(l1, more));
          ListBuilder b;
          while (c.next()) {
            Value v = in.apply(f.value, c.args(), c.count());
            if (truthy(v)) b.add(v);
          }
          return b.finish();
        },
        "The true values of (F e1 e2 ...) over the elements of the LISTS taken in step.");
  r.def("append-map", "(f list . lists)",
        [](Interp& in, Procedure f, Value l1, RestArgs more) {
          Cursors c("append-map", 1, listsOf(l1, more));
          ListBuilder b;
          while (c.next()) {
            Value v = in.apply(f.value, c.args(), c.count());
            listArg("append-map", 0, v);
            for (Value p = v; isPair(p); p = cdr(p)) b.add(car(p));
          }
          return b.finish();
        },
        "The concatenation of the lists (F e1 e2 ...) over the elements of the LISTS in step.");
  r.alias("append-map!", "append-map");

  // ---- folds ----
  r.def("fold", "(kons knil list . lists)",
        [](Interp& in, Procedure kons, Value acc, Value l1, RestArgs more) {
          Cursors c("fold", 2, listsOf(l1, more));
          int n = c.count();
          bool owned = false;
          while (c.next()) {
            c.args()[n] = acc;
            acc = applyReplacing(in, kons.value, c.args(), n + 1, acc, owned);
          }
          return acc;
        },
        "SRFI-1 fold: (KONS elem acc) from left to right, starting with KNIL. "
        "(fold cons '() '(1 2 3)) => (3 2 1), (fold + 0 '(1 2 3)) => 6.",
        kPrimBorrowsArgs);
  r.def("fold-left", "(f init list . lists)",
        [](Interp& in, Procedure f, Value acc, Value l1, RestArgs more) {
          Cursors c("fold-left", 2, listsOf(l1, more));
          bool owned = false;
          while (c.next(1)) {
            c.args()[0] = acc;
            acc = applyReplacing(in, f.value, c.args(), c.count() + 1, acc, owned);
          }
          return acc;
        },
        "(F acc elem) from left to right, starting with INIT (R6RS order). "
        "(fold-left cons '() '(1 2 3)) => (((() . 1) . 2) . 3).",
        kPrimBorrowsArgs);
  r.def("fold-right", "(f init list . lists)",
        [](Interp& in, Procedure f, Value acc, Value l1, RestArgs more) {
          Value lists = listsOf(l1, more);
          int n = 0;
          for (Value p = lists; isPair(p); p = cdr(p)) n++;
          // The elements in step, row by row, so they can be visited right to left.
          size_t len = SIZE_MAX;
          int i = 0;
          for (Value p = lists; isPair(p); p = cdr(p), i++) {
            size_t k = listLength(car(p));
            if (k == SIZE_MAX) badList("fold-right", 2 + i, car(p));
            len = std::min(len, k);
          }
          Value* rows = gcValues(len * n);
          i = 0;
          for (Value p = lists; isPair(p); p = cdr(p), i++) {
            Value q = car(p);
            for (size_t k = 0; k < len; k++, q = cdr(q)) rows[k * n + i] = car(q);
          }
          Value* args = gcValues(n + 1);
          bool owned = false;
          for (size_t k = len; k-- > 0;) {
            std::copy(rows + k * n, rows + (k + 1) * n, args);
            args[n] = acc;
            acc = applyReplacing(in, f.value, args, n + 1, acc, owned);
          }
          return acc;
        },
        "(F elem acc) from right to left, starting with INIT. (fold-right cons '() '(1 2 3)) => (1 2 3).",
        kPrimBorrowsArgs);
  r.def("reduce", "(f ridentity list)",
        [](Interp& in, Procedure f, Value ridentity, Value l) {
          listArg("reduce", 2, l);
          if (l.isNil()) return ridentity;
          Value acc = car(l);
          bool owned = false;
          for (Value p = cdr(l); isPair(p); p = cdr(p)) acc = call2(in, f.value, car(p), acc, owned);
          return acc;
        },
        "SRFI-1 reduce: RIDENTITY for an empty LIST, else (F elem acc) folded from the left "
        "starting with the first element. (reduce + 0 '(1 2 3)) => 6, (reduce max 0 '()) => 0.",
        kPrimBorrowsArgs);
  r.def("reduce-right", "(f ridentity list)",
        [](Interp& in, Procedure f, Value ridentity, Value l) {
          size_t n;
          Value* items = listItems("reduce-right", 2, l, n);
          if (n == 0) return ridentity;
          Value acc = items[n - 1];
          bool owned = false;
          for (size_t k = n - 1; k-- > 0;) acc = call2(in, f.value, items[k], acc, owned);
          return acc;
        },
        "RIDENTITY for an empty LIST, else (F e1 (F e2 ... (F en-1 en))).",
        kPrimBorrowsArgs);
}

}  // namespace purple
