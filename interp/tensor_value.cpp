// The tensor cell and the accounting that keeps tensor memory bounded under a GC that only sees
// 32-byte cells: the bytes of fresh storage are counted when a cell is made, and past a
// threshold (64 MB unless PURPLE_TENSOR_GC_THRESHOLD says otherwise) a collection runs and
// the finalizers of dead cells release their storage.
#include "interp/tensor_value.hpp"
#include "interp/error.hpp"
#include "interp/gc.hpp"
#include "interp/interp.hpp"
#include "interp/tensor_scope.hpp"
#include <gc/gc.h>
#include <atomic>
#include <cstdlib>

namespace purple {

namespace {
std::atomic<int64_t> gLive{0};
std::atomic<int64_t> gBytes{0};
std::atomic<int64_t> gPeak{0};
std::atomic<int64_t> gCollections{0};
std::atomic<int64_t> gReleased{0};
std::atomic<int64_t> gBytesAfterCollect{0};
std::atomic<int64_t> gThreshold{[] {
  const char* env = std::getenv("PURPLE_TENSOR_GC_THRESHOLD");
  int64_t v = env ? std::atoll(env) : 0;
  // 64 MB: measured on a 1M-float loop with let-bound temporaries, peak RSS was 297 MB against
  // 280 MB in Python (256 MB gave 590 MB) with no measurable difference in CPU time.
  return v > 0 ? v : int64_t(64) << 20;
}()};

void finalizeTensor(void* obj, void*) {
  auto* cell = static_cast<TensorObj*>(obj);
  if (cell->countedBytes) gBytes.fetch_sub(cell->countedBytes, std::memory_order_relaxed);
  cell->countedBytes = 0;
  cell->tensor.~Tensor();
  gLive.fetch_sub(1, std::memory_order_relaxed);
}

// Storage that only this tensor uses: an op's fresh result, not a view of another tensor.
int64_t freshStorageBytes(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.use_count() != 1) return 0;
  const c10::Storage& s = t.storage();
  if (s.use_count() != 1) return 0;
  return int64_t(s.nbytes());
}

void collectForTensors() {
  gcCollectNow();
  gCollections.fetch_add(1, std::memory_order_relaxed);
  gBytesAfterCollect.store(gBytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}
}  // namespace

void registerTensorFinalizer(Object* cell) { gcRegisterFinalizer(cell, finalizeTensor, nullptr); }

namespace {
// Charges fresh storage to the accounting: a collection past the threshold, an error past an
// embedder's budget. `replacing` is what the tensor it replaces was charged (one atomic update
// for both). Returns the bytes charged.
int64_t chargeFreshStorage(const at::Tensor& t, int64_t replacing = 0) {
  int64_t bytes = freshStorageBytes(t);
  if (bytes > 0) {
    int64_t total = gBytes.load(std::memory_order_relaxed) + bytes - replacing;
    if (total - gBytesAfterCollect.load(std::memory_order_relaxed) > gThreshold.load(std::memory_order_relaxed))
      collectForTensors();
    checkTensorBudget(t);
  }
  if (bytes == replacing) return bytes;
  int64_t now = gBytes.fetch_add(bytes - replacing, std::memory_order_relaxed) + bytes - replacing;
  int64_t peak = gPeak.load(std::memory_order_relaxed);
  while (now > peak && !gPeak.compare_exchange_weak(peak, now)) {
  }
  return bytes;
}

// A statistic only: a plain load and store (no locked instruction on the hot path); a count
// lost to a race with another thread is harmless.
void countReleased() { gReleased.store(gReleased.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
}  // namespace

void checkTensorBudget(const at::Tensor& t) {
  Interp* in = Interp::current();
  int64_t cap = in ? in->limits.maxTensorBytes : 0;
  if (cap <= 0) return;
  int64_t bytes = freshStorageBytes(t);
  if (bytes <= 0 || gBytes.load() + bytes <= cap) return;
  collectForTensors();
  if (gBytes.load() + bytes > cap)
    throwError("memory-error", "tensor memory budget exceeded (" + std::to_string(cap) + " bytes)");
}

Value wrapTensor(at::Tensor t) {
  int64_t bytes = chargeFreshStorage(t);
  // The cell holds no GC pointers (at::Tensor points into LibTorch's heap): atomic, unscanned.
  auto* cell = static_cast<TensorObj*>(GC_MALLOC_ATOMIC(sizeof(TensorObj)));
  if (!cell) {
    gBytes.fetch_sub(bytes, std::memory_order_relaxed);
    throw std::bad_alloc();
  }
  cell->kind = Kind::Tensor;
  cell->flags = 0;
  cell->small = 0;
  cell->extra = 0;
  new (&cell->tensor) at::Tensor(std::move(t));
  cell->countedBytes = bytes;
  gLive.fetch_add(1, std::memory_order_relaxed);
  registerTensorFinalizer(cell);
  Value v(cell);
  noteTensorCreated(v);
  return v;
}

void noteTensorFreedUnboxed() { countReleased(); }

void reuseTensorCell(Value old, at::Tensor t) {
  auto* cell = old.as<TensorObj>();
  int64_t bytes = chargeFreshStorage(t, cell->countedBytes);   // may collect or throw: cell intact
  cell->tensor = at::Tensor();             // the old tensor goes first, as under refcounting
  cell->tensor = std::move(t);
  cell->countedBytes = bytes;
  countReleased();
}

Value wrapSoleOwnedTensor(at::Tensor t) {
  Value v = wrapTensor(std::move(t));
  // Inside a tensor scope every new tensor must stay recorded in the scope: no reuse there.
  if (!tensorScopeOpen()) v.obj()->flags = kTensorSoleOwner;
  return v;
}

void assignFreshTensor(Value& slot, at::Tensor t) {
  Value old = slot;
  if (isSoleOwnedTensor(old) && !tensorScopeOpen()) {
    reuseTensorCell(old, std::move(t));
    return;
  }
  Value v = wrapSoleOwnedTensor(std::move(t));
  dropOverwritten(old);
  slot = v;
}

const at::Tensor& tensorArg(Value v, std::string_view who, int argIndex) {
  if (!isTensor(v)) throwTypeError(who, argIndex, "a tensor", v);
  const at::Tensor& t = tensorOf(v);
  if (!t.defined())
    throwError("tensor-error", std::string(who) + ": argument " + std::to_string(argIndex) + " is a tensor that was already freed");
  return t;
}

void releaseTensor(Value v) {
  auto* cell = v.as<TensorObj>();
  if (!cell->tensor.defined()) return;
  if (cell->countedBytes) gBytes.fetch_sub(cell->countedBytes, std::memory_order_relaxed);
  cell->countedBytes = 0;
  cell->tensor = at::Tensor();
  countReleased();
}

TensorMemoryStats tensorMemoryStats() {
  return TensorMemoryStats{gLive.load(), gBytes.load(), gPeak.load(), gCollections.load(), gThreshold.load(), gReleased.load()};
}

void setTensorCollectThreshold(int64_t bytes) { gThreshold.store(bytes > 0 ? bytes : int64_t(1) << 20); }

}  // namespace purple
