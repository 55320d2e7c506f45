// Where the define-macro form being expanded was written (analyzer.hpp).
#include "interp/language/analyzer.hpp"

namespace purple {

namespace {
thread_local SourcePos tMacroCallPosition;
}  // namespace

const SourcePos& currentMacroCallPosition() { return tMacroCallPosition; }

MacroCallPositionScope::MacroCallPositionScope(const SourcePos& here) : saved_(tMacroCallPosition) {
  tMacroCallPosition = here;
}

MacroCallPositionScope::~MacroCallPositionScope() { tMacroCallPosition = saved_; }

}  // namespace purple
