// Purple data as bytes, for the object collectives (dist-broadcast-object ...): what `write` can
// write and `read` read back (numbers of every kind, booleans, characters, strings, symbols,
// keywords, lists, improper lists, vectors, bytevectors), plus hash tables and tensors. Tensors
// travel as dtype, shape and raw CPU bytes and arrive on the CPU. Procedures, records, ports,
// modules and other host objects cannot travel: encoding them is a Purple error naming the value.
#pragma once
#include "interp/core/value.hpp"
#include <string>
#include <string_view>

namespace purple::dist {

std::string encodeValue(Value v, std::string_view who);
// Raises a Purple error naming WHO when the bytes are not a value encodeValue wrote.
Value decodeValue(const uint8_t* data, size_t size, std::string_view who);

}  // namespace purple::dist
