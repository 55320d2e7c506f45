// Printing values: `write` (reads back) and `display` (human) forms.
#pragma once
#include "interp/value.hpp"
#include <string>

namespace purple {

void printValue(std::string& out, Value v, bool write);
void printShared(std::string& out, Value v);   // write-shared: labels all shared structure
std::string toWriteString(Value v);
std::string toDisplayString(Value v);
void printNumber(std::string& out, Value v, int radix = 10);
std::string formatFlonum(double d);

}  // namespace purple
