#include "builtins/core/special_forms.hpp"

namespace purple {

namespace {

const SpecialFormDoc kDocs[] = {
    {"quote", "(quote datum) / 'datum",
     "DATUM itself, not evaluated. Quoted data may share structure and be cyclic: '#0=(1 . #0#)."},
    {"quasiquote", "(quasiquote template) / `template",
     "Like quote, except that ,expr (unquote) inserts the value of EXPR and ,@expr (unquote-splicing) "
     "splices the elements of the list EXPR returns. Quasiquotes nest: each level of ` needs one more ,."},
    {"unquote", "(unquote expr) / ,expr", "Inside a quasiquote template: the value of EXPR."},
    {"unquote-splicing", "(unquote-splicing expr) / ,@expr",
     "Inside a quasiquote template: the elements of the list EXPR returns, spliced in."},
    {"lambda", "(lambda params body ...)",
     "A procedure. PARAMS is (a b), (a b . rest), a lone symbol taking all arguments as a list, or a list "
     "with markers: (lambda (x :optional (y 1) :key (scale 2.0) :rest more) ...); an optional or key "
     "parameter without a default gets #f. A string first in a body of several forms is the docstring "
     "help shows. Internal defines at the start of BODY are local."},
    {"named-lambda", "(named-lambda (name . params) body ...)",
     "A lambda that carries NAME, for backtraces and printing; NAME is not bound inside."},
    {"define", "(define name expr) / (define (name . params) body ...)",
     "Binds NAME to the value of EXPR, or to a procedure. At top level it defines a global; at the start "
     "of a body, a local. (define ((f a) b) ...) defines a curried procedure."},
    {"set!", "(set! name expr)", "Assigns the value of EXPR to the existing variable NAME."},
    {"if", "(if test consequent [alternative])",
     "CONSEQUENT when TEST is true (anything but #f), else ALTERNATIVE (unspecified when absent)."},
    {"begin", "(begin form ...)",
     "Evaluates the FORMs in order and returns the last value. At top level its definitions are global."},
    {"let", "(let ((var init) ...) body ...) / (let name ((var init) ...) body ...)",
     "Binds each VAR to its INIT (evaluated before any is bound) for BODY. The named form binds NAME to a "
     "procedure of the VARs whose body is BODY and calls it: the usual loop, in constant space."},
    {"let*", "(let* ((var init) ...) body ...)", "Like let, but each INIT sees the variables bound before it."},
    {"letrec", "(letrec ((var init) ...) body ...)",
     "Like let, but every INIT sees every VAR (for mutually recursive procedures)."},
    {"letrec*", "(letrec* ((var init) ...) body ...)", "Like letrec, with the INITs evaluated left to right."},
    {"and", "(and test ...)", "The first false value among the TESTs, or the last value (#t when there are none)."},
    {"or", "(or test ...)", "The first true value among the TESTs, or #f."},
    {"when", "(when test body ...)", "BODY when TEST is true; unspecified otherwise."},
    {"unless", "(unless test body ...)", "BODY when TEST is false; unspecified otherwise."},
    {"cond", "(cond (test body ...) ... (else body ...))",
     "The BODY of the first clause whose TEST is true. (test => proc) calls PROC with the test's value; "
     "(test) returns it; an else clause comes last."},
    {"case", "(case key ((datum ...) body ...) ... (else body ...))",
     "The BODY of the clause listing a DATUM eqv? to the value of KEY; ((datum ...) => proc) and "
     "(else => proc) call PROC with the key."},
    {"do", "(do ((var init step) ...) (test result ...) body ...)",
     "A loop: binds the VARs to their INITs, then until TEST is true runs BODY and rebinds each VAR to its "
     "STEP; returns the RESULTs' last value."},
    {"guard", "(guard (var clause ...) body ...)",
     "Evaluates BODY; if it raises, binds VAR to the raised object and runs the first cond-style CLAUSE "
     "whose test is true. With no matching clause the object is raised again. Interrupts and exhausted "
     "budgets are not caught."},
    {"define-syntax", "(define-syntax name (syntax-rules ...)) / (define-syntax name transformer)",
     "Defines the macro NAME. With syntax-rules it is hygienic; any other TRANSFORMER expression must give "
     "a procedure, which receives the arguments of each use unevaluated and returns the expansion, as "
     "with define-macro."},
    {"let-syntax", "(let-syntax ((name (syntax-rules ...)) ...) body ...)", "Macros local to BODY."},
    {"letrec-syntax", "(letrec-syntax ((name (syntax-rules ...)) ...) body ...)",
     "Like let-syntax, but the macros can use each other."},
    {"syntax-rules", "(syntax-rules (literal ...) (pattern template) ...) / (syntax-rules ellipsis (literal ...) ...)",
     "A hygienic macro transformer: the first PATTERN that matches a use gives its TEMPLATE, with pattern "
     "variables replaced. x ... matches zero or more; _ matches anything; LITERALs match themselves."},
    {"define-macro", "(define-macro (name . params) body ...) / (define-macro name procedure)",
     "A non-hygienic macro: BODY receives the arguments of each use unevaluated and returns the code to "
     "run in its place."},
    {"include", "(include \"file\" ...)", "The forms of each FILE, read and spliced in place (like begin)."},
    {"include-ci", "(include-ci \"file\" ...)", "Like include."},
    {"cond-expand", "(cond-expand (requirement body ...) ... (else body ...))",
     "The BODY of the first clause whose feature REQUIREMENT holds: a feature name from (features), "
     "(and ...), (or ...), (not ...), or (library name)."},
    {"import", "(import import-set ...)",
     "Makes the libraries' exported names available: (scheme base) and the other R7RS libraries are "
     "built in; others are loaded from name.sld on the library path; only, except, prefix and rename "
     "adjust the names."},
    {"define-library", "(define-library (name ...) declaration ...)",
     "An R7RS library with export, import, begin, include and cond-expand declarations."},
    {"else", "else", "The catch-all clause of cond, case and guard."},
    {"=>", "=>", "In cond and case clauses: pass the value to a procedure."},
};

}  // namespace

const SpecialFormDoc* findSpecialFormDoc(std::string_view name) {
  for (const auto& d : kDocs)
    if (name == d.name) return &d;
  return nullptr;
}

const SpecialFormDoc* specialFormDocs(size_t* count) {
  *count = sizeof kDocs / sizeof kDocs[0];
  return kDocs;
}

}  // namespace purple
