// The process and the interpreter itself: command line, exit, environment, time, the
// collector, tensor memory, help.
#include "builtins/builtins.hpp"
#include "interp/memory/cpu_allocator.hpp"
#include "builtins/io/source.hpp"
#include "interp/core/symbol_table.hpp"
#include "builtins/core/special_forms.hpp"
#include "interp/language/library.hpp"
#include "interp/core/gc.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/language/node.hpp"
#include "interp/core/port.hpp"
#include "interp/language/printer.hpp"
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <algorithm>
#include "interp/limits/sandbox.hpp"

extern char** environ;

namespace purple {

namespace {
void requireProcess(Interp&, const char* who) { requireProcessAccess(who); }
void requireEnvironment(Interp& in, const char* who) {
  if (!in.limits.allowEnvironment) throwError("error", std::string(who) + ": environment access is disabled in this interpreter");
}
Value sandboxRuleValue(const SandboxRule& rule) {
  const char* kinds[] = {"refused", "conditional", "allowed"};
  Value needs = Value::nil();
  if (rule.needs & Needs::Environment) needs = cons(intern("environment"), needs);
  if (rule.needs & Needs::Process) needs = cons(intern("process"), needs);
  if (rule.needs & Needs::Files) needs = cons(intern("files"), needs);
  Value items[] = {intern(kinds[int(rule.kind)]), needs, makeString(rule.touches), makeString(rule.how)};
  return listFromArray(items, 4);
}
std::vector<std::string> boundNamesContaining(Interp& in, const std::string& text) {
  std::vector<std::string> names;
  in.forEachGlobal([&](Value key, GlobalCell* c) {
    if (c->value.isUnbound()) return;
    std::string_view n = symbolName(key);
    if (n.find(text) != std::string_view::npos) names.emplace_back(n);
  });
  return names;
}

// The names LIB exports that contain TEXT and are not bound here (imported already, they are
// among the bound names).
std::vector<std::string> libraryNamesContaining(Interp& in, const BuiltInLibrary& lib, const std::string& text) {
  std::vector<std::string> names;
  for (const std::string& n : lib.exports) {
    if (n.find(text) == std::string::npos) continue;
    GlobalCell* cell = in.findGlobal(intern(n));
    if (!cell || cell->value.isUnbound()) names.push_back(n);
  }
  return names;
}

int exitCode(Value v) {
  if (v.isMissing() || v == Value::t()) return 0;
  if (v.isFalse()) return 1;
  if (v.isFixnum()) return int(v.fixnum());
  return 0;
}

// (name a b :key (c 1) . rest), from the parameter list as written
std::string closureSignature(std::string_view name, Value params) {
  std::string text = "(" + std::string(name);
  if (isSymbol(params)) return text + " . " + std::string(symbolName(params)) + ")";
  if (!isPair(params)) return text + ")";
  std::string inner = toWriteString(params);   // "(a b . rest)"
  return text + " " + inner.substr(1);
}

std::string cellHelp(Value sym, GlobalCell* cell);

// The libraries built into Purple that export NAME.
std::vector<const BuiltInLibrary*> librariesExporting(std::string_view name) {
  std::vector<const BuiltInLibrary*> out;
  for (const BuiltInLibrary& lib : builtInLibraries())
    if (std::find(lib.exports.begin(), lib.exports.end(), name) != lib.exports.end()) out.push_back(&lib);
  return out;
}

std::string helpText(Interp& in, Value name) {
  Value sym = isString(name) ? intern(stringView(name)) : name;
  if (!isSymbol(sym)) return "help: give a name, as in (help 'tensor-matmul)";
  GlobalCell* cell = in.findGlobal(sym);
  if (!cell || cell->value.isUnbound()) {
    if (const SpecialFormDoc* d = findSpecialFormDoc(symbolName(sym)))
      return std::string(d->usage) + "  [special form]\n  " + d->doc;
    // A name of a library built into Purple that is not imported: its documentation (the library
    // is loaded for it, not imported) and the import that provides it.
    for (const BuiltInLibrary* lib : librariesExporting(symbolName(sym))) {
      std::string import = "(import " + lib->name + ")";
      GlobalCell* exported = nullptr;
      try {
        exported = in.libraryExportCell(lib->nameValue(), sym);
      } catch (const PurpleInterrupt&) {
        throw;
      } catch (const PurpleException&) {
        exported = nullptr;
      }
      std::string from = std::string(symbolName(sym)) + " is in the library " + lib->name + ": " + import +
                         " provides it";
      if (!exported || exported->value.isUnbound()) return from;
      return cellHelp(sym, exported) + "\n  [" + from + "]";
    }
    return std::string(symbolName(sym)) + ": not defined";
  }
  return cellHelp(sym, cell);
}

std::string cellHelp(Value sym, GlobalCell* cell) {
  Value v = cell->value;
  std::string out;
  if (v.is(Kind::Primitive)) {
    PrimitiveInfo* info = v.as<Primitive>()->info;
    std::string sig = info->signature;
    if (sig.size() >= 2) sig = sig.substr(1, sig.size() - 2);
    out = "(" + info->name + (sig.empty() ? "" : " " + sig) + ")\n  " + info->doc;
  } else if (v.is(Kind::Closure)) {
    LambdaNode* l = v.as<Closure>()->code;
    out = closureSignature(symbolName(sym), l->params) + "  [procedure]\n  ";
    Value doc = isString(l->doc) ? l->doc : cell->doc;
    out += isString(doc) ? std::string(stringView(doc)) : std::string("(no documentation)");
  } else if (v.is(Kind::Macro)) {
    out = std::string(symbolName(sym)) + "  [syntax]\n  ";
    out += isString(cell->doc) ? std::string(stringView(cell->doc)) : std::string("(no documentation)");
  } else {
    out = std::string(symbolName(sym)) + " = " + toWriteString(v);
    if (isString(cell->doc)) out += "\n  " + std::string(stringView(cell->doc));
  }
  return out;
}
}  // namespace

void registerSystem(Registry& r) {
  r.def("command-line", "()", [](Interp& in) {
    requireProcess(in, "command-line");
    Value l = Value::nil();
    for (size_t i = in.commandLine.size(); i-- > 0;) l = cons(makeString(in.commandLine[i]), l);
    return l;
  }, "The command line as a list of strings: the script name first, then its arguments.");
  sandbox(r, "command-line", Needs::Process, "the process: its command line");
  r.def("exit", "(:optional code)", [](Interp& in, Value code) -> Value {
    requireProcess(in, "exit");
    portFlush(in.currentOutputPort());
    throw PurpleExit{exitCode(code)};
  }, "Leaves the program with CODE (0 for #t or none, 1 for #f), running dynamic-wind exits.");
  sandbox(r, "exit", Needs::Process, "the process: ends the program (the host gets PurpleExit)");
  r.def("emergency-exit", "(:optional code)", [](Interp& in, Value code) -> Value {
    requireProcess(in, "emergency-exit");
    std::fflush(stdout);
    std::_Exit(exitCode(code));
  }, "Leaves the program at once with CODE.");
  sandbox(r, "emergency-exit", Needs::Process, "the process: ends it at once");
  r.def("get-environment-variable", "(name)", [](Interp& in, std::string name) -> Value {
    requireEnvironment(in, "get-environment-variable");
    const char* v = std::getenv(name.c_str());
    return v ? makeString(v) : Value::f();
  }, "The value of the environment variable NAME, or #f.");
  sandbox(r, "get-environment-variable", Needs::Environment, "the environment");
  r.def("get-environment-variables", "()", [](Interp& in) {
    requireEnvironment(in, "get-environment-variables");
    Value l = Value::nil();
    for (char** e = environ; e && *e; e++) {
      std::string s(*e);
      size_t eq = s.find('=');
      if (eq == std::string::npos) continue;
      l = cons(cons(makeString(s.substr(0, eq)), makeString(s.substr(eq + 1))), l);
    }
    return l;
  }, "All environment variables as an alist of strings.");
  sandbox(r, "get-environment-variables", Needs::Environment, "the environment");
  r.def("current-second", "()", []() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }, "Seconds since the epoch, as a real.");
  sandboxAllowed(r, "current-second", "the clock",
               "reads the time; changes nothing");
  r.def("current-jiffy", "()", []() {
    return int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  }, "A monotonic clock in jiffies (nanoseconds).");
  sandboxAllowed(r, "current-jiffy", "the clock",
               "reads the time; changes nothing");
  r.def("jiffies-per-second", "()", []() { return int64_t(1000000000); }, "Jiffies in a second.");
  r.def("cpu-time", "()", []() { return double(std::clock()) / CLOCKS_PER_SEC; }, "Processor time used by this process, in seconds.");
  sandboxAllowed(r, "cpu-time", "the process: its CPU time",
               "reads a number; changes nothing");
  r.def("features", "(:rest ignored)", [](Interp& in, RestArgs) { return in.st->features; }, "The cond-expand features.");
  r.def("void", "(:rest ignored)", [](RestArgs) { return Value::unspecified(); }, "Ignores its arguments and returns nothing.");

  r.def("process-peak-rss", "()", []() -> int64_t {
    // VmHWM: the peak resident set size of this process, from the kernel.
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t kb = -1;
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::atoll(line + 6);
    std::fclose(f);
    return kb < 0 ? -1 : kb * 1024;
  }, "The peak resident memory of this process so far, in bytes (Linux).");
  sandboxAllowed(r, "process-peak-rss", "the process: its memory",
               "reads a number; changes nothing");
  r.def("process-rss", "()", []() -> int64_t {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t kb = -1;
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "VmRSS:", 6) == 0) kb = std::atoll(line + 6);
    std::fclose(f);
    return kb < 0 ? -1 : kb * 1024;
  }, "The current resident memory of this process, in bytes (Linux).");
  sandboxAllowed(r, "process-rss", "the process: its memory",
               "reads a number; changes nothing");
  r.def("gc", "()", []() { gcCollectFully(); },
        "Runs full collections and the finalizers they make ready, until one leaves none to run: "
        "what a finalizer releases (a module's parameters) is freed by the next.");
  sandboxAllowed(r, "gc", "the process: a full collection of the shared heap",
               "costs time only; maxSeconds and maxSteps still bound the script");
  r.def("gc-stats", "()", []() {
    GcStats g = gcStats();
    TensorMemoryStats t = tensorMemoryStats();
    auto entry = [](const char* k, int64_t v) { return cons(intern(k), makeInteger(v)); };
    Value items[] = {entry("live-tensors", t.liveTensors), entry("tensor-bytes", t.countedBytes),
                     entry("peak-tensor-bytes", t.peakCountedBytes), entry("tensor-collections", t.collections),
                     entry("tensor-gc-threshold", t.threshold), entry("tensors-freed-early", t.released),
                     entry("tensors-freed-by-collector", t.freedByCollector),
                     entry("tensor-bytes-freed-early", t.bytesFreedEarly),
                     entry("tensor-bytes-freed-by-collector", t.bytesFreedByCollector),
                     entry("module-bytes", t.heldBytes), entry("device-tensor-bytes", t.deviceBytes),
                     entry("device-gc-threshold", t.deviceThreshold),
                     entry("heap-bytes", g.heapBytes), entry("free-bytes", g.freeBytes),
                     entry("collections", g.collections), entry("allocated-bytes", g.allocatedBytes),
                     entry("buffer-bytes", gcExternalBytes()),
                     entry("interned-symbols", int64_t(internedSymbolCount()))};
    return listFromArray(items, sizeof items / sizeof items[0]);
  }, "An alist of memory facts: live tensors and their bytes (device-tensor-bytes: those on a GPU), "
     "how tensors went: freed early, when the evaluator saw their last reference die "
     "(tensors-freed-early, tensor-bytes-freed-early), or by the collector (tensors-freed-by-collector, "
     "tensor-bytes-freed-by-collector; a storage's bytes count once, when the last tensor holding it goes), "
     "collections and the tensor bytes that trigger one (tensor-gc-threshold; device-gc-threshold for "
     "GPU storage, paced by the collections' cost), heap size, the bytes allocated on it since "
     "the process began (allocated-bytes: the difference across a call is what the call allocated), the bytes "
     "ports hold outside the heap (buffer-bytes), interned symbols (those a script made are "
     "collected once unused).");
  sandboxAllowed(r, "gc-stats", "global settings: memory counters",
               "reads numbers; changes nothing");
  r.def("cpu-allocator-stats", "(:key (reset-watermark #f))", [](bool reset) {
    CpuAllocatorStats s = cpuAllocatorStats();
    if (reset) resetCpuAllocatorWatermark();
    auto entry = [](const char* k, size_t v) { return cons(intern(k), makeInteger(int64_t(v))); };
    Value items[] = {entry("in-use", s.inUse), entry("free", s.free), entry("peak-in-use", s.peakInUse),
                     entry("watermark", s.watermark), entry("peak-footprint", s.peakFootprint),
                     entry("fresh-maps", s.freshMaps), entry("unmaps", s.unmaps)};
    return listFromArray(items, sizeof items / sizeof items[0]);
  }, "An alist of the CPU tensor allocator's counts, in bytes: the large blocks (128 KB and over, which "
     "parameters, gradients, optimizer moments and activations of any size are) in use now, the free ranges "
     "kept mapped, the most in use so far (peak-in-use) and since the last (cpu-allocator-stats :reset-watermark "
     "#t) (watermark; the call returns the counts before it resets), the largest footprint, and the mmap and "
     "munmap calls. All zero under PURPLE_CPU_ALLOCATOR=system. bench/distributed/sharding.purple measures "
     "memory per rank with it.");
  sandboxAllowed(r, "cpu-allocator-stats", "global settings: memory counters",
               "reads numbers; resets a measurement counter that nothing else uses");
  r.def("set-tensor-gc-threshold!", "(bytes)", [](int64_t b) {
    requireProcessAccess("set-tensor-gc-threshold!");
    setTensorCollectThreshold(b);
  },
        "Sets how many bytes of new tensor storage trigger a collection, from then on fixed. By "
        "default the threshold follows the collector's live heap: half of it, from 16 MB to 64 MB.");
  sandbox(r, "set-tensor-gc-threshold!", Needs::Process, "global settings: the tensor collection threshold of every interpreter");
  r.def("tensor-free!", "(tensor)", [](Value t) {
    if (!isTensor(t)) throwTypeError("tensor-free!", 1, "a tensor", t);
    releaseTensor(t);
  }, "Releases TENSOR's storage now. Using TENSOR afterwards is an error.");

  // ---- the sandbox rules (interp/limits/sandbox.hpp), for the generated table in docs/sandbox.md ----
  sandboxSyntax("import", "files: reads a library file",
                "refused (file-error) for a library that is not built in; (scheme ...), (srfi ...) and (purple ...) "
                "libraries are allowed; (purple python) loads the Python plugin, whose builtins are refused");
  sandboxSyntax("include", "files: reads PATH at expansion time", "refused (file-error) in a sandbox");
  sandboxSyntax("include-ci", "files: reads PATH at expansion time", "refused (file-error) in a sandbox");
  r.def("builtin-sandbox-rule", "(name)", [](Interp& in, Value name) -> Value {
    Value sym = isString(name) ? intern(stringView(name)) : name;
    if (!isSymbol(sym)) throwTypeError("builtin-sandbox-rule", 1, "a symbol", name);
    std::string key(symbolName(sym));
    GlobalCell* cell = in.findGlobal(sym);
    if (cell && cell->value.is(Kind::Primitive)) key = cell->value.as<Primitive>()->info->name;   // aliases
    SandboxRule rule;
    if (!findSandboxRule(key, rule)) return Value::f();
    return sandboxRuleValue(rule);
  }, "The sandbox rule of builtin NAME, or #f when it touches nothing outside the interpreter:\n"
     "(rule needs touches how), where RULE is refused, conditional or allowed (under Limits::sandbox()),\n"
     "NEEDS lists the limits it needs (files process environment), TOUCHES says what it touches and HOW\n"
     "when a conditional one is refused or why an allowed one is safe. docs/sandbox.md lists them all.");
  r.def("sandbox-rules", "()", []() {
    Value out = Value::nil();
    std::vector<SandboxRule> all = sandboxRules();
    for (size_t i = all.size(); i-- > 0;)
      out = cons(cons(intern(all[i].name), cons(intern(all[i].family), sandboxRuleValue(all[i]))), out);
    return out;
  }, "Every declared sandbox rule, as (name family rule needs touches how) lists: see builtin-sandbox-rule.");
  r.def("help", "(:optional name)", [](Interp& in, Value name) {
    std::string text = name.isMissing()
        ? "Purple: (help 'name) shows a procedure's documentation; (apropos \"text\") lists names."
        : helpText(in, name);
    portWrite(in.currentOutputPort(), text + "\n");
  }, "Prints the documentation of the procedure or syntax NAME.");
  r.def("documentation", "(name)", [](Interp& in, Value name) { return makeString(helpText(in, name)); },
        "The documentation of NAME as a string.");
  r.def("apropos-list", "(text)", [](Interp& in, std::string text) {
    std::vector<std::string> names = boundNamesContaining(in, text);
    for (const BuiltInLibrary& lib : builtInLibraries())
      for (const std::string& n : libraryNamesContaining(in, lib, text)) names.push_back(n);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    Value l = Value::nil();
    for (size_t i = names.size(); i-- > 0;) l = cons(intern(names[i]), l);
    return l;
  }, "The sorted list of names containing TEXT: those bound here and those the libraries built into\n"
     "Purple export (see apropos, which says which import provides each).");
  r.def("apropos", "(text)", [](Interp& in, std::string text) {
    std::vector<std::string> bound = boundNamesContaining(in, text);
    std::sort(bound.begin(), bound.end());
    std::string out;
    auto line = [&](const std::string& head, const std::vector<std::string>& names) {
      out += head;
      for (const std::string& n : names) out += " " + n;
      out += "\n";
    };
    if (!bound.empty()) line("bound here:", bound);
    for (const BuiltInLibrary& lib : builtInLibraries()) {
      std::vector<std::string> names = libraryNamesContaining(in, lib, text);
      std::sort(names.begin(), names.end());
      if (!names.empty()) line("(import " + lib.name + ") provides:", names);
    }
    if (out.empty()) out = "no name contains \"" + text + "\"\n";
    portWrite(in.currentOutputPort(), out);
  }, "Prints the names containing TEXT: those bound here, then those each library built into Purple\n"
     "exports, under the import that provides them. apropos-list returns them as a list.");
  r.def("%global-names", "()", [](Interp& in) {
    Value l = Value::nil();
    in.forEachGlobal([&](Value key, GlobalCell* c) {
      if (!c->value.isUnbound()) l = cons(key, l);
    });
    return l;
  }, "Internal: every bound global name (for completion and the reference generator).");
  r.def("%global-info", "(name)", [](Interp& in, Value name) -> Value {
    GlobalCell* cell = in.findGlobal(name);
    if (!cell || cell->value.isUnbound()) return Value::f();
    Value v = cell->value;
    Value items[4] = {Value::f(), Value::f(), Value::f(), Value::f()};   // kind family signature doc
    if (v.is(Kind::Primitive)) {
      PrimitiveInfo* info = v.as<Primitive>()->info;
      items[0] = intern("builtin");
      items[1] = makeString(info->family);
      items[2] = makeString(info->signature);
      items[3] = makeString(info->doc);
    } else if (v.is(Kind::Closure)) {
      LambdaNode* l = v.as<Closure>()->code;
      items[0] = intern("procedure");
      items[1] = makeString("prelude");
      items[2] = makeString(toWriteString(l->params));
      items[3] = isString(l->doc) ? l->doc : cell->doc;
    } else if (v.is(Kind::Macro)) {
      items[0] = intern("syntax");
      items[1] = makeString("prelude");
      items[3] = cell->doc;
    } else {
      items[0] = intern("variable");
      items[1] = makeString("prelude");
      items[3] = cell->doc;
    }
    return listFromArray(items, 4);
  }, "Internal: (kind family signature doc) of the global NAME, or #f; used by the reference generator.");
  r.def("%builtin-ownership", "(name)", [](Interp& in, Value name) -> Value {
    GlobalCell* cell = in.findGlobal(name);
    if (!cell || !cell->value.is(Kind::Primitive)) return Value::f();
    uint8_t f = cell->value.obj()->flags;
    Value l = Value::nil();
    auto note = [&](uint8_t bit, const char* what) {
      if (f & bit) l = cons(intern(what), l);
    };
    note(kPrimBorrowsArgs, "borrows");
    note(kPrimReturnsFresh, "returns-fresh");
    note(kPrimUnboxedTensor, "returns-tensor");
    note(kPrimReturnsFreshList, "returns-fresh-list");
    note(kPrimMakesList, "makes-list");
    return l;
  }, "Internal: what the builtin NAME does with tensors, for purple check --memory: a list of "
     "borrows (keeps none of its arguments), returns-fresh, returns-tensor, returns-fresh-list, "
     "makes-list; #f when NAME is not a builtin.");
  r.def("%special-forms", "()", []() {
    size_t n = 0;
    const SpecialFormDoc* docs = specialFormDocs(&n);
    Value l = Value::nil();
    for (size_t i = n; i-- > 0;) {
      Value entry[3] = {intern(docs[i].name), makeString(docs[i].usage), makeString(docs[i].doc)};
      l = cons(listFromArray(entry, 3), l);
    }
    return l;
  }, "Internal: (name usage doc) of every special form, for the reference generator.");
  r.def("%set-documentation!", "(name doc)", [](Interp& in, Value name, std::string doc) {
    in.globalCell(name)->doc = makeString(doc);
  }, "Internal: attaches DOC to the global NAME (used for prelude syntax).");
  registerSourceTools(r);
}

}  // namespace purple
