// Python data <-> Purple data, the mapping every Python-facing format uses:
//
//   None  <-> the unspecified value      bool <-> boolean       int <-> exact integer (any size)
//   float <-> flonum     complex <-> complex number      str <-> string (symbols and keywords too)
//   bytes, bytearray <-> bytevector      list <-> list          tuple <-> vector
//   dict, OrderedDict <-> hash table (equal?, insertion-ordered); an alist with string or symbol
//        keys is also written as a dict
//   torch.Tensor, Parameter <-> tensor   torch.Size -> list of integers     set -> list
//   torch.dtype -> symbol ('float32)     torch.device -> string ("cuda:0")
//   objects of other classes (unsafe mode only) -> a hash table with "__class__", "__args__",
//        "__state__" (and "__items__" when the pickle appended any)
#pragma once
#include "builtins/formats/pyobject.hpp"
#include "interp/core/value.hpp"
#include <string>

namespace purple::formats {

Value toPurple(const PyRef& o);
// WHO names the builtin in errors. Dicts made from hash tables and alists are plain dicts; set
// `ordered` on the result to write an OrderedDict.
PyRef toPython(Value v, const std::string& who);

}  // namespace purple::formats
