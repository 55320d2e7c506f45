// Which line of the user's program is running: the innermost call record written outside the
// prelude, and the closure whose body holds it. Tensor origins and the operator profiler credit
// their work to it, so a tensor made deep inside a library procedure is credited to the user's
// line that called that procedure.
#pragma once
#include "interp/core/interp.hpp"
#include "interp/language/node.hpp"
#include <string>

namespace purple {

inline bool isUserCall(const Node* n) {
  return n && n->kind == Kind::Node && n->op() == Op::App && !(n->flags & kAppInPrelude) &&
         static_cast<const AppNode*>(n)->pos.line > 0;
}

// The innermost user call in IN's records, or nullptr; *at is its record.
inline const AppNode* innermostUserCall(const Interp& in, int64_t* at) {
  for (int64_t i = in.depth; i >= 1; i--) {
    const Interp::CallRecord& r = in.callStack[i];
    if (isUserCall(r.node) || isUserCall(r.userCall)) {
      *at = i;
      return static_cast<const AppNode*>(isUserCall(r.node) ? r.node : r.userCall);
    }
  }
  return nullptr;
}

// The name a lambda shows under: its own, or for a name made by gensym (a `do` loop is a named
// let called do-loop17) the name without its counter and with the lambda's line, "do loop
// (line 12)", which the user can find in the file.
inline std::string lambdaName(const LambdaNode* l) {
  if (!isSymbol(l->name)) return "anonymous procedure";
  std::string name(symbolName(l->name));
  if (!isGensym(l->name)) return name;
  while (!name.empty() && name.back() >= '0' && name.back() <= '9') name.pop_back();
  for (char& c : name)
    if (c == '-') c = ' ';
  if (name.empty()) name = "loop";
  return l->pos.line > 0 ? name + " (line " + std::to_string(l->pos.line) + ")" : name;
}

// A lambda's name, and for one defined inside another procedure (a named let's loop, an
// internal define, a lambda) the name of the nearest named procedure around it: "loop in
// train". nullptr is the top level.
inline std::string lambdaLabel(const LambdaNode* l) {
  if (!l) return "<top level>";
  std::string label = lambdaName(l);
  for (const LambdaNode* o = l->outer; o; o = o->outer)
    if (isSymbol(o->name) && !isGensym(o->name)) return label + " in " + std::string(symbolName(o->name));
  return label;
}

// The procedure whose body holds the call APP, as lambdaLabel names it. (Lexical: a tail call
// replaces its caller's record, so the records below cannot say it.)
inline std::string procedureOfCall(const AppNode* app) { return lambdaLabel(app->owner); }

inline std::string positionFile(const SourcePos& p) {
  return isString(p.file) ? std::string(stringView(p.file)) : "<input>";
}

}  // namespace purple
