// The time budget inside tensor operations.
//
// One LibTorch call can run for minutes without coming back to the evaluator: a convolution
// whose kernel is as big as its input (40 s for a 1200x1200 image and a 600x600 kernel, 7 MB of
// tensors), a reduction over an expanded view (a sum over 10^12 elements that are one number),
// an SVD. Neither the watchdog's flag nor a poll between primitive calls can stop it. So on the
// thread of an interpreter with a time budget, every operator LibTorch dispatches passes a
// RecordFunction callback, which
//   - estimates the operator's work from its arguments' shapes (the operators whose work grows
//     faster than their memory get a formula: matrix products, convolutions, pooling, the
//     decompositions of linear algebra, pairwise distances, attention; every operator counts at
//     least its inputs' elements) and refuses one that cannot finish in the time left, before
//     it starts, with a `time-limit` stop (which Purple code cannot catch, as the budget's own);
//   - once the budget has passed (or an interrupt was asked) while a composite operator runs
//     (an LSTM over a long sequence, a matrix exponential), stops it at its next allocation.
// Both raise from the CPU allocator (checkTensorWorkAtAllocation): LibTorch catches and logs an
// exception thrown by a RecordFunction callback, but an allocation that fails unwinds the
// operator as running out of memory does. Tensors on other devices run asynchronously and are
// not estimated.
#pragma once
#include <cstdint>

namespace purple {

class Interp;

// On this thread, for the outermost API call of an interpreter with a time budget. Returns a
// handle for endTensorTimeBudget (0: nothing was added).
uint64_t beginTensorTimeBudget();
void endTensorTimeBudget(uint64_t handle);

// Called by the CPU allocator on an interpreter's thread, outside parallel regions: raises the
// refusal an operator in progress met, or the stop that is waiting.
void checkTensorWorkAtAllocation(Interp& in);

}  // namespace purple
