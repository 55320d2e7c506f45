// The node tree: what the analyzer makes of a form once, and the evaluator walks many times.
// Variables are resolved to lexical addresses (frame depth, slot) or to a global cell; macros
// are already expanded. Nodes are GC objects (closures point at their LambdaNode).
#pragma once
#include "interp/core/interp.hpp"
#include "interp/core/value.hpp"

namespace purple {

enum class Op : uint16_t {
  Const, Local0, Local1, LocalN, LocalChecked, Global,
  SetLocal, SetGlobal, DefineGlobal,
  If, Seq, Lambda, App, And, Or, Let, Case, Guard, Reraise,
};

struct Node : Object {
  Op op() const { return Op(small); }
};

struct ConstNode : Node { Value value; };
struct LocalNode : Node { uint32_t depth, index; Value name; };
struct GlobalNode : Node { GlobalCell* cell; SourcePos pos; };   // pos: of the innermost form around it
struct SetLocalNode : Node { uint32_t depth, index; Node* value; };
struct SetGlobalNode : Node { GlobalCell* cell; Node* value; };   // also DefineGlobal
struct IfNode : Node { Node* test; Node* then; Node* otherwise; };
struct SeqNode : Node { uint32_t count; Node* items[1]; };          // also And, Or
struct GlobalCell;
struct LetNode : Node {             // flattened let: slots in the current frame
  uint32_t count;
  Node* body;
  uint32_t* slots;
  Node** inits;
  // Bit i: variable i is only ever an argument of builtins that keep no reference to their
  // arguments (kPrimBorrowsArgs), is never assigned or captured, and the body ends in no call
  // of a closure. A tensor it holds is dead once the body returns, and is freed then, as
  // reference counting would free it (let_release.cpp). guardCells are the globals naming the
  // builtins that proof rests on, guardValues what they held then: the release happens only
  // while they still hold them.
  uint32_t releaseMask;
  uint32_t nGuardCells;
  GlobalCell** guardCells;
  Value* guardValues;
};
struct CaseNode : Node {
  Node* key;
  uint32_t keySlot;                  // key kept in a slot for `=>` clauses
  uint32_t count;
  Value* data;                       // per clause: list of data
  Node** bodies;
  Node* otherwise;                   // else body, or nullptr (unspecified)
};
struct GuardNode : Node {
  Node* body;
  uint32_t slot;                     // where the condition is bound (current frame)
  Node* handler;                     // cond clauses; falls through to a Reraise node
};
struct ReraiseNode : Node { uint32_t slot; };

struct LambdaNode : Node {
  uint32_t nRequired, nOptional, nKeys;
  bool hasRest;
  bool heapFrame;                    // a closure or promise may capture the frame
  uint32_t frameSize;                // parameters + flattened locals
  // nRequired when a call passing exactly that many arguments can bind them straight into an
  // eval activation's stack frame (required parameters only, frame not captured and small
  // enough), else UINT32_MAX: the evaluator's commonest closure call tests one field.
  uint32_t directArity;
  // The slots below 16 that no closure made inside this lambda refers to (ownership.hpp): a
  // tensor cell such a slot owns dies with the frame, and an argument read from a variable can
  // be lent to such a parameter without being marked shared.
  uint16_t ownableSlots;
  Value* keyNames;                   // keywords
  Node** defaults;                   // per optional then key parameter: expression or nullptr
  Node* body;
  Value name;                        // symbol or #f
  Value doc;                         // docstring (first body form when more follow) or #f
  Value params;                      // the parameter list as written, for help
  SourcePos pos;
  LambdaNode* outer;                 // the lambda whose body holds this one; nullptr at top level
};

// Values an eval activation's own frame buffer holds: a closure whose frame needs no more, and
// that nothing captures, runs without a heap frame.
constexpr uint32_t kFrameStoreSlots = 8;

inline uint32_t directArityOf(const LambdaNode* l) {
  bool direct = !l->heapFrame && l->frameSize <= kFrameStoreSlots && !(l->nOptional | l->nKeys | l->hasRest);
  return direct ? l->nRequired : UINT32_MAX;
}

constexpr uint8_t kAppInPrelude = 1;   // AppNode::flags: a call written in the prelude
// AppNode::flags: a call of a global with one to three arguments that are each a constant or a
// local of the current or enclosing frame (Local0, Local1): `(< n 2)`, `(- i 1)`, `(car l)`,
// `(vector-ref v i)`. The evaluator runs an inline builtin there (+ - * < > <= >= = on two
// fixnums, car, null?, vector-ref...) on the operands read in place.
constexpr uint8_t kAppSimpleOperands = 2;

// AppNode::flags: the analyzer specialised the call for its shape (AppNode::shape), a
// superinstruction: `(< n 2)`, `(- n 1)`, `(+ (fib (- n 1)) (fib (- n 2)))`.
constexpr uint8_t kAppShaped = 4;

struct AppNode;
// Evaluates a shaped call. It runs the shape only while the operator's global holds
// AppNode::expected, and otherwise takes the general path.
using AppShapeFn = Value (*)(Interp& in, AppNode* app, Frame* env);

struct AppNode : Node {
  Node* fn;
  uint32_t argc;
  uint32_t appArgMask;               // bit i: argument i is itself an application
  uint32_t tensorArgMask;            // bit i: ... of a global that was a tensor builtin
  // bit i: argument i is a variable of this frame that the callee may borrow: an ownable slot
  // (LambdaNode::ownableSlots) that no other argument of this call assigns (ownership.hpp).
  uint32_t borrowArgMask;
  SourcePos pos;
  AppShapeFn shape;                  // with kAppShaped
  Value expected;                    // the builtin `shape` assumes the operator names
  LambdaNode* owner;                 // the lambda whose body holds this call; nullptr at top level
  Node* args[1];
};

// The shape for a call (eval.cpp), or nullptr; sets *expected.
AppShapeFn appShapeFor(AppNode* app, Value* expected);

// call/cc's call of PROC with its escape continuation K (eval.cpp): K called in a tail
// position of PROC's body returns from here without a C++ exception; anywhere else it throws
// ContinuationInvoked as before.
Value callWithEscape(Interp& in, Value proc, Value k);

// Analysis entry points (analyzer.cpp).
// OWNABLE, when given, gets the top-level frame's ownable slots (ownership.hpp).
Node* analyzeToplevel(Interp& in, Value form, PositionTable* positions, uint32_t* frameSize,
                      uint16_t* ownable = nullptr);

std::string primitiveName(Value prim);
std::string describeProcedure(Value proc);   // for backtraces: "fib", "tensor-add", "lambda"

}  // namespace purple
