// load-inline: C++ (and CUDA) source compiled against LibTorch at run time, as
// torch.utils.cpp_extension.load_inline takes it, and its functions as Purple procedures.
//
// The source is compiled with the compiler and flags Purple was built with (toolchain.hpp), with
// load-inline's own <torch/extension.h> first on the include path (shim/: LibTorch's C++ API and
// the part of pybind11 that names functions, no Python). The FUNCTIONS list becomes m.def calls
// appended to the source after a #line directive, so the user's lines keep their numbers in the
// compiler's messages. The library goes into the cache (extension_cache.hpp) under a key hashing
// the sources, every flag, the toolchain, LibTorch's version and the shim's text; a second process,
// or a second call, loads it without compiling. The library describes each bound function's C++
// signature (shim/purple_extension_abi.h); extension_calls.cpp checks arguments against it.
#include "builtins/builtins.hpp"
#include "builtins/extensions/compile_errors.hpp"
#include "builtins/extensions/cuda_libraries.hpp"
#include "builtins/extensions/extension_cache.hpp"
#include "builtins/extensions/extension_calls.hpp"
#include "builtins/extensions/source_scan.hpp"
#include "builtins/extensions/toolchain.hpp"
#include "interp/core/file_io.hpp"
#include "interp/core/port.hpp"
#include "interp/language/printer.hpp"
#include "interp/limits/sandbox.hpp"
#include <torch/version.h>
#include <dlfcn.h>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

namespace purple {

namespace ext = extensions;

namespace {

constexpr const char* kWho = "load-inline";

// One FUNCTIONS entry: the key the result alist uses (as given), the C++ function it binds and the
// docstring (an alist entry's cdr).
struct Listed {
  Value key;
  std::string cppName;
  std::string doc;
};

struct Request {
  std::string name;
  std::string cppSource;                 // the user's C++, as given
  std::string cudaSource;                // "" without :cuda-sources
  std::vector<Listed> functions;
  std::vector<std::string> cflags, cudaCflags, ldflags, includePaths;
  std::string buildDirectory;
  bool verbose = false;
};

[[noreturn]] void argumentError(const std::string& what, Value got) {
  throwError("type-error", std::string(kWho) + ": " + what + ", got " + toWriteStringBounded(got));
}

std::string textOf(Value v, const char* what) {
  if (isString(v)) return std::string(stringView(v));
  if (v.is(Kind::Symbol)) return std::string(symbolName(v));
  argumentError(std::string(what) + " must be a string", v);
}

// A string, or a list of strings joined by newlines (load_inline's str or list of str).
std::string sourceText(Value v, const char* what) {
  if (isString(v)) return std::string(stringView(v));
  if (!isList(v) || v.isNil()) argumentError(std::string(what) + " must be a string or a list of strings", v);
  std::string out;
  for (Value p = v; isPair(p); p = cdr(p)) {
    if (!isString(car(p))) argumentError(std::string(what) + " must be a string or a list of strings", v);
    out += (out.empty() ? "" : "\n") + std::string(stringView(car(p)));
  }
  return out;
}

std::vector<std::string> stringList(Value v, const char* what) {
  std::vector<std::string> out;
  if (v.isMissing() || v.isFalse() || v.isNil()) return out;
  if (isString(v)) return {std::string(stringView(v))};
  if (!isList(v)) argumentError(std::string(what) + " must be a list of strings", v);
  for (Value p = v; isPair(p); p = cdr(p)) {
    if (!isString(car(p))) argumentError(std::string(what) + " must be a list of strings", v);
    out.emplace_back(stringView(car(p)));
  }
  return out;
}

// FUNCTIONS: #f or (), one name, or a list of names (strings or symbols) and (name . docstring)
// pairs. A name with hyphens binds the C++ function with underscores.
std::vector<Listed> listedFunctions(Value v) {
  std::vector<Listed> out;
  if (v.isMissing() || v.isFalse() || v.isNil()) return out;
  if (isString(v) || v.is(Kind::Symbol)) v = cons(v, Value::nil());
  if (!isList(v)) argumentError("FUNCTIONS must be a list of function names", v);
  for (Value p = v; isPair(p); p = cdr(p)) {
    Value entry = car(p);
    Listed l;
    Value name = entry;
    if (isPair(entry)) {
      name = car(entry);
      if (!isString(cdr(entry))) argumentError("a FUNCTIONS entry (name . docstring) needs a string docstring", entry);
      l.doc = std::string(stringView(cdr(entry)));
    }
    if (!isString(name) && !name.is(Kind::Symbol)) argumentError("FUNCTIONS names must be strings or symbols", entry);
    l.key = name;
    l.cppName = textOf(name, "a function name");
    for (char& c : l.cppName)
      if (c == '-') c = '_';
    if (!ext::isIdentifier(l.cppName, true))
      argumentError("\"" + l.cppName + "\" in FUNCTIONS is not a C++ function name", entry);
    for (const auto& other : out)
      if (other.cppName == l.cppName) argumentError("FUNCTIONS names " + l.cppName + " twice", v);
    out.push_back(l);
  }
  return out;
}

std::string cppStringLiteral(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
    else out += c;
  }
  return out + "\"";
}

// The translation unit load-inline compiles: the user's source as given (its lines keep their
// numbers), then, under their own file name, the bindings of FUNCTIONS and the entry point.
std::string mainTranslationUnit(const Request& q) {
  std::string s = q.cppSource;
  s += "\n#line 1 \"load-inline bindings\"\nnamespace {\n"
       "void purple_ext_listed_functions(::pybind11::module_& m) {\n";
  for (const auto& f : q.functions) {
    s += "  m.def(" + cppStringLiteral(f.cppName) + ", &" + f.cppName + ", " + cppStringLiteral(f.doc);
    if (auto params = ext::findParameters(q.cppSource, f.cppName)) {
      s += ", ::purple_ext::parsed_names{{";
      for (size_t i = 0; i < params->size(); i++) s += (i ? ", " : "") + cppStringLiteral((*params)[i].name);
      s += "}}";
    }
    s += ");\n";
  }
  s += "}\nconst ::purple_ext::Registrar purple_ext_listed_registrar(&purple_ext_listed_functions);\n"
       "}  // namespace\nPURPLE_EXTENSION_ENTRY\n";
  return s;
}

// ---- building --------------------------------------------------------------------------------

struct Build {
  const Request& q;
  Interp& in;
  std::string root, key, final, library;
  std::string mainSource;

  void say(const std::string& text) {
    if (q.verbose) portWrite(in.currentOutputPort(), std::string(kWho) + ": " + text + "\n");
  }

  // -gencode flags for nvcc: TORCH_CUDA_ARCH_LIST ("8.0;9.0+PTX") as PyTorch reads it, else the
  // current GPU's compute capability, else nvcc's default.
  std::vector<std::string> cudaArchFlags() {
    std::vector<std::string> out;
    std::string list;
    if (const char* env = std::getenv("TORCH_CUDA_ARCH_LIST")) list = env;
    if (list.empty()) {
      int cc = ext::computeCapability(0);
      if (cc) list = std::to_string(cc / 10) + "." + std::to_string(cc % 10);
    }
    for (char& c : list)
      if (c == ' ' || c == ',') c = ';';
    size_t start = 0;
    while (start < list.size()) {
      size_t end = list.find(';', start);
      if (end == std::string::npos) end = list.size();
      std::string arch = list.substr(start, end - start);
      start = end + 1;
      bool ptx = arch.size() > 4 && arch.compare(arch.size() - 4, 4, "+PTX") == 0;
      if (ptx) arch.resize(arch.size() - 4);
      std::string digits;
      for (char c : arch)
        if (c != '.') digits += c;
      if (digits.empty() || digits.find_first_not_of("0123456789a") != std::string::npos) continue;
      out.push_back("-gencode=arch=compute_" + digits + ",code=sm_" + digits);
      if (ptx) out.push_back("-gencode=arch=compute_" + digits + ",code=compute_" + digits);
    }
    return out;
  }

  // Runs one compiler command in DIR, logged; a compile-error when it fails.
  void run(const std::vector<std::string>& argv, const std::string& dir, const std::string& what) {
    std::string log = dir + "/build.log";
    {
      std::string line = "$ " + ext::commandText(argv) + "\n";
      if (std::FILE* f = std::fopen(log.c_str(), "a")) {
        std::fputs(line.c_str(), f);
        std::fclose(f);
      }
      say(ext::commandText(argv));
    }
    int rc = ext::runProcess(argv, dir, log);
    std::string output;
    try {
      output = readWholeFile(log, kWho);
    } catch (const PurpleException&) {
    }
    if (q.verbose && rc == 0) {
      size_t firstLine = output.rfind("$ ");   // what this command printed
      std::string printed = firstLine == std::string::npos ? output : output.substr(output.find('\n', firstLine) + 1);
      if (!printed.empty()) portWrite(in.currentOutputPort(), printed);
    }
    if (rc == 0) return;
    std::string kept = root + "/" + q.name + "-" + key + ".log";
    std::rename(log.c_str(), kept.c_str());
    ext::removeTree(dir);
    if (rc < 0)
      throwError("error", std::string(kWho) + ": cannot run " + argv[0] + " (" + what +
                              "): is it installed? (the whole log: " + kept + ")");
    std::vector<std::string> files = {q.name + ".cpp", q.name + "_cuda.cu", "load-inline bindings"};
    // nvcc's own messages say "file.cu(12): error"; the form gcc and editors use is "file.cu:12:"
    output = ext::colonLineNumbers(output, q.name + "_cuda.cu");
    // (and the instantiation that names a C++ type no binding converts)
    ext::throwCompileError(kWho, q.name, ext::compilerOutputSummary(output, files, {"struct purple_ext::"}), kept);
  }

  void compile(const std::string& dir) {
    const ext::Toolchain& t = ext::toolchain();
    std::string include = ext::shimIncludeDir(root, kWho);
    {
      AtomicFile f(dir + "/" + q.name + ".cpp", kWho);
      std::fputs(mainSource.c_str(), f.stream());
      f.commit();
    }
    std::vector<std::string> objects;
    std::vector<std::string> common = {"-DTORCH_EXTENSION_NAME=" + q.name, "-DTORCH_API_INCLUDE_EXTENSION_H",
                                       "-I" + include};
    for (const auto& p : q.includePaths) common.push_back("-I" + p);
    if (!q.cudaSource.empty()) {
      std::string nvcc = ext::findNvcc();
      {
        AtomicFile f(dir + "/" + q.name + "_cuda.cu", kWho);
        std::fputs(q.cudaSource.c_str(), f.stream());
        f.commit();
      }
      std::vector<std::string> argv = {nvcc, "-c", q.name + "_cuda.cu", "-o", q.name + "_cuda.o", "-std=c++17",
                                       "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", "-O3",
                                       "--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__",
                                       "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
                                       "-D__CUDA_NO_HALF2_OPERATORS__", "-include", "torch/types.h", "-include",
                                       "cuda.h", "-include", "cuda_runtime.h"};
      for (const auto& f : t.cxxFlags)
        if (f.rfind("-D", 0) == 0) argv.push_back(f);   // LibTorch's ABI flag and NDEBUG
      argv.insert(argv.end(), common.begin(), common.end());
      for (const auto& d : t.torchIncludeDirs) argv.insert(argv.end(), {"-isystem", d});
      for (const auto& d : t.cudaIncludeDirs) argv.insert(argv.end(), {"-isystem", d});
      for (const auto& f : cudaArchFlags()) argv.push_back(f);
      argv.insert(argv.end(), q.cudaCflags.begin(), q.cudaCflags.end());
      run(argv, dir, "nvcc");
      objects.push_back(q.name + "_cuda.o");
    }
    std::vector<std::string> argv = {t.cxx};
    argv.insert(argv.end(), t.cxxFlags.begin(), t.cxxFlags.end());
    argv.insert(argv.end(), {"-fPIC", "-shared", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
                             "-fdiagnostics-color=never", "-include", "torch/extension.h"});
    argv.insert(argv.end(), common.begin(), common.end());
    for (const auto& d : t.torchIncludeDirs) argv.insert(argv.end(), {"-isystem", d});
    // (with a CUDA LibTorch, C++ sources may include ATen/cuda headers, which need cuda_runtime_api.h)
    if (t.torchHasCuda)
      for (const auto& d : t.cudaIncludeDirs) argv.insert(argv.end(), {"-isystem", d});
    argv.insert(argv.end(), q.cflags.begin(), q.cflags.end());
    argv.push_back(q.name + ".cpp");
    argv.insert(argv.end(), objects.begin(), objects.end());
    argv.insert(argv.end(), {"-o", q.name + ".so", "-Wl,--no-undefined"});
    std::vector<std::string> libDirs;
    for (const auto& lib : t.torchLibraries) {
      argv.push_back(lib);
      std::string libDir = lib.substr(0, lib.rfind('/'));
      if (!libDir.empty() && std::find(libDirs.begin(), libDirs.end(), libDir) == libDirs.end()) libDirs.push_back(libDir);
    }
    for (const auto& d : libDirs) argv.insert(argv.end(), {"-Wl,-rpath," + d, "-Wl,-rpath-link," + d});
    if (!q.cudaSource.empty()) {
      for (const auto& d : t.cudaLibraryDirs) argv.push_back("-L" + d);
      argv.push_back("-lcudart");
    }
    argv.insert(argv.end(), q.ldflags.begin(), q.ldflags.end());
    run(argv, dir, "the C++ compiler");
    ext::syncFile(dir + "/" + q.name + ".so");
  }

  static void announceWait(void* self) {
    auto* b = static_cast<Build*>(self);
    b->say("waiting for another process that is compiling " + b->q.name);
  }

  // The library of Q, compiled unless the cache has it. REBUILD: the cached one would not load.
  std::string ensure(bool rebuild) {
    if (rebuild) ext::removeTree(final);
    if (ext::fileExists(library)) {
      say("using " + library + " (cached)");
      return library;
    }
    ext::FileLock lock(root + "/" + q.name + "-" + key + ".lock", &Build::announceWait, this);
    if (ext::fileExists(library)) {   // another process built it while this one waited
      say("using " + library + " (built by another process)");
      return library;
    }
    say("compiling " + q.name + " into " + final);
    std::string dir = ext::makeBuildDirectory(root, q.name + "-" + key, kWho);
    try {
      compile(dir);
    } catch (...) {
      ext::removeTree(dir);
      throw;
    }
    if (!ext::publishDirectory(dir, final))
      throwError("file-error", std::string(kWho) + ": cannot move the finished build to " + final);
    return library;
  }
};

// Loaded libraries, by path: a library is loaded once per process and never unloaded (procedures
// made from it may live anywhere).
std::mutex gLoadedLock;
std::map<std::string, const ext::abi::Module*>& loadedModules() {
  static auto* m = new std::map<std::string, const ext::abi::Module*>();
  return *m;
}

// The module description of the library at PATH; "" in ERROR when it does not load.
const ext::abi::Module* loadModule(const std::string& path, std::string& error) {
  std::lock_guard<std::mutex> g(gLoadedLock);
  auto it = loadedModules().find(path);
  if (it != loadedModules().end()) return it->second;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    error = e ? e : "dlopen failed";
    return nullptr;
  }
  using Entry = const ext::abi::Module* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, PURPLE_EXTENSION_ENTRY_NAME));
  if (!entry) {
    error = path + " is not a library load-inline made (it has no " PURPLE_EXTENSION_ENTRY_NAME ")";
    return nullptr;
  }
  const ext::abi::Module* m = nullptr;
  try {
    m = entry();   // runs the module bodies: m.def calls, and whatever else PYBIND11_MODULE holds
  } catch (const c10::Error& e) {
    error = e.what_without_backtrace();
    return nullptr;
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
  if (m->version != ext::abi::kVersion || std::string(m->torchVersion) != TORCH_VERSION) {
    error = path + " was built for another Purple or LibTorch (" + m->torchVersion + ")";
    return nullptr;
  }
  loadedModules()[path] = m;
  return m;
}

Value loadInline(Interp& in, const Request& q) {
  if (!q.cudaSource.empty()) {
    if (!ext::toolchain().torchHasCuda)
      throwError("error", std::string(kWho) + ": :cuda-sources needs a LibTorch built with CUDA; this Purple was built "
                              "against a CPU-only LibTorch (" + TORCH_VERSION + ")");
    if (ext::findNvcc().empty())
      throwError("error", std::string(kWho) + ": :cuda-sources needs nvcc, which was not found (set CUDA_HOME, or put "
                                              "nvcc on PATH)");
  }
  Build b{q, in, ext::cacheRoot(q.buildDirectory, kWho), "", "", "", mainTranslationUnit(q)};
  std::string material = "purple load-inline 1\n" + ext::toolchain().fingerprint() + ext::shimHash() + "\n" + q.name +
                         '\0' + b.mainSource + '\0' + q.cudaSource + '\0';
  for (const auto* list : {&q.cflags, &q.cudaCflags, &q.ldflags, &q.includePaths}) {
    for (const auto& x : *list) material += x + '\x1f';
    material += '\0';
  }
  if (!q.cudaSource.empty()) {
    material += ext::findNvcc() + '\0';
    for (const auto& f : b.cudaArchFlags()) material += f + '\x1f';
  }
  b.key = ext::hashHex(material).substr(0, 20);
  b.final = b.root + "/" + q.name + "-" + b.key;
  b.library = b.final + "/" + q.name + ".so";

  bool wasCached = ext::fileExists(b.library);
  std::string path = b.ensure(false);
  std::string error;
  const ext::abi::Module* m = loadModule(path, error);
  if (!m && wasCached) {   // a cached library that does not load (a crash while it was written): build it again
    b.say("the cached library does not load (" + error + "); building it again");
    path = b.ensure(true);
    m = loadModule(path, error);
  }
  if (!m) throwError("error", std::string(kWho) + ": " + q.name + ": " + error);
  if (m->nFunctions == 0)
    throwError("error", std::string(kWho) + ": " + q.name + " binds no functions: list them in FUNCTIONS, or bind "
                                            "them in a PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) block");

  // The alist: FUNCTIONS' entries first, keyed as given; then what the module body bound besides,
  // keyed by its name as a string.
  Registry r(in, "extensions");
  auto describe = [&](const ext::abi::Function& f, const std::string& given) {
    std::string doc = given.empty() ? std::string(f.doc) : given;
    std::string sig = ext::cppSignature(f);
    return doc.empty() ? "C++: " + sig : doc + "\nC++: " + sig;
  };
  std::vector<int> index(q.functions.size(), -1);
  std::vector<bool> listed(size_t(m->nFunctions), false);
  for (size_t k = 0; k < q.functions.size(); k++) {
    for (int i = 0; i < m->nFunctions; i++)
      if (q.functions[k].cppName == m->functions[i].name) index[k] = i;
    if (index[k] < 0) throwError("error", std::string(kWho) + ": " + q.name + " does not bind " + q.functions[k].cppName);
    listed[size_t(index[k])] = true;
  }
  Value out = Value::nil();   // built from the back
  for (int i = m->nFunctions; i-- > 0;) {
    if (listed[size_t(i)]) continue;
    const ext::abi::Function& f = m->functions[i];
    Value proc = ext::extensionProcedure(r, &f, f.name, describe(f, ""));
    out = cons(cons(makeString(f.name), proc), out);
  }
  for (size_t k = q.functions.size(); k-- > 0;) {
    const Listed& l = q.functions[k];
    const ext::abi::Function& f = m->functions[index[k]];
    std::string display = l.key.is(Kind::Symbol) ? std::string(symbolName(l.key)) : l.cppName;
    Value proc = ext::extensionProcedure(r, &f, display, describe(f, l.doc));
    out = cons(cons(l.key, proc), out);
  }
  return out;
}

}  // namespace

void registerLoadInline(Registry& r) {
  r.def("load-inline",
        "(name cpp-sources :optional functions :key functions cuda-sources extra-cflags extra-cuda-cflags "
        "extra-ldflags extra-include-paths build-directory verbose)",
        [](Interp& in, Value name, Value cppSources, Value functionsPos, Value functionsKey, Value cudaSources,
           Value cflags, Value cudaCflags, Value ldflags, Value includePaths, Value buildDirectory, bool verbose) {
          Request q;
          q.name = textOf(name, "NAME");
          if (!ext::isIdentifier(q.name)) argumentError("NAME must be a C++ identifier (it is TORCH_EXTENSION_NAME)", name);
          q.cppSource = sourceText(cppSources, "CPP-SOURCES");
          if (!cudaSources.isMissing() && !cudaSources.isFalse()) q.cudaSource = sourceText(cudaSources, ":cuda-sources");
          q.functions = listedFunctions(functionsKey.isMissing() ? functionsPos : functionsKey);
          q.cflags = stringList(cflags, ":extra-cflags");
          q.cudaCflags = stringList(cudaCflags, ":extra-cuda-cflags");
          q.ldflags = stringList(ldflags, ":extra-ldflags");
          // the compiler runs in the build directory: a relative path means what it means here
          for (const auto& path : stringList(includePaths, ":extra-include-paths"))
            q.includePaths.push_back(path.empty() || path[0] == '/' ? path : ext::absolutePath(path));
          if (!buildDirectory.isMissing() && !buildDirectory.isFalse())
            q.buildDirectory = textOf(buildDirectory, ":build-directory");
          q.verbose = verbose;
          return loadInline(in, q);
        },
        "Compiles C++ source that includes <torch/extension.h>, as "
        "torch.utils.cpp_extension.load_inline takes it, and returns an alist from each name in FUNCTIONS to a "
        "procedure calling that C++ function. CPP-SOURCES is a string or a list of strings; FUNCTIONS lists names "
        "(strings or symbols; hyphens read as underscores) or (name . docstring) pairs; functions bound in a "
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) block follow, keyed by name. Arguments are checked against each "
        "function's C++ signature (torch::Tensor, integers, double, bool, std::string, vectors and ArrayRefs of "
        "these, optionals: #f is none, at::Scalar, at::ScalarType, at::Device); tuples and vectors come back as "
        "lists. The library is compiled with the compiler and flags Purple was built with into a cache "
        "($XDG_CACHE_HOME/purple/extensions, or :build-directory) keyed by the sources, flags and LibTorch version: "
        "a second process loads it without compiling. :cuda-sources (a CUDA LibTorch and nvcc) are compiled with "
        "nvcc and linked in. A compile error is a compile-error carrying the compiler's messages (NAME.cpp:LINE:). "
        ":verbose #t prints the commands and the cache's decisions. docs/extensions.md has examples.");
  sandbox(r, "load-inline", Needs::Process | Needs::Files,
          "the process and files: compiles and runs native code, writes the extension cache");
}

}  // namespace purple
