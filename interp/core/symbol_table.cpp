// Interned symbols: a chained hash table in malloc'ed memory, which the collector does not scan.
// A collectable symbol's entry holds its pointer as a Boehm "disappearing link": when the
// symbol becomes unreachable the collector clears the link, and the next walk over that chain
// unlinks the entry. Entries never move (growing the table relinks them), so links never need
// moving; the chains are read under the allocation lock, because between the collector's
// decision that a symbol is dead and its clearing of the link, reading the pointer would
// resurrect a symbol about to be freed (gc.h, GC_general_register_disappearing_link).
#include "interp/core/symbol_table.hpp"
#include "interp/core/gc.hpp"

#include <gc/gc.h>
#include <gc/gc_allocator.h>

#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace purple {

uint32_t symbolNameHash(std::string_view s) {
  uint32_t h = 2166136261u;   // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

namespace {

struct Entry {
  Symbol* symbol;   // cleared by the collector when a collectable symbol dies
  Entry* next;
  uint32_t hash;
  bool pinned;
};

class SymbolTable {
 public:
  Value intern(std::string_view name, bool keyword, bool pin) {
    uint32_t hash = symbolNameHash(name) ^ (keyword ? 0x9e3779b9u : 0);
    std::lock_guard<std::mutex> g(lock_);
    if (buckets_.empty()) buckets_.assign(1024, nullptr);
    Lookup q{this, name, hash, keyword, nullptr, nullptr};
    GC_call_with_alloc_lock(&SymbolTable::findLocked, &q);
    if (q.found) {
      if (pin && !q.entry->pinned) pinLater(q.entry, q.found);
      return Value(q.found);
    }
    if (count_ + 1 > buckets_.size()) makeRoom();

    size_t bytes = sizeof(Symbol) + name.size();
    void* mem = pin ? GC_MALLOC_ATOMIC_UNCOLLECTABLE(bytes) : GC_MALLOC_ATOMIC(bytes);
    if (!mem) throw std::bad_alloc();
    auto* s = static_cast<Symbol*>(mem);
    s->kind = Kind::Symbol;
    s->flags = keyword ? 1 : 0;
    s->small = 0;
    s->extra = 0;
    s->hash = hash;
    s->length = uint32_t(name.size());
    std::memcpy(s->name, name.data(), name.size());
    s->name[name.size()] = '\0';

    size_t b = hash & (buckets_.size() - 1);
    auto* e = new Entry{s, buckets_[b], hash, pin};
    if (!pin && GC_general_register_disappearing_link(reinterpret_cast<void**>(&e->symbol), s) != GC_SUCCESS) {
      // No weak link could be made (out of memory): keep the symbol for good instead.
      pinned_.push_back(Value(s));
      e->pinned = true;
    }
    buckets_[b] = e;
    count_++;
    return Value(s);
  }

  size_t count() {
    std::lock_guard<std::mutex> g(lock_);
    GC_call_with_alloc_lock(&SymbolTable::pruneAllLocked, this);
    return count_;
  }

 private:
  struct Lookup {
    SymbolTable* table;
    std::string_view name;
    uint32_t hash;
    bool keyword;
    Symbol* found;
    Entry* entry;
  };

  // Runs under the allocation lock: reads links, and unlinks the entries of dead symbols met
  // on the way (their registration went with the clearing).
  static void* findLocked(void* arg) {
    auto* q = static_cast<Lookup*>(arg);
    SymbolTable* t = q->table;
    Entry** link = &t->buckets_[q->hash & (t->buckets_.size() - 1)];
    while (Entry* e = *link) {
      Symbol* s = e->symbol;
      if (!s) {
        *link = e->next;
        delete e;
        t->count_--;
        continue;
      }
      if (e->hash == q->hash && (s->flags & 1) == q->keyword && s->view() == q->name) {
        q->found = s;
        q->entry = e;
        return nullptr;
      }
      link = &e->next;
    }
    return nullptr;
  }

  static void* pruneAllLocked(void* arg) {
    auto* t = static_cast<SymbolTable*>(arg);
    for (Entry*& head : t->buckets_) {
      Entry** link = &head;
      while (Entry* e = *link) {
        if (!e->symbol) {
          *link = e->next;
          delete e;
          t->count_--;
        } else {
          link = &e->next;
        }
      }
    }
    return nullptr;
  }

  static void* rehashLocked(void* arg) {
    auto* t = static_cast<SymbolTable*>(arg);
    std::vector<Entry*> old(t->buckets_.size() * 2, nullptr);
    old.swap(t->buckets_);
    size_t mask = t->buckets_.size() - 1;
    for (Entry* e : old) {
      while (e) {
        Entry* next = e->next;
        Entry*& head = t->buckets_[e->hash & mask];
        e->next = head;
        head = e;
        e = next;
      }
    }
    return nullptr;
  }

  // The table is full: drop the dead first; grow only when more than half is still alive, so
  // a full sweep happens at most once per (size / 2) new symbols.
  void makeRoom() {
    GC_call_with_alloc_lock(&SymbolTable::pruneAllLocked, this);
    if (count_ * 2 > buckets_.size()) GC_call_with_alloc_lock(&SymbolTable::rehashLocked, this);
  }

  void pinLater(Entry* e, Symbol* s) {
    pinned_.push_back(Value(s));   // scanned memory: the symbol stays reachable from here on
    GC_unregister_disappearing_link(reinterpret_cast<void**>(&e->symbol));
    e->pinned = true;
  }

  std::mutex lock_;
  std::vector<Entry*> buckets_;   // heads of chains; size a power of two
  size_t count_ = 0;
  // Symbols a script made first and C++ interned later; uncollectable from then on.
  std::vector<Value, traceable_allocator<Value>> pinned_;
};

SymbolTable& symbolTable() {
  static SymbolTable* t = new SymbolTable();   // never destroyed: pinned symbols outlive everything
  return *t;
}

}  // namespace

Value intern(std::string_view name) { return symbolTable().intern(name, false, true); }
Value internKeyword(std::string_view name) { return symbolTable().intern(name, true, true); }
Value internCollectable(std::string_view name, bool keyword) { return symbolTable().intern(name, keyword, false); }
std::size_t internedSymbolCount() { return symbolTable().count(); }

}  // namespace purple
