// Source as data with positions, for `purple check` and the language server (tools/): the
// reader's side table of positions, the embedded prelude's and libraries' text, and where the procedural macro
// being expanded was called (shape contracts name it in their errors).
#include "builtins/io/source.hpp"
#include "builtins/core/hashtable.hpp"
#include "interp/core/error.hpp"
#include "interp/language/analyzer.hpp"
#include "interp/language/reader.hpp"
#include <array>
#include <string>

namespace purple {

struct PreludeSource { const char* name; const char* text; };
extern const PreludeSource kPreludeSources[];
extern const std::size_t kPreludeSourceCount;
extern const PreludeSource kLibrarySources[];
extern const std::size_t kLibrarySourceCount;

namespace {

Value linePair(const SourcePos& p) { return cons(Value::fixnum(p.line), Value::fixnum(p.col)); }

Value sourceList(const PreludeSource* sources, std::size_t n) {
  Value l = Value::nil();
  for (size_t i = n; i-- > 0;) l = cons(cons(makeString(sources[i].name), makeString(sources[i].text)), l);
  return l;
}

}  // namespace

void registerSourceTools(Registry& r) {
  r.def("%read-source", "(text source-name)", [](Interp& in, std::string text, std::string name) {
    PositionTable lists, elements;
    Value source = makeString(name);
    Reader reader(text, source, &lists, 1);
    reader.recordElementPositions(&elements);
    Value forms = Value::nil();
    Value problem = Value::f();
    try {
      Value datum;
      while (reader.read(datum))
        forms = cons(listFromArray(std::array<Value, 3>{datum, Value::fixnum(reader.datumLine()),
                                                        Value::fixnum(reader.datumColumn())}.data(), 3),
                     forms);
    } catch (const PurpleInterrupt&) {
      throw;
    } catch (const PurpleException& e) {
      Value items[3] = {makeString(errorMessage(e.payload())), Value::fixnum(reader.failLine()),
                        Value::fixnum(reader.failColumn())};
      problem = listFromArray(items, 3);
    }
    // Keyed by identity: every key is a pair reachable from FORMS, so the table keeps nothing alive.
    Value table = makeHashTable(HashEquiv::Eq, elements.size() + lists.size());
    for (auto& [cell, pos] : elements) hashTablePut(in, table, Value(cell), linePair(pos));
    Value items[3] = {reverseList(forms), table, problem};
    return listFromArray(items, 3);
  }, "Internal: reads every datum of TEXT without evaluating it, as (forms positions error). FORMS lists\n"
     "(datum line column) for each top-level datum; POSITIONS is an eq hash table from every list cell\n"
     "read to (line . column) of its car; ERROR is #f or (message line column) of the first read error\n"
     "(FORMS then holds the data before it). Used by purple check and the language server.");
  r.def("%prelude-sources", "()", []() { return sourceList(kPreludeSources, kPreludeSourceCount); },
        "Internal: the prelude compiled into this Purple, as (file-name . text) pairs in load order.");
  r.def("%library-sources", "()", []() { return sourceList(kLibrarySources, kLibrarySourceCount); },
        "Internal: the files of the libraries built into Purple (lib/), as (path . text) pairs, PATH\n"
        "relative to lib/ (\"purple/vision.sld\"). Used by purple check and the language server.");
  r.def("%macro-call-position", "()", []() -> Value {
    const SourcePos& p = currentMacroCallPosition();
    if (p.line <= 0) return Value::f();
    return makeString(sourcePosText(p));
  }, "Internal: \"file:line:column\" of the form a define-macro transformer is expanding, or #f.");
}

}  // namespace purple
