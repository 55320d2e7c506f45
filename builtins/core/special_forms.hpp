// Documentation of the special forms the analyzer implements (define, lambda, let ...), for
// help and the generated reference: they are not globals, so they have no docstrings of their own.
#pragma once
#include <string_view>

namespace purple {

struct SpecialFormDoc {
  const char* name;
  const char* usage;   // "(let ((var init) ...) body ...)", one or more forms separated by " / "
  const char* doc;
};

const SpecialFormDoc* findSpecialFormDoc(std::string_view name);   // nullptr when not one
const SpecialFormDoc* specialFormDocs(size_t* count);

}  // namespace purple
