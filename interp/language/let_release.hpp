// Freeing a let-bound tensor when its let returns (let_release.cpp). Argument temporaries are
// freed right after the builtin that consumed them, and a variable's old tensor when the
// variable is set again; a tensor bound by `let` waited for the collector. (Internal defines
// are frame slots assigned in place, not lets, and still wait.) In `(let ((x (tensor-randn 4096 4096 :device "cuda"))) (tensor-sum (* x 2)))`
// nothing can see x once the body has returned, and reference counting would free it there.
#pragma once
#include "interp/core/interp.hpp"
#include "interp/language/node.hpp"

namespace purple {

// Fills n->releaseMask and n->guardCells (the analyzer, once the let's body is analysed).
void markReleasableLetSlots(LetNode* n);

// Does one of N's releasable variables hold a tensor (after its inits ran)?
inline bool letHoldsReleasableTensor(const LetNode* n, const Frame* env) {
  for (uint32_t i = 0, mask = n->releaseMask; mask; i++, mask >>= 1)
    if ((mask & 1) && env->slots[n->slots[i]].is(Kind::Tensor)) return true;
  return false;
}

// Evaluates the body of a let with a releaseMask (not as a tail: something must happen after
// it), then frees the tensors of its releasable variables, unless one is the result itself or
// a guard cell no longer names a builtin that borrows.
Value evalLetReleasing(Interp& in, LetNode* n, Frame* env);

}  // namespace purple
