// Big GMP operations that an interrupt or a time budget can still stop.
//
// One GMP call cannot be interrupted, and near the size limit for exact integers (2^26 bits) a
// single call runs for seconds: a gcd of two such numbers takes about 20 s, and every rational
// operation computes gcds. So a call whose operands are big enough to take more than a few
// milliseconds runs on a worker thread, on operands moved into storage the worker owns, while the
// interpreter's thread waits and polls. When the poll raises (Ctrl-C, the time budget), the
// interpreter goes on at once and the worker is abandoned: it finishes on its own data and frees
// it at the lowest priority. Workers never touch the collected heap. At most one worker per core
// runs at a time, so abandoned work cannot pile up; when all are busy, a caller runs an operation
// of up to 4 times its threshold itself (tens of milliseconds), and waits, polling, for a bigger one.
#pragma once
#include <gmp.h>
#include <cstdint>
#include <functional>
#include <initializer_list>

namespace purple {

// Operand sizes (in bits, the larger operand or the sum for rationals) from which each kind of
// operation goes to a worker. Below them a call takes at most about 10 ms on this project's
// machines, which is the interrupt latency the evaluator's own polling gives.
constexpr uint64_t kGmpWorkerBitsMultiply = uint64_t(1) << 21;   // mul, div, sqrt, compare
constexpr uint64_t kGmpWorkerBitsGcd = uint64_t(1) << 17;        // gcd and rational arithmetic

// `compute` reads and writes the integers `z` and rationals `q` it is given, in the order they
// were passed; it must not touch anything else that the caller owns, and so captures by value
// only: after a raise the caller's frame is gone while an abandoned worker still runs `compute`.
// A result that is not a number comes back in one of the integers.
using GmpCompute = std::function<void(mpz_ptr* z, mpq_ptr* q)>;

// `shortEnoughToRunHere`: the operation takes at most some tens of milliseconds, so when every
// worker is busy it runs on the calling thread instead of waiting for one.
void runGmpOnWorker(std::initializer_list<mpz_ptr> z, std::initializer_list<mpq_ptr> q, const GmpCompute& compute,
                    bool shortEnoughToRunHere);

// Runs `compute` here when `bits` is below `threshold`, else on a worker as described above. The
// caller's integers and rationals hold the results either way.
template <class F>
inline void computeGmp(uint64_t bits, uint64_t threshold, std::initializer_list<mpz_ptr> z,
                       std::initializer_list<mpq_ptr> q, F&& compute) {
  if (bits < threshold) {
    mpz_ptr zs[4] = {};
    mpq_ptr qs[2] = {};
    int i = 0;
    for (mpz_ptr p : z) zs[i++] = p;
    i = 0;
    for (mpq_ptr p : q) qs[i++] = p;
    compute(zs, qs);
    return;
  }
  runGmpOnWorker(z, q, GmpCompute(compute), bits < 4 * threshold);
}

}  // namespace purple
