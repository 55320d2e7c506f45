// The sandbox, builtin by builtin (issue 11). Every builtin that touches the world outside the
// interpreter declares its rule beside its registration (interp/limits/sandbox.hpp); this host attacks
// them all in interpreters made with Limits::sandbox():
//   (a) every builtin whose rule is "refused" is called with plausible arguments: it must fail
//       with the refusal (its error kind and text), create no file, delete or rename none, and
//       leave every process-wide setting as it was;
//   (b) the conditional ones, case by case (standard input, import, Python, ports given by the
//       host);
//   (c) the declared rules match this audit exactly, and every builtin whose source calls a
//       sandbox check or touches files, the environment or process settings declares a rule
//       (a new builtin that forgets fails here);
//   (d) escapes through prelude code, eval, apply, environment, macros, aliases, call/cc,
//       import of a library file, include, the Python bridge and dist-init.
//
// usage: purple_sandbox_host SOURCE_DIR
#include <purple/purple.hpp>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

int gFailures = 0;
int gChecks = 0;

void fail(const std::string& what) {
  gFailures++;
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

void check(bool ok, const std::string& what) {
  gChecks++;
  if (!ok) fail(what);
}

std::string dirListing(const std::string& dir) {
  std::set<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.insert(n);
    }
    closedir(d);
  }
  std::string out;
  for (const auto& n : names) out += n + " ";
  return out;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs CODE; "" when it returned, else "kind: message".
std::string outcome(purple::Interpreter& interp, const std::string& code) {
  try {
    interp.eval(code);
    return "";
  } catch (const purple::Error& e) {
    return e.kind() + ": " + e.message();
  } catch (const std::exception& e) {
    return std::string("C++ exception: ") + e.what();
  }
}

std::string evalString(purple::Interpreter& interp, const std::string& code) {
  return interp.eval(code).to<std::string>();
}

purple::Options sandboxOptions() {
  purple::Options o;
  o.limits = purple::Limits::sandbox();
  o.limits.maxSeconds = 20;   // an attack that hangs fails instead of stopping the suite
  return o;
}

// Everything process-wide that a refused builtin could change, read by the host's own
// interpreter (the environment variable is set by this host: a sandbox must not read it).
const char* kSettings =
    "(with-output-to-string (lambda () (write (list (get-num-threads) (get-default-dtype) (detect-anomaly?)"
    "  (tensor->list (tensor-sum (tensor-to (get-rng-state) 'int64)))"
    "  (cdr (assq 'tensor-gc-threshold (gc-stats)))"
    "  (with-output-to-string (lambda () (display (tensor-div (tensor-arange 3) 3.0))))"
    "  (tensor->list (tensor-mul (tensor-ones 1) 1e-310))))))";

struct Rule {
  std::string family, kind, needs;
};

// name -> rule, from (sandbox-rules) in a host interpreter
std::map<std::string, Rule> declaredRules(purple::Interpreter& host) {
  std::string text = evalString(host,
      "(with-output-to-string (lambda () (for-each (lambda (r) (display (car r)) (display \"\\t\")"
      "  (display (cadr r)) (display \"\\t\") (display (caddr r)) (display \"\\t\")"
      "  (for-each (lambda (n) (display n) (display \" \")) (cadddr r)) (newline)) (sandbox-rules))))");
  std::map<std::string, Rule> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, '\t')) f.push_back(cell);
    if (f.size() < 3) continue;
    out[f[0]] = Rule{f[1], f[2], f.size() > 3 ? f[3] : ""};
  }
  return out;
}

// ---- (a) the attack on every refused builtin -----------------------------------------------

// A plausible call for each refused builtin: what it would do if the rule did not hold. W is
// the scratch directory, which must stay as it was (victim, victim.purple, lib/ inside).
std::map<std::string, std::string> attackCalls() {
  std::map<std::string, std::string> m = {
      {"command-line", "(command-line)"},
      // (what data-loader calls with :num-workers; a whole pass would first draw its base seed)
      {"%worker-pool-start", "(%worker-pool-start 2 2 0 (lambda (id seed) id) (lambda (indices cell) indices))"},
      {"%data-worker-signal-self", "(%data-worker-signal-self 9)"},
      {"exit", "(exit 3)"},
      {"emergency-exit", "(emergency-exit 3)"},
      {"get-environment-variable", "(get-environment-variable \"PURPLE_SANDBOX_SECRET\")"},
      {"get-environment-variables", "(get-environment-variables)"},
      {"set-tensor-gc-threshold!", "(set-tensor-gc-threshold! 1)"},
      {"serve-repl", "(serve-repl \"W/made\")"},
      {"stop-repl-server", "(stop-repl-server)"},
      {"serve-kernel", "(serve-kernel :connection-file \"W/made\")"},
      {"record-tensor-origins!", "(record-tensor-origins! #t)"},
      {"%tensor-memory-rows", "(tensor-memory-report)"},
      {"%profile-run", "(profile (lambda () 1))"},
      {"%op-profile-run", "(with-profiler () (tensor-add (tensor-ones 2) 1))"},
      {"%op-profile-export-chrome-trace", "(%op-profile-export-chrome-trace 1 \"W/made\")"},
      {"cuda-empty-cache", "(cuda-empty-cache)"},
      {"cuda-reset-peak-memory-stats", "(cuda-reset-peak-memory-stats)"},
      {"open-input-file", "(read-line (open-input-file \"W/victim\"))"},
      {"open-binary-input-file", "(read-u8 (open-binary-input-file \"W/victim\"))"},
      {"open-output-file", "(close-port (open-output-file \"W/made\"))"},
      {"open-binary-output-file", "(close-port (open-binary-output-file \"W/made\"))"},
      {"call-with-output-file", "(call-with-output-file \"W/made\" (lambda (p) (write 1 p)))"},
      {"call-with-input-file", "(call-with-input-file \"W/victim\" read-line)"},
      {"with-output-to-file", "(with-output-to-file \"W/made\" (lambda () (display 1)))"},
      {"with-input-from-file", "(with-input-from-file \"W/victim\" read-line)"},
      {"file-exists?", "(file-exists? \"W/victim\")"},
      {"delete-file", "(delete-file \"W/victim\")"},
      {"load", "(load \"W/victim.purple\")"},
      {"rename-file", "(rename-file \"W/victim\" \"W/made\")"},
      {"create-directory", "(create-directory \"W/made\")"},
      {"load-idx", "(load-idx \"W/victim\")"},
      {"load-csv", "(load-csv \"W/victim\")"},
      {"set-num-threads!", "(set-num-threads! (+ 1 (get-num-threads)))"},
      {"set-flush-denormal!", "(set-flush-denormal! #t)"},
      {"set-default-dtype!", "(set-default-dtype! 'float64)"},
      {"default-generator", "(generator-manual-seed! (default-generator) 7)"},
      {"set-rng-state!", "(set-rng-state! (get-rng-state))"},
      {"manual-seed", "(manual-seed 12345)"},
      {"tensor-set-print-options!", "(tensor-set-print-options! :precision 1)"},
      {"set-detect-anomaly!", "(set-detect-anomaly! #t)"},
      {"call-with-detect-anomaly", "(call-with-detect-anomaly #t (lambda () (detect-anomaly?)))"},
      {"summary-writer", "(summary-writer \"W/made\")"},
      {"load-npy", "(load-npy \"W/victim\")"},
      {"read-image", "(read-image \"W/victim\")"},
      {"file->tensor", "(file->tensor \"W/victim\")"},
      {"write-png", "(write-png (tensor-zeros '(3 2 2) :dtype 'uint8) \"W/made\")"},
      {"write-jpeg", "(write-jpeg (tensor-zeros '(3 2 2) :dtype 'uint8) \"W/made\")"},
      {"directory-files", "(directory-files \"W\")"},
      {"file-directory?", "(file-directory? \"W/victim\")"},
      {"save-npy", "(save-npy (tensor-ones 2) \"W/made\")"},
      {"load-npz", "(load-npz \"W/victim\")"},
      {"save-npz", "(save-npz (list (cons \"a\" (tensor-ones 2))) \"W/made\")"},
      {"load-safetensors", "(load-safetensors \"W/victim\")"},
      {"safetensors-metadata", "(safetensors-metadata \"W/victim\")"},
      {"save-safetensors", "(save-safetensors (list (cons \"a\" (tensor-ones 2))) \"W/made\")"},
      {"read-json-file", "(read-json-file \"W/victim\")"},
      {"write-json-file", "(write-json-file (vector 1 2) \"W/made\")"},
      {"sentencepiece-load", "(sentencepiece-load \"W/victim\")"},
      {"torch-save", "(torch-save (tensor-ones 2) \"W/made\")"},
      {"torch-load", "(torch-load \"W/victim\")"},
      {"save-state-dict", "(save-state-dict (list (cons \"w\" (tensor-ones 2))) \"W/made\")"},
      {"load-state-dict", "(load-state-dict \"W/victim\")"},
      {"load-torchscript", "(load-torchscript \"W/victim\")"},
      {"save-torchscript", "(save-torchscript (jit-compile \"def forward(x: Tensor) -> Tensor:\\n    return x\\n\") \"W/made\")"},
      {"export-onnx", "(export-onnx (sequential (relu)) (list (tensor-ones 1 2)) \"W/made\")"},
      {"save-optimizer-state", "(save-optimizer-state (sgd (list (tensor-ones 2 :requires-grad #t)) :lr 0.1) \"W/made\")"},
      {"load-optimizer-state!", "(load-optimizer-state! (sgd (list (tensor-ones 2 :requires-grad #t)) :lr 0.1) \"W/victim\")"},
      {"save-png", "(save-png (tensor-zeros 4 4) \"W/made\")"},
      // native code: a static initialiser that would touch a file if the library were ever built and loaded
      {"load-inline", "(load-inline \"pwned\" \"#include <cstdlib>\\nstatic int pwned = std::system(\\\"touch W/made\\\");\" "
                      "'() :build-directory \"W/cache\")"},
      {"cuda-raw-kernel", "(cuda-raw-kernel \"k\" \"extern \\\"C\\\" __global__ void k(float* y) { y[0] = 1; }\")"},
      {"dist-init", "(dist-init :backend 'gloo :rank 0 :world-size 1 :init-method \"tcp://127.0.0.1:29517\")"},
      {"dist-new-group", "(dist-new-group '(0))"},
      {"dist-destroy", "(dist-destroy)"},
      {"dist-local-rank", "(dist-local-rank)"},
      {"dist-local-world-size", "(dist-local-world-size)"},
      {"distributed-data-parallel", "(distributed-data-parallel (sequential))"},
      {"fully-shard", "(fully-shard (sequential))"},
      {"fully-shard-unit!", "(fully-shard-unit! (sequential))"},
      {"zero-redundancy-optimizer", "(zero-redundancy-optimizer (list (tensor-ones 2 :requires-grad #t)) sgd :lr 0.1)"},
  };
  for (const char* c : {"dist-all-reduce!", "dist-all-reduce", "dist-broadcast!", "dist-broadcast", "dist-reduce!",
                        "dist-all-gather", "dist-all-gather!", "dist-gather", "dist-gather!", "dist-scatter!",
                        "dist-reduce-scatter", "dist-reduce-scatter!", "dist-all-to-all", "dist-all-to-all!",
                        "dist-all-to-all-single"})
    m[c] = std::string("(") + c + " (tensor-ones 2))";
  m["dist-barrier"] = "(dist-barrier)";
  m["dist-send"] = "(dist-send (tensor-ones 2) 0)";
  m["dist-recv!"] = "(dist-recv! (tensor-ones 2) :src 0)";
  for (const char* c : {"dist-broadcast-object", "dist-all-gather-object", "dist-gather-object", "dist-scatter-object"})
    m[c] = std::string("(") + c + " '(1 2))";
  m["dist-send-object"] = "(dist-send-object '(1 2) 0)";
  m["dist-recv-object"] = "(dist-recv-object :src 0)";
  // Python: a script's every own way into Python (the host's objects are the conditional case)
  m["py-import"] = "(py-import \"os\")";
  m["py-eval"] = "(py-eval \"open('W/made', 'w').close()\")";
  m["py-exec"] = "(py-exec \"open('W/made', 'w').close()\")";
  m["py-object"] = "(py-object '(1 2))";
  m["python-version"] = "(python-version)";
  m["numpy->tensor"] = "(numpy->tensor 1)";
  m["tensor->numpy"] = "(tensor->numpy (tensor-ones 2))";
  m["dataset->py"] = "(dataset->py (vector 1 2))";
  for (const char* c : {"py-attr", "py-set-attr!", "py-has-attr?", "py-ref", "py-set-ref!", "py-delete-ref!", "py-slice",
                        "py-len", "py-contains?", "py-list", "%py-iter", "%py-next", "%py-with", "py->purple",
                        "py-equal?", "py-is?", "py-repr", "py-str", "py-type-name", "py-isinstance?", "py-callable?",
                        "py-dir", "py-tensors-shared?", "python-error-exception", "python-error-type",
                        "python-error-traceback"})
    m[c] = std::string("(") + c + " \"os\" \"system\" \"touch W/made\")";
  return m;
}

// The refusal a refused builtin must give.
bool isRefusal(const std::string& name, const Rule& rule, const std::string& got) {
  if (name.rfind("py", 0) == 0 || name.rfind("%py", 0) == 0 || name.find("numpy") != std::string::npos ||
      name.rfind("python", 0) == 0 || name == "dataset->py")
    return got == "error: python: Python is disabled in this interpreter (its limits forbid process access)";
  if (name == "dist-init")
    return got.rfind("dist-error: dist-init: distributed training is disabled in this interpreter", 0) == 0;
  if (rule.needs.find("files") != std::string::npos)
    return got == "file-error: " + name + ": file access is disabled in this interpreter";
  if (rule.needs.find("process") != std::string::npos)
    return got == "error: " + name + ": process access is disabled in this interpreter";
  return got == "error: " + name + ": environment access is disabled in this interpreter";
}

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

// ---- (c) the audit -------------------------------------------------------------------------

// The audit (docs/sandbox.md): the builtins refused in a sandbox.
const std::set<std::string> kRefused = {
    "command-line", "exit", "emergency-exit", "get-environment-variable", "get-environment-variables",
    "set-tensor-gc-threshold!", "serve-repl", "stop-repl-server", "serve-kernel", "record-tensor-origins!", "%tensor-memory-rows", "%profile-run", "%op-profile-run",
    "%op-profile-export-chrome-trace", "cuda-empty-cache", "cuda-reset-peak-memory-stats", "open-input-file", "open-binary-input-file", "open-output-file",
    "open-binary-output-file", "call-with-output-file", "call-with-input-file", "with-output-to-file",
    "with-input-from-file", "file-exists?", "delete-file", "load", "rename-file", "create-directory", "load-idx",
    "load-csv", "set-num-threads!", "set-flush-denormal!", "set-default-dtype!", "default-generator",
    "set-rng-state!", "manual-seed", "tensor-set-print-options!", "set-detect-anomaly!", "call-with-detect-anomaly",
    "summary-writer", "load-npy", "save-npy", "load-npz", "save-npz", "load-safetensors", "safetensors-metadata",
    "save-safetensors", "read-json-file", "write-json-file", "torch-save", "torch-load", "save-state-dict", "load-state-dict", "load-torchscript",
    "save-torchscript", "export-onnx", "save-optimizer-state", "load-optimizer-state!", "save-png",
    "read-image", "file->tensor", "write-png", "write-jpeg", "directory-files", "file-directory?",
    "%worker-pool-start", "%data-worker-signal-self", "load-inline", "cuda-raw-kernel",
    // optional families: checked only when built in
    "sentencepiece-load",
    "dist-init", "dist-new-group", "dist-destroy", "dist-local-rank", "dist-local-world-size",
    "distributed-data-parallel", "fully-shard", "fully-shard-unit!", "zero-redundancy-optimizer", "dist-all-reduce!", "dist-all-reduce", "dist-broadcast!", "dist-broadcast",
    "dist-reduce!", "dist-all-gather", "dist-all-gather!", "dist-gather", "dist-gather!", "dist-scatter!",
    "dist-reduce-scatter", "dist-reduce-scatter!", "dist-all-to-all", "dist-all-to-all!", "dist-all-to-all-single",
    "dist-barrier", "dist-send", "dist-recv!", "dist-broadcast-object", "dist-all-gather-object",
    "dist-gather-object", "dist-scatter-object", "dist-send-object", "dist-recv-object",
    "py-import", "py-attr", "py-set-attr!", "py-has-attr?", "py-ref", "py-set-ref!", "py-delete-ref!", "py-slice",
    "py-len", "py-contains?", "py-list", "%py-iter", "%py-next", "%py-with", "py-object", "py->purple", "py-equal?",
    "py-is?", "py-repr", "py-str", "py-type-name", "py-isinstance?", "py-callable?", "py-dir", "tensor->numpy",
    "numpy->tensor", "py-tensors-shared?", "python-error-exception", "python-error-type", "python-error-traceback",
    "dataset->py", "python-version", "py-eval", "py-exec"};
const std::set<std::string> kOptionalFamilies = {"distributed", "python", "tensorboard", "plot", "text"};
const std::set<std::string> kConditional = {
    "read-line", "read-char", "peek-char", "read-string", "read-u8", "peek-u8", "read-bytevector",
    "read-bytevector!", "read", "import", "include", "include-ci"};

// Source files under DIR (recursively) with the given suffix.
void sourceFiles(const std::string& dir, std::vector<std::string>& out) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    std::string p = dir + "/" + n;
    struct stat sb;
    if (stat(p.c_str(), &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) sourceFiles(p, out);
    else if (n.size() > 4 && n.substr(n.size() - 4) == ".cpp") out.push_back(p);
  }
  closedir(d);
}

// Names of builtins whose registration body (from `r.def("NAME"` to the next registration)
// shows that it touches the outside: a sandbox check written by hand, the environment, a file
// opened or written, a process-wide LibTorch setting.
std::map<std::string, std::string> touchingBuiltins(const std::string& sourceDir) {
  const char* markers[] = {"requireFileAccess", "requireProcessAccess", "limits.allow", "getenv", "AtomicFile",
                           "writeFileAtomically", "readWholeFile", "fopen", "std::ifstream", "std::ofstream",
                           "at::set_num_threads", "set_default_dtype", "set_flush_denormal", "AnomalyMode::set_enabled",
                           "manual_seed", "std::_Exit", "PurpleExit", "::rename(", "mkdir("};
  std::map<std::string, std::string> out;
  std::vector<std::string> files;
  sourceFiles(sourceDir + "/builtins", files);
  for (const auto& path : files) {
    std::string s = readFile(path);
    std::vector<std::pair<size_t, std::string>> defs;
    for (const char* opener : {"r.def(\"", "r.defRaw(\""}) {
      for (size_t p = s.find(opener); p != std::string::npos; p = s.find(opener, p + 1)) {
        size_t start = p + std::string(opener).size();
        defs.emplace_back(p, s.substr(start, s.find('"', start) - start));
      }
    }
    std::sort(defs.begin(), defs.end());
    for (size_t i = 0; i < defs.size(); i++) {
      size_t end = i + 1 < defs.size() ? defs[i + 1].first : s.size();
      std::string body = s.substr(defs[i].first, end - defs[i].first);
      for (const char* m : markers)
        if (body.find(m) != std::string::npos) out[defs[i].second] = path + " (" + m + ")";
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: purple_sandbox_host SOURCE_DIR\n");
    return 2;
  }
  std::string sourceDir = argv[1];
  char tmpl[] = "/tmp/purple-sandbox-XXXXXX";
  if (!mkdtemp(tmpl)) return 2;
  std::string w = tmpl;
  setenv("PURPLE_SANDBOX_SECRET", "s3cret", 1);
  setenv("LOCAL_RANK", "7", 1);
  setenv("LOCAL_WORLD_SIZE", "9", 1);
  mkdir((w + "/lib").c_str(), 0700);
  writeFile(w + "/victim", "victim\n");
  writeFile(w + "/victim.purple", "(define loaded #t)\n");
  writeFile(w + "/lib/evil.sld", "(define-library (evil) (export pwned) (import (scheme base)) (begin (define pwned 1)))\n");
  writeFile(w + "/inc.purple", "(define included #t)\n");
  const std::string before = dirListing(w) + "| " + dirListing(w + "/lib");

  purple::Interpreter host;
  bool hasPython = outcome(host, "(import (purple python))").empty();   // declares its rules
  std::map<std::string, Rule> rules = declaredRules(host);
  check(rules.size() > 50, "(sandbox-rules) lists the audited builtins, got " + std::to_string(rules.size()));
  {
    // warm up: the first interpreter made after (purple python) is loaded draws from the global
    // generator once (Python's own start); the settings are read after that
    purple::Interpreter warm(sandboxOptions());
    if (hasPython) warm.eval("(import (purple python))");
  }
  std::string settings = evalString(host, kSettings);
  std::printf("%zu declared rules; python %s\n", rules.size(), hasPython ? "present" : "absent");

  // ---- (c) the declared rules match the audit
  for (const auto& [name, rule] : rules) {
    if (rule.kind == "refused")
      check(kRefused.count(name) == 1, name + " is refused but not in the audit's refused list");
    if (kRefused.count(name)) check(rule.kind == "refused", name + " must be refused, its rule is " + rule.kind);
    if (kConditional.count(name)) check(rule.kind == "conditional", name + " must be conditional, its rule is " + rule.kind);
  }
  for (const auto& name : kRefused) {
    bool optional = name.rfind("dist", 0) == 0 || name == "distributed-data-parallel" || name == "fully-shard" || name == "fully-shard-unit!" ||
                    name == "zero-redundancy-optimizer" || name.find("py") != std::string::npos ||
                    name == "sentencepiece-load";
    bool defined = outcome(host, name).empty();   // an unbound name is an error
    if (!defined && optional) continue;
    check(rules.count(name) && rules[name].kind == "refused", name + " has no refused rule (its declaration is missing)");
  }
  for (const auto& name : kConditional)
    check(rules.count(name) == 1, name + " has no conditional rule");
  for (const auto& [name, where] : touchingBuiltins(sourceDir))
    check(rules.count(name) == 1, name + " touches the outside (" + where + ") but declares no sandbox rule");

  // ---- (a) every refused builtin, refused, with nothing created and nothing changed
  std::map<std::string, std::string> calls = attackCalls();
  int attacked = 0;
  for (const auto& [name, rule] : rules) {
    if (rule.kind != "refused") continue;
    auto it = calls.find(name);
    if (it == calls.end()) {
      fail(name + " is refused but this test has no attack call for it: add one to attackCalls()");
      continue;
    }
    purple::Interpreter sandboxed(sandboxOptions());
    if (rule.family == "python") sandboxed.eval("(import (purple python))");
    settings = evalString(host, kSettings);   // arguments are evaluated first: none draws random numbers
    std::string code = replaceAll(it->second, "W/", w + "/");
    std::string got = outcome(sandboxed, code);
    check(isRefusal(name, rule, got), name + ": " + code + " gave \"" + got + "\", not its refusal");
    attacked++;
    // the same refusal whatever the arguments (checked before they are converted)
    std::string bare = outcome(sandboxed, "(" + name + " 'nonsense 1 2 3 4 5 6)");
    check(isRefusal(name, rule, bare), name + " with nonsense arguments gave \"" + bare + "\", not its refusal");
    std::string after = dirListing(w) + "| " + dirListing(w + "/lib");
    check(after == before, name + " changed the scratch directory: " + after);
    check(readFile(w + "/victim") == "victim\n", name + " changed the victim file");
    std::string now = evalString(host, kSettings);
    check(now == settings, name + " changed a process-wide setting: " + now + " (was " + settings + ")");
  }
  std::printf("%d refused builtins attacked\n", attacked);
  check(attacked >= 46, "the core's refused builtins were all attacked");

  // ---- (b) the conditional rules, case by case
  {
    purple::Interpreter sandboxed(sandboxOptions());   // no Options::input: stdin is the host's
    for (const char* c : {"(read-line)", "(read-char)", "(peek-char)", "(read-string 3)", "(read)",
                          "(read-u8)", "(peek-u8)", "(read-bytevector 3)", "(read-bytevector! (make-bytevector 3))",
                          "(read-line (current-input-port))"}) {
      std::string got = outcome(sandboxed, c);
      // the binary readers may instead refuse the textual console port: either way nothing is read
      bool refused = got.find("standard input") != std::string::npos ||
                     ((std::string(c).find("u8") != std::string::npos || std::string(c).find("bytevector") != std::string::npos) &&
                      got.find("binary") != std::string::npos);
      check(refused, std::string(c) + " on the process's stdin gave \"" + got + "\"");
    }
    // char-ready? looks only at what is buffered: allowed, and reads nothing
    check(outcome(sandboxed, "(char-ready?)").empty(), "char-ready? is allowed");
    // string ports and the host's input stay allowed
    check(evalString(sandboxed, "(read-line (open-input-string \"ok\"))") == "ok", "read-line on a string port");
    check(evalString(sandboxed, "(with-output-to-string (lambda () (display \"ok\")))") == "ok", "string output port");
    purple::Options fedOptions = sandboxOptions();
    fedOptions.input = std::string("given\n");
    purple::Interpreter fed(fedOptions);
    check(evalString(fed, "(read-line)") == "given", "read-line on the input the host gave");
    // import: standard libraries yes, a library file no
    check(outcome(sandboxed, "(import (scheme base) (scheme write) (srfi 1))").empty(), "import of standard libraries");
    purple::Options withPath = sandboxOptions();
    withPath.libraryPath = {w + "/lib"};
    purple::Interpreter pathed(withPath);
    std::string got = outcome(pathed, "(import (evil))");
    check(got == "file-error: import: file access is disabled in this interpreter", "import of a library file gave \"" + got + "\"");
    got = outcome(sandboxed, "(include \"" + w + "/inc.purple\")");
    check(got.rfind("file-error", 0) == 0, "include gave \"" + got + "\"");
    check(outcome(sandboxed, "included").rfind("unbound", 0) == 0, "include ran the file");
    got = outcome(sandboxed, "(include-ci \"" + w + "/inc.purple\")");
    check(got.rfind("file-error", 0) == 0, "include-ci gave \"" + got + "\"");
  }
  if (hasPython) {
    // Python: a script's own way in is refused; a Python object the host hands in may be called
    purple::Interpreter sandboxed(sandboxOptions());
    check(outcome(sandboxed, "(import (purple python))").empty(), "import (purple python) in a sandbox");
    std::string got = outcome(sandboxed, "(py-call (py-import \"os\") 1)");
    check(got.find("Python is disabled") != std::string::npos, "py-call of py-import gave \"" + got + "\"");
  }

  // ---- (d) escapes through the language and the prelude
  {
    std::vector<std::string> escapes = {
        "(apply open-output-file (list \"W/made\"))",
        "(eval '(open-output-file \"W/made\") (interaction-environment))",
        "(eval '(open-output-file \"W/made\") (environment '(scheme base) '(scheme file)))",
        "((eval 'open-output-file (environment '(scheme file))) \"W/made\")",
        "(begin (define-syntax m (syntax-rules () ((_ f) (f \"W/made\")))) (m open-output-file))",
        "(let ((f open-output-file)) (f \"W/made\"))",
        "(map open-output-file '(\"W/made\"))",
        "(call-with-current-continuation (lambda (k) (k (open-output-file \"W/made\"))))",
        "(dynamic-wind (lambda () #f) (lambda () (delete-file \"W/victim\")) (lambda () #f))",
        "(with-exception-handler (lambda (e) (delete-file \"W/victim\")) (lambda () (raise 'x)))",
        "(guard (e (#t (delete-file \"W/victim\"))) (raise 'x))",
        "(for-each (lambda (n) (let ((v (eval n (interaction-environment)))) (if (procedure? v) (v \"W/made\")))) "
        "  '(open-output-file with-output-to-file delete-file))",
        "(mnist-dataset :dir \"W\")",
        "(load-state-dict \"W/victim\")",
        "(save-plot (plot '(1 2 3)) \"W/made.png\")",
        "(call-with-detect-anomaly #t (lambda () (set! leaked (detect-anomaly?))))",
        "(with-detect-anomaly (detect-anomaly?))",
        "(import (evil))",
        "(include \"W/inc.purple\")",
        "(eval '(include \"W/inc.purple\") (interaction-environment))",
        "(dist-init :backend 'gloo :rank 0 :world-size 1 :init-method \"tcp://127.0.0.1:29518\")",
        "(begin (import (purple python)) (py-exec \"open('W/made', 'w').close()\"))",
        "(begin (import (purple python)) (py-eval \"__import__('os').system('touch W/made')\"))",
        "(exit 7)",
        "(emergency-exit 7)",
        "(get-environment-variable \"PURPLE_SANDBOX_SECRET\")",
        "(apply load-inline (list \"pwned\" \"int f() { return 1; }\" '(f) :build-directory \"W/cache\"))",
        "(let ((k cuda-raw-kernel)) (k \"k\" \"extern \\\"C\\\" __global__ void k() {}\"))",
    };
    for (const auto& e : escapes) {
      purple::Interpreter sandboxed(sandboxOptions());
      sandboxed.eval("(define leaked #f)");
      settings = evalString(host, kSettings);
      std::string code = replaceAll(e, "W/", w + "/");
      code = replaceAll(code, "\"W\"", "\"" + w + "\"");
      std::string got = outcome(sandboxed, code);
      check(!got.empty(), "escape ran: " + e);
      check(got.find("unbound") == std::string::npos || e.find("plot") != std::string::npos || e.find("mnist") != std::string::npos,
            "escape " + e + " tested nothing: " + got);
      check(evalString(sandboxed, "(if leaked \"leak\" \"\")").empty(), "escape leaked a setting: " + e);
      check(dirListing(w) + "| " + dirListing(w + "/lib") == before, "escape changed the scratch directory: " + e);
      check(evalString(host, kSettings) == settings, "escape changed a process-wide setting: " + e);
    }
  }
  // limits set later (Interpreter::setLimits) hold at once; a port opened before them stays usable
  // (docs/sandbox.md: the host, or code it trusted, opened it), but no new one can be opened
  {
    purple::Interpreter later;
    std::string portFile = w + "-port";
    later.eval("(define p (open-output-file \"" + portFile + "\"))");
    later.setLimits(purple::Limits::sandbox());
    std::string got = outcome(later, "(open-output-file \"" + w + "/made\")");
    check(got == "file-error: open-output-file: file access is disabled in this interpreter",
          "open-output-file after setLimits gave \"" + got + "\"");
    check(outcome(later, "(begin (display \"kept\" p) (close-port p))").empty(), "a port opened before the limits");
    check(readFile(portFile) == "kept", "the port opened before the limits was written");
    std::remove(portFile.c_str());
    got = outcome(later, "(manual-seed 1)");
    check(got == "error: manual-seed: process access is disabled in this interpreter", "manual-seed after setLimits gave \"" + got + "\"");
    // help still describes a refused builtin (the guard keeps its signature and docstring)
    check(evalString(later, "(with-output-to-string (lambda () (help 'load)))").find("(load ") == 0, "help of a refused builtin");
    check(evalString(later, "(with-output-to-string (lambda () (write (builtin-sandbox-rule 'u8-ready?))))")
              .find("allowed") != std::string::npos, "an alias has its builtin's rule");
    check(later.eval("(builtin-sandbox-rule 'car)").isFalse(), "car touches nothing outside");
  }
  check(dirListing(w) + "| " + dirListing(w + "/lib") == before, "the scratch directory is as it was");

  // a host's own interpreter keeps every right: the wrapper passes the call through
  check(host.eval("(file-exists? \"" + w + "/victim\")").isTrue(), "file-exists? in the host's interpreter");
  check(evalString(host, "(get-environment-variable \"PURPLE_SANDBOX_SECRET\")") == "s3cret", "the host reads the environment");

  for (const char* f : {"/lib/evil.sld", "/victim", "/victim.purple", "/inc.purple"}) std::remove((w + f).c_str());
  rmdir((w + "/lib").c_str());
  rmdir(w.c_str());
  std::printf("%d checks, %d failures\n", gChecks, gFailures);
  return gFailures ? 1 : 0;
}
