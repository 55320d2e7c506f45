// Reading declarations out of C++ and CUDA C source text, without a compiler: the parameter names of
// the functions load-inline binds (C++ types carry no names, and an error should say "argument 2
// (bias)"), and the parameter types of the kernel cuda-raw-kernel launches (NVRTC does not report
// them, and a launch must check each argument against them). The scan skips comments, string and
// character literals and preprocessor lines, and finds the first definition of the name: the name,
// a parenthesised parameter list, then a body `{` (after qualifiers or a trailing return type).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace purple::extensions {

struct DeclaredParam {
  std::string type;   // as written, spaces normalised: "const float *" -> "const float*"
  std::string name;   // "" when the parameter has none
};

struct FoundFunction {
  std::vector<DeclaredParam> params;
  std::vector<std::string> templateParams;   // the names a `template <typename T, int N>` before it declares
};
// The first definition of function NAME (a plain or qualified identifier; the last component is
// searched) in SOURCE; nullopt when none is found.
std::optional<FoundFunction> findFunction(std::string_view source, std::string_view name);
// Its parameters alone.
std::optional<std::vector<DeclaredParam>> findParameters(std::string_view source, std::string_view name);

// The template arguments of a name expression: "scale<float, 4>" -> {"float", "4"}; {} without any.
std::vector<std::string> templateArguments(std::string_view nameExpression);
// TYPE with each whole word FROM[i] replaced by TO[i]: a template's parameter types for one instance.
std::string substituteWords(const std::string& type, const std::vector<std::string>& from,
                            const std::vector<std::string>& to);

// Whether TEXT is a C++ identifier, or a qualified name (ns::f) when QUALIFIED.
bool isIdentifier(std::string_view text, bool qualified = false);

}  // namespace purple::extensions
