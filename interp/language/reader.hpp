// The reader: text to data, recording where each list came from. Bad input raises a
// `read-error` with file:line:column; running off the end inside a datum is reported as
// incomplete, so the REPL can ask for more lines.
#pragma once
#include "interp/core/interp.hpp"
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>
#include <gc/gc_allocator.h>

namespace purple {

class Reader {
 public:
  Reader(std::string_view text, Value sourceName, PositionTable* positions, int firstLine = 1);
  bool read(Value& out);            // false at end of input
  size_t offset() const { return pos_; }
  // Where the datum the last read() returned began.
  size_t datumStart() const { return start_; }
  int datumLine() const { return startLine_; }
  int datumColumn() const { return startCol_; }
  bool hitEndOfInput() const { return incomplete_; }
  // Where the last read error was found (0 before any).
  int failLine() const { return failLine_; }
  int failColumn() const { return failCol_; }
  // Also record, for every list cell read, where its car began (atoms have no identity of their
  // own): what `purple check` and the language server need to point at a symbol.
  void recordElementPositions(PositionTable* elements) { elements_ = elements; }

  // True when `text` holds only complete data (or a read error that more text cannot fix).
  static bool isComplete(std::string_view text);

 private:
  Value datum();
  Value list(char close, int line, int col);
  Value tensorLiteral(int line, int col);
  Value tensorRow(int line, int col);
  Value stringLiteral();
  Value character();
  Value hashSyntax(int line, int col);
  Value atom(int line, int col);
  std::string token();
  void skipAtmosphere();            // whitespace and comments
  void blockComment();
  int peek() const { return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : -1; }
  int next();
  [[noreturn]] void fail(const std::string& message, int line, int col);
  [[noreturn]] void failEof(const std::string& what, int line, int col);
  void record(Value pair, int line, int col);

  std::string_view text_;
  size_t pos_ = 0;
  size_t start_ = 0;
  int startLine_ = 1, startCol_ = 1;
  int line_, col_ = 1;
  Value source_;
  PositionTable* positions_;
  PositionTable* elements_ = nullptr;
  bool foldCase_ = false;
  bool incomplete_ = false;
  int failLine_ = 0, failCol_ = 0;
  // datum labels #n= / #n#; placeholders are boxes patched once the labelled datum is read
  std::vector<std::pair<long, Value>, traceable_allocator<std::pair<long, Value>>> labels_;
  // Replaces PLACEHOLDER by TARGET inside X. SEEN holds the pairs and vectors already walked:
  // X may hold cycles already (an inner #n= datum), which a walk must not go round forever.
  Value patchLabel(Value x, Value placeholder, Value target, int depth, std::unordered_set<const void*>& seen);
};

// Reads every datum of `text` (a whole file or REPL input).
Value readAll(std::string_view text, Value sourceName, PositionTable* positions);

}  // namespace purple
