// Printing values: `write` (reads back) and `display` (human) forms.
#pragma once
#include "interp/core/value.hpp"
#include <string>

namespace purple {

void printValue(std::string& out, Value v, bool write);
void printShared(std::string& out, Value v);   // write-shared: labels all shared structure
std::string toWriteString(Value v);
std::string toDisplayString(Value v);
// `write` form cut off after about `maxChars` characters (ending in "..."), for error messages:
// an irritant may be a list of a hundred million elements or a 20-million-digit integer.
std::string toWriteStringBounded(Value v, size_t maxChars = 1000);
void printNumber(std::string& out, Value v, int radix = 10);
std::string formatFlonum(double d);

// How Foreign cells whose destroy function is `destroy` print (e.g. a Python object by its
// repr); others print as #<type-name>.
using ForeignPrinter = void (*)(std::string& out, Value v, bool write);
void setForeignPrinter(void (*destroy)(void*), ForeignPrinter printer);

}  // namespace purple
