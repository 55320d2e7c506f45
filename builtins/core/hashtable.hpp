// Hash tables (Kind::HashTable): an insertion-ordered open-addressing table, like CPython's dict.
//
//   entries  2*entryCap Values (key, value) in insertion order; a deleted entry's key is
//            Value::unbound(), never a user value. Scanned by the GC.
//   hashes   entryCap 32-bit hashes of the keys (atomic memory): rehashing never calls a user
//            hash procedure again, and most mismatches are rejected without comparing keys.
//   index    indexCap 32-bit slots (atomic memory): 0 empty, 1 deleted, else the entry number
//            plus 2 in the low bits (those under indexCap - 1) and the key's hash in the high
//            bits. Linear probing from the key's hash; indexCap is a power of two with load at
//            most 2/3.
//
// Iteration (keys, values, walk, fold, ->alist) follows insertion order, so programs print the
// same thing on every run.
#pragma once
#include "interp/core/value.hpp"

#include <cstdint>

namespace purple {

class Interp;

enum class HashEquiv : uint16_t { Eq, Eqv, Equal, String, StringCi, Number, Custom };

// One slot of the open-addressed index. The bits of the hash a slot's position does not already
// say sit beside the entry number, so a probe rejects a different key without touching the
// entry arrays (one cache miss, not two), in half the memory of a whole hash beside it: 2 MB of
// index for 200,000 keys, against a 2 MB level-2 cache.
using HashSlot = uint32_t;

struct HashTable : Object {      // small: HashEquiv; flags & 1: immutable (hash-table-copy)
  Value* entries;
  uint32_t* hashes;
  HashSlot* index;
  uint32_t entryCap;             // capacity of entries/hashes
  uint32_t entryUsed;            // entries appended so far (live + deleted)
  uint32_t count;                // live entries
  uint32_t indexCap;
  Value equivProc;               // Custom: the equivalence procedure
  Value hashProc;                // Custom: the hash procedure, or #f (then every key hashes alike)

  HashEquiv equiv() const { return HashEquiv(small); }
};

inline bool isHashTable(Value v) { return v.is(Kind::HashTable); }

// The C++ face, for other builtins (and the host API): keys are compared with the table's
// equivalence. `in` is needed only for tables with a custom equivalence (it may be any Interp
// for the others).
Value makeHashTable(HashEquiv equiv, size_t sizeHint = 0, Value equivProc = Value::f(),
                    Value hashProc = Value::f());
// The value stored under KEY, or `missing` when there is none.
Value hashTableGet(Interp& in, Value table, Value key, Value missing = Value::missing());
void hashTablePut(Interp& in, Value table, Value key, Value value);
bool hashTableRemove(Interp& in, Value table, Value key);   // true when KEY was present
size_t hashTableCount(Value table);

}  // namespace purple
