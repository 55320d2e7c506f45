// The sandbox rule of every builtin that touches the world outside the interpreter: files,
// the process (exit, command line, standard input, settings shared by every interpreter and the
// host, Python, the network), the environment. A builtin family declares the rule right after
// the builtin's `r.def`, in the same file:
//
//   r.def("save-npy", "(path tensor)", ..., "Writes ...");
//   sandbox(r, "save-npy", Needs::Files, "writes the file PATH");
//
// A rule with needs is enforced here, centrally: the builtin's entry is wrapped so that an
// interpreter whose Limits lack one of the needs refuses the call before any argument is
// converted (the same error whatever the arguments), with the error kinds of requireFileAccess
// and requireProcessAccess. Builtins without a rule are not wrapped and pay nothing.
// A builtin whose rule depends on its arguments (read-line only on the process's stdin, a
// py-object the host handed in) keeps its precise check in its body and declares a conditional
// rule, so that the generated table (docs/sandbox.md) lists it too; builtins that touch the
// outside but are deliberately allowed in a sandbox declare that, with the reason.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace purple {

class Registry;
class Interp;

namespace Needs {
enum : uint8_t { Files = 1, Process = 2, Environment = 4 };
}

enum class SandboxKind : uint8_t { Refused, Conditional, Allowed };

struct SandboxRule {
  std::string name;
  std::string family;
  SandboxKind kind = SandboxKind::Refused;
  uint8_t needs = 0;        // Needs bits: refused unless the interpreter's Limits allow all of them
  std::string touches;      // what it touches outside the interpreter
  std::string how;          // conditional: when it is refused; allowed: why it stays allowed
  std::string errorKind;    // refusal's error kind and text, when not the usual ones
  std::string errorText;
};

// Refused without NEEDS (Needs bits), checked before the body runs.
void sandbox(Registry& r, std::string_view name, uint8_t needs, std::string_view touches);
// The same with the builtin's own refusal (error kind and full message), kept from before.
void sandbox(Registry& r, std::string_view name, uint8_t needs, std::string_view touches,
             std::string_view errorKind, std::string_view errorText);
// Checked in the body, depending on the arguments; HOW says when it is refused.
void sandboxConditional(Registry& r, std::string_view name, std::string_view touches, std::string_view how);
// Touches the outside but stays allowed in a sandbox; WHY says why that is safe.
void sandboxAllowed(Registry& r, std::string_view name, std::string_view touches, std::string_view why);

// The rule of a special form (import, include ...), which has no builtin entry to wrap: its
// check is in the analyzer or the library loader; listed with family "syntax".
void sandboxSyntax(std::string_view name, std::string_view touches, std::string_view how);

// The declared rules, in declaration order (every interpreter declares the same ones).
std::vector<SandboxRule> sandboxRules();
// NAME's rule, or false when it has none.
bool findSandboxRule(std::string_view name, SandboxRule& out);
// The refusal of a rule's needs in interpreter IN, thrown as the builtin's error; no-op when allowed.
void checkSandboxNeeds(Interp& in, const SandboxRule& rule);

}  // namespace purple
