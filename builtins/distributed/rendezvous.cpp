// How ranks find each other. The steps, and the store keys, are those of Python's
// torch.distributed.init_process_group / new_group for the LibTorch Purple is built against:
//
//   1.13: store = PrefixStore("default_pg", TCPStore(MASTER_ADDR, MASTER_PORT; rank 0 serves))
//         group k (the world is 0) uses PrefixStore("<k>", store); after constructing its backend,
//         every rank joins the store-based barrier "store_based_barrier_key:<k+1>", then sets
//         the group's sequence number.
//   2.x:  the world uses PrefixStore("cpu/" or "cuda/", PrefixStore("0/", store)), and group k
//         the same with "<k>/" nested under the world's "0/"; the sequence number is set right
//         after construction; the barrier key is "...:<k>" with a ":last_worker" key (a
//         sub-group's in the world's "0/" store), and barriers run only when
//         TORCH_DIST_INIT_BARRIER=1. The TCP store is the classic one, not libuv's.
//
// Under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True) every rank is a client and
// keys live under "/worker/attempt_<restart count>", as in Python.
//
// What Purple adds, in keys Python never reads: each rank publishes "purple/world-size/<rank>"
// before it constructs its backend. While the backend connects (which blocks until all ranks
// are there), a second store connection watches those keys, so ranks started with different
// world sizes, or two processes claiming one rank, fail at once with an error saying so rather
// than at the timeout. Once the backend is connected every rank has published, so whether all
// ranks are Purple processes is known exactly; only then are collectives checked (fingerprint.cpp).
#include "builtins/distributed/rendezvous.hpp"
#include "interp/platform/torch_compat.hpp"
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <c10/util/Exception.h>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace purple::dist {

namespace {

using Clock = std::chrono::steady_clock;

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string messageOf(const std::exception& e) {
  std::string m = dynamic_cast<const c10::Error*>(&e) ? static_cast<const c10::Error&>(e).what_without_backtrace() : e.what();
  auto nl = m.find('\n');
  if (nl != std::string::npos) m.resize(nl);
  return m;
}

std::string seconds(std::chrono::milliseconds ms) {
  double s = double(ms.count()) / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, s == double(int64_t(s)) ? "%.0f s" : "%.1f s", s);
  return buf;
}

std::vector<uint8_t> bytesOf(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string stringOf(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

bool useAgentStore() {
  const char* v = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return v && std::string(v) == "True";
}

// A TCP store connection. Rank 0 serves (unless torchrun's agent does). Clients count themselves
// in the server's "init/" key (waitWorkers), which a Python rank 0 waits for; Purple's rank 0
// does not wait there, so that it can watch for misconfiguration while the others arrive.
StorePtr connectTcp(const InitRequest& r, bool serve, bool countIn, std::string_view who) {
  c10d::TCPStoreOptions opts;
  opts.port = uint16_t(r.port);
  opts.isServer = serve;
  if (countIn || serve) opts.numWorkers = size_t(r.worldSize);
  opts.waitWorkers = countIn;
  opts.timeout = r.timeout;
  opts.multiTenant = true;
  compat::tcpStoreWithoutLibuv(opts);
  try {
    return c10::make_intrusive<c10d::TCPStore>(r.host, opts);
  } catch (const std::exception& e) {
    std::string m = messageOf(e);
    std::string where = r.host + ":" + std::to_string(r.port);
    if (serve && (contains(m, "Address already in use") || contains(m, "errno: 98")))
      throwError("dist-error", std::string(who) + ": rank 0 cannot serve the store on port " + std::to_string(r.port) +
                                   ": the port is already in use (MASTER_PORT; choose a free port, or let purple-run "
                                   "choose one)");
    if (!serve && (contains(m, "timed out") || contains(m, "Timed out") || contains(m, "refused")))
      throwError("dist-error", std::string(who) + ": rank " + std::to_string(r.rank) + " could not reach the store at " +
                                   where + " within " + seconds(r.timeout) +
                                   " (is rank 0 running? MASTER_ADDR and MASTER_PORT must be the same on every rank): " + m);
    throwError("dist-error", std::string(who) + ": cannot connect to the store at " + where + ": " + m);
  }
}

StorePtr withJobPrefix(StorePtr s) {
  if (useAgentStore()) {
    const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
    s = c10::make_intrusive<c10d::PrefixStore>(std::string("/worker/attempt_") + (attempt ? attempt : "0"), s);
  }
  return c10::make_intrusive<c10d::PrefixStore>("default_pg", s);
}

std::string worldSizeKey(int rank) { return "purple/world-size/" + std::to_string(rank); }
std::string rankClaimKey(int rank) { return "purple/rank-claims/" + std::to_string(rank); }

// Watches the keys the other Purple ranks publish; raises on the first disagreement.
class MisconfigurationWatch {
 public:
  MisconfigurationWatch(StorePtr store, int rank, int worldSize, std::string who)
      : store_(std::move(store)), rank_(rank), n_(worldSize), who_(std::move(who)), seen_(worldSize, false) {
    seen_[rank] = true;
  }
  void poll() {
    if (!store_) return;
    for (int r = 0; r < n_; r++) {
      if (seen_[r]) continue;
      std::string key = worldSizeKey(r), theirs;
      try {
        if (!store_->check({key})) continue;
        theirs = stringOf(store_->get(key));
      } catch (const std::exception& e) {
        throwError("dist-error", who_ + ": lost the connection to the store that rank 0 serves (rank 0 has probably "
                                        "failed; see its error): " + messageOf(e));
      }
      seen_[r] = true;
      if (theirs != std::to_string(n_))
        throwError("dist-error", who_ + ": the ranks disagree on the world size: this process (rank " +
                                     std::to_string(rank_) + ") has WORLD_SIZE=" + std::to_string(n_) + ", rank " +
                                     std::to_string(r) + " has WORLD_SIZE=" + theirs +
                                     "; start every rank with the same world size");
    }
  }

 private:
  StorePtr store_;
  int rank_, n_;
  std::string who_;
  std::vector<bool> seen_;
};

std::string groupName(int index) { return std::to_string(index); }

// The store a group's backend talks through (the layouts are compat::kDistProtocol2's comment).
StorePtr groupStore(const StorePtr& base, int index, const std::string& backend) {
  if constexpr (compat::kDistProtocol2) {
    StorePtr parent = index == 0 ? base : StorePtr(c10::make_intrusive<c10d::PrefixStore>(groupName(0) + "/", base));
    auto named = c10::make_intrusive<c10d::PrefixStore>(groupName(index) + "/", parent);
    return c10::make_intrusive<c10d::PrefixStore>(backend == "nccl" ? "cuda/" : "cpu/", named);
  } else {
    (void)backend;
    return c10::make_intrusive<c10d::PrefixStore>(groupName(index), base);
  }
}

// The store a group's store-based barrier counts in: the job's store for the world, and for a
// sub-group the world's own store (2.x's "0/"; 1.13 used the job's store for all).
StorePtr barrierStore(const StorePtr& base, int index) {
  if (compat::kDistProtocol2 && index != 0) return c10::make_intrusive<c10d::PrefixStore>(groupName(0) + "/", base);
  return base;
}

std::string barrierKey(int index) {
  if constexpr (compat::kDistProtocol2) return "store_based_barrier_key:" + groupName(index);
  return "store_based_barrier_key:" + std::to_string(index + 1);   // Python 1.13 counts after creating
}

// Python's _store_based_barrier, in the form both versions accept: count in; the last to arrive
// sets ":last_worker" (2.x waits for that key, 1.13 for the count).
void storeBarrier(const StorePtr& store, int index, int count, std::chrono::milliseconds timeout,
                  MisconfigurationWatch* watch, std::string_view who) {
  std::string key = barrierKey(index), last = key + ":last_worker";
  int64_t arrived = store->add(key, 1);
  if (arrived == count) store->set(last, bytesOf("1"));
  auto deadline = Clock::now() + timeout;
  for (;;) {
    arrived = store->add(key, 0);
    if (arrived > count)
      throwError("dist-error", std::string(who) + ": " + std::to_string(arrived) +
                                   " processes joined a group of world size " + std::to_string(count) +
                                   "; start exactly WORLD_SIZE ranks, each with its own RANK");
    if (arrived == count || store->check({last})) return;
    if (watch) watch->poll();
    if (Clock::now() > deadline)
      throwError("dist-error", std::string(who) + ": timed out after " + seconds(timeout) + ": only " +
                                   std::to_string(arrived) + " of " + std::to_string(count) + " ranks arrived");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Constructs the backend on a helper thread while the calling thread polls WATCH: the
// constructor blocks until every rank has connected, and cannot be interrupted. When the watch
// raises, the helper is left to time out on its own; it holds nothing of Purple's.
CommPtr constructWatched(const std::string& backend, StorePtr store, int rank, int size,
                         std::chrono::milliseconds timeout, MisconfigurationWatch* watch, std::string_view who) {
  if (!watch) return makeBackend(backend, store, rank, size, timeout, who);
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    CommPtr comm;
    std::exception_ptr error;
  };
  auto shared = std::make_shared<Shared>();
  std::string whoCopy(who);
  std::thread helper([shared, backend, store, rank, size, timeout, whoCopy] {
    CommPtr c;
    std::exception_ptr err;
    try {
      c = makeBackend(backend, store, rank, size, timeout, whoCopy);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(shared->m);
    shared->comm = std::move(c);
    shared->error = err;
    shared->done = true;
    shared->cv.notify_all();
  });
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(shared->m);
      if (shared->cv.wait_for(lock, std::chrono::milliseconds(25), [&] { return shared->done; })) break;
    }
    try {
      watch->poll();
    } catch (...) {
      helper.detach();
      throw;
    }
  }
  helper.join();
  if (shared->error) {
    try {
      std::rethrow_exception(shared->error);
    } catch (const PurpleException&) {
      throw;
    } catch (const std::exception& e) {
      std::string m = messageOf(e);
      if (contains(m, "imed out") || contains(m, "Timeout"))
        throwError("dist-error", std::string(who) + ": timed out after " + seconds(timeout) +
                                     " waiting for all " + std::to_string(size) + " ranks to connect: " + m);
      throwError("dist-error", std::string(who) + ": connecting the ranks failed: " + m);
    }
  }
  return shared->comm;
}

// Whether groups end in a store-based barrier: always in 1.13; in 2.x only with
// TORCH_DIST_INIT_BARRIER=1, as Python reads it (for the world and for new groups alike).
bool initBarrierWanted() {
  if constexpr (compat::kDistProtocol2) {
    const char* v = std::getenv("TORCH_DIST_INIT_BARRIER");
    return v && std::string(v) == "1";
  }
  return true;
}

void setSequenceNumber(const CommPtr& comm, std::string_view who) {
  try {
    comm->setSequenceNumberForGroup();
  } catch (const std::exception& e) {
    throwError("dist-error", std::string(who) + ": agreeing on the group's sequence number failed: " + messageOf(e));
  }
}

// Construct, then barrier and sequence number in the order Python uses for this version (a
// Python rank waits in one while a Purple rank waiting in the other would deadlock).
CommPtr formGroup(const StorePtr& base, int index, const std::string& backend, int rank, int size, int barrierCount,
                  bool barrier, std::chrono::milliseconds timeout, MisconfigurationWatch* watch, std::string_view who) {
  CommPtr comm;
  if (rank >= 0) comm = constructWatched(backend, groupStore(base, index, backend), rank, size, timeout, watch, who);
  if (compat::kDistProtocol2 && comm) setSequenceNumber(comm, who);
  if (barrier) storeBarrier(barrierStore(base, index), index, barrierCount, timeout, watch, who);
  if (!compat::kDistProtocol2 && comm) setSequenceNumber(comm, who);
  return comm;
}

}  // namespace

GroupPtr initWorld(const InitRequest& r, std::string_view who) {
  World& w = world();
  StorePtr base, watchBase;
  if (!r.filePath.empty()) {
    try {
      base = c10::make_intrusive<c10d::FileStore>(r.filePath, r.worldSize);
    } catch (const std::exception& e) {
      throwError("dist-error", std::string(who) + ": cannot use " + r.filePath + " as the rendezvous file: " + messageOf(e));
    }
  } else {
    bool agent = useAgentStore();
    base = connectTcp(r, !agent && r.rank == 0, agent || r.rank != 0, who);
    // A second connection for the watch: a store connection serves one request at a time, and
    // the backend's connection waits on it for the other ranks.
    watchBase = connectTcp(r, false, false, who);
  }
  StorePtr store = withJobPrefix(base);
  StorePtr watchStore = watchBase ? withJobPrefix(watchBase) : StorePtr();

  int64_t claims = store->add(rankClaimKey(r.rank), 1);
  if (claims > 1)
    throwError("dist-error", std::string(who) + ": two processes were started with RANK=" + std::to_string(r.rank) +
                                 "; every rank needs its own RANK in 0.." + std::to_string(r.worldSize - 1));
  store->set(worldSizeKey(r.rank), bytesOf(std::to_string(r.worldSize)));

  MisconfigurationWatch watch(watchStore, r.rank, r.worldSize, std::string(who));
  watch.poll();   // the ranks already there
  CommPtr comm = formGroup(store, 0, r.backend, r.rank, r.worldSize, r.worldSize, initBarrierWanted(), r.timeout,
                           watchStore ? &watch : nullptr, who);

  std::vector<std::string> markers;
  for (int k = 0; k < r.worldSize; k++) markers.push_back(worldSizeKey(k));
  bool allPurple = store->check(markers);

  auto g = std::make_shared<Group>();
  g->comm = comm;
  g->name = groupName(0);
  g->backend = r.backend;
  g->rank = r.rank;
  g->size = r.worldSize;
  for (int k = 0; k < r.worldSize; k++) g->globalRanks.push_back(k);
  g->checked = allPurple && r.checkCollectives;
  g->timeout = r.timeout;
  w.world = g;
  w.store = store;
  w.localRank = r.localRank;
  w.localWorldSize = r.localWorldSize;
  w.groupsMade = 1;
  w.allPurple = allPurple;
  w.groups.clear();
  w.groups.push_back(g);
  return g;
}

GroupPtr newGroup(std::vector<int> ranks, const std::string& backend, std::chrono::milliseconds timeout,
                  std::string_view who) {
  World& w = world();
  const Group& worldGroup = *w.world;
  int index = w.groupsMade++;
  auto g = std::make_shared<Group>();
  g->name = groupName(index);
  g->backend = backend;
  g->size = int(ranks.size());
  g->globalRanks = ranks;
  g->timeout = timeout;
  g->checked = worldGroup.checked;
  for (size_t k = 0; k < ranks.size(); k++)
    if (ranks[k] == worldGroup.rank) g->rank = int(k);
  g->comm = formGroup(w.store, index, backend, g->rank, g->size, worldGroup.size, initBarrierWanted(), timeout, nullptr,
                      who);
  w.groups.push_back(g);
  return g;
}

void destroyAll() {
  World& w = world();
  for (auto& weak : w.groups)
    if (auto g = weak.lock()) {
      g->comm.reset();
      g->rank = -1;
    }
  w.groups.clear();
  w.world.reset();
  w.store.reset();
  w.groupsMade = 0;
  w.allPurple = false;
}

}  // namespace purple::dist
