// libFuzzer target: the reader on arbitrary bytes (docs/hardening.md). Every input must end in
// data or a read-error, never a crash, a hang or a sanitizer report.
#include "interp/error.hpp"
#include "interp/interp.hpp"
#include "interp/reader.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One interpreter for the process: the reader needs the collector, symbols and, for
  // tensor literals, the tensor builtins.
  static purple::Interp* interp = new purple::Interp();
  purple::InterpScope scope(interp);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)purple::Reader::isComplete(text);
  purple::PositionTable positions;
  purple::Reader reader(text, purple::makeString("<fuzz>"), &positions);
  try {
    purple::Value form;
    while (reader.read(form)) positions.clear();
  } catch (const purple::PurpleException&) {
  }
  return 0;
}
