// Builtins for tools that read Purple source without running it (`purple check`, the language
// server): registered with the system family (builtins/io/system.cpp).
#pragma once
#include "interp/language/bind.hpp"

namespace purple {

void registerSourceTools(Registry& r);

}  // namespace purple
