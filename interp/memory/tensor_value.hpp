// The tensor value kind: a small GC cell that owns one at::Tensor. Its finalizer drops the
// tensor; `releaseTensor` drops it early (tensor-free!, temporaries the evaluator knows are dead).
#pragma once
#include "interp/core/value.hpp"
#include <ATen/ATen.h>
#include <atomic>

namespace purple {

struct TensorObj : Object {
  at::Tensor tensor;              // placement-new'd; destroyed by the finalizer or release
  int64_t countedBytes;           // storage bytes charged to the memory accounting, or 0
};

// Wraps `t` in a new cell. Fresh storage (not a view of a counted tensor) is charged to the
// tensor-memory accounting, which triggers a collection at the next safe point when it passes
// its threshold.
Value wrapTensor(at::Tensor t);
// The tensor inside a value, or a type error naming `who` and the argument position.
const at::Tensor& tensorArg(Value v, std::string_view who, int argIndex);
inline at::Tensor& tensorOf(Value v) { return v.as<TensorObj>()->tensor; }
void releaseTensor(Value v);      // drops the at::Tensor now; later use is a Purple error

// Stores the fresh result `t` of a primitive in the variable `slot`. When the slot holds a
// tensor cell that it alone has held (kTensorSoleOwner), the old tensor is freed now and the
// cell reused: no new cell, no finalizer, and the memory goes back to the allocator in the
// order Python's reference counting would return it. Otherwise a new cell is made and marked.
void assignFreshTensor(Value& slot, at::Tensor t);
// A variable that held `old` is being overwritten: a cell only it held is freed now.
inline void dropOverwritten(Value old) {
  if (isSoleOwnedTensor(old)) releaseTensor(old);
}
// The pieces of assignFreshTensor, for parameters bound by a tail call (eval.cpp): put `t` in
// a sole-owned cell whose old tensor is dead, or in a new cell marked sole-owned.
void reuseTensorCell(Value cell, at::Tensor t);
Value wrapSoleOwnedTensor(at::Tensor t);
// Marks V, a tensor cell nobody else holds, sole-owned (language/ownership.hpp says what
// follows). Until the first cell is so marked, soleOwnedCellsExist() is false and the evaluator
// skips its ownership steps: code without tensors pays nothing for them.
inline void markSoleOwned(Value v) {
  v.obj()->flags = kTensorSoleOwner;
  if (!soleOwnedCellsExist()) gSoleOwnedCellsMade.store(true, std::memory_order_relaxed);
}
// A fresh result that is passed on or dropped without ever getting a cell still counts
// against an embedder's tensor-memory budget.
void checkTensorBudget(const at::Tensor& t);
// Counts a result freed without ever getting a cell (for gc-stats' tensors-freed-early and
// tensor-bytes-freed-early), before T goes.
void noteTensorFreedUnboxed(const at::Tensor& t);

// Option parsing shared by every tensor builtin.
at::ScalarType scalarTypeFromValue(Value v, std::string_view who);   // 'float32, "float32", ...
Value scalarTypeToValue(at::ScalarType t);                           // -> symbol
at::Device deviceFromValue(Value v, std::string_view who);           // "cpu", "cuda:1", 'cuda
void checkDeviceAvailable(const at::Device& d);                      // a tensor can be made there
Value deviceToValue(const at::Device& d);                            // -> string
Value scalarToValue(const at::Scalar& s);

// Memory accounting (gc.cpp): live tensor cells, counted bytes, collections triggered.
struct TensorMemoryStats {
  int64_t liveTensors;
  int64_t countedBytes;
  int64_t peakCountedBytes;
  int64_t collections;
  int64_t threshold;
  int64_t released;               // cells emptied early (tensor-free!, temporaries)
  int64_t heldBytes;              // chargeHeldStorage
  int64_t deviceBytes;            // the part of countedBytes on a device (CUDA)
  int64_t deviceThreshold;        // the device storage's collection threshold, paced by cost
  int64_t freedByCollector;       // cells whose tensor a finalizer dropped
  int64_t bytesFreedEarly;        // the counted bytes of the cells emptied early
  int64_t bytesFreedByCollector;  // ... and of those a finalizer emptied
};
TensorMemoryStats tensorMemoryStats();
void setTensorCollectThreshold(int64_t bytes);
// Storage a value holds through a C++ object instead of tensor cells (a module's parameters and
// buffers, builtins/nn/modules.cpp). It counts toward the collection threshold as fresh tensor
// storage does, so that dropped modules are collected, but toward no budget. Charging may collect.
void chargeHeldStorage(int64_t bytes);
void unchargeHeldStorage(int64_t bytes);

// Told of every tensor cell made or refilled (`made`) and emptied or finalized (`dropped`), while
// one is installed: tensor-memory-report's recorder (language/tensor_origins.cpp). Null, the
// default, costs one relaxed load where a cell is made. `dropped` may run on any thread.
struct TensorCellObserver {
  void (*made)(TensorObj* cell);
  void (*dropped)(TensorObj* cell);
};
void setTensorCellObserver(const TensorCellObserver* observer);   // nullptr: none

}  // namespace purple
