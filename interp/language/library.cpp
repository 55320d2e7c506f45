// define-library and import: libraries with their own namespaces.
//
// A library's body is evaluated in a namespace of its own (Interp::globals_ points at it
// meanwhile): its definitions go there, and its names resolve there, then in the system
// namespace (builtins, prelude, standard libraries, as they were at start-up). So a library's
// helpers never clobber the user's names, two libraries may both define `block`, and a library
// does not see the user's definitions. Exports are the library's cells themselves: importing
// binds a name to the same variable, so there is nothing to copy and nothing to keep in sync.
// The standard libraries ((scheme base) (srfi 1) (purple) ...) are the system namespace, which
// every namespace sees already; importing them binds nothing unless prefix or rename asks.
// Library files are found next to the importing file, then on the library path (-I), then among
// the libraries built into Purple (lib/ in the source tree, embedded like the prelude).
#include "interp/core/interp.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/core/file_io.hpp"
#include "interp/language/analyzer.hpp"
#include "interp/language/library.hpp"
#include "interp/language/printer.hpp"
#include "interp/language/reader.hpp"
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <vector>
#include <fstream>

namespace purple {

struct PreludeSource { const char* name; const char* text; };
extern const PreludeSource kLibrarySources[];
extern const std::size_t kLibrarySourceCount;

const char* const kEmbeddedLibraryPrefix = "purple-lib:";

const char* embeddedLibrarySource(std::string_view path) {
  size_t n = std::strlen(kEmbeddedLibraryPrefix);
  if (path.size() <= n || path.compare(0, n, kEmbeddedLibraryPrefix) != 0) return nullptr;
  std::string_view rel = path.substr(n);
  for (size_t i = 0; i < kLibrarySourceCount; i++)
    if (rel == kLibrarySources[i].name) return kLibrarySources[i].text;
  return nullptr;
}

// While alive, definitions and names go to (and resolve in) NS.
struct NamespaceSwitch {
  Interp& in;
  Interp::GlobalMap* saved;
  NamespaceSwitch(Interp& i, Interp::GlobalMap* ns) : in(i), saved(i.globals_) { i.globals_ = ns; }
  ~NamespaceSwitch() { in.globals_ = saved; }
};

Interp::GlobalMap* Interp::newNamespace() {
  auto* ns = makeGlobalMap();
  libraryNamespaces_.push_back(ns);
  return ns;
}

void Interp::sealSystemNamespace() {
  if (!systemGlobals_) systemGlobals_ = makeGlobalMap(userGlobals_);
}

void Interp::loadIntoSystem(void (*load)(Interp&)) {
  NamespaceSwitch to(*this, userGlobals_);
  std::unordered_set<const Object*> before;
  for (auto& kv : *userGlobals_) before.insert(kv.first);
  load(*this);
  if (!systemGlobals_) return;
  for (auto& kv : *userGlobals_)   // only its own names: the user's definitions stay the user's
    if (!before.count(kv.first)) systemGlobals_->emplace(kv.first, kv.second);
}

namespace {
using ImportBinding = std::pair<Value, GlobalCell*>;
using ImportBindings = std::vector<ImportBinding, traceable_allocator<ImportBinding>>;

// What an import set makes visible: ALL (a standard library: the system namespace, visible
// already) and/or the bindings listed.
struct ImportSet {
  bool all = false;
  ImportBindings named;
};

// (a b 0): a proper list of identifiers and exact non-negative integers, as R7RS says
bool isLibraryName(Value name) {
  if (!isPair(name) || !isList(name)) return false;
  for (Value p = name; isPair(p); p = cdr(p)) {
    Value part = car(p);
    if (!isSymbol(part) && !(part.isFixnum() && part.fixnum() >= 0)) return false;
  }
  return true;
}

bool isStandardLibrary(Value name) {
  if (!isPair(name) || !isSymbol(car(name))) return false;
  std::string_view first = symbolName(car(name));
  if (first == "chibi" && isPair(cdr(name)) && cadr(name) == intern("test")) return true;   // the prelude's harness
  return first == "scheme" || first == "srfi" || first == "purple";
}

std::string nameToPath(Value name) {
  std::string path;
  for (Value p = name; isPair(p); p = cdr(p)) {
    if (!path.empty()) path += '/';
    path += toDisplayString(car(p));
  }
  return path;
}

bool isBuiltIntoPurple(Value name) {
  return embeddedLibrarySource(std::string(kEmbeddedLibraryPrefix) + nameToPath(name) + ".sld") != nullptr;
}

bool isSystemLibrary(Value name) { return isStandardLibrary(name) && !isBuiltIntoPurple(name); }

Value libraryName(Value importSet) {
  // (only set id...) (except set id...) (prefix set p) (rename set (a b)...); a set nested
  // into itself is cut off (resolveImportSet then finds no library name)
  for (int depth = 0; depth < 10000 && isPair(importSet) && isSymbol(car(importSet)) && isPair(cdr(importSet)) && isPair(cadr(importSet));
       depth++) {
    std::string_view op = symbolName(car(importSet));
    if (op != "only" && op != "except" && op != "prefix" && op != "rename") break;
    importSet = cadr(importSet);
  }
  return importSet;
}

// st->libraries: ((name . exports) ...), EXPORTS #t (everything it defined is global: a
// standard library, or a plain file) or an alist (external-name . cell).
Value libraryEntry(State* st, Value name) {
  std::string key = toWriteString(name);
  for (Value p = st->libraries; isPair(p); p = cdr(p))
    if (isPair(car(p)) && toWriteString(car(car(p))) == key) return car(p);
  return Value::f();
}

bool loaded(State* st, Value name) { return !libraryEntry(st, name).isFalse(); }

bool isPythonLibrary(Value name) {
  return isPair(name) && car(name) == intern("purple") && isPair(cdr(name)) && cadr(name) == intern("python") &&
         cddr(name).isNil();
}

// The libraries whose files are being loaded, outermost first: an import of one of them is a cycle.
thread_local std::vector<std::string> tLoading;
// The folders the libraries being loaded were found under: (a b) found as ROOT/a/b.sld finds
// the libraries it imports under ROOT too.
thread_local std::vector<std::string> tRoots;

struct LoadingGuard {
  LoadingGuard(std::string n) { tLoading.push_back(std::move(n)); }
  ~LoadingGuard() { tLoading.pop_back(); }
};

[[noreturn]] void importError(const std::string& message, Value irritant) {
  throwError("syntax-error", "import: " + message, listFromArray(&irritant, 1));
}

const ImportBinding* findBinding(const ImportBindings& b, Value id) {
  for (const ImportBinding& x : b)
    if (x.first == id) return &x;
  return nullptr;
}
}  // namespace

bool Interp::libraryLoaded(Value name) const { return loaded(st, name); }

bool Interp::libraryAvailable(Value name) {
  if (!isLibraryName(name)) return false;
  if (loaded(st, name)) return true;
  if (isPythonLibrary(name)) return pythonLibraryAvailable();
  if (isBuiltIntoPurple(name)) return true;
  return isStandardLibrary(name);
}

namespace {

// Loads the library NAME (a file) unless it is loaded or standard.
void loadLibrary(Interp& in, Value name) {
  State* st = in.st;
  if (loaded(st, name)) return;
  if (isPythonLibrary(name)) {
    // its builtins join the system namespace, as if they had been there at start-up
    in.loadIntoSystem(importPythonLibrary);
    if (!loaded(st, name)) st->libraries = cons(cons(name, Value::t()), st->libraries);
    return;
  }
  if (isSystemLibrary(name)) return;
  std::string key = toWriteString(name);
  for (size_t i = 0; i < tLoading.size(); i++)
    if (tLoading[i] == key) {
      std::string chain;
      for (size_t j = i; j < tLoading.size(); j++) chain += tLoading[j] + " -> ";
      throwError("syntax-error", "import: a cycle of imports: " + chain + key);
    }
  LoadingGuard guard(key);
  std::string rel = nameToPath(name);
  std::vector<std::string> dirs;
  if (isString(st->currentFile)) {
    std::string f(stringView(st->currentFile));
    size_t slash = f.rfind('/');
    if (f.compare(0, std::strlen(kEmbeddedLibraryPrefix), kEmbeddedLibraryPrefix) != 0)
      dirs.push_back(slash == std::string::npos ? "" : f.substr(0, slash + 1));
  }
  for (size_t i = tRoots.size(); i-- > 0;) dirs.push_back(tRoots[i]);
  dirs.push_back("");
  for (auto& d : in.libraryPath) dirs.push_back(d.empty() || d.back() == '/' ? d : d + "/");
  std::string found, root;
  if (in.limits.allowFiles) {
    for (const auto& d : dirs) {
      for (const char* ext : {".sld", ".purple", ".scm", ".ss"}) {
        std::string candidate = d + rel + ext;
        if (std::ifstream(candidate).good()) {
          found = candidate;
          root = d;
          break;
        }
      }
      if (!found.empty()) break;
    }
  }
  if (found.empty() && isBuiltIntoPurple(name)) found = kEmbeddedLibraryPrefix + rel + ".sld";
  if (found.empty()) {
    requireFileAccess("import");
    throwError("file-error", "import: library " + key + " not found (looked for " + rel + ".sld)");
  }
  tRoots.push_back(root);
  struct PopRoot { ~PopRoot() { tRoots.pop_back(); } } popRoot;
  in.loadFile(found);
  if (!loaded(st, name)) st->libraries = cons(cons(name, Value::t()), st->libraries);   // a plain file without define-library
}

// Every binding of the system namespace: what prefix gives a standard library's names.
ImportBindings systemBindings(Interp::GlobalMap* system) {
  ImportBindings out;
  for (auto& kv : *system)
    if (!kv.second->value.isUnbound()) out.push_back({Value(const_cast<Object*>(kv.first)), kv.second});
  return out;
}

ImportSet resolveImportSet(Interp& in, Value set, Interp::GlobalMap* system) {
  if (stackNearlyFull()) throwError("recursion-error", "import set nested too deeply");
  if (!isPair(set) || !isList(set)) importError("bad import set", set);
  Value name = libraryName(set);
  if (!isLibraryName(name)) importError("bad library name", name);
  if (set == name) {
    loadLibrary(in, name);
    Value entry = libraryEntry(in.st, name);
    ImportSet r;
    if (entry.isFalse() || cdr(entry) == Value::t()) {
      r.all = true;
      return r;
    }
    for (Value p = cdr(entry); isPair(p); p = cdr(p)) r.named.push_back({car(car(p)), cdr(car(p)).as<GlobalCell>()});
    return r;
  }
  std::string_view op = symbolName(car(set));
  ImportSet inner = resolveImportSet(in, cadr(set), system);
  // only, prefix and rename on a standard library work on its bindings, which are the system's
  auto lookup = [&](Value id) -> const ImportBinding* {
    if (const ImportBinding* b = findBinding(inner.named, id)) return b;
    if (inner.all) {
      auto it = system->find(id.obj());
      if (it != system->end() && !it->second->value.isUnbound()) {
        inner.named.push_back({id, it->second});
        return &inner.named.back();
      }
    }
    return nullptr;
  };
  ImportSet r;
  if (op == "only") {
    for (Value p = cddr(set); isPair(p); p = cdr(p)) {
      if (!isSymbol(car(p))) importError("only expects identifiers", set);
      const ImportBinding* b = lookup(car(p));
      if (!b) importError(toWriteString(name) + " does not export " + toWriteString(car(p)), set);
      r.named.push_back(*b);
    }
    return r;
  }
  if (op == "except") {
    r = inner;
    for (Value p = cddr(set); isPair(p); p = cdr(p)) {
      if (!isSymbol(car(p))) importError("except expects identifiers", set);
      bool present = false;
      for (size_t i = 0; i < r.named.size(); i++)
        if (r.named[i].first == car(p)) {
          r.named.erase(r.named.begin() + long(i));
          present = true;
          break;
        }
      if (!present && !inner.all) importError(toWriteString(name) + " does not export " + toWriteString(car(p)), set);
    }
    return r;
  }
  if (op == "prefix") {
    if (!isPair(cddr(set)) || !isSymbol(caddr(set))) importError("prefix expects (prefix import-set identifier)", set);
    std::string prefix(symbolName(caddr(set)));
    ImportBindings from = inner.named;
    if (inner.all) {
      ImportBindings sys = systemBindings(system);
      from.insert(from.end(), sys.begin(), sys.end());
    }
    for (const ImportBinding& b : from) r.named.push_back({intern(prefix + std::string(symbolName(b.first))), b.second});
    return r;
  }
  if (op == "rename") {
    r = inner;
    for (Value p = cddr(set); isPair(p); p = cdr(p)) {
      Value pairing = car(p);
      if (!isPair(pairing) || !isSymbol(car(pairing)) || !isPair(cdr(pairing)) || !isSymbol(cadr(pairing)))
        importError("rename expects (old new) pairs", set);
      const ImportBinding* b = lookup(car(pairing));
      if (!b) importError(toWriteString(name) + " does not export " + toWriteString(car(pairing)), set);
      GlobalCell* cell = b->second;
      bool replaced = false;
      for (ImportBinding& x : r.named)
        if (x.first == car(pairing)) {
          x.first = cadr(pairing);
          replaced = true;
        }
      if (!replaced) r.named.push_back({cadr(pairing), cell});
    }
    return r;
  }
  importError("bad import set", set);
}

}  // namespace

GlobalCell* Interp::libraryExportCell(Value name, Value id) {
  if (!isLibraryName(name)) return nullptr;
  loadLibrary(*this, name);
  Value entry = libraryEntry(st, name);
  if (entry.isFalse() || cdr(entry) == Value::t()) return nullptr;
  for (Value p = cdr(entry); isPair(p); p = cdr(p))
    if (car(car(p)) == id) return cdr(car(p)).as<GlobalCell>();
  return nullptr;
}

Value BuiltInLibrary::nameValue() const {
  Reader reader(name, Value::f(), nullptr);
  Value v;
  return reader.read(v) ? v : Value::nil();
}

const std::vector<BuiltInLibrary>& builtInLibraries() {
  static std::vector<BuiltInLibrary> libraries;
  static std::once_flag once;
  std::call_once(once, [] {
    Value sym = intern("define-library"), exportSym = intern("export"), renameSym = intern("rename");
    for (size_t i = 0; i < kLibrarySourceCount; i++) {
      std::string_view file = kLibrarySources[i].name;
      if (file.size() < 4 || file.substr(file.size() - 4) != ".sld") continue;
      Reader reader(kLibrarySources[i].text, makeString(std::string(kEmbeddedLibraryPrefix) + std::string(file)), nullptr);
      Value form;
      while (reader.read(form)) {
        if (!isPair(form) || car(form) != sym || !isPair(cdr(form)) || !isLibraryName(cadr(form))) continue;
        BuiltInLibrary lib;
        lib.name = toWriteString(cadr(form));
        for (Value d = cddr(form); isPair(d); d = cdr(d)) {
          if (!isPair(car(d)) || car(car(d)) != exportSym) continue;
          for (Value e = cdr(car(d)); isPair(e); e = cdr(e)) {
            Value spec = car(e);
            if (isSymbol(spec)) lib.exports.emplace_back(symbolName(spec));
            else if (isPair(spec) && car(spec) == renameSym && isPair(cdr(spec)) && isPair(cddr(spec)) && isSymbol(caddr(spec)))
              lib.exports.emplace_back(symbolName(caddr(spec)));
          }
        }
        libraries.push_back(std::move(lib));
      }
    }
  });
  return libraries;
}

void Interp::importLibrary(Value importSet) {
  if (!isPair(importSet) || !isList(importSet)) importError("bad import set", importSet);
  GlobalMap* into = globals_;
  ImportSet set = resolveImportSet(*this, importSet, systemGlobals_ ? systemGlobals_ : userGlobals_);
  // binding to the exporter's own cell: importing again binds the same cells (idempotent)
  for (const ImportBinding& b : set.named) (*into)[b.first.obj()] = b.second;
}

Interp::Namespace Interp::makeNamespace(Value importSets) {
  GlobalMap* ns = newNamespace();
  NamespaceSwitch to(*this, ns);
  for (Value p = importSets; isPair(p); p = cdr(p)) importLibrary(car(p));
  return ns;
}

Value Interp::evalFormIn(Namespace ns, Value form) {
  NamespaceSwitch to(*this, ns ? static_cast<GlobalMap*>(ns) : userGlobals_);
  return evalForm(form);
}

namespace {
// The forms of the file PATH (or of a library built into Purple), appended to FORMS.
void readSourceForms(const std::string& path, const char* who, PositionTable* positions,
                     std::vector<Value, traceable_allocator<Value>>& forms) {
  const char* embedded = embeddedLibrarySource(path);
  if (!embedded) requireFileAccess(who);
  std::string text = embedded ? std::string(embedded) : readWholeFile(path, who);
  Value file = makeString(path);
  Reader r(text, file, positions);
  Value d;
  while (r.read(d)) forms.push_back(d);
}

void libraryDeclarations(Interp& in, Value decls, PositionTable* positions, std::vector<Value, traceable_allocator<Value>>& exports,
                         const SourcePos& pos);
bool featureMatch(Interp& in, Value req, const SourcePos& pos);

void libraryDeclaration(Interp& in, Value decl, PositionTable* positions, std::vector<Value, traceable_allocator<Value>>& exports,
                        const SourcePos& pos) {
  if (!isPair(decl) || !isSymbol(car(decl))) throwError("syntax-error", "define-library: bad declaration", listFromArray(&decl, 1));
  std::string_view kind = symbolName(car(decl));
  if (kind == "begin") {
    for (Value f = cdr(decl); isPair(f); f = cdr(f)) in.evalForm(car(f), positions);
  } else if (kind == "import") {
    for (Value s = cdr(decl); isPair(s); s = cdr(s)) in.importLibrary(car(s));
  } else if (kind == "include" || kind == "include-ci") {
    for (Value f = cdr(decl); isPair(f); f = cdr(f)) {
      if (!isString(car(f))) throwError("syntax-error", "define-library: include expects file names", listFromArray(&decl, 1));
      in.loadFile(in.resolveRelative(std::string(stringView(car(f))), SourcePos{}));
    }
  } else if (kind == "include-library-declarations") {
    for (Value f = cdr(decl); isPair(f); f = cdr(f)) {
      if (!isString(car(f))) throwError("syntax-error", "define-library: include-library-declarations expects file names", listFromArray(&decl, 1));
      std::string path = in.resolveRelative(std::string(stringView(car(f))), SourcePos{});
      std::vector<Value, traceable_allocator<Value>> decls;
      readSourceForms(path, "include-library-declarations", positions, decls);
      libraryDeclarations(in, listFromArray(decls.data(), decls.size()), positions, exports, pos);
    }
  } else if (kind == "export") {
    for (Value e = cdr(decl); isPair(e); e = cdr(e)) exports.push_back(car(e));
  } else if (kind == "cond-expand") {
    // in a library, cond-expand chooses declarations, not expressions
    for (Value c = cdr(decl); isPair(c); c = cdr(c))
      if (isPair(car(c)) && featureMatch(in, car(car(c)), pos)) {
        libraryDeclarations(in, cdr(car(c)), positions, exports, pos);
        break;
      }
  } else {
    throwError("syntax-error", "define-library: unknown declaration (expected export, import, begin, include or cond-expand)",
               listFromArray(&decl, 1));
  }
}

void libraryDeclarations(Interp& in, Value decls, PositionTable* positions, std::vector<Value, traceable_allocator<Value>>& exports,
                         const SourcePos& pos) {
  for (Value p = decls; isPair(p); p = cdr(p)) libraryDeclaration(in, stripSyntax(car(p)), positions, exports, pos);
}
}  // namespace

void Interp::defineLibrary(Value form, PositionTable* positions) {
  if (!isList(form)) throwError("syntax-error", "define-library: bad syntax");
  Value name = isPair(cdr(form)) ? cadr(form) : Value::f();
  if (!isLibraryName(name)) throwError("syntax-error", "define-library: bad library name", listFromArray(&name, 1));
  std::vector<Value, traceable_allocator<Value>> exports;
  GlobalMap* ns = newNamespace();
  {
    NamespaceSwitch to(*this, ns);
    libraryDeclarations(*this, cddr(form), positions, exports, SourcePos{});
  }
  // each export is the library's cell under its external name
  Value table = Value::nil();
  for (Value e : exports) {
    Value internal = e, external = e;
    if (isPair(e) && car(e) == intern("rename") && isPair(cdr(e)) && isPair(cddr(e)) && isSymbol(cadr(e)) && isSymbol(caddr(e))) {
      internal = cadr(e);
      external = caddr(e);
    } else if (!isSymbol(e)) {
      throwError("syntax-error", "define-library " + toWriteString(name) + ": bad export spec", listFromArray(&e, 1));
    }
    GlobalCell* cell = globalCellIn(ns, internal);
    if (cell->value.isUnbound())
      throwError("syntax-error", "define-library " + toWriteString(name) + ": exports " + toWriteString(internal) + ", which it does not define");
    table = cons(cons(external, Value(cell)), table);
  }
  Value entry = libraryEntry(st, name);
  if (!entry.isFalse()) entry.as<Pair>()->cdr = reverseList(table);   // defined again (a REPL session): the new one
  else st->libraries = cons(cons(name, reverseList(table)), st->libraries);
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
    readSourceForms(in.resolveRelative(std::string(stringView(car(p))), pos), "include", positions, forms);
  }
  return cons(intern("begin"), listFromArray(forms.data(), forms.size()));
}

}  // namespace purple
