// Analyzer internals shared with the syntax-rules expander and the library code.
#pragma once
#include "interp/language/node.hpp"
#include <gc/gc_allocator.h>
#include <functional>
#include <string>
#include <vector>

namespace purple {

struct LambdaNode;
struct LambdaInfo {
  LambdaInfo* parent = nullptr;
  LambdaNode* node = nullptr;    // the lambda being analyzed (nullptr for a top-level frame)
  uint32_t frameSize = 0;
  bool captured = false;         // some closure or promise may hold this frame
};

struct Binding {
  Value name;                    // symbol or alias
  uint32_t slot;
  bool checked;                  // letrec-style: may be read before it is initialised
  Value macro;                   // Macro object for local syntax bindings, else #f
};

struct Scope {
  Scope* parent = nullptr;
  LambdaInfo* lambda = nullptr;
  std::vector<Binding, traceable_allocator<Binding>> vars;
};

// Strips aliases made by macro expansion: the symbol the user (or the macro writer) wrote.
Value stripSyntax(Value x);
Value baseSymbol(Value id);      // alias chain -> symbol
inline bool isIdentifier(Value v) { return v.is(Kind::Symbol) || v.is(Kind::Alias); }

// syntax_rules.cpp: expands one use of a syntax-rules macro. `spec` is the
// (syntax-rules ...) form; the result contains aliases for the template's own identifiers.
Value expandSyntaxRules(Value spec, Value form, Scope* defScope, void* defSpace, Value macroName);
Value makeMacro(Value transformer, Scope* scope, void* space, Value name, bool procedural);

// throwSyntaxError (core/error.hpp) names the innermost form with a known position.

// library.cpp: cond-expand and include as the analyzer expands them, into a `begin` form.
Value expandCondExpand(Interp& in, Value x, const SourcePos& pos);
Value expandInclude(Interp& in, Value x, const SourcePos& pos, PositionTable* positions);

// quasiquote.cpp: the expansion of `(quasiquote TEMPL)`. ISKEYWORD says whether an identifier
// in the template means the named keyword (unquote, unquote-splicing, quasiquote) where it stands.
using KeywordTest = std::function<bool(Value id, const char* name)>;
Value expandQuasiquote(Interp& in, Value templ, const KeywordTest& isKeyword);

// While a define-macro transformer runs: where the form it expands was written (line 0 when
// unknown or outside an expansion). Shape contracts (prelude/) put it in their errors. The
// analyzer sets it for the time one transformer runs (nested expansions restore the outer one),
// on the thread that analyzes (macro_call_position.cpp).
const SourcePos& currentMacroCallPosition();
class MacroCallPositionScope {
 public:
  explicit MacroCallPositionScope(const SourcePos& here);
  ~MacroCallPositionScope();
  MacroCallPositionScope(const MacroCallPositionScope&) = delete;
  MacroCallPositionScope& operator=(const MacroCallPositionScope&) = delete;
 private:
  SourcePos saved_;
};

// The names the analyzer treats as special forms (for completion and help).
std::vector<std::string> specialFormNames();

}  // namespace purple
