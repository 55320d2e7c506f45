// The tensor cell and the accounting that keeps tensor memory bounded under a GC that only sees
// 32-byte cells: the bytes of fresh storage are counted when a cell is made, and past a
// threshold (16 to 64 MB after the live heap, unless PURPLE_TENSOR_GC_THRESHOLD says otherwise)
// a collection runs and the finalizers of dead cells release their storage. Storage on a device
// (CUDA) is counted apart, with a threshold paced by what the collections cost (below).
#include "interp/memory/tensor_value.hpp"
#include "interp/core/error.hpp"
#include "interp/core/gc.hpp"
#include "interp/core/interp.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/limits/tensor_budget.hpp"
#include "interp/memory/tensor_scope.hpp"
#include <gc/gc.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace purple {

namespace {
std::atomic<int64_t> gLive{0};
std::atomic<int64_t> gBytes{0};
std::atomic<int64_t> gPeak{0};
std::atomic<int64_t> gCollections{0};
std::atomic<int64_t> gReleased{0};
std::atomic<int64_t> gFreedByCollector{0};     // cells whose tensor a finalizer dropped
std::atomic<int64_t> gBytesFreedEarly{0};      // counted bytes dropped without the collector
std::atomic<int64_t> gBytesFreedByCollector{0};
std::atomic<int64_t> gBytesAfterCollect{0};   // host counted + held bytes after the last collection
std::atomic<int64_t> gDeviceBytes{0};         // the part of gBytes on a device
std::atomic<int64_t> gDeviceBytesAfterCollect{0};
std::atomic<int64_t> gHeld{0};                // chargeHeldStorage
std::atomic<int64_t> gHeldAfterCollect{0};
std::atomic<const TensorCellObserver*> gObserver{nullptr};

inline void observeMade(TensorObj* cell) {
  const TensorCellObserver* o = gObserver.load(std::memory_order_relaxed);
  if (__builtin_expect(o != nullptr, 0)) o->made(cell);
}
inline void observeDropped(TensorObj* cell) {
  if (const TensorCellObserver* o = gObserver.load(std::memory_order_relaxed)) o->dropped(cell);
}
// The collection threshold. Set (PURPLE_TENSOR_GC_THRESHOLD, set-tensor-gc-threshold!), it is
// fixed. Otherwise it follows the collector's live heap: half of it, from 16 MB to 64 MB. A
// collection costs about the marking of the live heap, so with the few tens of MB a training
// script has, dead tensors go every 16 MB (the MLP epoch, interleaved runs: 2.91-3.22 s and
// 251 MB peak, against 3.70-4.09 s and 315 MB at a fixed 64 MB; the VAE example: 278 MB
// against 398 MB, Python 341 MB), while a script holding a large heap of Lisp data collects no
// more often than before.
constexpr int64_t kLeastThreshold = int64_t(16) << 20;
constexpr int64_t kMostThreshold = int64_t(64) << 20;
std::atomic<bool> gThresholdFixed{false};
std::atomic<int64_t> gThreshold{[] {
  const char* env = std::getenv("PURPLE_TENSOR_GC_THRESHOLD");
  int64_t v = env ? std::atoll(env) : 0;
  if (v > 0) gThresholdFixed.store(true);
  return v > 0 ? v : kLeastThreshold;
}()};

// A collection that found little tensor garbage (less than a quarter of the base threshold:
// tensors, modules' parameters and held storage the collection uncharged) was
// triggered by storage that is live, not dead: with tensors freed early, that is a batch's
// activations in flight (mnist-cnn's test batches of 1000 hold 230 MB at once and collected once
// a batch, finding nothing). Each such collection in a row doubles the threshold, up to 16
// times; one that frees more sets it back. Garbage made meanwhile stays bounded: a collection
// that finds it resets the threshold.
std::atomic<int> gFutileCollections{0};
constexpr int kMostBackoff = 4;

void adaptThreshold(int64_t freedBytes) {
  if (gThresholdFixed.load(std::memory_order_relaxed)) return;
  int64_t live = int64_t(GC_get_heap_size()) - int64_t(GC_get_free_bytes());
  int64_t base = std::clamp(live / 2, kLeastThreshold, kMostThreshold);
  int futile = gFutileCollections.load(std::memory_order_relaxed);
  futile = freedBytes < base / 4 ? std::min(futile + 1, kMostBackoff) : 0;
  gFutileCollections.store(futile, std::memory_order_relaxed);
  gThreshold.store(base << futile, std::memory_order_relaxed);
}

// Device storage has its own threshold, paced by the collections' cost. A collection marks the
// whole live heap (about 1.3 ms for the prelude's 1.6 MB), and on a GPU the kernels run
// asynchronously, so the interpreter's thread is the bottleneck and every collection is time the
// GPU waits: at the host's 16-64 MB, char-GPT's 25-100 MB activations made dozens a step, and
// the gpt10m preset ran at 0.42x Python's tokens/s on an H100. When the collections that device
// storage triggered take more than a tenth of the time since the last one, the threshold
// doubles, up to 2 GB; below a fiftieth it halves again, down to the host's. GPU memory then
// holds at most that much garbage at the peak, traded for time where collecting dominated; a
// CUDA allocation that fails collects and retries anyway (device_memory.hpp). A fixed threshold
// (PURPLE_TENSOR_GC_THRESHOLD, set-tensor-gc-threshold!) fixes this one too.
constexpr int64_t kMostDeviceThreshold = int64_t(2) << 30;
std::atomic<int64_t> gDeviceThreshold{kMostThreshold};
std::atomic<int64_t> gLastDeviceCollectEnd{0};   // steady-clock ns

int64_t steadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t deviceThreshold() {
  return gThresholdFixed.load(std::memory_order_relaxed) ? gThreshold.load(std::memory_order_relaxed)
                                                          : gDeviceThreshold.load(std::memory_order_relaxed);
}

void paceDeviceThreshold(int64_t began, int64_t ended) {
  int64_t last = gLastDeviceCollectEnd.exchange(ended);
  if (last == 0) return;   // the first: no interval to weigh it against yet
  int64_t busy = ended - began, since = began - last;
  int64_t t = gDeviceThreshold.load(std::memory_order_relaxed);
  if (busy * 10 > since) t = std::min(t * 2, kMostDeviceThreshold);
  else if (busy * 50 < since) t = std::max(t / 2, gThreshold.load(std::memory_order_relaxed));
  gDeviceThreshold.store(t, std::memory_order_relaxed);
}

// Storage a tensor's bytes were counted for is on a device (not the CPU).
inline bool onDevice(const at::Tensor& t) { return t.defined() && !t.device().is_cpu(); }

// ---- per-interpreter accounts (tensor_budget.hpp) ----
// A fixed table, so a finalizer on any thread reaches an account without a lock. An account is
// free while its reference count is 0; the interpreter holds one reference and every cell
// charged to it another, so a slot is reused only once nothing can still uncharge it.
struct TensorAccount {
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> refs{0};
};
constexpr uint32_t kAccounts = 1u << 16;   // slot 0 means "no account"
// On the C++ heap, not in .bss: the collector scans Purple's static data as roots at every
// collection, and this megabyte holds no GC pointers. Never freed (finalizers may run at exit).
TensorAccount* const gAccounts = new TensorAccount[kAccounts];
std::mutex gAccountLock;
uint32_t gAccountCursor = 0;

void dropAccount(uint32_t slot) {
  if (slot) gAccounts[slot].refs.fetch_sub(1, std::memory_order_acq_rel);
}

// The account of the interpreter running on this thread when it has a budget, else 0.
uint32_t currentAccount() {
  Interp* in = Interp::current();
  if (!in || in->limits.maxTensorBytes <= 0 || !in->st->tensorAccount.isFixnum()) return 0;
  return uint32_t(in->st->tensorAccount.fixnum());
}

// Charges a cell's counted bytes to the budget of the interpreter running on this thread.
void chargeAccount(TensorObj* cell) {
  cell->extra = 0;
  if (cell->countedBytes <= 0) return;
  uint32_t slot = currentAccount();
  if (!slot) return;
  gAccounts[slot].refs.fetch_add(1, std::memory_order_relaxed);
  gAccounts[slot].bytes.fetch_add(cell->countedBytes, std::memory_order_relaxed);
  cell->extra = slot;
}

// The cell's storage leaves the accounting: process-wide, and its interpreter's budget.
void uncharge(TensorObj* cell) {
  if (cell->countedBytes) {
    gBytes.fetch_sub(cell->countedBytes, std::memory_order_relaxed);
    if (onDevice(cell->tensor)) gDeviceBytes.fetch_sub(cell->countedBytes, std::memory_order_relaxed);
  }
  if (uint32_t slot = cell->extra) {
    gAccounts[slot].bytes.fetch_sub(cell->countedBytes, std::memory_order_relaxed);
    cell->extra = 0;
    dropAccount(slot);
  }
  cell->countedBytes = 0;
}

// ---- when a storage's bytes count as freed ----
// A storage's bytes count once, when the last cell holding it goes: the cell that made it
// (countedBytes), or a view of it that outlived that cell. A cell that made a storage and dies
// while another tensor still holds it (a view, or C++: a dataset, a module) leaves its bytes here,
// under the storage, for the view that goes last; storage C++ keeps is never counted as freed,
// since it is not (mnist-dataset's images, viewed by the dataset, counted 55 MB "freed by the
// collector" before). An entry whose storage C++ dropped stays until its address is reused by a
// storage a cell makes, or the table is full.
std::mutex gDeferredLock;
std::unordered_map<const void*, int64_t> gDeferredBytes;
std::atomic<bool> gAnyDeferred{false};
constexpr size_t kMostDeferred = size_t(1) << 16;   // (a few MB at most; when full, it starts again)

const void* storageKey(const at::TensorBase& t) {
  return t.defined() && t.has_storage() ? static_cast<const void*>(t.storage().unsafeGetStorageImpl()) : nullptr;
}

// The bytes to count as freed now that a cell holding T (which made COUNTED bytes of it) goes.
int64_t bytesFreedWith(const at::Tensor& t, int64_t counted) {
  const void* key = storageKey(t);
  if (!key) return counted;
  // The last holder: none but T, or but T's autograd base, which a view keeps alive and which
  // nothing else holds (LibTorch's view of a view keeps the root base).
  auto holders = t.storage().use_count();
  bool last = holders == 1;
  if (!last && holders == 2 && t.is_view()) {
    const at::TensorBase& base = t._base();   // (a reference: no count of its own)
    last = base.defined() && base.use_count() == 1 && storageKey(base) == key;
  }
  if (counted > 0 && last && !gAnyDeferred.load(std::memory_order_relaxed)) return counted;
  if (counted <= 0 && (!last || !gAnyDeferred.load(std::memory_order_relaxed))) return 0;
  std::lock_guard<std::mutex> g(gDeferredLock);
  auto it = gDeferredBytes.find(key);
  int64_t bytes = counted > 0 ? counted : 0;
  if (it != gDeferredBytes.end() && last) {
    bytes += it->second;
    gDeferredBytes.erase(it);
  } else if (!last && counted > 0) {
    if (gDeferredBytes.size() >= kMostDeferred) gDeferredBytes.clear();
    gDeferredBytes[key] += counted;
    bytes = 0;
  }
  gAnyDeferred.store(!gDeferredBytes.empty(), std::memory_order_relaxed);
  return bytes;
}

// A cell made storage at this address: whatever an earlier storage there left is stale.
void forgetDeferred(const at::Tensor& t) {
  if (!gAnyDeferred.load(std::memory_order_relaxed)) return;
  const void* key = storageKey(t);
  std::lock_guard<std::mutex> g(gDeferredLock);
  gDeferredBytes.erase(key);
  gAnyDeferred.store(!gDeferredBytes.empty(), std::memory_order_relaxed);
}

void finalizeTensor(void* obj, void*) {
  auto* cell = static_cast<TensorObj*>(obj);
  observeDropped(cell);
  if (cell->tensor.defined()) {   // (a cell released early has nothing left to free)
    gFreedByCollector.fetch_add(1, std::memory_order_relaxed);
    gBytesFreedByCollector.fetch_add(bytesFreedWith(cell->tensor, cell->countedBytes), std::memory_order_relaxed);
  }
  uncharge(cell);
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

// Whether host storage counted since the last collection, with FRESH and HELD bytes more about
// to be, asks for one. Storage held by modules (their parameters and buffers) weighs a quarter:
// a model being built is nearly always kept, and the collection its parameters started found
// nothing (resnet18's 47 MB at the 16 MB threshold: Siamese's first collection, before any
// step); modules made and dropped in a loop still start one every four thresholds.
bool hostCollectionDue(int64_t fresh, int64_t held) {
  int64_t heldNew = gHeld.load(std::memory_order_relaxed) + held - gHeldAfterCollect.load(std::memory_order_relaxed);
  int64_t allNew = gBytes.load(std::memory_order_relaxed) - gDeviceBytes.load(std::memory_order_relaxed) +
                   gHeld.load(std::memory_order_relaxed) + fresh + held - gBytesAfterCollect.load(std::memory_order_relaxed);
  int64_t threshold = gThreshold.load(std::memory_order_relaxed);
  return allNew - heldNew > threshold || allNew > 4 * threshold;
}

void collectForTensors(bool forDevice = false) {
  int64_t began = forDevice ? steadyNanos() : 0;
  auto charged = [] { return gBytes.load(std::memory_order_relaxed) + gHeld.load(std::memory_order_relaxed); };
  int64_t chargedBefore = charged();
  gcCollectNow();
  adaptThreshold(chargedBefore - charged());
  gCollections.fetch_add(1, std::memory_order_relaxed);
  int64_t device = gDeviceBytes.load(std::memory_order_relaxed);
  int64_t held = gHeld.load(std::memory_order_relaxed);
  gBytesAfterCollect.store(gBytes.load(std::memory_order_relaxed) - device + held, std::memory_order_relaxed);
  gHeldAfterCollect.store(held, std::memory_order_relaxed);
  gDeviceBytesAfterCollect.store(device, std::memory_order_relaxed);
  if (forDevice) paceDeviceThreshold(began, steadyNanos());
}
}  // namespace

void registerTensorFinalizer(Object* cell) { gcRegisterFinalizer(cell, finalizeTensor, nullptr); }

namespace {
// Charges fresh storage to the accounting: a collection past the threshold, an error past an
// embedder's budget. `replacing` is what the tensor it replaces was charged (one atomic update
// for both), `replacingOnDevice` whether that was device storage. Returns the bytes charged.
int64_t chargeFreshStorage(const at::Tensor& t, int64_t replacing = 0, bool replacingOnDevice = false) {
  int64_t bytes = freshStorageBytes(t);
  bool device = bytes > 0 && onDevice(t);
  int64_t deviceChange = (device ? bytes : 0) - (replacingOnDevice ? replacing : 0);
  if (bytes > 0) {
    if (device) {
      int64_t now = gDeviceBytes.load(std::memory_order_relaxed) + deviceChange;
      if (now - gDeviceBytesAfterCollect.load(std::memory_order_relaxed) > deviceThreshold()) {
        collectForTensors(true);
        gDeviceBytesAfterCollect.fetch_add(deviceChange, std::memory_order_relaxed);
      }
    } else {
      int64_t change = bytes - (replacingOnDevice ? 0 : replacing);
      if (hostCollectionDue(change, 0)) {
        // The storage that asked for the collection is live once it returns: it belongs to what
        // survived it, not to what the next collection is counted from. (Otherwise one large
        // tensor made as a program starts, a dataset loaded, asks for two collections in a row.)
        collectForTensors();
        gBytesAfterCollect.fetch_add(change, std::memory_order_relaxed);
      }
    }
    checkTensorBudget(t);
  }
  if (deviceChange) gDeviceBytes.fetch_add(deviceChange, std::memory_order_relaxed);
  if (bytes == replacing) return bytes;
  int64_t now = gBytes.fetch_add(bytes - replacing, std::memory_order_relaxed) + bytes - replacing;
  int64_t peak = gPeak.load(std::memory_order_relaxed);
  while (now > peak && !gPeak.compare_exchange_weak(peak, now)) {
  }
  return bytes;
}

// Statistics only: a plain load and store (no locked instruction on the hot path); a count
// lost to a race with another thread is harmless. BYTES: the storage the release freed, as
// charged to the accounting (a view's cell was charged nothing: its storage counts where it was
// made).
void countReleased(int64_t bytes) {
  gReleased.store(gReleased.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (bytes) gBytesFreedEarly.store(gBytesFreedEarly.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
}
}  // namespace

uint32_t openTensorAccount(Interp& in) {
  if (in.st->tensorAccount.isFixnum()) return uint32_t(in.st->tensorAccount.fixnum());
  std::lock_guard<std::mutex> g(gAccountLock);
  for (uint32_t k = 1; k < kAccounts; k++) {
    uint32_t slot = 1 + (gAccountCursor + k - 1) % (kAccounts - 1);
    if (gAccounts[slot].refs.load(std::memory_order_acquire) == 0) {
      gAccounts[slot].bytes.store(0, std::memory_order_relaxed);
      gAccounts[slot].refs.store(1, std::memory_order_release);
      gAccountCursor = slot;
      in.st->tensorAccount = Value::fixnum(slot);
      return slot;
    }
  }
  return 0;
}

void closeTensorAccount(Interp& in) {
  if (!in.st->tensorAccount.isFixnum()) return;
  dropAccount(uint32_t(in.st->tensorAccount.fixnum()));
  in.st->tensorAccount = Value::f();
}

void checkTensorBudget(const at::Tensor& t) {
  Interp* in = Interp::current();
  int64_t cap = in ? in->limits.maxTensorBytes : 0;
  if (cap <= 0) return;
  int64_t bytes = freshStorageBytes(t);
  // The interpreter's own account; without one (every slot taken), the process-wide count.
  uint32_t slot = currentAccount();
  std::atomic<int64_t>& held = slot ? gAccounts[slot].bytes : gBytes;
  if (bytes <= 0 || held.load() + bytes <= cap) return;
  collectForTensors();
  if (held.load() + bytes > cap)
    throwError("memory-error", "tensor memory budget exceeded (" + std::to_string(held.load()) + " bytes held, " +
                                   std::to_string(bytes) + " more asked, limit " + std::to_string(cap) + " bytes)");
}

Value wrapTensor(at::Tensor t) {
  int64_t bytes = chargeFreshStorage(t);
  // The cell holds no GC pointers (at::Tensor points into LibTorch's heap): atomic, unscanned.
  auto* cell = static_cast<TensorObj*>(GC_MALLOC_ATOMIC(sizeof(TensorObj)));
  if (!cell) {
    gBytes.fetch_sub(bytes, std::memory_order_relaxed);
    if (bytes > 0 && onDevice(t)) gDeviceBytes.fetch_sub(bytes, std::memory_order_relaxed);
    throw std::bad_alloc();
  }
  cell->kind = Kind::Tensor;
  cell->flags = 0;
  cell->small = 0;
  cell->extra = 0;
  new (&cell->tensor) at::Tensor(std::move(t));
  cell->countedBytes = bytes;
  if (bytes > 0) forgetDeferred(cell->tensor);
  chargeAccount(cell);
  gLive.fetch_add(1, std::memory_order_relaxed);
  registerTensorFinalizer(cell);
  Value v(cell);
  noteTensorCreated(v);
  observeMade(cell);
  return v;
}

void noteTensorFreedUnboxed(const at::Tensor& t) { countReleased(freshStorageBytes(t)); }

void reuseTensorCell(Value old, at::Tensor t) {
  auto* cell = old.as<TensorObj>();
  int64_t bytes = chargeFreshStorage(t, cell->countedBytes, onDevice(cell->tensor));   // may collect or throw: cell intact
  if (uint32_t slot = cell->extra) {        // the old storage leaves its interpreter's budget
    gAccounts[slot].bytes.fetch_sub(cell->countedBytes, std::memory_order_relaxed);
    cell->extra = 0;
    dropAccount(slot);
  }
  int64_t freed = bytesFreedWith(cell->tensor, cell->countedBytes);
  cell->tensor = at::Tensor();             // the old tensor goes first, as under refcounting
  cell->tensor = std::move(t);
  cell->countedBytes = bytes;
  if (bytes > 0) forgetDeferred(cell->tensor);
  chargeAccount(cell);
  countReleased(freed);
  observeMade(cell);
}

std::atomic<bool> gSoleOwnedCellsMade{false};

Value wrapSoleOwnedTensor(at::Tensor t) {
  Value v = wrapTensor(std::move(t));
  // Inside a tensor scope every new tensor must stay recorded in the scope: no reuse there.
  if (!tensorScopeOpen()) markSoleOwned(v);
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
  observeDropped(cell);
  int64_t freed = bytesFreedWith(cell->tensor, cell->countedBytes);
  uncharge(cell);
  cell->tensor = at::Tensor();
  countReleased(freed);
}

TensorMemoryStats tensorMemoryStats() {
  return TensorMemoryStats{gLive.load(), gBytes.load(), gPeak.load(), gCollections.load(), gThreshold.load(), gReleased.load(),
                           gHeld.load(), gDeviceBytes.load(), deviceThreshold(), gFreedByCollector.load(),
                           gBytesFreedEarly.load(), gBytesFreedByCollector.load()};
}

void chargeHeldStorage(int64_t bytes) {
  if (bytes <= 0) return;
  if (hostCollectionDue(0, bytes)) {
    collectForTensors();
    gBytesAfterCollect.fetch_add(bytes, std::memory_order_relaxed);   // (as chargeFreshStorage's)
    gHeldAfterCollect.fetch_add(bytes, std::memory_order_relaxed);
  }
  gHeld.fetch_add(bytes, std::memory_order_relaxed);
}

void unchargeHeldStorage(int64_t bytes) { gHeld.fetch_sub(bytes, std::memory_order_relaxed); }

void setTensorCellObserver(const TensorCellObserver* observer) { gObserver.store(observer, std::memory_order_release); }

void setTensorCollectThreshold(int64_t bytes) {
  gThresholdFixed.store(true);
  gThreshold.store(bytes > 0 ? bytes : int64_t(1) << 20);
}

}  // namespace purple
