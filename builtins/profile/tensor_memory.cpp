// The data behind tensor-memory-report (prelude/60-profile.purple formats it): recording of where
// each tensor was made, and the live bytes grouped by that position (interp/language/tensor_origins).
#include "builtins/builtins.hpp"
#include "interp/language/tensor_origins.hpp"
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

Value rowValue(const OriginRow& row) {
  Value file = row.file.empty() ? Value::f() : makeString(row.file);
  Value items[] = {file,
                   makeInteger(row.line),
                   makeInteger(row.col),
                   makeString(row.procedure),
                   makeInteger(row.valueBytes),
                   makeInteger(row.graphBytes),
                   makeInteger(row.otherBytes),
                   makeInteger(row.tensors)};
  return listFromArray(items, sizeof items / sizeof items[0]);
}

Value rowsValue(const std::vector<OriginRow>& rows) {
  Value out = Value::nil();
  for (size_t i = rows.size(); i-- > 0;) out = cons(rowValue(rows[i]), out);
  return out;
}

}  // namespace

void registerTensorMemory(Registry& r) {
  r.def("record-tensor-origins!", "(on)", [](bool on) {
    requireProcessAccess("record-tensor-origins!");
    setRecordingTensorOrigins(on);
  }, "Starts (ON true) or stops recording, for every tensor made from now on, the source position of\n"
     "the Purple call that made it, for tensor-memory-report. Off by default, and then it costs\n"
     "nothing; stopping forgets what was recorded. `purple --track-tensor-memory` starts it before\n"
     "the program runs.");
  sandbox(r, "record-tensor-origins!", Needs::Process, "global settings: tensor origin recording of every interpreter");
  r.def("recording-tensor-origins?", "()", []() { return recordingTensorOrigins(); },
        "True while tensor origins are recorded (record-tensor-origins!).");
  r.def("%tensor-memory-rows", "()", []() -> Value {
    if (!recordingTensorOrigins())
      throwError("tensor-error",
                 "tensor-memory-report: tensor origins are not being recorded; call (record-tensor-origins! #t) "
                 "before the code to examine, or run purple --track-tensor-memory");
    OriginReport report = tensorOriginReport();
    return cons(rowsValue(report.rows), rowsValue(report.holders));
  }, "Internal: (ROWS . HOLDERS) for tensor-memory-report, each row (FILE LINE COLUMN PROCEDURE\n"
     "VALUE-BYTES GRAPH-BYTES OTHER-BYTES TENSORS); collects garbage first.");
  sandbox(r, "%tensor-memory-rows", Needs::Process, "the process: the source positions of every interpreter's tensors");
}

}  // namespace purple
