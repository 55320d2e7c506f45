// A collective in flight. Every collective builtin builds one; without :async it is completed at
// once, with :async #t it is handed to Purple as a handle (dist-wait completes it). Completing
// waits for the c10d work items in order, then runs `finish` (what Gloo cannot do itself: the
// division of an average, copying into a non-contiguous tensor, the local half of an emulated
// reduce-scatter) on the interpreter's thread, and makes the result value.
#pragma once
#include "builtins/distributed/comm.hpp"
#include <functional>

namespace purple::dist {

struct Pending {
  enum class Result { Unspecified, Input, Tensor, TensorList, TensorListOrFalse, SourceRank, Custom };

  explicit Pending(std::string_view w) : who(w) {}
  std::string who;
  std::vector<WorkPtr> works;
  std::function<void()> finish;
  Result result = Result::Unspecified;
  Root input;                        // Result::Input: the tensor the collective changed in place
  std::vector<at::Tensor> tensors;   // Result::Tensor / TensorList
  const Group* group = nullptr;      // Result::SourceRank: to map the group rank to a world rank
  int sourceRank = -1;               // set by finish for receives
  std::function<Value(Interp&)> custom;   // Result::Custom (object collectives), run on the interpreter's thread
  bool done = false;
  bool completesAtWait = false;      // part of the transfer is started by dist-wait (checked receives)
};

// Completes P now (blocking) and returns its result.
Value complete(Interp& in, Pending& p);
// Completes P now, or returns a handle for it when ASYNC.
Value finishOrDefer(Interp& in, std::unique_ptr<Pending> p, bool async);
// Issues a c10d call, turning a synchronous failure into a Purple error naming WHO.
template <class F> WorkPtr issue(std::string_view who, F&& call) {
  try {
    return call();
  } catch (const PurpleException&) {
    throw;
  } catch (...) {
    rethrowCommError(who);
  }
}

}  // namespace purple::dist
