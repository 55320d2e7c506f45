// What the embedding API's files share with api.cpp, which owns the interpreter handle and the
// translation of every exception into purple::Error. Included with PURPLE_IMPLEMENTATION.
#pragma once
#include "purple/purple.hpp"
#include "interp/core/interp.hpp"
#include <functional>

namespace purple::embed::detail {

Interp& interpOf(Impl* impl);
// Runs `f` as one API call on the interpreter: the thread registered with the collector, the
// interpreter current, budgets armed when outermost, any exception turned into purple::Error.
embed::Value runGuarded(Impl* impl, const std::function<::purple::Value()>& f);

}  // namespace purple::embed::detail
