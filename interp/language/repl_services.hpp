// What a front end asks of an interpreter besides evaluation, written once for the embedding
// API (interp/api/api_frontend.cpp) and the REPL server (attach_server.cpp): completion
// candidates, documentation, and a value's representations by the display protocol.
#pragma once
#include "interp/core/value.hpp"
#include "interp/language/attach_wire.hpp"
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace purple {

class Interp;

// Characters that end an identifier: whitespace, brackets, quotes, ; and ,.
bool isIdentifierDelimiter(char c);
// Where the identifier that ends at byte CURSOR of CODE begins.
std::size_t identifierStart(std::string_view code, std::size_t cursor);
// Bound global names of the current namespace (procedures, syntax, variables; not the internal
// %names unless the prefix starts with %) and special forms starting with PREFIX: sorted,
// without duplicates. Nothing for an empty prefix.
std::vector<std::string> completionCandidates(Interp& in, std::string_view prefix);
// The text (help 'NAME) prints: signature and docstring; nothing when NAME is neither bound
// nor a special form.
std::optional<std::string> documentationText(Interp& in, std::string_view name);
// A Purple list of representations, (MIME-TYPE DATA [:width W :height H]) ..., as a bundle;
// malformed entries are skipped (`representations` has checked them).
attach::WireBundle bundleFromList(Value reps);
// V's representations (prelude/38-display.purple); its written form as text/plain when a
// broken define-representation fails, so the value is never hidden.
attach::WireBundle representationsOf(Interp& in, Value v);

}  // namespace purple
