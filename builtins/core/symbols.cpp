// Symbols, keywords and booleans.
#include "builtins/builtins.hpp"
#include "interp/core/symbol_table.hpp"
#include "builtins/core/checks.hpp"
#include "interp/language/inline_ops.hpp"

namespace purple {

namespace {

Value primNot(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  return Value::boolean(argv[0].isFalse());
}

Value primBooleanEq(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  for (int i = 0; i < argc; i++)
    if (!argv[i].isBool()) data::typeError("boolean=?", i, "a boolean", argv[i]);
  for (int i = 0; i + 1 < argc; i++)
    if (argv[i] != argv[i + 1]) return Value::f();
  return Value::t();
}

Value primSymbolEq(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  for (int i = 0; i < argc; i++)
    if (!isSymbol(argv[i])) data::typeError("symbol=?", i, "a symbol", argv[i]);
  for (int i = 0; i + 1 < argc; i++)
    if (argv[i] != argv[i + 1]) return Value::f();   // interned: same name, same object
  return Value::t();
}

Value symbolArg(std::string_view who, int index, Value v) {
  if (!isSymbol(v)) data::typeError(who, index, "a symbol", v);
  return v;
}
Value keywordArg(std::string_view who, int index, Value v) {
  if (!isKeyword(v)) data::typeError(who, index, "a keyword", v);
  return v;
}

}  // namespace

void registerSymbols(Registry& r) {
  r.defRaw("not", "(obj)", primNot, "#t when OBJ is #f, else #f.", kPrimBorrowsArgs);
  inlineInEvaluator(r.interp(), "not", InlineBuiltin::Not);
  r.def("boolean?", "(obj)", [](Value v) { return v.isBool(); }, "True when OBJ is #t or #f.");
  r.defRaw("boolean=?", "(bool1 bool2 . bools)", primBooleanEq,
           "True when all the arguments, which must be booleans, are the same boolean.",
           kPrimBorrowsArgs);

  r.def("symbol?", "(obj)", [](Value v) { return isSymbol(v); },
        "True when OBJ is a symbol (keywords such as :name are not symbols).");
  r.defRaw("symbol=?", "(sym1 sym2 . syms)", primSymbolEq,
           "True when all the arguments, which must be symbols, are the same symbol.",
           kPrimBorrowsArgs);
  r.def("symbol->string", "(symbol)",
        [](Value s) { return makeString(symbolName(symbolArg("symbol->string", 0, s))); },
        "The name of SYMBOL as a new string.", kPrimFreshString);
  r.def("string->symbol", "(string)",
        [](Value s) { return internCollectable(data::stringArg("string->symbol", 0, s)->view()); },
        "The symbol whose name is STRING, interned: equal names give eq? symbols.", kPrimBorrowsArgs);
  r.def("symbol<?", "(sym1 sym2)",
        [](Value a, Value b) {
          return symbolName(symbolArg("symbol<?", 0, a)) < symbolName(symbolArg("symbol<?", 1, b));
        },
        "True when the name of SYM1 sorts before the name of SYM2.");
  r.def("gensym", "(:optional prefix)",
        [](Value prefix) {
          if (prefix.isMissing()) return gensym("g");
          if (isString(prefix)) return gensym(stringView(prefix));
          if (prefix.is(Kind::Symbol)) return gensym(symbolName(prefix));
          data::typeError("gensym", 0, "a string or symbol prefix", prefix);
        },
        "A fresh symbol, distinct from every other symbol, whose name starts with PREFIX "
        "(default \"g\"). For unhygienic macros (define-macro).");
  r.alias("generate-symbol", "gensym");

  r.def("keyword?", "(obj)", [](Value v) { return isKeyword(v); },
        "True when OBJ is a keyword such as :lr (keywords evaluate to themselves).");
  r.def("keyword->string", "(keyword)",
        [](Value k) { return makeString(symbolName(keywordArg("keyword->string", 0, k))); },
        "The name of KEYWORD without its colon: (keyword->string :lr) => \"lr\".");
  r.def("string->keyword", "(string)",
        [](Value s) { return internCollectable(data::stringArg("string->keyword", 0, s)->view(), true); },
        "The keyword named STRING (without a colon): (string->keyword \"lr\") => :lr.");
  r.def("keyword->symbol", "(keyword)",
        [](Value k) { return internCollectable(symbolName(keywordArg("keyword->symbol", 0, k))); },
        "The symbol with the same name as KEYWORD: (keyword->symbol :lr) => lr.");
  r.def("symbol->keyword", "(symbol)",
        [](Value s) { return internCollectable(symbolName(symbolArg("symbol->keyword", 0, s)), true); },
        "The keyword with the same name as SYMBOL: (symbol->keyword 'lr) => :lr.");
}

}  // namespace purple
