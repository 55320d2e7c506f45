// Interned symbols: a chained hash table in malloc'ed memory, which the collector does not scan.
//
// Collectable symbols are cut from shared blocks of collectable memory, and each block, not each
// symbol, carries one Boehm "disappearing link": when nothing points into a block any more (the
// collector honours interior pointers) it clears the link, and the next walk over a chain
// unlinks that block's entries. One link per symbol cost a full collection every few thousand
// new symbols: Boehm collects before it grows its table of links past 4,096 entries, and again
// whenever a quarter of them died, so interning 200,000 names ran 60 full collections.
//
// Entries never move (growing the table relinks them), and the chains are read under the
// allocation lock: between the collector's decision that a block is dead and its clearing of
// the link, reading a symbol's pointer would resurrect memory about to be freed
// (gc.h, GC_general_register_disappearing_link).
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

// A block of collectable symbols, as the table sees it (malloc'ed, so not scanned).
struct Block {
  void* memory;      // the block's collectable memory; cleared by the collector when it dies
  size_t entries;    // collectable entries still pointing into it
};

struct Entry {
  Symbol* symbol;
  Entry* next;
  Block* block;      // null for a pinned symbol: then the entry lives for good
  uint32_t hash;
};

// Big enough that a program interning a million names registers a few thousand links, small
// enough that one kept symbol holds little memory alive.
constexpr size_t kBlockBytes = 4096;
constexpr size_t kSymbolAlign = 16;

class SymbolTable {
 public:
  SymbolTable() {
    // Without interior pointers a block would die while its symbols are still referenced.
    blocksShared_ = GC_get_all_interior_pointers() != 0;
    GC_add_roots(&currentMemory_, &currentMemory_ + 1);
  }

  Value intern(std::string_view name, bool keyword, bool pin) {
    uint32_t hash = symbolNameHash(name) ^ (keyword ? 0x9e3779b9u : 0);
    std::lock_guard<std::mutex> g(lock_);
    if (buckets_.empty()) buckets_.assign(1024, nullptr);
    Lookup q{this, name, hash, keyword, nullptr, nullptr};
    GC_call_with_alloc_lock(&SymbolTable::findLocked, &q);
    if (q.found) {
      if (pin && q.entry->block) pinLater(q.entry, q.found);
      return Value(q.found);
    }
    if (count_ + 1 > buckets_.size()) makeRoom();

    size_t bytes = (sizeof(Symbol) + name.size() + kSymbolAlign - 1) & ~(kSymbolAlign - 1);
    Block* block = nullptr;
    void* mem;
    if (pin) {
      mem = GC_MALLOC_ATOMIC_UNCOLLECTABLE(bytes);
    } else {
      block = blockFor(bytes);
      mem = block ? carve(bytes) : nullptr;
    }
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
    auto* e = new Entry{s, buckets_[b], block, hash};
    if (block) block->entries++;
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

  static bool deadLocked(const Entry* e) { return e->block && !e->block->memory; }

  static void dropLocked(SymbolTable* t, Entry* e) {
    if (--e->block->entries == 0) delete e->block;   // its link went with the clearing
    delete e;
    t->count_--;
  }

  // Runs under the allocation lock: reads links, and unlinks the entries of dead blocks met on
  // the way.
  static void* findLocked(void* arg) {
    auto* q = static_cast<Lookup*>(arg);
    SymbolTable* t = q->table;
    Entry** link = &t->buckets_[q->hash & (t->buckets_.size() - 1)];
    while (Entry* e = *link) {
      if (deadLocked(e)) {
        *link = e->next;
        dropLocked(t, e);
        continue;
      }
      Symbol* s = e->symbol;
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
        if (deadLocked(e)) {
          *link = e->next;
          dropLocked(t, e);
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

  // The block the next collectable symbol of BYTES goes into, opening one when the current one
  // is full. A name too long to share a block gets a block of its own. The block being filled
  // is held from a root, so it cannot die while it has no symbol anyone refers to yet.
  Block* blockFor(size_t bytes) {
    size_t size = (!blocksShared_ || bytes > kBlockBytes / 4) ? bytes : kBlockBytes;
    if (current_ && cursor_ + bytes <= currentSize_) return current_;
    return openBlock(size);
  }

  Block* openBlock(size_t size) {
    void* memory = GC_MALLOC_ATOMIC(size);
    if (!memory) return nullptr;
    auto* block = new Block{memory, 0};
    if (GC_general_register_disappearing_link(&block->memory, memory) != GC_SUCCESS) {
      // No weak link could be made (out of memory): the block's symbols stay for good.
      pinnedBlocks_.push_back(memory);
    }
    current_ = block;
    currentMemory_ = memory;
    currentSize_ = size;
    cursor_ = 0;
    return block;
  }

  void* carve(size_t bytes) {
    void* at = static_cast<char*>(currentMemory_) + cursor_;
    cursor_ += bytes;
    return at;
  }

  void pinLater(Entry* e, Symbol* s) {
    pinned_.push_back(Value(s));   // scanned memory: the symbol (and its block) stay reachable
    GC_call_with_alloc_lock(&SymbolTable::unshareLocked, e);
  }

  static void* unshareLocked(void* arg) {
    auto* e = static_cast<Entry*>(arg);
    if (--e->block->entries == 0 && !e->block->memory) delete e->block;
    e->block = nullptr;
    return nullptr;
  }

  std::mutex lock_;
  std::vector<Entry*> buckets_;   // heads of chains; size a power of two
  size_t count_ = 0;
  bool blocksShared_ = true;
  Block* current_ = nullptr;      // the block being filled
  void* currentMemory_ = nullptr; // its memory, registered as a root
  size_t currentSize_ = 0;        // its size in bytes
  size_t cursor_ = 0;             // bytes of it used
  // Symbols a script made first and C++ interned later; uncollectable from then on.
  std::vector<Value, traceable_allocator<Value>> pinned_;
  std::vector<void*, traceable_allocator<void*>> pinnedBlocks_;
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
