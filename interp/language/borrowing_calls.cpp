// Module calls and the tensor cells that die with them (borrowing_calls.hpp).
#include "interp/language/borrowing_calls.hpp"
#include "interp/language/eval_internal.hpp"
#include "interp/language/ownership.hpp"

namespace purple {

bool (*moduleCallBorrowsArguments)(Value fn) = nullptr;
Value (*callBorrowingModule)(Interp& in, Value fn, const Value* argv, int argc, bool* fresh) = nullptr;

namespace {
Value callModuleNow(Interp& in, Value module, Value* argv, uint32_t argc, bool borrows, bool* fresh) {
  if (borrows) return callBorrowingModule(in, module, argv, int(argc), fresh);
  return in.apply(shareValue(module), argv, int(argc));
}
}  // namespace

Value evalModuleCall(Interp& in, AppNode* app, Value module, Frame* env, Interp::CallRecord* rec) {
  uint32_t argc = app->argc;
  constexpr uint32_t kMostArgs = 8;   // layers take one or two tensors; more goes the general way
  Value argvBuf[kMostArgs];
  Value* argv = argc <= kMostArgs ? argvBuf : static_cast<Value*>(gcAlloc(argc * sizeof(Value)));
  bool borrows = callBorrowingModule && moduleCallBorrowsArguments(module);
  uint32_t lent = borrows ? app->borrowArgMask : 0;
  for (uint32_t i = 0; i < argc; i++)
    argv[i] = argBit(lent, i) ? env->slots[static_cast<LocalNode*>(app->args[i])->index] : evalSimple(in, app->args[i], env);
  // A hook registered while the arguments were evaluated sees this call, and may keep them.
  borrows = borrows && moduleCallBorrowsArguments(module);
  if (!borrows) shareArguments(argv, argc);
  bool fresh = false;
  Value result;
  if (rec) {   // the call an eval activation makes in a tail position: its own record
    rec->node = app;
    rec->proc = module;
    if (!(app->flags & kAppInPrelude)) {
      rec->userCall = app;
      rec->userProc = module;
    }
    result = callModuleNow(in, module, argv, argc, borrows, &fresh);
  } else {
    PrimitiveFrame frame(in, app, module, /*userCall=*/true);
    in.poll();
    result = callModuleNow(in, module, argv, argc, borrows, &fresh);
  }
  if (borrows) {
    finishBorrowingCall(argv, argc, lent, result, fresh);
    if (fresh && isPair(result)) ownFreshList(result, argv, argc);   // a layer's (h c)
  }
  return result;
}

}  // namespace purple
