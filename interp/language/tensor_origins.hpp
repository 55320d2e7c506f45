// Where live tensor memory came from: while recording is on, every tensor cell remembers the
// Purple source position of the call that made it (the innermost call written outside the
// prelude), and every storage the position that first made it. A report then groups the bytes
// that are still alive by that position, and says what keeps them alive: a Purple value, an
// autograd graph hanging from a live tensor, or something else (a module, C++, Python).
#pragma once
#include "interp/core/interp.hpp"
#include <ATen/ATen.h>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace purple {

struct AppNode;

extern std::atomic<bool> gRecordingTensorOrigins;
inline bool recordingTensorOrigins() { return gRecordingTensorOrigins.load(std::memory_order_relaxed); }
// Turns recording on or off (off forgets what was recorded). Recording starts from the moment
// it is turned on: tensors made before have no position.
void setRecordingTensorOrigins(bool on);

// A tensor builtin's result that gets its cell only after the builtin's call record is gone
// (the evaluator's unboxed path): the cell made next for this same tensor is credited to APP.
void noteUnboxedTensorSite(const AppNode* app, const at::Tensor& result);

// One line of a report: what is alive of the storage first made at one source position.
struct OriginRow {
  std::string file;          // "" when the position is unknown (made before recording, or by C++)
  int line = 0, col = 0;
  std::string procedure;     // the enclosing procedure, or "<top level>"
  int64_t valueBytes = 0;    // storages a live tensor value uses
  int64_t graphBytes = 0;    // storages only an autograd graph of a live tensor keeps
  int64_t otherBytes = 0;    // storages alive for another reason (module, C++, Python ...)
  int64_t tensors = 0;       // live tensor values made here
  int64_t total() const { return valueBytes + graphBytes + otherBytes; }
};

struct OriginReport {
  std::vector<OriginRow> rows;      // by creating position, largest first
  std::vector<OriginRow> holders;   // graphBytes by the position of the live tensor whose graph holds them
};

// Collects first (so that only live tensors count), then groups. Needs recording on.
OriginReport tensorOriginReport();

}  // namespace purple
