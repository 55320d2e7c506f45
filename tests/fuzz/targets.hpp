// What the fuzz targets do with one input, shared by the libFuzzer targets (reader.cpp,
// eval.cpp) and by purple_fuzz_replay, which runs the inputs that once crashed
// (tests/fuzz/regressions/) in the default build. Every input must end in data, a value or a
// purple error within the limits: a crash, an abort, a sanitizer report or a hang is a bug.
#pragma once
// The reader target uses libpurple's internal names (purple::Value is the internal value there);
// the public API's are spelled purple::embed::.
#define PURPLE_IMPLEMENTATION
#include <purple/purple.hpp>

#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/reader.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace purple::fuzz {

// The reader on arbitrary bytes: the completeness check, then every datum up to the end or
// the first read-error.
// One interpreter for the process: the reader needs the collector, symbols and, for tensor
// literals, the tensor builtins. Made before fuzzing starts (LLVMFuzzerInitialize), so its cost
// (the prelude) does not count against the first input's time limit.
inline Interp* readerInterp() {
  static Interp* interp = new Interp();
  return interp;
}

inline void readAll(std::string_view text) {
  InterpScope scope(readerInterp());
  (void)Reader::isComplete(text);
  PositionTable positions;
  Reader reader(text, makeString("<fuzz>"), &positions);
  try {
    Value form;
    while (reader.read(form)) positions.clear();
  } catch (const PurpleException&) {
  }
}

// The options of a sandboxed interpreter under tight budgets: no files, processes or
// environment; 200,000 steps, 2 s, 64 MB of tensors; input from a string, output dropped.
inline embed::Options sandboxOptions() {
  embed::Options o;
  o.limits = embed::Limits::sandbox();
  o.limits.maxSteps = 200000;
  o.limits.maxSeconds = 2;
  o.limits.maxTensorBytes = int64_t(64) << 20;
  o.limits.maxDepth = 20000;
  o.input = std::string("(read-line) 42\n");
  o.onOutput = [](std::string_view) {};
  o.onError = [](std::string_view) {};
  return o;
}

// The process-wide part of the sandbox: a 1 GB cap on the collected heap.
inline void limitHeap() { embed::setHeapLimit(std::size_t(1) << 30); }

// Evaluates CODE in INTERP and prints the value: a value or a purple::Error.
inline void evalSandboxed(embed::Interpreter& interp, std::string_view code) {
  try {
    embed::Value v = interp.eval(std::string(code), "<fuzz>");
    (void)v.repr();
  } catch (const embed::Error&) {
  }
}

}  // namespace purple::fuzz
