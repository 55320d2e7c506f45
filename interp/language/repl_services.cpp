#include "interp/language/repl_services.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/analyzer.hpp"
#include "interp/language/printer.hpp"

#include <algorithm>
#include <cctype>

namespace purple {

bool isIdentifierDelimiter(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || c == '(' || c == ')' || c == '[' || c == ']' || c == '"' ||
         c == ';' || c == '\'' || c == '`' || c == ',' || c == '{' || c == '}';
}

std::size_t identifierStart(std::string_view code, std::size_t cursor) {
  cursor = std::min(cursor, code.size());
  while (cursor > 0 && !isIdentifierDelimiter(code[cursor - 1])) cursor--;
  return cursor;
}

std::vector<std::string> completionCandidates(Interp& in, std::string_view prefix) {
  std::vector<std::string> out;
  if (prefix.empty()) return out;
  auto wanted = [&](std::string_view name) {
    return name.size() >= prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
           (name.empty() || name[0] != '%' || prefix[0] == '%');
  };
  in.forEachGlobal([&](Value key, GlobalCell* c) {
    if (c->value.isUnbound()) return;
    std::string_view n = symbolName(key);
    if (wanted(n)) out.emplace_back(n);
  });
  for (const std::string& s : specialFormNames())
    if (wanted(s)) out.push_back(s);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<std::string> documentationText(Interp& in, std::string_view name) {
  if (name.empty()) return std::nullopt;
  Value sym = intern(name);
  GlobalCell* cell = in.findGlobal(sym);
  bool bound = cell && !cell->value.isUnbound();
  const auto specials = specialFormNames();
  bool special = std::find(specials.begin(), specials.end(), name) != specials.end();
  if (!bound && !special) return std::nullopt;
  Value doc = in.apply(in.lookupGlobal("documentation"), {sym});
  std::string s = isString(doc) ? std::string(stringView(doc)) : std::string();
  if (!bound && (s.empty() || s == std::string(name) + ": not defined")) s = std::string(name) + "  [special form]";
  return s;
}

attach::WireBundle bundleFromList(Value reps) {
  attach::WireBundle out;
  for (Value p = reps; isPair(p); p = cdr(p)) {
    Value e = car(p);
    if (!isPair(e) || !isString(car(e)) || !isPair(cdr(e))) continue;
    attach::WireRepresentation r;
    r.mimeType = std::string(stringView(car(e)));
    Value d = car(cdr(e));
    if (isString(d)) {
      r.data = std::string(stringView(d));
    } else if (d.is(Kind::Bytevector)) {
      auto* bv = d.as<Bytevector>();
      r.data.assign(reinterpret_cast<const char*>(bv->bytes), bv->extra);
      r.binary = true;
    } else {
      continue;
    }
    for (Value q = cdr(cdr(e)); isPair(q) && isPair(cdr(q)); q = cdr(cdr(q))) {
      Value key = car(q), value = car(cdr(q));
      if (!isKeyword(key) || !value.isFixnum()) continue;
      if (symbolName(key) == "width") r.width = int(value.fixnum());
      else if (symbolName(key) == "height") r.height = int(value.fixnum());
    }
    out.push_back(std::move(r));
  }
  return out;
}

attach::WireBundle representationsOf(Interp& in, Value v) {
  try {
    return bundleFromList(in.apply(in.lookupGlobal("representations"), {v}));
  } catch (const PurpleInterrupt&) {
    throw;
  } catch (const PurpleException&) {
    attach::WireRepresentation text;
    text.mimeType = "text/plain";
    text.data = toWriteString(v);
    return {text};
  }
}

}  // namespace purple
