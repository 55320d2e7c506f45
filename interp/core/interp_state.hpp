// The Values an interpreter holds. The struct lives in uncollectable GC memory, so the
// collector sees every field; nothing here may be a std:: container of Values.
#pragma once
#include "interp/core/interp.hpp"

namespace purple {

struct Interp::State {
  // originals of procedures the analyzer's expansions call (quasiquote), immune to redefinition
  Value primCons, primList, primAppend, primListToVector;
  Value handlers;          // with-exception-handler stack: list of procedures, innermost first
  Value outputPort, errorPort, inputPort;   // parameter objects
  Value features;          // cond-expand features
  Value libraries;         // alist: library name -> #t once loaded
  Value currentFile;       // string or #f: the file being loaded (for include / relative paths)
  Value tensorAccount;     // fixnum or #f: this interpreter's tensor budget account (tensor_budget.hpp)
};

using State = Interp::State;

}  // namespace purple
