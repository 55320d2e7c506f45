// Hash tables: SRFI-69 names (make-hash-table, hash-table-ref, hash-table-walk, ...) with the
// SRFI-125 additions people also reach for (hash-table-contains?, hash-table-size,
// hash-table-intern!, hash-table-prune!, ...). Layout and invariants: builtins/core/hashtable.hpp.
#include "builtins/core/hashtable.hpp"

#include "builtins/builtins.hpp"
#include "builtins/core/checks.hpp"
#include "builtins/core/unicode.hpp"
#include "interp/language/equality.hpp"
#include "interp/language/numbers.hpp"

#include <gc/gc.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace purple {

using namespace data;

namespace {

constexpr HashSlot kEmpty = 0;
constexpr HashSlot kDeleted = 1;
constexpr uint32_t kFirstEntry = 2;   // a slot's low bits hold its entry number plus this
constexpr uint8_t kImmutable = 1;

HashTable* table(Value v) { return v.as<HashTable>(); }

uint32_t fold64(uint64_t h) { return uint32_t(h ^ (h >> 32)); }

uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

std::string foldString(std::string_view b) {
  std::string out;
  out.reserve(b.size());
  const char* p = b.data();
  const char* e = p + b.size();
  while (p < e) unicode::appendFold(out, decodeUtf8(p, e));
  return out;
}

uint64_t bytesHash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) { h ^= c; h *= 0x100000001b3ULL; }
  return mix64(h);
}

// A hash for `=`: equal numbers of any exactness convert to the same double (a number = to a
// flonum is exactly that flonum, and the conversions are exact then), so hash the double.
uint64_t numberHash(Value v) {
  double d = toDouble(v);
  if (d == 0) d = 0;          // -0.0 = 0
  if (std::isnan(d)) return 0x7ff8;
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return mix64(bits);
}

uint32_t hashKey(Interp& in, HashTable* t, Value key) {
  switch (t->equiv()) {
    // eq? compares the bits, so they are the hash: a lookup reads nothing of the key itself (a
    // cache miss per symbol when a program walks a list of keys).
    case HashEquiv::Eq: return fold64(mix64(key.bits));
    case HashEquiv::Eqv: return fold64(hashEqv(key));
    case HashEquiv::Equal: return fold64(hashEqual(key));
    case HashEquiv::String:
      if (!isString(key)) typeError("hash-table", 1, "a string key (the table compares with string=?)", key);
      return fold64(bytesHash(stringView(key)));
    case HashEquiv::StringCi:
      if (!isString(key)) typeError("hash-table", 1, "a string key (the table compares with string-ci=?)", key);
      return fold64(bytesHash(foldString(stringView(key))));
    case HashEquiv::Number:
      if (!isNumber(key)) typeError("hash-table", 1, "a number key (the table compares with =)", key);
      return fold64(numberHash(key));
    case HashEquiv::Custom: {
      if (t->hashProc.isFalse()) return 0;   // no hash given: correct, if slow (one probe chain)
      Value h = in.apply(t->hashProc, {key});
      if (!isExactInteger(h)) typeError("hash-table", 1, "a hash function that returns exact integers", h);
      return fold64(hashEqv(h));
    }
  }
  return 0;
}

bool keysEqual(Interp& in, HashTable* t, Value a, Value b) {
  switch (t->equiv()) {
    case HashEquiv::Eq: return a == b;
    case HashEquiv::Eqv: return eqv(a, b);
    case HashEquiv::Equal: return equalValues(a, b);
    case HashEquiv::String: return isString(a) && isString(b) && stringView(a) == stringView(b);
    case HashEquiv::StringCi:
      return isString(a) && isString(b) && foldString(stringView(a)) == foldString(stringView(b));
    case HashEquiv::Number: return numEqual(a, b);
    case HashEquiv::Custom: return in.apply(t->equivProc, {a, b}).isTrue();
  }
  return false;
}

uint32_t indexCapFor(uint32_t entryCap) {
  uint32_t cap = 8;
  while (cap < entryCap + entryCap / 2 + kFirstEntry) cap *= 2;
  return cap;
}

void allocate(HashTable* t, uint32_t entryCap) {
  t->entryCap = entryCap;
  t->entries = gcValues(size_t(entryCap) * 2);
  t->hashes = static_cast<uint32_t*>(gcAllocAtomic(sizeof(uint32_t) * entryCap));
  t->indexCap = indexCapFor(entryCap);
  t->index = static_cast<HashSlot*>(gcAllocAtomic(sizeof(HashSlot) * t->indexCap));
  std::fill(t->index, t->index + t->indexCap, kEmpty);
  t->entryUsed = 0;
  t->count = 0;
}

// indexCapFor keeps indexCap above entryCap + kFirstEntry, so the entry number fits the bits
// below the mask.
void indexInsert(HashTable* t, uint32_t h, int32_t entry) {
  uint32_t mask = t->indexCap - 1;
  for (uint32_t i = h & mask;; i = (i + 1) & mask) {
    if (t->index[i] <= kDeleted) {
      t->index[i] = (h & ~mask) | (uint32_t(entry) + kFirstEntry);
      return;
    }
  }
}

// Compacts live entries into fresh arrays sized for growth. No user code runs here.
void rebuild(HashTable* t, uint32_t minEntries) {
  Value* oldEntries = t->entries;
  uint32_t* oldHashes = t->hashes;
  HashSlot* oldIndex = t->index;
  uint32_t oldUsed = t->entryUsed;
  uint32_t live = t->count;
  uint64_t want = std::max<uint64_t>({8, uint64_t(live) * 2, minEntries});
  if (want > 0x3fffffff) throwError("range-error", "hash table too large");
  allocate(t, uint32_t(want));
  uint32_t k = 0;
  for (uint32_t i = 0; i < oldUsed; i++) {
    Value key = oldEntries[2 * i];
    if (key.isUnbound()) continue;
    t->entries[2 * k] = key;
    t->entries[2 * k + 1] = oldEntries[2 * i + 1];
    t->hashes[k] = oldHashes[i];
    indexInsert(t, oldHashes[i], int32_t(k));
    k++;
  }
  t->entryUsed = k;
  t->count = k;
  // The old arrays go back to the collector now: growing a table of 200,000 keys otherwise
  // leaves 18 MB of garbage that brings on full collections. Only a custom equivalence runs
  // user code while find holds the arrays (and compares their addresses to notice a rebuild),
  // so its tables leave them to the collector.
  if (t->equiv() != HashEquiv::Custom) {
    GC_FREE(oldEntries);
    GC_FREE(oldHashes);
    GC_FREE(oldIndex);
  }
}

struct Found {
  int32_t entry = -1;   // entry number, or -1
  uint32_t slot = 0;    // index slot holding it
};

// Looks KEY up. For a custom equivalence the user's procedure runs during the probe and may
// change the table; the probe then starts again on the table's new arrays.
Found find(Interp& in, Value tv, Value key, uint32_t h) {
  for (;;) {
    HashTable* t = table(tv);
    Value* entries = t->entries;
    HashSlot* index = t->index;
    uint32_t mask = t->indexCap - 1;
    bool restart = false;
    for (uint32_t i = h & mask, probes = 0; probes <= mask; i = (i + 1) & mask, probes++) {
      HashSlot slot = index[i];
      if (slot == kEmpty) return {};
      if (slot == kDeleted || ((slot ^ h) & ~mask) != 0) continue;
      int32_t e = int32_t((slot & mask) - kFirstEntry);
      Value k = entries[2 * e];
      if (k.isUnbound()) continue;
      if (k == key) return {e, i};
      bool same = keysEqual(in, t, key, k);
      if (t->entries != entries || t->index != index || entries[2 * e] != k) {
        restart = true;
        break;
      }
      if (same) return {e, i};
    }
    if (!restart) return {};
  }
}

HashTable* tableArg(std::string_view who, int index, Value v) {
  if (!isHashTable(v)) typeError(who, index, "a hash table", v);
  return table(v);
}

HashTable* mutableTableArg(std::string_view who, int index, Value v) {
  HashTable* t = tableArg(who, index, v);
  if (t->flags & kImmutable) typeError(who, index, "a mutable hash table", v);
  return t;
}

void put(Interp& in, Value tv, Value key, Value value) {
  uint32_t h = hashKey(in, table(tv), key);
  Found f = find(in, tv, key, h);
  HashTable* t = table(tv);
  if (f.entry >= 0) {
    t->entries[2 * f.entry + 1] = value;
    return;
  }
  if (t->entryUsed == t->entryCap) rebuild(t, 0);
  int32_t e = int32_t(t->entryUsed++);
  t->entries[2 * e] = key;
  t->entries[2 * e + 1] = value;
  t->hashes[e] = h;
  t->count++;
  indexInsert(t, h, e);
}

bool removeKey(Interp& in, Value tv, Value key) {
  uint32_t h = hashKey(in, table(tv), key);
  Found f = find(in, tv, key, h);
  if (f.entry < 0) return false;
  HashTable* t = table(tv);
  t->entries[2 * f.entry] = Value::unbound();
  t->entries[2 * f.entry + 1] = Value::f();   // drop the reference for the collector
  t->index[f.slot] = kDeleted;
  t->count--;
  if (t->count == 0) allocate(t, t->entryCap);   // cheap reset: no tombstones left behind
  return true;
}

Value get(Interp& in, Value tv, Value key, Value missing) {
  uint32_t h = hashKey(in, table(tv), key);
  Found f = find(in, tv, key, h);
  if (f.entry < 0) return missing;
  return table(tv)->entries[2 * f.entry + 1];
}

// The live entries, copied out (GC-visible) before any callback runs: walking while the
// callback adds or deletes entries is then well defined (it sees the table as it was).
Value* snapshot(HashTable* t, size_t& n) {
  n = t->count;
  Value* out = gcValues(2 * n);
  size_t k = 0;
  for (uint32_t i = 0; i < t->entryUsed && k < n; i++) {
    Value key = t->entries[2 * i];
    if (key.isUnbound()) continue;
    out[2 * k] = key;
    out[2 * k + 1] = t->entries[2 * i + 1];
    k++;
  }
  n = k;
  return out;
}

HashEquiv classify(Value proc) {
  if (isBuiltin(proc, "eq?")) return HashEquiv::Eq;
  if (isBuiltin(proc, "eqv?")) return HashEquiv::Eqv;
  if (isBuiltin(proc, "equal?")) return HashEquiv::Equal;
  if (isBuiltin(proc, "string=?")) return HashEquiv::String;
  if (isBuiltin(proc, "string-ci=?")) return HashEquiv::StringCi;
  if (isBuiltin(proc, "=")) return HashEquiv::Number;
  return HashEquiv::Custom;
}

// (make-hash-table [equiv [hash]] [size]) in the SRFI-69 / SRFI-125 style; a bare integer is a
// size hint (Guile, R6RS); symbols such as 'weak are accepted and ignored.
Value makeFromArgs(std::string_view who, RestArgs args, HashEquiv dflt) {
  Value equiv = Value::f(), hash = Value::f();
  size_t size = 0;
  int i = 0;
  for (Value p = args.list; isPair(p); p = cdr(p), i++) {
    Value a = car(p);
    if (isProcedure(a)) {
      if (equiv.isFalse()) equiv = a;
      else if (hash.isFalse()) hash = a;
      else typeError(who, i, "at most an equivalence and a hash procedure", a);
    } else if (a.isFixnum() && a.fixnum() >= 0) {
      size = size_t(std::min<int64_t>(a.fixnum(), 1 << 24));
    } else if (a.is(Kind::Symbol) || a.isFalse()) {
      // weak/ephemeral/thread-safe flags: this implementation is strong and single-threaded.
    } else {
      typeError(who, i, "an equivalence procedure, a hash procedure or a size", a);
    }
  }
  HashEquiv kind = equiv.isFalse() ? dflt : classify(equiv);
  if (kind != HashEquiv::Custom) return makeHashTable(kind, size);
  return makeHashTable(kind, size, equiv, hash);
}

Value equivProcedureOf(Interp& in, HashTable* t) {
  switch (t->equiv()) {
    case HashEquiv::Eq: return in.lookupGlobal("eq?");
    case HashEquiv::Eqv: return in.lookupGlobal("eqv?");
    case HashEquiv::Equal: return in.lookupGlobal("equal?");
    case HashEquiv::String: return in.lookupGlobal("string=?");
    case HashEquiv::StringCi: return in.lookupGlobal("string-ci=?");
    case HashEquiv::Number: return in.lookupGlobal("=");
    default: return t->equivProc;
  }
}

Value hashResult(uint64_t h, Value bound, std::string_view who) {
  uint64_t v = h >> 3;   // fits a fixnum
  if (!bound.isMissing() && !bound.isFalse()) {
    if (!bound.isFixnum() || bound.fixnum() <= 0) typeError(who, 1, "a positive exact integer bound", bound);
    v %= uint64_t(bound.fixnum());
  }
  return Value::fixnum(int64_t(v));
}

Value primHashTableSet(Interp& in, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  mutableTableArg("hash-table-set!", 0, argv[0]);
  if ((argc - 1) % 2 != 0) throwArityError("hash-table-set!", argc, "a table and key/value pairs");
  for (int i = 1; i + 1 < argc; i += 2) put(in, argv[0], argv[i], argv[i + 1]);
  return Value::unspecified();
}

Value primHashTableDelete(Interp& in, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  mutableTableArg("hash-table-delete!", 0, argv[0]);
  for (int i = 1; i < argc; i++) removeKey(in, argv[0], argv[i]);
  return Value::unspecified();
}

// Procedures that take a table and a procedure in either order (SRFI-69 puts the table first,
// SRFI-125 the procedure).
void tableAndProc(std::string_view who, Value a, Value b, Value& t, Value& f) {
  if (isHashTable(a)) { t = a; f = b; }
  else { t = b; f = a; }
  tableArg(who, 0, t);
  procArg(who, 1, f);
}

}  // namespace

// ---- the C++ face ----------------------------------------------------------------------------

Value makeHashTable(HashEquiv equiv, size_t sizeHint, Value equivProc, Value hashProc) {
  auto* t = static_cast<HashTable*>(gcAlloc(sizeof(HashTable)));
  t->kind = Kind::HashTable;
  t->flags = 0;
  t->small = uint16_t(equiv);
  t->extra = 0;
  t->equivProc = equivProc;
  t->hashProc = hashProc;
  Value v(t);
  allocate(t, uint32_t(std::max<size_t>(8, std::min<size_t>(sizeHint, 1 << 24))));
  return v;
}

Value hashTableGet(Interp& in, Value t, Value key, Value missing) { return get(in, t, key, missing); }
void hashTablePut(Interp& in, Value t, Value key, Value value) { put(in, t, key, value); }
bool hashTableRemove(Interp& in, Value t, Value key) { return removeKey(in, t, key); }
size_t hashTableCount(Value t) { return table(t)->count; }

// ---- builtins ----------------------------------------------------------------------------------

void registerHashTables(Registry& r) {
  r.def("make-hash-table", "(:rest args)",
        [](RestArgs args) { return makeFromArgs("make-hash-table", args, HashEquiv::Equal); },
        "A new empty hash table. Optional arguments, as in SRFI-69: an equivalence procedure "
        "(equal? by default; eq?, eqv?, string=?, string-ci=? and = are recognised and fast; any "
        "other procedure works too), then a hash procedure consistent with it, and/or an integer "
        "size hint. Iteration follows insertion order.");
  r.def("make-equal-hash-table", "(:optional size)",
        [](Value size) { return makeHashTable(HashEquiv::Equal, size.isFixnum() ? size_t(std::max<int64_t>(0, size.fixnum())) : 0); },
        "A new empty hash table comparing keys with equal?.");
  r.def("make-eqv-hash-table", "(:optional size)",
        [](Value size) { return makeHashTable(HashEquiv::Eqv, size.isFixnum() ? size_t(std::max<int64_t>(0, size.fixnum())) : 0); },
        "A new empty hash table comparing keys with eqv?.");
  r.def("make-eq-hash-table", "(:optional size)",
        [](Value size) { return makeHashTable(HashEquiv::Eq, size.isFixnum() ? size_t(std::max<int64_t>(0, size.fixnum())) : 0); },
        "A new empty hash table comparing keys with eq? (symbols, identity).");
  r.def("make-string-hash-table", "(:optional size)",
        [](Value size) { return makeHashTable(HashEquiv::String, size.isFixnum() ? size_t(std::max<int64_t>(0, size.fixnum())) : 0); },
        "A new empty hash table whose keys are strings compared with string=?.");
  r.def("hash-table?", "(obj)", [](Value v) { return isHashTable(v); }, "True when OBJ is a hash table.");

  r.defRaw("hash-table-set!", "(table key value . more)", primHashTableSet,
           "Associates VALUE with KEY in TABLE, replacing any previous value. More key/value "
           "pairs may follow.");
  r.def("hash-table-ref", "(table key :optional failure success)",
        [](Interp& in, Value t, Value key, Value failure, Value success) {
          tableArg("hash-table-ref", 0, t);
          Value v = get(in, t, key, Value::missing());
          if (v.isMissing()) {
            if (!failure.isMissing() && !failure.isFalse()) return in.apply(procArg("hash-table-ref", 2, failure), nullptr, 0);
            throwError("error", "hash-table-ref: no value for key", cons(key, Value::nil()));
          }
          if (!success.isMissing() && !success.isFalse()) return in.apply(procArg("hash-table-ref", 3, success), {v});
          return v;
        },
        "The value for KEY in TABLE. When there is none, calls the thunk FAILURE, or raises an "
        "error if FAILURE is not given; when there is one and SUCCESS is given, returns (SUCCESS value).");
  r.def("hash-table-ref/default", "(table key default)",
        [](Interp& in, Value t, Value key, Value dflt) {
          tableArg("hash-table-ref/default", 0, t);
          return get(in, t, key, dflt);
        },
        "The value for KEY in TABLE, or DEFAULT when there is none.");
  r.alias("hash-table-get", "hash-table-ref/default");
  r.defRaw("hash-table-delete!", "(table . keys)", primHashTableDelete,
           "Removes KEYS (and their values) from TABLE; absent keys are ignored.");
  r.def("hash-table-contains?", "(table key)",
        [](Interp& in, Value t, Value key) {
          tableArg("hash-table-contains?", 0, t);
          return !get(in, t, key, Value::missing()).isMissing();
        },
        "True when TABLE has a value for KEY.");
  r.alias("hash-table-exists?", "hash-table-contains?");
  r.def("hash-table-count", "(table :optional pred)",
        [](Interp& in, Value a, Value b) {
          if (b.isMissing()) return Value::fixnum(tableArg("hash-table-count", 0, a)->count);
          Value t, f;   // SRFI-125's (hash-table-count pred table): entries satisfying (pred key value)
          tableAndProc("hash-table-count", a, b, t, f);
          size_t n;
          Value* es = snapshot(table(t), n);
          int64_t c = 0;
          for (size_t i = 0; i < n; i++)
            if (in.apply(f, {es[2 * i], es[2 * i + 1]}).isTrue()) c++;
          return Value::fixnum(c);
        },
        "The number of entries in TABLE. With a predicate, (hash-table-count pred table) counts "
        "the entries for which (PRED key value) is true.");
  r.def("hash-table-size", "(table)",
        [](Value t) { return Value::fixnum(tableArg("hash-table-size", 0, t)->count); },
        "The number of entries in TABLE.");
  r.def("hash-table-empty?", "(table)",
        [](Value t) { return tableArg("hash-table-empty?", 0, t)->count == 0; },
        "True when TABLE has no entries.");
  r.def("hash-table-keys", "(table)",
        [](Value t) {
          size_t n;
          Value* es = snapshot(tableArg("hash-table-keys", 0, t), n);
          Value out = Value::nil();
          for (size_t i = n; i-- > 0;) out = cons(es[2 * i], out);
          return out;
        },
        "A new list of the keys of TABLE, in insertion order.");
  r.alias("hash-table-key-list", "hash-table-keys");
  r.def("hash-table-values", "(table)",
        [](Value t) {
          size_t n;
          Value* es = snapshot(tableArg("hash-table-values", 0, t), n);
          Value out = Value::nil();
          for (size_t i = n; i-- > 0;) out = cons(es[2 * i + 1], out);
          return out;
        },
        "A new list of the values of TABLE, in the order of their keys' insertion.");
  r.alias("hash-table-value-list", "hash-table-values");
  r.def("hash-table->alist", "(table)",
        [](Value t) {
          size_t n;
          Value* es = snapshot(tableArg("hash-table->alist", 0, t), n);
          Value out = Value::nil();
          for (size_t i = n; i-- > 0;) {
            Value entry = cons(es[2 * i], es[2 * i + 1]);
            out = cons(entry, out);
          }
          return out;
        },
        "A new association list ((key . value) ...) of the entries of TABLE, in insertion order.");
  r.def("hash-table-entries", "(table)",
        [](Value t) {
          size_t n;
          Value* es = snapshot(tableArg("hash-table-entries", 0, t), n);
          Value lists[2] = {Value::nil(), Value::nil()};
          for (size_t i = n; i-- > 0;) {
            lists[0] = cons(es[2 * i], lists[0]);
            lists[1] = cons(es[2 * i + 1], lists[1]);
          }
          return makeValues(lists, 2);
        },
        "Two values: the list of keys and the list of values of TABLE, in matching order.");
  r.def("hash-table-walk", "(table proc)",
        [](Interp& in, Value a, Value b) {
          Value t, f;
          tableAndProc("hash-table-walk", a, b, t, f);
          size_t n;
          Value* es = snapshot(table(t), n);
          for (size_t i = 0; i < n; i++) in.apply(f, {es[2 * i], es[2 * i + 1]});
        },
        "Calls (PROC key value) for each entry of TABLE, in insertion order. Entries added or "
        "removed by PROC do not change which entries are visited.");
  r.alias("hash-table-for-each", "hash-table-walk");
  r.def("hash-table-map->list", "(proc table)",
        [](Interp& in, Value a, Value b) {
          Value t, f;
          tableAndProc("hash-table-map->list", a, b, t, f);
          size_t n;
          Value* es = snapshot(table(t), n);
          Value* results = gcValues(n);
          for (size_t i = 0; i < n; i++) results[i] = in.apply(f, {es[2 * i], es[2 * i + 1]});
          return listFromArray(results, n);
        },
        "The list of (PROC key value) over the entries of TABLE, in insertion order.");
  r.def("hash-table-fold", "(table kons knil)",
        [](Interp& in, Value a, Value b, Value c) {
          // SRFI-69: (hash-table-fold table kons knil); SRFI-125: (hash-table-fold kons knil table).
          Value t, kons, acc;
          if (isHashTable(a)) { t = a; kons = b; acc = c; }
          else { kons = a; acc = b; t = c; }
          tableArg("hash-table-fold", 0, t);
          procArg("hash-table-fold", 1, kons);
          size_t n;
          Value* es = snapshot(table(t), n);
          for (size_t i = 0; i < n; i++) acc = in.apply(kons, {es[2 * i], es[2 * i + 1], acc});
          return acc;
        },
        "Folds (KONS key value acc) over the entries of TABLE, starting with KNIL. The SRFI-125 "
        "order (hash-table-fold kons knil table) is accepted too.");
  r.def("hash-table-update!", "(table key proc :optional failure success)",
        [](Interp& in, Value t, Value key, Procedure f, Value failure, Value success) {
          mutableTableArg("hash-table-update!", 0, t);
          Value v = get(in, t, key, Value::missing());
          if (v.isMissing()) {
            if (failure.isMissing() || failure.isFalse())
              throwError("error", "hash-table-update!: no value for key", cons(key, Value::nil()));
            v = in.apply(procArg("hash-table-update!", 3, failure), nullptr, 0);
          } else if (!success.isMissing() && !success.isFalse()) {
            v = in.apply(procArg("hash-table-update!", 4, success), {v});
          }
          Value nv = in.apply(f.value, {v});
          put(in, t, key, nv);
        },
        "Sets the value for KEY in TABLE to (PROC old), where old is the current value, or the "
        "result of the thunk FAILURE when there is none (an error without FAILURE).");
  r.def("hash-table-update!/default", "(table key proc default)",
        [](Interp& in, Value t, Value key, Procedure f, Value dflt) {
          mutableTableArg("hash-table-update!/default", 0, t);
          Value v = get(in, t, key, dflt);
          Value nv = in.apply(f.value, {v});
          put(in, t, key, nv);
        },
        "Sets the value for KEY in TABLE to (PROC old), where old is the current value or DEFAULT. "
        "(hash-table-update!/default counts word add1 0) counts occurrences.");
  r.def("hash-table-intern!", "(table key failure)",
        [](Interp& in, Value t, Value key, Procedure failure) {
          mutableTableArg("hash-table-intern!", 0, t);
          Value v = get(in, t, key, Value::missing());
          if (!v.isMissing()) return v;
          v = in.apply(failure.value, nullptr, 0);
          put(in, t, key, v);
          return v;
        },
        "The value for KEY in TABLE; when there is none, stores and returns the result of the thunk FAILURE.");
  r.def("hash-table-prune!", "(proc table)",
        [](Interp& in, Value a, Value b) {
          Value t, f;
          tableAndProc("hash-table-prune!", a, b, t, f);
          mutableTableArg("hash-table-prune!", 1, t);
          size_t n;
          Value* es = snapshot(table(t), n);
          for (size_t i = 0; i < n; i++)
            if (in.apply(f, {es[2 * i], es[2 * i + 1]}).isTrue()) removeKey(in, t, es[2 * i]);
        },
        "Removes from TABLE every entry for which (PROC key value) is true.");
  r.def("hash-table-clear!", "(table)",
        [](Value t) {
          HashTable* h = mutableTableArg("hash-table-clear!", 0, t);
          allocate(h, 8);
        },
        "Removes every entry from TABLE.");
  r.def("hash-table-copy", "(table :optional mutable?)",
        [](Value t, Value mut) {
          HashTable* src = tableArg("hash-table-copy", 0, t);
          Value out = makeHashTable(src->equiv(), src->count, src->equivProc, src->hashProc);
          HashTable* dst = table(out);
          size_t n;
          Value* es = snapshot(src, n);
          for (size_t i = 0; i < n; i++) {
            dst->entries[2 * i] = es[2 * i];
            dst->entries[2 * i + 1] = es[2 * i + 1];
          }
          // Hashes are copied rather than recomputed: no user hash procedure runs.
          uint32_t k = 0;
          for (uint32_t i = 0; i < src->entryUsed; i++)
            if (!src->entries[2 * i].isUnbound()) dst->hashes[k++] = src->hashes[i];
          for (uint32_t i = 0; i < k; i++) indexInsert(dst, dst->hashes[i], int32_t(i));
          dst->entryUsed = dst->count = k;
          // SRFI-69's copy is mutable; SRFI-125 makes it immutable unless MUTABLE? is true.
          if (!mut.isMissing() && mut.isFalse()) dst->flags |= kImmutable;
          return out;
        },
        "A new hash table with the same equivalence and entries as TABLE. (hash-table-copy "
        "table #f) makes an immutable copy.");
  r.def("hash-table-mutable?", "(table)",
        [](Value t) { return !(tableArg("hash-table-mutable?", 0, t)->flags & kImmutable); },
        "True unless TABLE is an immutable copy.");
  r.def("alist->hash-table", "(alist :rest args)",
        [](Interp& in, Value alist, RestArgs args) {
          listArg("alist->hash-table", 0, alist);
          Value t = makeFromArgs("alist->hash-table", args, HashEquiv::Equal);
          for (Value p = alist; isPair(p); p = cdr(p)) {
            Value e = car(p);
            if (!isPair(e)) typeError("alist->hash-table", 0, "an association list (a list of pairs)", alist);
            // The first association of a key wins, as in SRFI-69.
            if (get(in, t, car(e), Value::missing()).isMissing()) put(in, t, car(e), cdr(e));
          }
          return t;
        },
        "A new hash table holding the entries of ALIST; when a key occurs more than once the "
        "first occurrence wins. Further arguments as for make-hash-table.");
  r.def("hash-table-equivalence-function", "(table)",
        [](Interp& in, Value t) { return equivProcedureOf(in, tableArg("hash-table-equivalence-function", 0, t)); },
        "The equivalence procedure TABLE compares keys with.");
  r.def("hash-table-hash-function", "(table)",
        [](Interp& in, Value t) {
          HashTable* h = tableArg("hash-table-hash-function", 0, t);
          switch (h->equiv()) {
            case HashEquiv::Eq: return in.lookupGlobal("eq-hash");
            case HashEquiv::Eqv: return in.lookupGlobal("eqv-hash");
            case HashEquiv::Equal: return in.lookupGlobal("equal-hash");
            case HashEquiv::String: return in.lookupGlobal("string-hash");
            case HashEquiv::StringCi: return in.lookupGlobal("string-ci-hash");
            case HashEquiv::Number: return in.lookupGlobal("equal-hash");
            default: return h->hashProc;
          }
        },
        "The hash procedure TABLE uses (consistent with its equivalence), or #f.");

  // ---- hash procedures ----
  r.def("equal-hash", "(obj :optional bound)",
        [](Value v, Value bound) { return hashResult(hashEqual(v), bound, "equal-hash"); },
        "A non-negative integer hash of OBJ consistent with equal?; below BOUND when given.");
  r.alias("hash", "equal-hash");
  r.def("eqv-hash", "(obj :optional bound)",
        [](Value v, Value bound) { return hashResult(hashEqv(v), bound, "eqv-hash"); },
        "A non-negative integer hash of OBJ consistent with eqv?; below BOUND when given.");
  r.def("eq-hash", "(obj :optional bound)",
        [](Value v, Value bound) { return hashResult(hashEqv(v), bound, "eq-hash"); },
        "A non-negative integer hash of OBJ consistent with eq?; below BOUND when given.");
  r.alias("hash-by-identity", "eq-hash");
  r.def("string-hash", "(string :optional bound)",
        [](Value s, Value bound) {
          return hashResult(bytesHash(stringArg("string-hash", 0, s)->view()), bound, "string-hash");
        },
        "A non-negative integer hash of STRING consistent with string=?; below BOUND when given.");
  r.def("string-ci-hash", "(string :optional bound)",
        [](Value s, Value bound) {
          return hashResult(bytesHash(foldString(stringArg("string-ci-hash", 0, s)->view())), bound, "string-ci-hash");
        },
        "A non-negative integer hash of STRING consistent with string-ci=?; below BOUND when given.");
}

}  // namespace purple
