// The process-wide table of interned symbols and keywords.
//
// Two kinds of entry. Names C++ code interns (`intern`, `internKeyword` in value.hpp: special
// forms, keyword arguments, symbols cached in statics and in tables the collector does not scan)
// are pinned: they live as long as the process. Names that come from a script's data (the
// reader, string->symbol and friends) are interned collectable: once nothing refers to such a
// symbol the collector frees it and its entry disappears, so a long-running host cannot be
// filled up by a script that makes millions of distinct symbols. Interning the same name
// again makes a new object, which no one can tell from the old one: the old one is gone.
// C++ interning a name a script made first pins that symbol.
#pragma once
#include "interp/core/value.hpp"
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace purple {

// For names that come from data a script controls. Never cache the result in memory the
// collector does not scan: use intern() for that.
Value internCollectable(std::string_view name, bool keyword = false);

// The FNV-1a hash symbols carry (gensym uses it for uninterned symbols).
uint32_t symbolNameHash(std::string_view name);

// Entries in the table: pinned ones plus collectable ones not yet found unreachable.
std::size_t internedSymbolCount();

}  // namespace purple
