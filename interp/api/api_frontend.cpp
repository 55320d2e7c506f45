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

#include <algorithm>
#include <cctype>

namespace purple {
namespace embed {

using PV = ::purple::Value;
using detail::interpOf;
using detail::runGuarded;

namespace {

bool isDelimiter(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || c == '(' || c == ')' || c == '[' || c == ']' || c == '"' ||
         c == ';' || c == '\'' || c == '`' || c == ',' || c == '{' || c == '}';
}

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
      while (i < n && !isDelimiter(code[i])) i++;
    } else {
      if (c == '(' || c == '[') depth++;
      else if ((c == ')' || c == ']') && depth > 0) depth--;
      i++;
    }
  }
  return depth;
}

// A Purple list of representations, (MIME-TYPE DATA [:width W :height H]) ..., as a MimeBundle;
// malformed entries are skipped (representations has checked them).
MimeBundle bundleOf(PV reps) {
  MimeBundle out;
  for (PV p = reps; isPair(p); p = cdr(p)) {
    PV e = car(p);
    if (!isPair(e) || !isString(car(e)) || !isPair(cdr(e))) continue;
    Representation r;
    r.mimeType = std::string(stringView(car(e)));
    PV d = car(cdr(e));
    if (isString(d)) {
      r.data = std::string(stringView(d));
    } else if (d.is(Kind::Bytevector)) {
      auto* bv = d.as<Bytevector>();
      r.data.assign(reinterpret_cast<const char*>(bv->bytes), bv->extra);
      r.binary = true;
    } else {
      continue;
    }
    for (PV q = cdr(cdr(e)); isPair(q) && isPair(cdr(q)); q = cdr(cdr(q))) {
      PV key = car(q), value = car(cdr(q));
      if (!isKeyword(key) || !value.isFixnum()) continue;
      if (symbolName(key) == "width") r.width = int(value.fixnum());
      else if (symbolName(key) == "height") r.height = int(value.fixnum());
    }
    out.push_back(std::move(r));
  }
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
  size_t begin = cursor, end = cursor;
  while (begin > 0 && !isDelimiter(code[begin - 1])) begin--;
  while (end < code.size() && !isDelimiter(code[end])) end++;
  return std::string(code.substr(begin, end - begin));
}

Completions Interpreter::complete(std::string_view code, std::size_t cursor) {
  Completions out;
  cursor = std::min(cursor, code.size());
  size_t begin = cursor;
  while (begin > 0 && !isDelimiter(code[begin - 1])) begin--;
  out.begin = begin;
  out.end = cursor;
  std::string prefix(code.substr(begin, cursor - begin));
  if (prefix.empty()) return out;
  auto wanted = [&](std::string_view name) {
    return name.size() >= prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
           (name.empty() || name[0] != '%' || prefix[0] == '%');
  };
  runGuarded(impl_, [&]() -> PV {
    interpOf(impl_).forEachGlobal([&](purple::Value key, GlobalCell* c) {
      if (c->value.isUnbound()) return;
      std::string_view n = symbolName(key);
      if (wanted(n)) out.matches.emplace_back(n);
    });
    return PV::unspecified();
  });
  for (const std::string& s : specialFormNames())
    if (wanted(s)) out.matches.push_back(s);
  std::sort(out.matches.begin(), out.matches.end());
  out.matches.erase(std::unique(out.matches.begin(), out.matches.end()), out.matches.end());
  return out;
}

std::optional<std::string> Interpreter::documentation(std::string_view name) {
  if (name.empty()) return std::nullopt;
  std::optional<std::string> text;
  runGuarded(impl_, [&]() -> PV {
    Interp& in = interpOf(impl_);
    PV sym = intern(name);
    GlobalCell* cell = in.findGlobal(sym);
    bool bound = cell && !cell->value.isUnbound();
    const auto specials = specialFormNames();
    bool special = std::find(specials.begin(), specials.end(), name) != specials.end();
    if (!bound && !special) return PV::unspecified();
    PV doc = in.apply(in.lookupGlobal("documentation"), {sym});
    std::string s = isString(doc) ? std::string(stringView(doc)) : std::string();
    if (!bound && (s.empty() || s == std::string(name) + ": not defined")) s = std::string(name) + "  [special form]";
    text = s;
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
