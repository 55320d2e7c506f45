// The operator profiler behind with-profiler: LibTorch's RecordFunction callbacks, the mechanism
// LibTorch's own profilers (the legacy autograd profiler of 1.13, Kineto's in 2.x) are built on,
// and which both lines have with one API. Each operator event gets its times, thread, sequence
// number, input shapes (:record-shapes), the bytes it allocated (:profile-memory, through the
// allocator's memory reports) and the Purple source position of the call that ran it; a
// backward operator gets the position of the forward call with the same sequence number.
// The prelude (60-profile.purple) makes the table; the Chrome trace is written here.
#include "builtins/builtins.hpp"
#include "interp/core/file_io.hpp"
#include "interp/language/call_site.hpp"
#include "interp/limits/sandbox.hpp"
#include "interp/platform/torch_compat.hpp"
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace purple {

namespace {

struct OpEvent {
  std::string name;
  int64_t startNs = 0, endNs = -1;
  uint64_t thread = 0;
  int64_t sequence = -1;
  bool backward = false;
  std::string shapes;
  int32_t site = -1;               // into OpProfile::sites
  int64_t parent = -1;             // the event open around it on its thread
  int64_t selfBytes = 0;           // allocated minus freed while it ran, outside its children
  bool allocator = false;          // aten::empty and its kind: they allocate for whoever called them
};

// The operators that only allocate for the operator calling them (aten::mm makes its result with
// aten::empty): their bytes are their caller's, so a table sorted by memory names the operator
// that asked for the memory, not aten::empty.
bool isAllocator(const std::string& name) {
  static const char* const names[] = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
                                      "aten::new_empty_strided", "aten::resize_", "aten::empty.memory_format"};
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

struct OpProfile {
  std::vector<OpEvent> events;
  std::vector<std::string> sites;  // "file:line (procedure)"
  std::unordered_map<std::string, int32_t> siteIds;
  std::unordered_map<int64_t, int32_t> forwardSite;   // sequence number -> site of the forward op
  bool recordShapes = false;
  int64_t origin = 0;              // steady-clock ns when profiling started
};

std::mutex gLock;                  // guards gActive's contents: ops run on autograd threads too
OpProfile* gActive = nullptr;
thread_local std::vector<int64_t> tOpen;   // events open on this thread, innermost last

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string shapesOf(const at::RecordFunction& fn) {
  std::string out = "[";
  bool first = true;
  for (const c10::IValue& v : fn.inputs()) {
    out += first ? "" : ", ";
    first = false;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      out += "[";
      if (t.defined())
        for (int64_t d = 0; d < t.dim(); d++) out += (d ? ", " : "") + std::to_string(t.size(d));
      out += "]";
    } else if (v.isTensorList()) {
      out += "[list of " + std::to_string(v.toTensorList().size()) + "]";
    } else {
      out += "[]";
    }
  }
  return out + "]";
}

int32_t siteId(OpProfile& p, const std::string& text) {
  auto it = p.siteIds.find(text);
  if (it != p.siteIds.end()) return it->second;
  int32_t id = int32_t(p.sites.size());
  p.sites.push_back(text);
  p.siteIds.emplace(text, id);
  return id;
}

// The user's call running on this thread's interpreter, as text; "" when none (a LibTorch thread).
std::string currentSiteText() {
  Interp* in = Interp::current();
  if (!in) return "";
  int64_t at = 0;
  const AppNode* app = innermostUserCall(*in, &at);
  if (!app) return "";
  return positionFile(app->pos) + ":" + std::to_string(app->pos.line) + " (" + procedureOfCall(app) + ")";
}

struct EventContext : at::ObserverContext {
  int64_t index;
  explicit EventContext(int64_t i) : index(i) {}
};

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  OpEvent e;
  e.name = fn.name();
  e.allocator = isAllocator(e.name);
  e.thread = fn.threadId();
  e.sequence = fn.seqNr();
  // The engine's wrapper around each backward node is recorded as a plain function with the
  // node's sequence number: it belongs to the backward pass too.
  e.backward = fn.scope() == at::RecordScope::BACKWARD_FUNCTION ||
               e.name.rfind("autograd::engine::evaluate_function", 0) == 0;
  std::string site = currentSiteText();
  std::lock_guard<std::mutex> g(gLock);
  OpProfile* p = gActive;
  if (!p) return nullptr;
  if (p->recordShapes) e.shapes = shapesOf(fn);
  auto forward = e.backward ? p->forwardSite.find(e.sequence) : p->forwardSite.end();
  if (forward != p->forwardSite.end()) {
    e.site = forward->second;
  } else if (e.backward) {
    if (!site.empty()) e.site = siteId(*p, site);   // the line that called backward
  } else if (!site.empty()) {
    e.site = siteId(*p, site);
    // Every operator shares the next sequence number until one makes an autograd node, which
    // takes it: the last operator to start with a number is the forward of its backward node.
    if (e.sequence >= 0) p->forwardSite[e.sequence] = e.site;
  }
  e.parent = tOpen.empty() ? -1 : tOpen.back();
  e.startNs = nowNs();
  int64_t index = int64_t(p->events.size());
  p->events.push_back(std::move(e));
  tOpen.push_back(index);
  return std::make_unique<EventContext>(index);
}

void onEnd(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (!ctx) return;
  int64_t index = static_cast<EventContext*>(ctx)->index;
  int64_t end = nowNs();
  std::lock_guard<std::mutex> g(gLock);
  if (gActive && index < int64_t(gActive->events.size())) gActive->events[size_t(index)].endNs = end;
  auto it = std::find(tOpen.rbegin(), tOpen.rend(), index);
  if (it != tOpen.rend()) tOpen.erase(std::next(it).base());
}

// The allocator's reports while :profile-memory is on: each allocation (positive) and free
// (negative) is charged to the operator running on the allocating thread, past the allocation
// operators (isAllocator) that it called to get the memory.
class MemoryReporter final : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, int64_t size, compat::MemoryReportTotal, compat::MemoryReportTotal, c10::Device) override {
    if (tOpen.empty()) return;
    std::lock_guard<std::mutex> g(gLock);
    if (!gActive) return;
    int64_t n = int64_t(gActive->events.size());
    int64_t target = -1;
    for (auto it = tOpen.rbegin(); it != tOpen.rend(); ++it) {
      if (*it >= n) continue;
      target = *it;
      if (!gActive->events[size_t(*it)].allocator) break;
    }
    if (target >= 0) gActive->events[size_t(target)].selfBytes += size;
  }
  bool memoryProfilingEnabled() const override { return true; }
};

// A profile once finished: a foreign object that Purple holds.
Value profileValue(OpProfile* p) {
  return makeForeign(p, [](void* q) { delete static_cast<OpProfile*>(q); }, intern("op-profile"));
}

OpProfile& profileArg(Value v, const char* who) {
  if (!v.is(Kind::Foreign) || v.as<Foreign>()->typeName.bits != intern("op-profile").bits)
    throwTypeError(who, 1, "an operator profile (from with-profiler)", v);
  return *static_cast<OpProfile*>(v.as<Foreign>()->ptr);
}

// The callbacks (and the memory reporter) installed for as long as it lives: an error in the
// profiled code propagates, and the callbacks are removed on the way out.
struct Recording {
  at::CallbackHandle handle;
  std::unique_ptr<c10::DebugInfoGuard> memory;
  Recording(OpProfile* p, bool profileMemory) {
    std::lock_guard<std::mutex> g(gLock);
    if (gActive) throwError("profile-error", "with-profiler: another operator profile is running in this process");
    gActive = p;
    handle = at::addGlobalCallback(at::RecordFunctionCallback(onStart, onEnd)
                                       .needsInputs(p->recordShapes)
                                       .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    if (profileMemory)
      memory = std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, std::make_shared<MemoryReporter>());
  }
  ~Recording() {
    memory.reset();
    at::removeCallback(handle);
    std::lock_guard<std::mutex> g(gLock);
    gActive = nullptr;
    tOpen.clear();
  }
};

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

// Aggregates events with the same name (and shapes, when GROUP-BY-SHAPES), as key_averages does.
struct OpRow {
  std::string name, shapes;
  int64_t calls = 0, selfNs = 0, totalNs = 0, selfBytes = 0, totalBytes = 0;
  std::map<int32_t, int64_t> siteNs;   // total time by source site
};

}  // namespace

void registerOpProfiler(Registry& r) {
  r.def("%op-profile-run", "(thunk record-shapes profile-memory)",
        [](Interp& in, Procedure thunk, bool recordShapes, bool profileMemory) -> Value {
          auto profile = std::make_unique<OpProfile>();
          profile->recordShapes = recordShapes;
          profile->origin = nowNs();
          Value result;
          {
            Recording recording(profile.get(), profileMemory);
            result = in.apply(thunk.value, nullptr, 0);
          }
          for (OpEvent& e : profile->events)
            if (e.endNs < 0) e.endNs = e.startNs;   // still open when the profile ended
          return cons(result, profileValue(profile.release()));
        },
        "Internal: calls THUNK with LibTorch's operator callbacks installed; returns (VALUE . PROFILE).");
  sandbox(r, "%op-profile-run", Needs::Process, "the process: LibTorch's global operator callbacks, one profile at a time");
  r.def("%op-profile-rows", "(profile group-by-shapes)", [](Value v, bool byShapes) -> Value {
    OpProfile& p = profileArg(v, "profiler-table");
    std::vector<int64_t> childNs(p.events.size(), 0), subtreeBytes(p.events.size(), 0);
    for (size_t i = p.events.size(); i-- > 0;) {   // children come after their parent
      const OpEvent& e = p.events[i];
      subtreeBytes[i] += e.selfBytes;
      if (e.parent >= 0) {
        childNs[size_t(e.parent)] += e.endNs - e.startNs;
        subtreeBytes[size_t(e.parent)] += subtreeBytes[i];
      }
    }
    std::map<std::string, OpRow> rows;
    for (size_t i = 0; i < p.events.size(); i++) {
      const OpEvent& e = p.events[i];
      OpRow& row = rows[byShapes ? e.name + "\n" + e.shapes : e.name];
      row.name = e.name;
      if (byShapes) row.shapes = e.shapes;
      row.calls++;
      row.totalNs += e.endNs - e.startNs;
      row.selfNs += e.endNs - e.startNs - childNs[i];
      row.selfBytes += e.selfBytes;
      row.totalBytes += subtreeBytes[i];
      row.siteNs[e.site] += e.endNs - e.startNs;
    }
    Value out = Value::nil();
    for (auto& [key, row] : rows) {
      int32_t site = -1;
      int64_t best = -1;
      for (auto& [s, ns] : row.siteNs)
        if (s >= 0 && ns > best) best = ns, site = s;
      std::string where = site >= 0 ? p.sites[size_t(site)] : "";
      if (row.siteNs.size() > 1 && site >= 0) where += " and " + std::to_string(row.siteNs.size() - 1) + " more";
      Value items[] = {makeString(row.name), makeInteger(row.calls), makeInteger(row.selfNs), makeInteger(row.totalNs),
                       makeInteger(row.selfBytes), makeInteger(row.totalBytes), makeString(row.shapes), makeString(where)};
      out = cons(listFromArray(items, 8), out);
    }
    return out;
  }, "Internal: PROFILE's operators grouped by name (and input shapes), each (NAME CALLS SELF-NS\n"
     "TOTAL-NS SELF-BYTES TOTAL-BYTES SHAPES SOURCE), SOURCE the Purple call with the most time.");
  r.def("%op-profile-export-chrome-trace", "(profile path)", [](Value v, std::string path) {
    OpProfile& p = profileArg(v, "profiler-export-chrome-trace");
    std::string out = "{\"traceEvents\": [\n";
    long pid = long(getpid());
    for (size_t i = 0; i < p.events.size(); i++) {
      const OpEvent& e = p.events[i];
      char times[96];
      std::snprintf(times, sizeof times, "\"ts\": %.3f, \"dur\": %.3f", double(e.startNs - p.origin) / 1e3,
                    double(e.endNs - e.startNs) / 1e3);
      out += std::string(i ? ",\n" : "") + "{\"ph\": \"X\", \"cat\": \"" + (e.backward ? "backward" : "cpu_op") +
             "\", \"name\": " + jsonString(e.name) + ", \"pid\": " + std::to_string(pid) +
             ", \"tid\": " + std::to_string(e.thread) + ", " + times + ", \"args\": {\"Sequence number\": " +
             std::to_string(e.sequence);
      if (!e.shapes.empty()) out += ", \"Input Dims\": " + jsonString(e.shapes);
      if (e.site >= 0) out += ", \"Purple source\": " + jsonString(p.sites[size_t(e.site)]);
      if (e.selfBytes) out += ", \"Self CPU memory\": " + std::to_string(e.selfBytes);
      out += "}}";
    }
    out += "\n], \"displayTimeUnit\": \"ms\"}\n";
    writeFileAtomically(path, out.data(), out.size(), "profiler-export-chrome-trace");
    return makeString(path);
  }, "Internal: writes the operator profile PROFILE as a Chrome trace (profiler-export-chrome-trace).");
  sandbox(r, "%op-profile-export-chrome-trace", Needs::Files, "files: writes PATH");
  r.def("%op-profile-event-count", "(profile)", [](Value v) { return int64_t(profileArg(v, "profiler-event-count").events.size()); },
        "Internal: how many operator calls PROFILE recorded (profiler-event-count).");
}

}  // namespace purple
