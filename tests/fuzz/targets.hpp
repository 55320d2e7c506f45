// What the fuzz targets do with one input, shared by the libFuzzer targets (reader.cpp,
// eval.cpp) and by purple_fuzz_replay, which runs the inputs that once crashed
// (tests/fuzz/regressions/) in the default build. Every input must end in data, a value or a
// purple error within the limits: a crash, an abort, a sanitizer report or a hang is a bug.
#pragma once
// The reader target uses libpurple's internal names (purple::Value is the internal value there);
// the public API's are spelled purple::embed::.
#define PURPLE_IMPLEMENTATION
#include <purple/purple.hpp>

#include "builtins/formats/format_error.hpp"
#include "builtins/formats/mapped_file.hpp"
#include "builtins/formats/python_values.hpp"
#include "builtins/formats/unpickler.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/reader.hpp"

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <unistd.h>

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

// ---- the file formats (issue 29) ----------------------------------------------------------
// Each input must end in data or a FormatError / purple file-error: never a crash, a sanitizer
// report, a hang or an unbounded allocation.

// The pickle reader and the conversion to Purple values, in safe mode and with :safe #f; a
// persistent id resolves to a small float storage, so the tensor rebuilders run too.
inline void unpickleAll(std::string_view bytes) {
  InterpScope scope(readerInterp());
  for (bool safe : {true, false}) {
    formats::UnpickleOptions o;
    o.safe = safe;
    o.persistentLoad = [](const formats::PyRef&) {
      static const float zeros[16] = {};
      auto s = formats::PyObject::make(formats::PyType::Storage);
      s->storage = formats::copiedStorage(zeros, sizeof zeros);
      s->dtype = at::kFloat;
      return s;
    };
    try {
      formats::PyRef root = formats::unpickle(bytes, o);
      (void)formats::toPurple(root);
    } catch (const formats::FormatError&) {
    } catch (const c10::Error&) {
    } catch (const PurpleException&) {
    }
  }
}

// The readers that take a path (zip archives, safetensors, .npy): the input is written to a
// file of this process's own in /dev/shm (or /tmp), then every loader of the kind reads it
// through the builtins, as a script would.
// Each load and the printing of what it made run in one call under a time budget. A hostile file
// may legitimately load as shared structure whose printed form is exponential (a pickle of ten
// nested lists of ten references to the one below: 115 bytes, 10^9 leaves in print), so
// printing is bounded by the budget as it is for the REPL's user by Ctrl-C; the loaders are
// bounded on their own (the billion-laughs tests). The first run printed such a value outside
// any call, with Value::repr(), and libFuzzer stopped it as a 120 s timeout.
constexpr double kFileSeconds = 3;

inline embed::Interpreter& fileInterp() {
  static embed::Interpreter* interp = [] {
    embed::Options o;
    o.limits.maxSeconds = kFileSeconds;
    o.onOutput = [](std::string_view) {};
    o.onError = [](std::string_view) {};
    return new embed::Interpreter(o);
  }();
  return *interp;
}

inline std::string inputPath(const char* kind) {
  const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return std::string(dir) + "/purple-fuzz-" + std::to_string(getpid()) + "-" + kind;
}

inline void loadFile(const char* kind, std::string_view bytes, const std::vector<std::string>& loaders) {
  std::string path = inputPath(kind);
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  } else {
    return;
  }
  embed::Interpreter& interp = fileInterp();
  for (auto& loader : loaders) {
    try {
      (void)interp.eval("(write (" + loader + " \"" + path + "\"))", "<fuzz>");
    } catch (const embed::Error&) {
    }
  }
  std::remove(path.c_str());
}

inline void loadZip(std::string_view bytes) { loadFile("zip", bytes, {"torch-load", "(lambda (p) (torch-load p :safe #f))", "load-npz"}); }
inline void loadSafetensors(std::string_view bytes) { loadFile("safetensors", bytes, {"load-safetensors", "safetensors-metadata"}); }
inline void loadNpy(std::string_view bytes) { loadFile("npy", bytes, {"load-npy"}); }

}  // namespace purple::fuzz
