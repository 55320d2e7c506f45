// Interned symbols: a hash table in malloc'ed memory, which the collector does not scan.
//
// Collectable symbols are cut from shared blocks of collectable memory, and each block, not each
// symbol, carries one Boehm "disappearing link": when nothing points into a block any more (the
// collector honours interior pointers) it clears the link, and the next probe that meets one of
// that block's entries deletes it. One link per symbol cost a full collection every few
// thousand new symbols: Boehm collects before it grows its table of links past 4,096 entries,
// and again whenever a quarter of them died, so interning 200,000 names ran 60 collections.
//
// A block's link is read under the allocation lock: between the collector's decision that a
// block is dead and its clearing of the link, reading a symbol's pointer would resurrect memory
// about to be freed (gc.h, GC_general_register_disappearing_link).
#include "interp/core/symbol_table.hpp"
#include "interp/core/gc.hpp"

#include <gc/gc.h>
#include <gc/gc_allocator.h>

#include <cstdint>
#include <cstring>
#include <atomic>
#include <mutex>
#include <sched.h>
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

// The table is laid out as CPython's dict is: a dense array of entries in the order they were
// made, and a small open-addressed index of entry numbers. A probe for a new name, the common
// case when a program makes symbols from data, touches one index slot and then appends. With
// 24-byte slots in the probed array itself, that probe and the slot's write each missed the
// cache once the table outgrew it (200,000 names: 12 MB of slots, against 2 MB of index now).
struct Entry {
  Symbol* symbol;    // null once its block died; its index slot may point here until a probe or
                     // a rebuild marks the slot deleted
  Block* block;      // null for a pinned symbol: then the entry lives for good
};

// One index slot, as in builtins/core/hashtable.hpp: the entry number plus kFirstEntry in the
// bits under the index's mask, and the bits of the hash the slot's position does not already say
// above them, so a probe passes other names without reading their entries. Entries never number
// more than half the index (rebuild sees to it), so the number always fits.
using Slot = uint32_t;
constexpr Slot kEmpty = 0;
constexpr Slot kDeleted = 1;
constexpr uint32_t kFirstEntry = 2;

// Big enough that a program interning a million names registers a few thousand links, small
// enough that one kept symbol holds little memory alive.
constexpr size_t kBlockBytes = 4096;
constexpr size_t kSymbolAlign = 16;
constexpr size_t kFirstSlots = 4096;

// The table's own lock. Its release is a plain store: std::mutex's release is an atomic
// read-modify-write, which waits for the stores before it (the new symbol's bytes, in memory the
// collector just handed out and the cache has not seen) to reach the cache, and that wait was 6 %
// of a loop that makes symbols. Contention is rare (hosts interning from several threads), and a
// waiter yields its processor rather than spin, since the holder may be in a collection.
class InternLock {
 public:
  void lock() {
    while (held_.exchange(true, std::memory_order_acquire))
      while (held_.load(std::memory_order_relaxed)) sched_yield();
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

class SymbolTable {
 public:
  SymbolTable() {
    // Without interior pointers a block would die while its symbols are still referenced.
    blocksShared_ = GC_get_all_interior_pointers() != 0;
    GC_add_roots(&currentMemory_, &currentMemory_ + 1);
  }

  Value intern(std::string_view name, bool keyword, bool pin) {
    uint32_t hash = symbolNameHash(name) ^ (keyword ? 0x9e3779b9u : 0);
    std::lock_guard<InternLock> g(lock_);
    if (index_.empty()) index_.assign(kFirstSlots, kEmpty);
    size_t freeSlot = SIZE_MAX;
    if (Symbol* found = find(name, hash, keyword, freeSlot)) {
      if (pin && entries_[foundEntry_].block) pinLater(foundEntry_, found);
      return Value(found);
    }
    // Half full at most, counting deleted slots: probes stay short. Entries (dead ones count until
    // a rebuild drops them) stay under half the index, so their numbers fit a slot's low bits.
    if ((used_ + 1) * 2 > index_.size() || (entries_.size() + kFirstEntry) * 2 > index_.size()) {
      GC_call_with_alloc_lock(&SymbolTable::rebuildLocked, this);
      freeSlot = freeSlotFor(hash);
    }

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

    Slot& slot = index_[freeSlot];
    if (slot == kEmpty) used_++;
    slot = makeSlot(entries_.size(), hash);
    entries_.push_back(Entry{s, block});
    if (block) block->entries++;
    live_++;
    return Value(s);
  }

  size_t count() {
    std::lock_guard<InternLock> g(lock_);
    GC_call_with_alloc_lock(&SymbolTable::pruneAllLocked, this);
    return live_;
  }

 private:
  // Looks NAME up. On a miss FREESLOT is where it goes: the first deleted or empty slot on its
  // probe sequence. Only a slot whose hash matches needs the allocation lock, to read its block's
  // link; a probe for a new name, which almost never meets its own hash, takes no lock but ours.
  Symbol* find(std::string_view name, uint32_t hash, bool keyword, size_t& freeSlot) {
    size_t mask = index_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot s = index_[i];
      if (s == kEmpty) {
        if (freeSlot == SIZE_MAX) freeSlot = i;
        return nullptr;
      }
      if (s == kDeleted) {
        if (freeSlot == SIZE_MAX) freeSlot = i;
        continue;
      }
      if (((s ^ hash) & ~mask) != 0) continue;
      Candidate c{this, i, name, keyword, false, false};
      GC_call_with_alloc_lock(&SymbolTable::checkLocked, &c);
      if (c.matches) {
        foundEntry_ = entryOf(index_[i]);
        return entries_[foundEntry_].symbol;
      }
      if (c.buried && freeSlot == SIZE_MAX) freeSlot = i;
    }
  }

  struct Candidate {
    SymbolTable* table;
    size_t slot;
    std::string_view name;
    bool keyword;
    bool matches;
    bool buried;
  };

  // Under the allocation lock: between the collector's decision that a block is dead and its
  // clearing of the link, reading the symbol would resurrect memory about to be freed.
  static void* checkLocked(void* arg) {
    auto* c = static_cast<Candidate*>(arg);
    SymbolTable* t = c->table;
    uint32_t e = t->entryOf(t->index_[c->slot]);
    Entry& entry = t->entries_[e];
    if (!entry.symbol || deadLocked(entry)) {   // null: buried by a pass over all entries
      if (entry.symbol) buryLocked(t, entry);
      t->index_[c->slot] = kDeleted;
      c->buried = true;
      return nullptr;
    }
    c->matches = (entry.symbol->flags & 1) == c->keyword && entry.symbol->view() == c->name;
    return nullptr;
  }

  static bool deadLocked(const Entry& e) { return e.symbol && e.block && !e.block->memory; }

  // Its index slot is left pointing at it until the next rebuild or probe marks it deleted.
  static void buryLocked(SymbolTable* t, Entry& e) {
    if (--e.block->entries == 0) delete e.block;   // its link went with the clearing
    e = Entry{nullptr, nullptr};
    t->live_--;
  }

  Slot makeSlot(size_t entry, uint32_t hash) const {
    uint32_t mask = uint32_t(index_.size() - 1);
    return (hash & ~mask) | (uint32_t(entry) + kFirstEntry);
  }

  uint32_t entryOf(Slot s) const { return (s & uint32_t(index_.size() - 1)) - kFirstEntry; }

  size_t freeSlotFor(uint32_t hash) const {
    size_t mask = index_.size() - 1;
    size_t i = hash & mask;
    while (index_[i] != kEmpty) i = (i + 1) & mask;
    return i;
  }

  static void* pruneAllLocked(void* arg) {
    auto* t = static_cast<SymbolTable*>(arg);
    for (Entry& e : t->entries_)
      if (deadLocked(e)) buryLocked(t, e);
    return nullptr;
  }

  // Drops the dead, compacts the entries and sizes the index for four times the live symbols:
  // a rebuild happens at most once per (size / 4) new symbols. Only the index is probed at
  // random; the entries are read in order.
  static void* rebuildLocked(void* arg) {
    auto* t = static_cast<SymbolTable*>(arg);
    pruneAllLocked(t);
    size_t size = kFirstSlots;
    while (size < t->live_ * 4) size *= 2;
    t->index_.assign(size, kEmpty);
    size_t kept = 0;
    for (const Entry& e : t->entries_) {
      if (!e.symbol) continue;
      t->entries_[kept] = e;
      t->index_[t->freeSlotFor(e.symbol->hash)] = t->makeSlot(kept, e.symbol->hash);
      kept++;
    }
    t->entries_.resize(kept);
    t->used_ = kept;
    return nullptr;
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

  void pinLater(uint32_t entry, Symbol* s) {
    pinned_.push_back(Value(s));   // scanned memory: the symbol (and its block) stay reachable
    Unshare u{this, entry};
    GC_call_with_alloc_lock(&SymbolTable::unshareLocked, &u);
  }

  struct Unshare {
    SymbolTable* table;
    uint32_t entry;
  };

  static void* unshareLocked(void* arg) {
    auto* u = static_cast<Unshare*>(arg);
    Entry& e = u->table->entries_[u->entry];
    if (--e.block->entries == 0 && !e.block->memory) delete e.block;
    e.block = nullptr;
    return nullptr;
  }

  InternLock lock_;
  std::vector<Entry> entries_;    // in the order made; dead ones null until a rebuild
  std::vector<Slot> index_;       // size a power of two
  size_t live_ = 0;               // entries holding a symbol (some may belong to dead blocks)
  size_t used_ = 0;               // index slots not empty (live or deleted)
  uint32_t foundEntry_ = 0;       // the entry find last returned
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
