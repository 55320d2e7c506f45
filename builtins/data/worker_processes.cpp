// Data-loader worker processes: what torch's DataLoader does with num_workers > 0 for a dataset
// whose samples come from Purple code (prelude/36-data-workers.purple is the Purple half).
//
// One interpreter runs one thread of Purple code at a time, so a dataset written in Purple can
// only read samples in parallel in other processes. `%worker-pool-start` forks N workers from
// inside the builtin; each one, a copy of the interpreter at that moment, runs `serve` below and
// never returns into the caller's code: it reads tasks (a batch number and its sample indices)
// from its socket, calls the loader's fetch procedure (dataset-ref per index, then collate),
// sends the batch back (batch_transfer.hpp: tensors in shared memory, the rest encoded) and
// _exit()s when the parent closes its socket. Batch b goes to worker b mod N and the parent
// reads batch b from that worker, so batches arrive in the order they would without workers;
// each worker has at most PREFETCH batches in flight.
//
// Fork hazards, and what is done about them:
//  * Boehm GC's marker threads and lock: the collector installs its own fork handlers
//    (GC_set_handle_fork(1) before GC_INIT, interp/core/gc.cpp), so its lock is held across
//    fork() and the child's collector is consistent, collecting with the one thread it has.
//  * LibTorch's intra-op threads (OpenMP) do not exist in the child, and GNU OpenMP cannot
//    start a new team after fork: the child sets its thread count to 1, as PyTorch's workers do.
//  * Buffered output would be written twice: the parent flushes stdio before forking; a worker
//    flushes after every batch, so (display ...) in a dataset shows up.
//  * Orphans: each worker asks for SIGKILL when its parent dies (PR_SET_PDEATHSIG, checked
//    against a parent that died before the request) and ignores SIGINT (Ctrl-C stops the
//    parent, which then stops its workers). Every stop reaps the workers: no zombies.
//  * A dead worker (killed by a signal, or exited) closes its socket: the parent sees end of file
//    while waiting for its batch, reaps it and raises an error naming it, its pid and the
//    signal; it never waits forever. Writes to sockets use MSG_NOSIGNAL (no SIGPIPE).
#include "builtins/builtins.hpp"
#include "builtins/data/batch_transfer.hpp"
#include "builtins/tensor/random.hpp"
#include "interp/core/port.hpp"
#include "interp/limits/sandbox.hpp"
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace purple {
namespace dataload {

namespace {

constexpr const char* kPoolType = "data-worker-pool";

// The parent's ends of every live pool's sockets in this process. A new worker closes them all,
// so that a worker holds only its own socket: otherwise another pool's workers would never see
// their parent close theirs.
std::mutex gSocketsMutex;
std::set<int> gParentSockets;

// Set in a worker process only (data-worker-info).
struct WorkerInfo {
  bool active = false;
  int id = 0;
  int count = 0;
  uint64_t seed = 0;
};
WorkerInfo gWorkerInfo;

// ---- socket I/O ---------------------------------------------------------------------------------

bool writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

bool readAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

// A reply's fixed part, sent in one sendmsg with the batch's memfd (when it has one) beside it.
struct ReplyHeader {
  int64_t batch;
  int64_t failedIndex;   // on error: the sample index being read, -1 for none (collate, setup)
  uint64_t length;       // of the payload (a batch) or of the error text that follows
  uint8_t ok;
  uint8_t hasFd;
  uint8_t pad[6];
};

bool sendReply(int sock, const ReplyHeader& h, const std::string& body, int fd) {
  iovec iov{const_cast<ReplyHeader*>(&h), sizeof h};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    std::memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ssize_t k;
  do k = ::sendmsg(sock, &msg, MSG_NOSIGNAL); while (k < 0 && errno == EINTR);
  if (k <= 0) return false;
  if (size_t(k) < sizeof h && !writeAll(sock, reinterpret_cast<const char*>(&h) + k, sizeof h - size_t(k))) return false;
  return writeAll(sock, body.data(), body.size());
}

// Reads a reply's header and the fd beside it (-1 when none); false at end of file.
bool receiveHeader(int sock, ReplyHeader& h, int& fd) {
  fd = -1;
  iovec iov{&h, sizeof h};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t k;
  do k = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC); while (k < 0 && errno == EINTR);
  if (k <= 0) return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  if (size_t(k) < sizeof h && !readAll(sock, reinterpret_cast<char*>(&h) + k, sizeof h - size_t(k))) {
    if (fd >= 0) close(fd);
    return false;
  }
  return true;
}

// ---- the worker process -------------------------------------------------------------------------

std::string describeCurrentException(Interp& in) {
  try {
    throw;
  } catch (const PurpleExit& e) {
    return "the worker's code called exit (code " + std::to_string(e.code) + ")";
  } catch (const PurpleException& e) {
    std::string text = in.formatError(e.payload());
    if (text.rfind("Error: ", 0) == 0) text.erase(0, 7);
    return text;
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an escape continuation or a C++ exception left the worker's code";
  }
}

// A host's output callback (the Jupyter kernel's, which sends over ZeroMQ) cannot work in a
// worker: the threads behind it were not forked. The worker's current ports write to its stdout
// and stderr instead. The callback is moved out and never destroyed: its captures belong to the
// host's objects, copied into this process but not to be torn down by it.
void detachHostOutput(Interp& in) {
  std::pair<Value, FILE*> ports[] = {{in.currentOutputPort(), stdout}, {in.currentErrorPort(), stderr}};
  for (auto& [port, file] : ports) {
    if (!isPort(port)) continue;
    PortImpl* p = portImpl(port);
    if (!p->output || !p->sink) continue;
    new std::function<void(std::string_view)>(std::move(p->sink));
    p->sink = nullptr;
    p->file = file;
    p->ownsFile = false;
  }
}

// The worker's whole life: never returns.
[[noreturn]] void serve(Interp& in, int sock, int id, int count, uint64_t seed, Value setup, Value fetch,
                        pid_t parent) {
  try {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);   // the parent died before the request
    std::signal(SIGINT, SIG_IGN);
    markForkedFromParent();
    gWorkerInfo = WorkerInfo{true, id, count, seed};
    in.interruptRequested_.store(false, std::memory_order_relaxed);
    // Whatever fails while the worker starts is the answer to its first task, never a silent exit.
    std::string setupError;
    try {
      detachHostOutput(in);
      at::set_num_threads(1);
      seedDefaultGenerators(seed);
      in.apply(setup, {Value::fixnum(id), makeInteger(int64_t(seed))});
    } catch (...) {
      setupError = "in its setup (seeding, :worker-init-fn): " + describeCurrentException(in);
    }
    Value cell = makeVector(1, Value::f());   // the fetch procedure's current sample index
    for (;;) {
      int64_t task[2];   // batch number, index count
      if (!readAll(sock, task, sizeof task)) break;
      if (task[1] < 0 || task[1] > (int64_t(1) << 32)) break;
      std::vector<int64_t> indices(static_cast<size_t>(task[1]));
      if (task[1] > 0 && !readAll(sock, indices.data(), indices.size() * sizeof(int64_t))) break;
      ReplyHeader h{};
      h.batch = task[0];
      h.failedIndex = -1;
      std::string body;
      int fd = -1;
      if (!setupError.empty()) {
        body = setupError;
      } else {
        try {
          Value list = Value::nil();
          for (size_t k = indices.size(); k-- > 0;) list = cons(makeInteger(indices[k]), list);
          cell.as<Vector>()->items[0] = Value::f();
          Value batch = in.apply(fetch, {list, cell});
          try {
            fd = encodeBatch(batch, body);
            h.ok = 1;
          } catch (const std::exception& e) {
            body = std::string("sending the batch: ") + e.what();
          }
        } catch (...) {
          body = describeCurrentException(in);
          Value at = cell.as<Vector>()->items[0];
          if (at.isFixnum()) h.failedIndex = at.fixnum();
          else body = "collating: " + body;
        }
      }
      std::fflush(stdout);
      std::fflush(stderr);
      h.length = body.size();
      h.hasFd = fd >= 0;
      bool sent = sendReply(sock, h, body, fd);
      if (fd >= 0) close(fd);
      if (!sent) break;
    }
  } catch (...) {
  }
  std::fflush(nullptr);
  _exit(0);
}

// ---- the pool (parent side) ---------------------------------------------------------------------

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

struct Worker {
  pid_t pid = -1;
  int sock = -1;
  int64_t outstanding = 0;   // tasks sent whose replies are not read yet
};

struct WorkerPool {
  std::vector<Worker> workers;
  int prefetch = 2;
  std::vector<std::vector<int64_t>> batches;   // this pass's sample indices, batch by batch
  int64_t firstBatch = 0;                      // the pass's number of batches[0] (after :start-batch)
  size_t nextSend = 0, nextDeliver = 0;
  bool stopped = false;
  std::string stopReason;

  ~WorkerPool() { stop(false, "the loader was dropped"); }

  // Ends every worker and reaps it. An idle worker exits by itself when its socket closes; one
  // with work in flight (or FORCE) is killed.
  void stop(bool force, const std::string& reason) {
    if (stopped) return;
    stopped = true;
    stopReason = reason;
    for (Worker& w : workers) {
      if (w.sock >= 0) {
        {
          std::lock_guard<std::mutex> lock(gSocketsMutex);
          gParentSockets.erase(w.sock);
        }
        close(w.sock);
        w.sock = -1;
      }
      if (w.pid > 0 && (force || w.outstanding > 0)) kill(w.pid, SIGKILL);
    }
    for (Worker& w : workers) {
      if (w.pid > 0) reap(w.pid, nullptr);
      w.pid = -1;
    }
  }

  // Waits for PID to end: up to 2 s, then kills it. STATUS, when given, receives its status.
  static void reap(pid_t pid, int* status) {
    int st = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (;;) {
      pid_t r = waitpid(pid, &st, WNOHANG);
      if (r == pid || (r < 0 && errno != EINTR)) break;
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (status) *status = st;
  }

  void requireRunning(const char* who) const {
    if (stopped)
      throwError("data-error", std::string(who) + ": the data-loader's worker processes were stopped (" + stopReason + ")");
  }

  void sendMore() {
    while (nextSend < batches.size()) {
      Worker& w = workers[nextSend % workers.size()];
      if (w.outstanding >= prefetch) break;
      const std::vector<int64_t>& ix = batches[nextSend];
      int64_t task[2] = {firstBatch + int64_t(nextSend), int64_t(ix.size())};
      // A failed write means the worker is gone: reading its reply reports that.
      if (writeAll(w.sock, task, sizeof task)) writeAll(w.sock, ix.data(), ix.size() * sizeof(int64_t));
      w.outstanding++;
      nextSend++;
    }
  }

  // The next reply of worker K: its header, body and memfd. Stops the pool and raises when the
  // worker is gone, or when the interpreter is interrupted while waiting.
  void receive(Interp& in, size_t k, ReplyHeader& h, std::string& body, int& fd) {
    Worker& w = workers[k];
    for (;;) {
      pollfd p{w.sock, POLLIN, 0};
      int r = ::poll(&p, 1, 100);
      if (r > 0) break;
      if (r < 0 && errno != EINTR) break;
      if (in.interruptRequested_.load(std::memory_order_relaxed)) {
        stop(true, "interrupted");
        in.checkInterrupt();
      }
    }
    if (receiveHeader(w.sock, h, fd)) {
      body.resize(h.length);
      if (h.length == 0 || readAll(w.sock, body.data(), body.size())) return;
      if (fd >= 0) close(fd);
    }
    pid_t pid = w.pid;
    int status = 0;
    w.pid = -1;
    reap(pid, &status);
    std::string how = WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                                                signalName(WTERMSIG(status)) + ")"
                      : WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                          : "ended";
    std::string what = "data-loader: worker " + std::to_string(k) + " (pid " + std::to_string(pid) + ") " + how +
                       " while preparing batch " + std::to_string(firstBatch + int64_t(nextDeliver));
    stop(true, what);
    throwError("data-error", what);
  }

  // Starts a pass over BATCHES. Replies still in flight from an abandoned pass are read and
  // dropped first.
  void startPass(Interp& in, std::vector<std::vector<int64_t>> pass, int64_t first) {
    requireRunning("data-loader");
    for (size_t k = 0; k < workers.size(); k++) {
      while (workers[k].outstanding > 0) {
        ReplyHeader h;
        std::string body;
        int fd = -1;
        receive(in, k, h, body, fd);
        if (fd >= 0) close(fd);
        workers[k].outstanding--;
      }
    }
    batches = std::move(pass);
    firstBatch = first;
    nextSend = nextDeliver = 0;
    sendMore();
  }

  Value next(Interp& in) {
    if (nextDeliver >= batches.size()) return Value::eof();
    requireRunning("data-loader");
    size_t k = nextDeliver % workers.size();
    ReplyHeader h;
    std::string body;
    int fd = -1;
    receive(in, k, h, body, fd);
    workers[k].outstanding--;
    int64_t number = firstBatch + int64_t(nextDeliver);
    nextDeliver++;
    if (!h.ok) {
      if (fd >= 0) close(fd);
      std::string where = "data-loader: worker " + std::to_string(k) + " (pid " + std::to_string(workers[k].pid) +
                          ") failed on batch " + std::to_string(number);
      if (h.failedIndex >= 0) where += ", sample index " + std::to_string(h.failedIndex);
      stop(true, "a worker failed");
      throwError("data-error", where + ": " + body);
    }
    try {
      Value batch = decodeBatch(body, fd);
      sendMore();
      return batch;
    } catch (const std::runtime_error& e) {
      stop(true, "a worker's batch could not be read");
      throwError("data-error", std::string("data-loader: worker ") + std::to_string(k) + ": " + e.what());
    }
  }
};

void destroyPool(void* p) { delete static_cast<WorkerPool*>(p); }

WorkerPool* poolArg(Value v, const char* who) {
  if (v.is(Kind::Foreign)) {
    auto* f = v.as<Foreign>();
    if (f->typeName == intern(kPoolType) && f->ptr) return static_cast<WorkerPool*>(f->ptr);
  }
  throwTypeError(who, 1, "a data-loader worker pool", v);
}

std::vector<int64_t> indexList(Value list, const char* who) {
  std::vector<int64_t> out;
  if (!isList(list)) throwTypeError(who, 2, "a list of lists of sample indices", list);
  for (Value p = list; isPair(p); p = cdr(p)) {
    if (!car(p).isFixnum() || car(p).fixnum() < 0) throwTypeError(who, 2, "a list of lists of sample indices", list);
    out.push_back(car(p).fixnum());
  }
  return out;
}

Value startPool(Interp& in, int64_t count, int64_t prefetch, int64_t seed, Value setup, Value fetch) {
  if (count < 1 || count > 256) throwError("range-error", "data-loader: :num-workers must be between 1 and 256 for worker processes");
  if (prefetch < 1) throwError("range-error", "data-loader: :prefetch-factor must be at least 1");
  if (!isProcedure(setup) || !isProcedure(fetch)) throwTypeError("%worker-pool-start", 4, "procedures", setup);
  // Anything buffered now would be written again by every worker.
  portFlush(in.currentOutputPort());
  portFlush(in.currentErrorPort());
  std::fflush(nullptr);
  auto pool = std::make_unique<WorkerPool>();
  pool->prefetch = int(std::min<int64_t>(prefetch, 1024));
  pid_t parent = getpid();
  for (int id = 0; id < int(count); id++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throwError("data-error", std::string("data-loader: cannot make a worker's socket: ") + std::strerror(errno));
    std::vector<int> inherited;
    {
      std::lock_guard<std::mutex> lock(gSocketsMutex);
      inherited.assign(gParentSockets.begin(), gParentSockets.end());
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(sv[0]);
      for (int fd : inherited) close(fd);
      serve(in, sv[1], id, int(count), uint64_t(seed) + uint64_t(id), setup, fetch, parent);
    }
    close(sv[1]);
    if (pid < 0) {
      int e = errno;
      close(sv[0]);
      pool->stop(true, "a fork failed");
      throwError("data-error", std::string("data-loader: cannot start a worker process: ") + std::strerror(e));
    }
    {
      std::lock_guard<std::mutex> lock(gSocketsMutex);
      gParentSockets.insert(sv[0]);
    }
    pool->workers.push_back(Worker{pid, sv[0], 0});
  }
  return makeForeign(pool.release(), &destroyPool, intern(kPoolType));
}

}  // namespace

}  // namespace dataload

using namespace dataload;

void registerDataWorkers(Registry& r) {
  r.def("%worker-pool-start", "(num-workers prefetch-factor base-seed setup fetch)",
        [](Interp& in, int64_t count, int64_t prefetch, int64_t seed, Value setup, Value fetch) {
          return startPool(in, count, prefetch, seed, setup, fetch);
        },
        "Forks NUM-WORKERS data-loader worker processes and returns their pool. Worker k seeds its "
        "random generators with BASE-SEED + k, calls (SETUP k seed), then serves batches: "
        "(FETCH indices cell) returns the batch of the sample INDICES, storing the index being read "
        "in the one-element vector CELL. Each worker has at most PREFETCH-FACTOR batches in flight.");
  sandbox(r, "%worker-pool-start", Needs::Process, "the process: forks data-loader worker processes");
  r.def("%worker-pool-epoch!", "(pool batches first-batch)",
        [](Interp& in, Value pv, Value batches, int64_t first) {
          WorkerPool* pool = poolArg(pv, "%worker-pool-epoch!");
          std::vector<std::vector<int64_t>> pass;
          if (!isList(batches)) throwTypeError("%worker-pool-epoch!", 2, "a list of lists of sample indices", batches);
          for (Value p = batches; isPair(p); p = cdr(p)) pass.push_back(indexList(car(p), "%worker-pool-epoch!"));
          pool->startPass(in, std::move(pass), first);
        },
        "Starts a pass of POOL over BATCHES (a list of lists of sample indices; the first is batch "
        "number FIRST-BATCH of the pass), after dropping any batches of an abandoned pass.");
  r.def("%worker-pool-next!", "(pool)",
        [](Interp& in, Value pv) { return poolArg(pv, "%worker-pool-next!")->next(in); },
        "The next batch of POOL's pass, in order, or the eof object after the last one. A worker's "
        "error, or a worker's death, stops every worker and is raised here.",
        kPrimReturnsFreshList);   // a batch's tensors are new here: the batch owns them
  r.def("%worker-pool-close!", "(pool)",
        [](Value pv) { poolArg(pv, "%worker-pool-close!")->stop(false, "the loader closed them"); },
        "Stops POOL's workers (they exit; any still working are killed) and reaps them.");
  r.def("%worker-pool-usable?", "(pool)", [](Value pv) { return !poolArg(pv, "%worker-pool-usable?")->stopped; },
        "True while POOL's workers run (not stopped by an error or a close).");
  r.def("%worker-pool-pids", "(pool)",
        [](Value pv) {
          Value out = Value::nil();
          const auto& ws = poolArg(pv, "%worker-pool-pids")->workers;
          for (size_t k = ws.size(); k-- > 0;) out = cons(makeInteger(ws[k].pid), out);
          return out;
        },
        "The process ids of POOL's workers, worker 0 first (-1 for a stopped one).");
  r.def("data-worker-info", "()",
        []() -> Value {
          if (!gWorkerInfo.active) return Value::f();
          auto entry = [](const char* key, Value v) { return cons(intern(key), v); };
          return cons(entry("id", Value::fixnum(gWorkerInfo.id)),
                      cons(entry("num-workers", Value::fixnum(gWorkerInfo.count)),
                           cons(entry("seed", makeInteger(int64_t(gWorkerInfo.seed))),
                                cons(entry("pid", makeInteger(getpid())), Value::nil()))));
        },
        "Inside a data-loader worker process, an association list ((id . k) (num-workers . n) "
        "(seed . s) (pid . p)) describing it (torch's get_worker_info); #f elsewhere. A dataset "
        "can use the id to split work, or the seed for its own generators.");
  r.def("%data-worker-signal-self", "(signal)",
        [](int64_t sig) {
          if (!gWorkerInfo.active) throwError("data-error", "%data-worker-signal-self: not in a data-loader worker process");
          std::fflush(nullptr);
          ::raise(int(sig));
        },
        "For tests: sends SIGNAL (a number, e.g. 9) to the data-loader worker process it runs in; "
        "an error anywhere else.");
  sandbox(r, "%data-worker-signal-self", Needs::Process, "the process: signals a data-loader worker process");
}

}  // namespace purple
