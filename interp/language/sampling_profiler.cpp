// The sampling profiler (sampling_profiler.hpp). The SIGPROF handler runs on the interpreter's
// own thread (a POSIX timer aimed at that thread), so the call records it reads are the ones
// that thread last wrote; it takes no lock and allocates nothing: it hashes the records' raw
// (node, procedure, user call) words into a fixed table and appends new stacks to a fixed arena.
// The arena is a root of the collector up to the part in use, so every node and procedure a
// sample saw stays alive until the stacks are resolved into names and positions, after the
// timer stops.
#include "interp/language/sampling_profiler.hpp"
#include "interp/core/error.hpp"
#include "interp/core/gc.hpp"
#include "interp/language/call_site.hpp"
#include <gc/gc.h>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace purple {

namespace {

constexpr int64_t kMaxRecords = 256;             // innermost call records copied per sample
constexpr int64_t kWordsPerRecord = 3;          // node, procedure, the activation's last user call
constexpr int64_t kArenaWords = int64_t(3) << 19;  // 12 MB of record words
constexpr uint32_t kTableSlots = 1u << 15;       // distinct stacks

struct StackSlot {
  uint64_t hash;
  int64_t offset;                                // into the arena, in words
  int32_t words;                                 // 0: empty slot
  bool truncated;
  int64_t count;
};

struct Sampler {
  Interp* in = nullptr;
  int64_t base = 0;                              // records at or below it are the profiler's caller
  uintptr_t* arena = nullptr;
  int64_t arenaUsed = 0;                         // words in use (the collector scans this many)
  StackSlot* table = nullptr;
  std::atomic<int64_t> samples{0};
  std::atomic<int64_t> dropped{0};
  timer_t timer{};
};

std::atomic<Sampler*> gActive{nullptr};
std::mutex gStartLock;
bool gHandlerInstalled = false;

uint64_t mix(uint64_t h, uint64_t w) {
  h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

void onSample(int, siginfo_t*, void*) {
  Sampler* s = gActive.load(std::memory_order_acquire);
  if (!s) return;
  int savedErrno = errno;
  const Interp& in = *s->in;
  int64_t depth = in.depth;
  int64_t lo = depth - kMaxRecords + 1 > s->base + 1 ? depth - kMaxRecords + 1 : s->base + 1;
  int32_t words = int32_t(kWordsPerRecord * (depth - lo + 1));
  uint64_t h = 0;
  for (int64_t i = lo; i <= depth; i++) {
    h = mix(h, reinterpret_cast<uintptr_t>(in.callStack[i].node));
    h = mix(h, in.callStack[i].proc.bits);
    h = mix(h, reinterpret_cast<uintptr_t>(in.callStack[i].userCall));
  }
  s->samples.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t probe = 0; probe < 64; probe++) {
    StackSlot& slot = s->table[(h + probe) & (kTableSlots - 1)];
    if (slot.words == 0) {
      if (s->arenaUsed + words > kArenaWords) break;
      uintptr_t* out = s->arena + s->arenaUsed;
      for (int64_t i = lo; i <= depth; i++) {
        *out++ = reinterpret_cast<uintptr_t>(in.callStack[i].node);
        *out++ = in.callStack[i].proc.bits;
        *out++ = reinterpret_cast<uintptr_t>(in.callStack[i].userCall);
      }
      std::atomic_signal_fence(std::memory_order_release);
      slot.hash = h;
      slot.offset = s->arenaUsed;
      slot.truncated = lo > s->base + 1;
      slot.count = 1;
      slot.words = words;
      s->arenaUsed += words;
      errno = savedErrno;
      return;
    }
    if (slot.hash == h && slot.words == words) {
      const uintptr_t* seen = s->arena + slot.offset;
      bool same = true;
      for (int64_t i = lo, k = 0; same && i <= depth; i++, k += kWordsPerRecord)
        same = seen[k] == reinterpret_cast<uintptr_t>(in.callStack[i].node) && seen[k + 1] == in.callStack[i].proc.bits &&
               seen[k + 2] == reinterpret_cast<uintptr_t>(in.callStack[i].userCall);
      if (same) {
        slot.count++;
        errno = savedErrno;
        return;
      }
    }
  }
  s->dropped.fetch_add(1, std::memory_order_relaxed);
  errno = savedErrno;
}

// A word a sample saw, checked before it is read as an object: a record being overwritten
// when the signal came may hold a stale word. Everything the arena holds is kept alive by it.
bool isAppNode(uintptr_t w) {
  if (w == 0 || (w & 7) != 0) return false;
  auto* n = reinterpret_cast<const Node*>(w);
  return GC_base(const_cast<Node*>(n)) == n && n->kind == Kind::Node && n->op() == Op::App;
}

bool isCallee(Value v) {
  if (!v.isObject() || GC_base(v.obj()) != v.obj()) return false;
  Kind k = v.obj()->kind;
  return k == Kind::Closure || k == Kind::Primitive || k == Kind::CaseLambda || k == Kind::Continuation ||
         k == Kind::Parameter || k == Kind::Module || k == Kind::Foreign;
}

ModuleFrameNamer gModuleNamer = nullptr;

ProfiledStack resolve(const Sampler& s, const StackSlot& slot) {
  Value parentModule = Value::f();              // the nearest module frame outside, and its path
  std::string parentPath;
  ProfiledStack out;
  out.count = slot.count;
  out.truncated = slot.truncated;
  const uintptr_t* w = s.arena + slot.offset;
  for (int32_t k = 0; k < slot.words; k += kWordsPerRecord) {
    if (!isAppNode(w[k])) continue;
    auto* app = reinterpret_cast<const AppNode*>(w[k]);
    Value proc(w[k + 1], 0);
    // The line a record credits: its call, or when that call is the prelude's, the last call
    // the same activation made from the user's code (a chain of tail calls into the prelude,
    // as fit's loop makes, replaces the user's call in `node` but not in `userCall`).
    const AppNode* site = app;
    if (((app->flags & kAppInPrelude) || app->pos.line <= 0) && isAppNode(w[k + 2])) {
      auto* user = reinterpret_cast<const AppNode*>(w[k + 2]);
      if (user->pos.line > 0 && !(user->flags & kAppInPrelude)) site = user;
    }
    if (proc.isFalse()) {                       // the arguments of APP are being evaluated
      if (site->pos.line > 0 && !(site->flags & kAppInPrelude)) {
        out.leafFile = positionFile(site->pos);
        out.leafLine = site->pos.line;
        out.leafProcedure = procedureOfCall(site);
      }
      continue;
    }
    if (!isCallee(proc)) continue;
    ProfiledFrame f;
    if (proc.is(Kind::Module) && gModuleNamer) {
      ModuleFrameName n = gModuleNamer(proc, parentModule, parentPath);
      f.name = n.label;
      parentModule = proc;
      parentPath = n.path;
    } else {
      f.name = proc.is(Kind::Closure) ? lambdaLabel(proc.as<Closure>()->code) : describeProcedure(proc);
    }
    if (proc.is(Kind::Closure)) {
      const LambdaNode* l = proc.as<Closure>()->code;
      if (l->pos.line > 0) {
        f.defFile = positionFile(l->pos);
        f.defLine = l->pos.line;
      }
    }
    if (site->pos.line > 0) {
      f.siteFile = positionFile(site->pos);
      f.siteLine = site->pos.line;
      f.siteProcedure = procedureOfCall(site);
    }
    f.siteInPrelude = site->flags & kAppInPrelude;
    out.frames.push_back(std::move(f));
    out.leafFile.clear();                        // a marker counts only above the innermost frame
    out.leafLine = 0;
    out.leafProcedure.clear();
  }
  return out;
}

Sampler* gSampler = nullptr;   // the one being run (owned by the session)

}  // namespace

void setModuleFrameNamer(ModuleFrameNamer namer) { gModuleNamer = namer; }

SamplingSession::SamplingSession(Interp& in, double intervalSeconds) : interval_(intervalSeconds) {
  if (!(intervalSeconds >= 1e-4 && intervalSeconds <= 10))
    throwError("range-error", "profile: :interval must be between 0.0001 and 10 seconds");
  std::lock_guard<std::mutex> g(gStartLock);
  if (gSampler) throwError("profile-error", "profile: another profile is running in this process");
  auto* s = new Sampler;
  s->in = &in;
  s->base = in.depth;
  s->arena = static_cast<uintptr_t*>(std::calloc(size_t(kArenaWords), sizeof(uintptr_t)));
  s->table = static_cast<StackSlot*>(std::calloc(kTableSlots, sizeof(StackSlot)));
  if (!s->arena || !s->table) {
    std::free(s->arena);
    std::free(s->table);
    delete s;
    throw std::bad_alloc();
  }
  gcAddGrowingRoots(s->arena, &s->arenaUsed, sizeof(uintptr_t));
  if (!gHandlerInstalled) {
    // Installed once and kept: a signal still in flight after a timer is deleted finds it and
    // returns, where the default action would end the process.
    struct sigaction sa {};
    sa.sa_sigaction = onSample;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, nullptr);
    gHandlerInstalled = true;
  }
  struct sigevent ev {};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev.sigev_notify_thread_id = pid_t(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &ev, &s->timer) != 0) {
    gcRemoveGrowingRoots(s->arena);
    std::free(s->arena);
    std::free(s->table);
    delete s;
    throwError("profile-error", "profile: cannot create a timer");
  }
  gSampler = s;
  gActive.store(s, std::memory_order_release);
  struct itimerspec its {};
  auto ns = int64_t(intervalSeconds * 1e9);
  its.it_interval.tv_sec = ns / 1000000000;
  its.it_interval.tv_nsec = ns % 1000000000;
  its.it_value = its.it_interval;
  timer_settime(s->timer, 0, &its, nullptr);
}

void SamplingSession::stop() {
  if (stopped_) return;
  stopped_ = true;
  gActive.store(nullptr, std::memory_order_release);
  timer_delete(gSampler->timer);
}

SamplingSession::~SamplingSession() {
  stop();
  std::lock_guard<std::mutex> g(gStartLock);
  gcRemoveGrowingRoots(gSampler->arena);
  std::free(gSampler->arena);
  std::free(gSampler->table);
  delete gSampler;
  gSampler = nullptr;
}

ProfileResult SamplingSession::finish() {
  stop();
  ProfileResult r;
  r.samples = gSampler->samples.load();
  r.dropped = gSampler->dropped.load();
  r.intervalSeconds = interval_;
  for (uint32_t i = 0; i < kTableSlots; i++) {
    const StackSlot& slot = gSampler->table[i];
    if (slot.words) r.stacks.push_back(resolve(*gSampler, slot));
  }
  return r;
}

}  // namespace purple
