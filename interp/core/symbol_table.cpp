// Interned symbols: an open-addressed hash table in malloc'ed memory, which the collector does
// not scan.
//
// Collectable symbols are cut from shared blocks of collectable memory, and each block, not each
// symbol, carries one Boehm "disappearing link": when nothing points into a block any more (the
// collector honours interior pointers) it clears the link, and the next probe that meets one of
// that block's slots makes it a tombstone. One link per symbol cost a full collection every few
// thousand new symbols: Boehm collects before it grows its table of links past 4,096 entries,
// and again whenever a quarter of them died, so interning 200,000 names ran 60 collections.
//
// The slots are read under the allocation lock: between the collector's decision that a block
// is dead and its clearing of the link, reading a symbol's pointer would resurrect memory about
// to be freed (gc.h, GC_general_register_disappearing_link).
#include "interp/core/symbol_table.hpp"
#include "interp/core/gc.hpp"

#include <gc/gc.h>
#include <gc/gc_allocator.h>

#include <cstdint>
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

// One slot of the open-addressed table. The hash sits beside the pointer, so a probe passes
// other names without reading their symbols.
struct Slot {
  Symbol* symbol;    // null: empty, or a tombstone when `tombstone`
  Block* block;      // null for a pinned symbol: then the slot lives for good
  uint32_t hash;
  bool tombstone;
};

// Big enough that a program interning a million names registers a few thousand links, small
// enough that one kept symbol holds little memory alive.
constexpr size_t kBlockBytes = 4096;
constexpr size_t kSymbolAlign = 16;
constexpr size_t kFirstSlots = 4096;

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
    if (slots_.empty()) slots_.assign(kFirstSlots, Slot{nullptr, nullptr, 0, false});
    Lookup q{this, name, hash, keyword, nullptr, 0};
    GC_call_with_alloc_lock(&SymbolTable::findLocked, &q);
    if (q.found) {
      if (pin && slots_[q.slot].block) pinLater(q.slot, q.found);
      return Value(q.found);
    }
    // Half full at most, counting tombstones: probes stay short.
    if ((used_ + 1) * 2 > slots_.size()) {
      GC_call_with_alloc_lock(&SymbolTable::rebuildLocked, this);
      q.slot = freeSlotFor(hash);
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

    Slot& slot = slots_[q.slot];
    if (!slot.tombstone) used_++;
    slot = Slot{s, block, hash, false};
    if (block) block->entries++;
    live_++;
    return Value(s);
  }

  size_t count() {
    std::lock_guard<std::mutex> g(lock_);
    GC_call_with_alloc_lock(&SymbolTable::pruneAllLocked, this);
    return live_;
  }

 private:
  struct Lookup {
    SymbolTable* table;
    std::string_view name;
    uint32_t hash;
    bool keyword;
    Symbol* found;
    size_t slot;       // where it is, or the first free slot on its probe sequence
  };

  static bool deadLocked(const Slot& s) { return s.symbol && s.block && !s.block->memory; }

  // A slot whose block died becomes a tombstone: probes go on past it.
  static void buryLocked(SymbolTable* t, Slot& s) {
    if (--s.block->entries == 0) delete s.block;   // its link went with the clearing
    s = Slot{nullptr, nullptr, 0, true};
    t->live_--;
  }

  // Runs under the allocation lock: reads links, and buries the slots of dead blocks met on the
  // way.
  static void* findLocked(void* arg) {
    auto* q = static_cast<Lookup*>(arg);
    SymbolTable* t = q->table;
    size_t mask = t->slots_.size() - 1;
    size_t firstFree = SIZE_MAX;
    for (size_t i = q->hash & mask;; i = (i + 1) & mask) {
      Slot& s = t->slots_[i];
      if (!s.symbol) {
        if (!s.tombstone) {
          q->slot = firstFree != SIZE_MAX ? firstFree : i;
          return nullptr;
        }
        if (firstFree == SIZE_MAX) firstFree = i;
        continue;
      }
      if (s.hash != q->hash) continue;
      if (deadLocked(s)) {
        buryLocked(t, s);
        if (firstFree == SIZE_MAX) firstFree = i;
        continue;
      }
      if ((s.symbol->flags & 1) == q->keyword && s.symbol->view() == q->name) {
        q->found = s.symbol;
        q->slot = i;
        return nullptr;
      }
    }
  }

  size_t freeSlotFor(uint32_t hash) const {
    size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i].symbol) i = (i + 1) & mask;
    return i;
  }

  static void* pruneAllLocked(void* arg) {
    auto* t = static_cast<SymbolTable*>(arg);
    for (Slot& s : t->slots_)
      if (deadLocked(s)) buryLocked(t, s);
    return nullptr;
  }

  // Drops the dead and the tombstones, and sizes the table for four times the live symbols:
  // a rebuild happens at most once per (size / 4) new symbols.
  static void* rebuildLocked(void* arg) {
    auto* t = static_cast<SymbolTable*>(arg);
    pruneAllLocked(t);
    size_t size = kFirstSlots;
    while (size < t->live_ * 4) size *= 2;
    std::vector<Slot> old(size, Slot{nullptr, nullptr, 0, false});
    old.swap(t->slots_);
    for (const Slot& s : old)
      if (s.symbol) t->slots_[t->freeSlotFor(s.hash)] = s;
    t->used_ = t->live_;
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

  void pinLater(size_t slot, Symbol* s) {
    pinned_.push_back(Value(s));   // scanned memory: the symbol (and its block) stay reachable
    Unshare u{this, slot};
    GC_call_with_alloc_lock(&SymbolTable::unshareLocked, &u);
  }

  struct Unshare {
    SymbolTable* table;
    size_t slot;
  };

  static void* unshareLocked(void* arg) {
    auto* u = static_cast<Unshare*>(arg);
    Slot& s = u->table->slots_[u->slot];
    if (--s.block->entries == 0 && !s.block->memory) delete s.block;
    s.block = nullptr;
    return nullptr;
  }

  std::mutex lock_;
  std::vector<Slot> slots_;       // size a power of two
  size_t live_ = 0;               // slots holding a symbol (some may belong to dead blocks)
  size_t used_ = 0;               // live slots and tombstones
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
