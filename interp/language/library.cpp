// define-library and import. Purple has one global namespace per interpreter: a library's
// body is evaluated into it, `export (rename a b)` defines b, and import modifiers `prefix`
// and `rename` define the new names. `only` and `except` select nothing away (see
// docs/language.md). The standard libraries ((scheme base) ...) are always present.
#include "interp/core/interp.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/core/file_io.hpp"
#include "interp/language/analyzer.hpp"
#include "interp/language/printer.hpp"
#include "interp/language/reader.hpp"
#include <vector>
#include <fstream>

namespace purple {

namespace {
bool isStandardLibrary(Value name) {
  if (!isPair(name) || !isSymbol(car(name))) return false;
  std::string_view first = symbolName(car(name));
  if (first == "chibi" && isPair(cdr(name)) && cadr(name) == intern("test")) return true;   // the prelude's harness
  return first == "scheme" || first == "srfi" || first == "purple";
}

Value libraryName(Value importSet) {
  // (only set id...) (except set id...) (prefix set p) (rename set (a b)...)
  while (isPair(importSet) && isSymbol(car(importSet)) && isPair(cdr(importSet)) && isPair(cadr(importSet))) {
    std::string_view op = symbolName(car(importSet));
    if (op != "only" && op != "except" && op != "prefix" && op != "rename") break;
    importSet = cadr(importSet);
  }
  return importSet;
}

std::string nameToPath(Value name) {
  std::string path;
  for (Value p = name; isPair(p); p = cdr(p)) {
    if (!path.empty()) path += '/';
    path += toDisplayString(car(p));
  }
  return path;
}

bool loaded(State* st, Value name) {
  for (Value p = st->libraries; isPair(p); p = cdr(p))
    if (toWriteString(car(p)) == toWriteString(name)) return true;
  return false;
}

bool isPythonLibrary(Value name) {
  return isPair(name) && car(name) == intern("purple") && isPair(cdr(name)) && cadr(name) == intern("python") &&
         cddr(name).isNil();
}
}  // namespace

bool Interp::libraryLoaded(Value name) const { return loaded(st, name); }

bool Interp::libraryAvailable(Value name) {
  if (loaded(st, name)) return true;
  if (isPythonLibrary(name)) return pythonLibraryAvailable();
  return isStandardLibrary(name);
}

void Interp::importLibrary(Value importSet) {
  Value name = libraryName(importSet);
  if (!isPair(name)) throwError("syntax-error", "import: bad library name " + toWriteString(importSet));
  if (isPythonLibrary(name) && !loaded(st, name)) {
    importPythonLibrary(*this);
    if (!loaded(st, name)) st->libraries = cons(name, st->libraries);
  }
  if (!isStandardLibrary(name) && !loaded(st, name)) {
    std::string rel = nameToPath(name);
    requireFileAccess("import");
    std::vector<std::string> dirs;
    if (isString(st->currentFile)) {
      std::string f(stringView(st->currentFile));
      size_t slash = f.rfind('/');
      dirs.push_back(slash == std::string::npos ? "" : f.substr(0, slash + 1));
    }
    dirs.push_back("");
    for (auto& d : libraryPath) dirs.push_back(d.empty() || d.back() == '/' ? d : d + "/");
    bool found = false;
    for (const auto& d : dirs) {
      for (const char* ext : {".sld", ".purple", ".scm", ".ss"}) {
        std::string candidate = d + rel + ext;
        if (std::ifstream(candidate).good()) {
          loadFile(candidate);
          found = true;
          break;
        }
      }
      if (found) break;
    }
    if (!found || !loaded(st, name)) {
      if (!found) throwError("file-error", "import: library " + toWriteString(name) + " not found (looked for " + rel + ".sld)");
      st->libraries = cons(name, st->libraries);   // a plain file without define-library
    }
  }
  // prefix / rename: define the new names
  Value set = importSet;
  if (isPair(set) && isSymbol(car(set))) {
    std::string_view op = symbolName(car(set));
    if (op == "prefix" && isPair(cddr(set))) {
      // prefixing needs the library's export list; libraries record it as (name . exports)
    } else if (op == "rename") {
      for (Value p = cddr(set); isPair(p); p = cdr(p)) {
        Value pairing = car(p);
        if (isPair(pairing) && isPair(cdr(pairing))) {
          Value v = lookupGlobal(symbolName(car(pairing)));
          if (!v.isUnbound()) globalCell(cadr(pairing))->value = v;
        }
      }
    }
  }
}

void Interp::defineLibrary(Value form, PositionTable* positions) {
  Value name = isPair(cdr(form)) ? cadr(form) : Value::f();
  if (!isPair(name)) throwError("syntax-error", "define-library: bad library name");
  std::vector<std::pair<Value, Value>, traceable_allocator<std::pair<Value, Value>>> renames;
  for (Value p = cddr(form); isPair(p); p = cdr(p)) {
    Value decl = car(p);
    if (!isPair(decl) || !isSymbol(car(decl))) continue;
    std::string_view kind = symbolName(car(decl));
    if (kind == "begin") {
      for (Value f = cdr(decl); isPair(f); f = cdr(f)) evalForm(car(f), positions);
    } else if (kind == "import") {
      for (Value s = cdr(decl); isPair(s); s = cdr(s)) importLibrary(car(s));
    } else if (kind == "include" || kind == "include-ci") {
      for (Value f = cdr(decl); isPair(f); f = cdr(f))
        if (isString(car(f))) loadFile(resolveRelative(std::string(stringView(car(f))), SourcePos{}));
    } else if (kind == "export") {
      for (Value e = cdr(decl); isPair(e); e = cdr(e))
        if (isPair(car(e)) && car(car(e)) == intern("rename") && isPair(cdr(car(e))) && isPair(cddr(car(e))))
          renames.push_back({cadr(car(e)), caddr(car(e))});
    } else if (kind == "cond-expand") {
      evalForm(decl, positions);
    }
  }
  for (auto& r : renames) {
    Value v = lookupGlobal(symbolName(r.first));
    if (!v.isUnbound()) globalCell(r.second)->value = v;
  }
  st->libraries = cons(name, st->libraries);
}

// ---- cond-expand and include, which the analyzer expands ----

namespace {

bool featureMatch(Interp& in, Value req, const SourcePos& pos) {
  if (stackNearlyFull()) throwError("recursion-error", "feature requirement nested too deeply");
  req = stripSyntax(req);
  if (isPair(req) && !isList(req)) throwSyntaxError(pos, "bad feature requirement", req);
  if (isSymbol(req)) {
    for (Value f = in.st->features; isPair(f); f = cdr(f))
      if (car(f) == req) return true;
    return req == intern("else");
  }
  if (!isPair(req) || !isSymbol(car(req))) return false;
  std::string_view op = symbolName(car(req));
  if (op == "and") {
    for (Value p = cdr(req); isPair(p); p = cdr(p))
      if (!featureMatch(in, car(p), pos)) return false;
    return true;
  }
  if (op == "or") {
    for (Value p = cdr(req); isPair(p); p = cdr(p))
      if (featureMatch(in, car(p), pos)) return true;
    return false;
  }
  if (op == "not") return isPair(cdr(req)) && !featureMatch(in, cadr(req), pos);
  if (op == "library") return isPair(cdr(req)) && in.libraryAvailable(cadr(req));
  return false;
}

}  // namespace

Value expandCondExpand(Interp& in, Value x, const SourcePos& pos) {
  for (Value p = cdr(x); isPair(p); p = cdr(p)) {
    Value clause = car(p);
    if (isPair(clause) && featureMatch(in, car(clause), pos)) return cons(intern("begin"), cdr(clause));
  }
  return cons(intern("begin"), Value::nil());
}

Value expandInclude(Interp& in, Value x, const SourcePos& pos, PositionTable* positions) {
  std::vector<Value, traceable_allocator<Value>> forms;
  for (Value p = cdr(x); isPair(p); p = cdr(p)) {
    if (!isString(car(p))) throwSyntaxError(pos, "include expects file names", x);
    requireFileAccess("include");
    std::string path = in.resolveRelative(std::string(stringView(car(p))), pos);
    std::string text = readWholeFile(path, "include");
    Value file = makeString(path);
    Reader r(text, file, positions);
    Value d;
    while (r.read(d)) forms.push_back(d);
  }
  return cons(intern("begin"), listFromArray(forms.data(), forms.size()));
}

}  // namespace purple
