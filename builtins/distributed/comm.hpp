// What the distributed family (builtins/distributed/) shares: process groups and their values,
// the process-wide state that dist-init sets up, and how communication failures are reported.
//
// Everything here is C++ state outside the collector's reach on purpose: c10d objects, tensors
// and Gloo's threads never hold a Purple value, so LibTorch and Gloo may call back on any
// thread (gradient hooks, work completion) without touching the collector (DESIGN.md's rules).
// Purple values are made only on the interpreter's thread, from results these objects hand over.
//
// LibTorch 1.13 calls the object that runs collectives a ProcessGroup; 2.x splits it into a
// ProcessGroup that routes to per-device Backends, and ProcessGroupGloo/NCCL are Backends. Purple
// drives the backend object directly in both: `Comm` names whichever class that is.
#pragma once
#include "interp/language/bind.hpp"
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include "interp/platform/torch_compat.hpp"
#if PURPLE_C10D_BACKENDS   // torch_compat.hpp, 9.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace purple::dist {

#if PURPLE_C10D_BACKENDS   // torch_compat.hpp, 9.
using Comm = c10d::Backend;
#else
using Comm = c10d::ProcessGroup;
#endif
using CommPtr = c10::intrusive_ptr<Comm>;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;
using StorePtr = c10::intrusive_ptr<c10d::Store>;

// A process group: the world, or a sub-group made by dist-new-group. A process outside a
// sub-group holds a Group with no comm (rank -1), as torch's NON_GROUP_MEMBER.
struct Group {
  CommPtr comm;
  std::string name;                  // its store prefix: "0" for the world, "1", "2" ... after
  std::string backend;               // "gloo" or "nccl"
  int rank = -1;                     // this process's rank in the group, -1 outside it
  int size = 0;
  std::vector<int> globalRanks;      // group rank -> world rank
  // Every rank of the job is a Purple process, so collectives can first check across ranks
  // that all ranks call the same collective on matching tensors (fingerprint.cpp). With a
  // Python peer that exchange would not be understood, so it is off.
  bool checked = false;
  std::chrono::milliseconds timeout{0};

  bool member() const { return comm.defined(); }
  int groupRankOf(int worldRank) const;   // -1 when not in the group
};
using GroupPtr = std::shared_ptr<Group>;

// The process-wide state (torch.distributed's is process-wide too).
struct World {
  GroupPtr world;                    // null until dist-init
  StorePtr store;                    // the store with torch's "default_pg" prefix
  int localRank = 0;
  int localWorldSize = 1;
  int groupsMade = 0;                // groups created so far, the world included (names, barrier keys)
  bool allPurple = false;
  std::vector<std::weak_ptr<Group>> groups;   // for dist-destroy
};
World& world();
bool initialized();

// ---- group values ---------------------------------------------------------------------------

Value wrapGroup(GroupPtr g);
bool isGroupValue(Value v);
// The group V names (a group value), or the world when V is missing or #f. Raises a clear error
// naming WHO when dist-init has not run, or when this process is not in the group.
GroupPtr groupArg(Value v, std::string_view who, bool requireMember = true);
// A world rank given as :src / :dst, as the rank in GROUP (torch's convention: collectives
// name peers by their world rank).
int groupRankArg(const Group& g, int64_t worldRank, std::string_view who, std::string_view key);

// ---- failures -------------------------------------------------------------------------------

// Raises a Purple error for a failed collective: LibTorch's one-line message, plus what the
// launcher knows about a rank that has died (PURPLE_RUN_FAILURE_FILE), so that the survivors of
// a killed rank say which rank it was.
[[noreturn]] void throwCommError(std::string_view who, const std::exception& e);
// The same message as a plain string, for code that runs on LibTorch's threads (gradient hooks)
// and so must not make Purple values.
std::string describeCommFailure(std::string_view who, const std::exception& e);
[[noreturn]] void rethrowCommError(std::string_view who);   // from inside a catch block
// The launcher's account of a failed rank, waiting up to `wait` for it to appear; "" if none.
std::string launcherFailureReport(std::chrono::milliseconds wait);

// Waits for WORK, turning its failure into throwCommError(WHO).
void waitWork(const WorkPtr& work, std::string_view who);

// ---- collective checks (fingerprint.cpp) ----------------------------------------------------

enum class Op : int64_t {
  AllReduce = 1, Broadcast, Reduce, AllGather, Gather, Scatter, ReduceScatter, AllToAll,
  AllToAllSingle, Barrier, Send, Recv, BroadcastObject, AllGatherObject, GatherObject,
  ScatterObject, SendObject, RecvObject, NewGroup, DataParallel,
};
const char* opName(Op op);

// What one rank brings to a collective, compared across the ranks before the collective runs.
struct Contribution {
  Op op;
  int64_t root = -1;                 // src / dst as a world rank, or -1
  int64_t reduceOp = -1;
  const at::Tensor* tensor = nullptr;   // the tensor whose dtype and shape must agree
  std::vector<int64_t> extra = {};   // per-op numbers that must agree (list lengths ...)
};
// When the group is checked, gathers every rank's contribution and raises one clear error, on
// every rank, if they disagree. A no-op for unchecked groups.
void checkAgreement(Group& g, const Contribution& c, std::string_view who);

// Point-to-point transfers in checked groups: the sender sends a header (dtype, shape, bytes)
// before the data, both without waiting; the receiver first receives the header, and posts the
// receive of the data only once the header matches its tensor (a mismatched Gloo receive aborts
// the process). On a mismatch it drains the data into scratch memory, so the sender is not left
// waiting, and raises an error naming both shapes. Neither side blocks before dist-wait, so
// isend/irecv pairs may be posted in any order.
at::Tensor makeHeader(const at::Tensor& t);
at::Tensor emptyHeader();
// After HEADER (from group rank FROM) arrived for a receive into T: the buffer to receive the
// data into (T's contiguous buffer, or scratch memory when they disagree) and the error to raise
// once it is drained ("" when they agree).
at::Tensor receiveBufferFor(const at::Tensor& header, const at::Tensor& t, const at::Tensor& contiguous, int from,
                            const Group& g, std::string_view who, std::string& mismatch);

// ---- shared by the data-parallel wrappers (ddp.cpp, sharding.cpp, zero.cpp) -----------------

// Broadcasts TENSORS from group rank ROOT in place, packed into flat tensors per dtype and device
// of at most PACK-BYTES each; a contiguous tensor of PACK-BYTES or more goes alone, uncopied.
void broadcastPacked(Group& g, const std::vector<at::Tensor>& tensors, int root, std::string_view who,
                     int64_t packBytes = INT64_MAX);
// Raises one error on every rank unless every rank of G gives parameters of the same shapes and dtypes.
void checkSameModel(Group& g, const std::vector<at::Tensor>& params, std::string_view who);
// Every rank's V (Purple data, codec.hpp), as a list in group rank order: a collective (objects.cpp).
Value allGatherValue(Group& g, Value v, std::string_view who);

// ---- backends (backends.cpp) ----------------------------------------------------------------

// A new backend of the given kind ("gloo" or "nccl") over STORE.
CommPtr makeBackend(const std::string& kind, const StorePtr& store, int rank, int size,
                    std::chrono::milliseconds timeout, std::string_view who);
bool ncclAvailable();

}  // namespace purple::dist
