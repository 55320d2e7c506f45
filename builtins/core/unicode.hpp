// Unicode character properties and case mappings (tables generated from the Unicode database
// by builtins/core/gen_unicode_tables.pl; implemented in builtins/core/chars.cpp). Independent of the C
// library's locale, so an embedding host's setlocale cannot change what Purple answers.
#pragma once
#include <cstdint>
#include <string>

namespace purple {
namespace unicode {

bool isAlphabetic(uint32_t cp);
bool isUppercase(uint32_t cp);
bool isLowercase(uint32_t cp);
bool isWhitespace(uint32_t cp);
int digitValue(uint32_t cp);          // 0..9 for a decimal digit (general category Nd), else -1
const char* generalCategory(uint32_t cp);   // "Lu", "Nd" ... (two letters)

uint32_t toUpper(uint32_t cp);        // simple (one code point) mappings
uint32_t toLower(uint32_t cp);
uint32_t foldCase(uint32_t cp);

// Full mappings, which may expand (U+00DF "ß" upcases to "SS"), appended as UTF-8.
void appendUpper(std::string& out, uint32_t cp);
void appendLower(std::string& out, uint32_t cp);
void appendFold(std::string& out, uint32_t cp);

}  // namespace unicode
}  // namespace purple
