// The recorder behind tensor-memory-report (tensor_origins.hpp). It watches tensor cells through
// the cell observer of tensor_value.hpp, so nothing runs while it is off. A cell is credited to
// the innermost call record written outside the prelude: the user's line, also when the tensor
// was made deep inside a library procedure that line called.
//
// Autograd graphs: a graph keeps the tensors its backward needs (saved variables) after every
// Purple value of them is gone, and LibTorch has no portable way to list a node's saved tensors.
// So each storage keeps, weakly, the grad_fn of the tensor that made it: when the storage is still
// alive, no live value uses it, and that grad_fn is reachable from the grad_fn of a live tensor,
// the storage is held by that tensor's graph. (A saved tensor made by an op is the output or an
// input of a node in the graph, and the node of its own op is then in the graph too.)
#include "interp/language/tensor_origins.hpp"
#include "interp/core/gc.hpp"
#include "interp/language/call_site.hpp"
#include "interp/memory/tensor_value.hpp"
#include "interp/platform/torch_compat.hpp"
#include <ATen/SequenceNumber.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <gc/gc.h>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace purple {

std::atomic<bool> gRecordingTensorOrigins{false};

namespace {

struct Site {
  std::string file;
  int line = 0, col = 0;
  std::string procedure;
};

struct SiteKey {
  const void* app;
  const void* lambda;
  bool operator==(const SiteKey& o) const { return app == o.app && lambda == o.lambda; }
};
struct SiteKeyHash {
  size_t operator()(const SiteKey& k) const {
    return std::hash<const void*>()(k.app) * 31 + std::hash<const void*>()(k.lambda);
  }
};

struct StorageRecord {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  uint32_t site;
  std::weak_ptr<torch::autograd::Node> producer;
};

// Everything below is guarded by gLock: cells are made on the interpreter's thread, but a
// finalizer may run on whichever thread collected. Recursive: a storage freed while the report
// holds it reports its free to the allocation recorder.
std::recursive_mutex gLock;
std::vector<Site> gSites{Site{}};                      // 0: position unknown
std::unordered_map<SiteKey, uint32_t, SiteKeyHash> gSiteIds;
std::vector<void**> gSiteRoots;                        // keep the nodes of each key alive (no reuse of an address)
std::unordered_map<const TensorObj*, uint32_t> gCells; // live tensor cells -> site
std::unordered_map<const c10::StorageImpl*, StorageRecord> gStorages;
size_t gStoragesAtLastPrune = 0;

// The unboxed result noted by noteUnboxedTensorSite, for the cell made next. Held weakly: the
// TensorImpl's memory then stays allocated, so a later tensor cannot take its address and be
// mistaken for it after the noted one was consumed without a cell (an argument of another op).
using WeakTensorImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
using StrongTensorImpl = c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
thread_local const AppNode* tPendingApp = nullptr;
thread_local WeakTensorImpl tPendingTensor{StrongTensorImpl()};

uint32_t siteFor(const AppNode* app) {
  const LambdaNode* lambda = app ? app->owner : nullptr;
  SiteKey key{app, lambda};
  auto it = gSiteIds.find(key);
  if (it != gSiteIds.end()) return it->second;
  Site s;
  if (app) {
    s.file = positionFile(app->pos);
    s.line = app->pos.line;
    s.col = app->pos.col;
  }
  s.procedure = app ? procedureOfCall(app) : "<top level>";
  auto** root = static_cast<void**>(GC_MALLOC_UNCOLLECTABLE(2 * sizeof(void*)));
  if (root) {
    root[0] = const_cast<AppNode*>(app);
    root[1] = const_cast<LambdaNode*>(lambda);
    gSiteRoots.push_back(root);
  }
  uint32_t id = uint32_t(gSites.size());
  gSites.push_back(std::move(s));
  gSiteIds.emplace(key, id);
  return id;
}

// The site of the call running now on this thread's interpreter.
uint32_t currentSite(const TensorObj* cell) {
  Interp* in = Interp::current();
  if (!in) return 0;
  if (tPendingApp && tPendingTensor._unsafe_get_target() == cell->tensor.unsafeGetTensorImpl()) {
    const AppNode* app = tPendingApp;
    tPendingApp = nullptr;
    tPendingTensor.reset();
    // the unboxed call's record is gone: its enclosing closure is the innermost one now
    if (!(app->flags & kAppInPrelude)) return siteFor(app);
  }
  int64_t at = 0;
  const AppNode* app = innermostUserCall(*in, &at);
  return app ? siteFor(app) : 0;
}

// Drops the records of storages nobody holds any more, so a long recording stays small.
void pruneStorages() {
  for (auto it = gStorages.begin(); it != gStorages.end();)
    it = it->second.storage.expired() ? gStorages.erase(it) : std::next(it);
  gStoragesAtLastPrune = gStorages.size();
}

void cellMade(TensorObj* cell) {
  const at::Tensor& t = cell->tensor;
  if (!t.defined()) return;
  std::lock_guard<std::recursive_mutex> g(gLock);
  uint32_t site = currentSite(cell);
  gCells[cell] = site;
  if (!t.has_storage()) return;
  const c10::Storage& s = t.storage();
  auto it = gStorages.find(s.unsafeGetStorageImpl());
  if (it != gStorages.end() && !it->second.storage.expired()) return;   // a view: the storage keeps its maker
  StorageRecord rec{s.getWeakStorageImpl(), site, t.grad_fn()};
  if (it != gStorages.end()) it->second = std::move(rec);
  else gStorages.emplace(s.unsafeGetStorageImpl(), std::move(rec));
  if (gStorages.size() > 2 * gStoragesAtLastPrune + 4096) pruneStorages();
}

void cellDropped(TensorObj* cell) {
  std::lock_guard<std::recursive_mutex> g(gLock);
  gCells.erase(cell);
}

const TensorCellObserver kObserver{cellMade, cellDropped};

// Every CPU allocation on the recording thread, through LibTorch's memory reports (the hook its
// profiler uses): storage that LibTorch makes inside one call, where no cell sees it (a built-in
// layer's activations inside a sequential model), is still credited to the user's line. The
// autograd sequence number at the allocation is that of the node the allocating operator makes,
// which is how an allocation no value uses is found to belong to a live tensor's graph.
struct AllocRecord {
  uint32_t site;
  int64_t bytes;
  uint64_t sequence;
};
std::unordered_map<const void*, AllocRecord> gAllocs;

class AllocationRecorder final : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void* ptr, int64_t size, compat::MemoryReportTotal, compat::MemoryReportTotal, c10::Device) override {
    if (!ptr || !recordingTensorOrigins()) return;
    std::lock_guard<std::recursive_mutex> g(gLock);
    if (size <= 0) {
      gAllocs.erase(ptr);
      return;
    }
    Interp* in = Interp::current();
    int64_t at = 0;
    const AppNode* app = in ? innermostUserCall(*in, &at) : nullptr;
    gAllocs[ptr] = AllocRecord{app ? siteFor(app) : 0, size, at::sequence_number::peek()};
  }
  bool memoryProfilingEnabled() const override { return true; }
};
std::thread::id gRecordingThread;

}  // namespace

void setRecordingTensorOrigins(bool on) {
  std::lock_guard<std::recursive_mutex> g(gLock);
  if (on == gRecordingTensorOrigins.load()) return;
  gRecordingTensorOrigins.store(on);
  setTensorCellObserver(on ? &kObserver : nullptr);
  if (on) {
    gRecordingThread = std::this_thread::get_id();
    c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, std::make_shared<AllocationRecorder>());
    return;
  }
  if (gRecordingThread == std::this_thread::get_id() &&
      dynamic_cast<AllocationRecorder*>(c10::ThreadLocalDebugInfo::_peek(c10::DebugInfoKind::PROFILER_STATE).get()))
    c10::ThreadLocalDebugInfo::_pop(c10::DebugInfoKind::PROFILER_STATE);
  gAllocs.clear();
  gCells.clear();
  gStorages.clear();
  gStoragesAtLastPrune = 0;
  gSiteIds.clear();
  gSites.resize(1);
  for (void** root : gSiteRoots) GC_FREE(root);
  gSiteRoots.clear();
}

void noteUnboxedTensorSite(const AppNode* app, const at::Tensor& result) {
  tPendingApp = result.defined() ? app : nullptr;
  tPendingTensor = WeakTensorImpl(result.defined() ? result.getIntrusivePtr() : StrongTensorImpl());
}

OriginReport tensorOriginReport() {
  gcCollectNow();   // dead cells finalized: what is left in gCells is alive
  std::lock_guard<std::recursive_mutex> g(gLock);
  pruneStorages();
  std::unordered_map<const c10::StorageImpl*, bool> usedByValue;
  // Every node reachable from a live tensor's grad_fn, with the site of the first such tensor.
  std::unordered_map<const torch::autograd::Node*, uint32_t> graphOwner;
  std::vector<int64_t> tensorsAt(gSites.size(), 0);
  std::vector<const torch::autograd::Node*> work;
  std::unordered_map<uint64_t, uint32_t> sequenceOwner;   // node sequence number -> root site
  std::unordered_map<const void*, bool> leafData;         // storage of the graphs' leaves
  for (auto& [cell, site] : gCells) {
    const at::Tensor& t = cell->tensor;
    if (!t.defined()) continue;
    tensorsAt[site]++;
    if (t.has_storage()) usedByValue[t.storage().unsafeGetStorageImpl()] = true;
    const std::shared_ptr<torch::autograd::Node>& fn = t.grad_fn();
    if (!fn || graphOwner.count(fn.get())) continue;
    graphOwner.emplace(fn.get(), site);
    work.push_back(fn.get());
    while (!work.empty()) {
      const torch::autograd::Node* n = work.back();
      work.pop_back();
      // A leaf (a parameter) is reachable too, but its owner holds it, not the graph; and it may
      // have been made at a sequence number that a node of the graph took later.
      if (auto* acc = dynamic_cast<const torch::autograd::AccumulateGrad*>(n)) {
        if (acc->variable.defined() && acc->variable.has_storage()) leafData[acc->variable.storage().data()] = true;
        continue;
      }
      sequenceOwner.emplace(n->sequence_nr(), site);
      for (const torch::autograd::Edge& e : n->next_edges()) {
        const torch::autograd::Node* next = e.function.get();
        if (next && graphOwner.emplace(next, site).second) work.push_back(next);
      }
    }
  }
  std::vector<OriginRow> rows(gSites.size()), holders(gSites.size());
  std::unordered_map<const void*, bool> storageData;   // data of the storages counted below
  auto graphRootOf = [&](const void* data) -> int64_t {
    auto a = gAllocs.find(data);
    if (a == gAllocs.end()) return -1;
    auto s = sequenceOwner.find(a->second.sequence);
    return s == sequenceOwner.end() ? -1 : int64_t(s->second);
  };
  for (auto& [impl, rec] : gStorages) {
    auto strong = rec.storage.lock();
    if (!strong) continue;
    int64_t bytes = int64_t(strong->nbytes());
    const void* data = strong->data_ptr().get();
    if (data) storageData[data] = true;
    OriginRow& row = rows[rec.site];
    if (usedByValue.count(impl)) {
      row.valueBytes += bytes;
      continue;
    }
    std::shared_ptr<torch::autograd::Node> producer = rec.producer.lock();
    auto owner = producer ? graphOwner.find(producer.get()) : graphOwner.end();
    int64_t root = owner != graphOwner.end() ? int64_t(owner->second) : leafData.count(data) ? -1 : graphRootOf(data);
    if (root >= 0) {
      row.graphBytes += bytes;
      holders[size_t(root)].graphBytes += bytes;
    } else {
      row.otherBytes += bytes;
    }
  }
  // Allocations no cell ever held: made inside one LibTorch call.
  for (auto& [data, alloc] : gAllocs) {
    if (storageData.count(data)) continue;
    OriginRow& row = rows[alloc.site];
    auto s = leafData.count(data) ? sequenceOwner.end() : sequenceOwner.find(alloc.sequence);
    if (s != sequenceOwner.end()) {
      row.graphBytes += alloc.bytes;
      holders[s->second].graphBytes += alloc.bytes;
    } else {
      row.otherBytes += alloc.bytes;
    }
  }
  auto finish = [&](std::vector<OriginRow>& v, bool withTensors) {
    std::vector<OriginRow> out;
    for (size_t i = 0; i < v.size(); i++) {
      OriginRow& r = v[i];
      if (withTensors) r.tensors = tensorsAt[i];
      if (r.total() == 0 && r.tensors == 0) continue;
      r.file = gSites[i].file;
      r.line = gSites[i].line;
      r.col = gSites[i].col;
      r.procedure = gSites[i].procedure;
      out.push_back(std::move(r));
    }
    std::stable_sort(out.begin(), out.end(), [](const OriginRow& a, const OriginRow& b) {
      return a.total() != b.total() ? a.total() > b.total() : a.tensors > b.tensors;
    });
    return out;
  };
  OriginReport report;
  report.rows = finish(rows, true);
  report.holders = finish(holders, false);
  return report;
}

}  // namespace purple
