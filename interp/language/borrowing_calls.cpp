// Module calls and the tensors that die with them (borrowing_calls.hpp says which modules keep
// none of their argument cells). Two cases, both releasing at once what Python's reference
// counting frees when a layer or a function returns:
//  - `(conv2 (tensor-relu (conv1 x)))`: the module's arguments made by fresh-returning builtins
//    are released when the module returns;
//  - `(tensor-relu (conv1 x))`: the module's result, passed to a builtin that keeps none of its
//    arguments, is released when that builtin returns, or overwritten in place by it. Without it
//    a test pass of the mnist example in batches of 1,000 held each layer's output (82 and
//    141 MB) until the collector found it, 80 MB past Python's peak.
#include "interp/language/borrowing_calls.hpp"
#include "interp/language/eval_internal.hpp"

namespace purple {

namespace {
// An argument that is a call of a builtin returning a new cell (kPrimReturnsFresh).
bool isFreshPrimitiveCall(Node* n) {
  if (n->op() != Op::App) return false;
  Node* fn = static_cast<AppNode*>(n)->fn;
  if (fn->op() != Op::Global) return false;
  Value g = static_cast<GlobalNode*>(fn)->cell->value;
  return g.is(Kind::Primitive) && (g.obj()->flags & kPrimReturnsFresh);
}

uint32_t freshArgumentMask(AppNode* app, uint32_t argc) {
  uint32_t fresh = 0;
  for (uint32_t i = 0; i < argc && i < 32; i++)
    if (isFreshPrimitiveCall(app->args[i])) fresh |= 1u << i;
  return fresh;
}

// After module FN returned RESULT on ARGV: its fresh arguments are released (unless returned),
// when it borrows them. True when RESULT is a cell nobody else holds: the module borrows, and
// RESULT is a new cell or a fresh argument passed through (dropout in eval mode, identity).
bool finishModuleCall(Value fn, Value* argv, uint32_t argc, uint32_t fresh, Value result) {
  if (!moduleCallBorrowsArguments(fn)) return false;
  bool resultFresh = isTensor(result);
  for (uint32_t i = 0; i < argc; i++)
    if (argv[i] == result && !argBit(fresh, i)) resultFresh = false;
  if (fresh) releaseFreshArguments(argv, argc, fresh, result);
  return resultFresh;
}
}  // namespace

__attribute__((noinline)) Value callModuleReleasingArguments(Interp& in, AppNode* app, Value fn, Value* argv,
                                                             uint32_t argc) {
  uint32_t fresh = freshArgumentMask(app, argc);
  Value result = in.apply(shareValue(fn), argv, int(argc));
  if (fresh) finishModuleCall(fn, argv, argc, fresh, result);
  return result;
}

Value evalModuleCallArgument(Interp& in, AppNode* call, Value module, Frame* env, bool* fresh) {
  *fresh = false;
  uint32_t argc = call->argc;
  constexpr uint32_t kMostArgs = 8;   // layers take one or two tensors; more goes the usual way
  if (argc > kMostArgs || !moduleCallBorrowsArguments) return in.eval(call, env);
  Value argv[kMostArgs];
  for (uint32_t i = 0; i < argc; i++) argv[i] = evalSimple(in, call->args[i], env);
  uint32_t freshArgs = call->appArgMask ? freshArgumentMask(call, argc) : 0;
  Value result;
  {
    PrimitiveFrame frame(in, call, module, /*userCall=*/true);
    in.poll();
    result = in.apply(shareValue(module), argv, int(argc));
  }
  *fresh = finishModuleCall(module, argv, argc, freshArgs, result);
  return result;
}

}  // namespace purple
