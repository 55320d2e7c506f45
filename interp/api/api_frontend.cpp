// The embedding API's services for front ends (the `purple` REPL, the Jupyter kernel): form-by-form
// evaluation with positions, the input-completeness check, completion, documentation lookup,
// interrupt cancellation and per-request output capture. Both front ends use only these and the
// rest of include/purple/purple.hpp, as Lua's lua.c uses only lua.h.
#define PURPLE_IMPLEMENTATION
#include "purple/purple.hpp"

#include "interp/language/analyzer.hpp"
#include "interp/api/api_internal.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/core/port.hpp"
#include "interp/language/reader.hpp"
#include "interp/language/repl_services.hpp"

#include <algorithm>
#include <cctype>

namespace purple {
namespace embed {

using PV = ::purple::Value;
using detail::interpOf;
using detail::runGuarded;

namespace {

// Lists left open at the end of `code`, skipping strings, characters, comments and |symbols|.
int openListsAtEnd(std::string_view code) {
  int depth = 0, blockComment = 0;
  size_t i = 0, n = code.size();
  while (i < n) {
    char c = code[i];
    if (blockComment > 0) {
      if (c == '|' && i + 1 < n && code[i + 1] == '#') blockComment--, i += 2;
      else if (c == '#' && i + 1 < n && code[i + 1] == '|') blockComment++, i += 2;
      else i++;
      continue;
    }
    if (c == ';') {
      while (i < n && code[i] != '\n') i++;
    } else if (c == '"' || c == '|') {
      char close = c;
      for (i++; i < n && code[i] != close; i++)
        if (code[i] == '\\') i++;
      i++;
    } else if (c == '#' && i + 1 < n && code[i + 1] == '|') {
      blockComment++;
      i += 2;
    } else if (c == '#' && i + 1 < n && code[i + 1] == '\\') {
      i += 3;   // #\( is a character, not a list
      while (i < n && !isIdentifierDelimiter(code[i])) i++;
    } else {
      if (c == '(' || c == '[') depth++;
      else if ((c == ')' || c == ']') && depth > 0) depth--;
      i++;
    }
  }
  return depth;
}

// A Purple list of representations as the API's MimeBundle.
MimeBundle bundleOf(PV reps) {
  MimeBundle out;
  for (attach::WireRepresentation& r : bundleFromList(reps))
    out.push_back(Representation{std::move(r.mimeType), std::move(r.data), r.binary, r.width, r.height});
  return out;
}

void setPortParameter(PV param, PV port) {
  if (param.is(Kind::Parameter)) param.as<Parameter>()->value = port;
}

}  // namespace

Value Interpreter::evalForms(std::string_view code, std::string_view sourceName, const FormCallback& onResults,
                             int firstLine) {
  return runGuarded(impl_, [&]() -> PV {
    Interp& in = interpOf(impl_);
    // The whole input is read once before anything runs, as IPython parses a cell: a syntax
    // error anywhere in it is reported and no form of it has run.
    {
      Reader check(code, makeString(sourceName), nullptr, firstLine);
      PV ignored;
      while (check.read(ignored)) {
      }
    }
    PositionTable positions;
    Reader reader(code, makeString(sourceName), &positions, firstLine);
    PV last = PV::unspecified();
    while (true) {
      positions.clear();
      PV form;
      if (!reader.read(form)) break;
      FormSource where;
      where.begin = reader.datumStart();
      where.end = reader.offset();
      where.line = reader.datumLine();
      where.column = reader.datumColumn();
      in.resetBudgets();
      last = in.evalForm(form, &positions);
      if (!onResults) continue;
      std::vector<Value> results;
      if (last.is(Kind::MultipleValues)) {
        auto* m = last.as<MultipleValues>();
        for (uint32_t i = 0; i < m->extra; i++) results.push_back(Value::fromWord(m->items[i].bits));
      } else if (!last.isUnspecified()) {
        results.push_back(Value::fromWord(last.bits));
      }
      onResults(results, where);
    }
    return last;
  });
}

InputCheck Interpreter::checkInput(std::string_view code) {
  InputCheck check;
  detail::ThreadScope thread;
  Reader reader(code, PV::f(), nullptr);
  try {
    PV v;
    while (reader.read(v)) {
    }
  } catch (const PurpleException&) {
    check.status = reader.hitEndOfInput() ? InputStatus::incomplete : InputStatus::invalid;
  }
  check.openLists = openListsAtEnd(code);
  return check;
}

std::string Interpreter::identifierAt(std::string_view code, std::size_t cursor) {
  cursor = std::min(cursor, code.size());
  size_t begin = identifierStart(code, cursor), end = cursor;
  while (end < code.size() && !isIdentifierDelimiter(code[end])) end++;
  return std::string(code.substr(begin, end - begin));
}

Completions Interpreter::complete(std::string_view code, std::size_t cursor) {
  Completions out;
  cursor = std::min(cursor, code.size());
  size_t begin = identifierStart(code, cursor);
  out.begin = begin;
  out.end = cursor;
  std::string prefix(code.substr(begin, cursor - begin));
  runGuarded(impl_, [&]() -> PV {
    out.matches = completionCandidates(interpOf(impl_), prefix);
    return PV::unspecified();
  });
  return out;
}

std::optional<std::string> Interpreter::documentation(std::string_view name) {
  std::optional<std::string> text;
  runGuarded(impl_, [&]() -> PV {
    text = documentationText(interpOf(impl_), name);
    return PV::unspecified();
  });
  return text;
}

MimeBundle Interpreter::represent(const Value& v) {
  MimeBundle out;
  runGuarded(impl_, [&]() -> PV {
    Interp& in = interpOf(impl_);
    out = bundleOf(in.apply(in.lookupGlobal("representations"), {PV(v.word(), 0)}));
    return PV::unspecified();
  });
  return out;
}

void Interpreter::setDisplayHandler(DisplayHandler handler, bool live) {
  if (!handler) {
    setValue("%display-hook", Value::boolean(false));
    setValue("%display-live?", Value::boolean(false));
    return;
  }
  define("%display-hook", "(representations display-id update)",
         [handler = std::move(handler)](Value reps, std::string id, bool update) {
           handler(bundleOf(PV(reps.word(), 0)), id, update);
         },
         "Internal: sends representations to the front end's display (Interpreter::setDisplayHandler).");
  setValue("%display-live?", Value::boolean(live));
}

void Interpreter::cancelInterrupt() { interpOf(impl_).interruptRequested_.store(false); }

Interpreter::OutputCapture::OutputCapture(Interpreter& interp, OutputCallback out, OutputCallback err)
    : interp_(interp) {
  detail::Impl* impl = interp.impl();
  runGuarded(impl, [&]() -> PV {
    Interp& in = interpOf(impl);
    savedOut_ = Value::fromWord(in.currentOutputPort().bits);
    savedErr_ = Value::fromWord(in.currentErrorPort().bits);
    if (out) setPortParameter(in.st->outputPort, makeCallbackOutputPort(std::move(out)));
    if (err) setPortParameter(in.st->errorPort, makeCallbackOutputPort(std::move(err)));
    return PV::unspecified();
  });
}

Interpreter::OutputCapture::~OutputCapture() {
  try {
    detail::Impl* impl = interp_.impl();
    runGuarded(impl, [&]() -> PV {
      Interp& in = interpOf(impl);
      portFlush(in.currentOutputPort());
      portFlush(in.currentErrorPort());
      setPortParameter(in.st->outputPort, PV(savedOut_.word(), 0));
      setPortParameter(in.st->errorPort, PV(savedErr_.word(), 0));
      return PV::unspecified();
    });
  } catch (...) {
  }
}

}  // namespace embed
}  // namespace purple
