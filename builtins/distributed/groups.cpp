// Process groups from Purple: dist-init (torchrun's environment, or keyword arguments), the
// world's and sub-groups' ranks and sizes, dist-new-group, dist-destroy.
#include "builtins/distributed/rendezvous.hpp"
#include "builtins/builtins.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include "interp/limits/sandbox.hpp"

namespace purple::dist {

World& world() {
  static World* w = new World();   // never destroyed: Gloo's threads may outlive static destructors
  return *w;
}

bool initialized() { return world().world != nullptr; }

int Group::groupRankOf(int worldRank) const {
  for (size_t k = 0; k < globalRanks.size(); k++)
    if (globalRanks[k] == worldRank) return int(k);
  return -1;
}

namespace {

struct GroupBox { GroupPtr group; };
const char* kGroupType = "process-group";

void destroyGroupBox(void* p) { delete static_cast<GroupBox*>(p); }

[[noreturn]] void notInitialised(std::string_view who) {
  throwError("dist-error", std::string(who) +
                               ": the default process group is not initialised; call (dist-init) first (under "
                               "purple-run, or with :rank, :world-size and :init-method)");
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int64_t parseInteger(const std::string& text, const std::string& what, std::string_view who) {
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (...) {
  }
  throwError("dist-error", std::string(who) + ": " + what + " must be an integer, got \"" + text + "\"");
}

// RANK, WORLD_SIZE ...: the keyword argument when given, else the environment variable.
int64_t setting(Value given, const char* var, const char* keyword, std::string_view who, const PrimitiveInfo* info,
                int index) {
  if (!given.isMissing() && !given.isFalse()) return integerValue(given, info, index);
  auto v = env(var);
  if (!v)
    throwError("dist-error", std::string(who) + ": the environment variable " + var +
                                 " is not set; start the script with purple-run (or torchrun), or give " + keyword);
  return parseInteger(*v, std::string("the environment variable ") + var, who);
}

std::string backendName(Value v, std::string_view who) {
  if (v.isMissing() || v.isFalse()) return "gloo";
  std::string s;
  if (isString(v)) s = std::string(stringView(v));
  else if (v.is(Kind::Symbol)) s = std::string(symbolName(v));
  else throwTypeError(who, 0, "a backend name ('gloo or 'nccl)", v);
  for (auto& c : s) c = char(std::tolower(c));
  if (s != "gloo" && s != "nccl")
    throwError("dist-error", std::string(who) + ": unknown backend \"" + s + "\" (expected gloo or nccl)");
  if (s == "nccl" && !ncclAvailable())
    throwError("dist-error", std::string(who) +
                                 ": the NCCL backend is not available: this Purple was built against a LibTorch "
                                 "without NCCL (a CPU build); use :backend 'gloo");
  return s;
}

std::chrono::milliseconds timeoutArg(Value v, std::chrono::milliseconds dflt, std::string_view who) {
  if (v.isMissing() || v.isFalse()) return dflt;
  if (!isRealNumber(v)) throwTypeError(who, 0, "a number of seconds", v);
  double s = toDouble(v);
  if (!(s > 0)) throwError("dist-error", std::string(who) + ": :timeout must be a positive number of seconds");
  return std::chrono::milliseconds(int64_t(s * 1000.0));
}

// "env://", "tcp://HOST:PORT", "file:///PATH".
void parseInitMethod(const std::string& method, InitRequest& r, std::string_view who) {
  auto portOf = [&](const std::string& text, const std::string& what) {
    int64_t p = parseInteger(text, what, who);
    if (p < 1 || p > 65535) throwError("dist-error", std::string(who) + ": " + what + " must be a port in 1..65535, got " + text);
    return int(p);
  };
  if (method.empty() || method == "env://") {
    auto addr = env("MASTER_ADDR");
    auto port = env("MASTER_PORT");
    if (!addr)
      throwError("dist-error", std::string(who) + ": the environment variable MASTER_ADDR is not set; start the script "
                                   "with purple-run (or torchrun), or give :init-method \"tcp://HOST:PORT\"");
    if (!port)
      throwError("dist-error", std::string(who) + ": the environment variable MASTER_PORT is not set; start the script "
                                   "with purple-run (or torchrun), or give :init-method \"tcp://HOST:PORT\"");
    r.host = *addr;
    r.port = portOf(*port, "MASTER_PORT");
  } else if (method.rfind("tcp://", 0) == 0) {
    std::string rest = method.substr(6);
    auto q = rest.find('?');
    if (q != std::string::npos) rest.resize(q);
    auto colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0)
      throwError("dist-error", std::string(who) + ": :init-method must look like \"tcp://HOST:PORT\", got \"" + method + "\"");
    r.host = rest.substr(0, colon);
    if (r.host.size() > 2 && r.host.front() == '[' && r.host.back() == ']') r.host = r.host.substr(1, r.host.size() - 2);
    r.port = portOf(rest.substr(colon + 1), "the port of :init-method");
  } else if (method.rfind("file://", 0) == 0) {
    r.filePath = method.substr(7);
    if (r.filePath.empty()) throwError("dist-error", std::string(who) + ": :init-method \"file://PATH\" needs a path");
  } else {
    throwError("dist-error", std::string(who) + ": unsupported :init-method \"" + method +
                                 "\" (expected \"env://\", \"tcp://HOST:PORT\" or \"file:///PATH\")");
  }
}

}  // namespace

Value wrapGroup(GroupPtr g) { return makeForeign(new GroupBox{std::move(g)}, &destroyGroupBox, intern(kGroupType)); }

bool isGroupValue(Value v) {
  return v.is(Kind::Foreign) && v.as<Foreign>()->typeName == intern(kGroupType) && v.as<Foreign>()->ptr;
}

GroupPtr groupArg(Value v, std::string_view who, bool requireMember) {
  if (!initialized()) notInitialised(who);
  GroupPtr g;
  if (v.isMissing() || v.isFalse()) g = world().world;
  else if (isGroupValue(v)) g = static_cast<GroupBox*>(v.as<Foreign>()->ptr)->group;
  else throwTypeError(who, 0, "a process group (from dist-new-group)", v);
  if (requireMember && !g->member()) {
    if (g->size == 0 || !world().world)
      throwError("dist-error", std::string(who) + ": the process group was destroyed (dist-destroy)");
    throwError("dist-error", std::string(who) + ": this process (rank " + std::to_string(world().world->rank) +
                                 ") is not a member of the group");
  }
  return g;
}

int groupRankArg(const Group& g, int64_t worldRank, std::string_view who, std::string_view key) {
  int worldSize = world().world ? world().world->size : 0;
  if (worldRank < 0 || worldRank >= worldSize)
    throwError("dist-error", std::string(who) + ": :" + std::string(key) + " " + std::to_string(worldRank) +
                                 " is not a rank (the world has ranks 0.." + std::to_string(worldSize - 1) + ")");
  int r = g.groupRankOf(int(worldRank));
  if (r < 0)
    throwError("dist-error", std::string(who) + ": :" + std::string(key) + " " + std::to_string(worldRank) +
                                 " is not a member of the group");
  return r;
}

}  // namespace purple::dist

namespace purple {

using namespace dist;

void registerDistGroups(Registry& r) {
  r.def("dist-init", "(:key backend rank world-size init-method timeout local-rank (check-collectives #t))",
        [](Interp& in, Value backend, Value rank, Value worldSize, std::optional<std::string> method, Value timeout,
           Value localRank, bool check) -> Value {
          const char* who = "dist-init";
          if (!in.limits.allowProcess)
            throwError("dist-error", "dist-init: distributed training is disabled in this interpreter (its limits "
                                     "forbid process and network access)");
          if (initialized())
            throwError("dist-error", "dist-init: the default process group is already initialised (dist-destroy first)");
          static PrimitiveInfo info{"dist-init"};
          InitRequest req;
          req.backend = backendName(backend, who);
          req.worldSize = int(setting(worldSize, "WORLD_SIZE", ":world-size", who, &info, 2));
          req.rank = int(setting(rank, "RANK", ":rank", who, &info, 1));
          if (req.worldSize < 1)
            throwError("dist-error", "dist-init: the world size must be at least 1, got " + std::to_string(req.worldSize));
          if (req.rank < 0 || req.rank >= req.worldSize)
            throwError("dist-error", "dist-init: RANK " + std::to_string(req.rank) + " is outside 0.." +
                                         std::to_string(req.worldSize - 1) + " (WORLD_SIZE " +
                                         std::to_string(req.worldSize) + ")");
          parseInitMethod(method.value_or(""), req, who);
          req.timeout = timeoutArg(timeout, std::chrono::minutes(30), who);
          req.checkCollectives = check;
          if (!localRank.isMissing() && !localRank.isFalse()) req.localRank = int(integerValue(localRank, &info, 6));
          else if (auto lr = env("LOCAL_RANK")) req.localRank = int(parseInteger(*lr, "LOCAL_RANK", who));
          else req.localRank = req.rank;
          if (auto lws = env("LOCAL_WORLD_SIZE")) req.localWorldSize = int(parseInteger(*lws, "LOCAL_WORLD_SIZE", who));
          else req.localWorldSize = req.worldSize;
          return wrapGroup(initWorld(req, who));
        },
        "Joins the job's default process group and returns it. Reads torchrun's environment (RANK, WORLD_SIZE, "
        "LOCAL_RANK, MASTER_ADDR, MASTER_PORT), which purple-run sets; keyword arguments override it: :backend 'gloo "
        "(CPU tensors, the default) or 'nccl (CUDA tensors, when the LibTorch has NCCL), :rank, :world-size, "
        ":init-method \"env://\" | \"tcp://HOST:PORT\" | \"file:///PATH\", :timeout in seconds for every "
        "collective (default 1800, as PyTorch's), :local-rank. Rank 0 serves the store the others connect to. Python "
        "ranks (torch.distributed.init_process_group with the same settings) can be members of the same group. When "
        "every rank is a Purple process, collectives first check that all ranks call the same collective on tensors "
        "of the same dtype and shape and raise a clear error otherwise (:check-collectives #f skips that exchange). "
        "Misconfiguration (a missing variable, a port in use, ranks that disagree on the world size) is an error "
        "at once, not a hang.");
  sandbox(r, "dist-init", Needs::Process, "network: joins a process group (TCP, Gloo)",
        "dist-error", "dist-init: distributed training is disabled in this interpreter (its limits forbid process and network access)");

  r.def("dist-initialized?", "()", []() { return initialized(); },
        "True once dist-init has joined the default process group (and dist-destroy has not left it).");
  sandboxAllowed(r, "dist-initialized?", "network: the process group",
               "reads a flag");
  r.def("dist-available?", "()", []() { return true; },
        "True when this Purple has distributed training (c10d with Gloo).");
  r.def("dist-nccl-available?", "()", []() { return ncclAvailable(); },
        "True when this Purple was built against a LibTorch with NCCL (CUDA builds), so :backend 'nccl works.");

  r.def("dist-rank", "(:optional group)",
        [](Value group) { return int64_t(groupArg(group, "dist-rank", false)->rank); },
        "This process's rank in GROUP (default: the world), from 0; -1 when it is not a member of GROUP.");
  sandboxAllowed(r, "dist-rank", "network: the process group",
               "reads a number");
  r.def("dist-world-size", "(:optional group)",
        [](Value group) { return int64_t(groupArg(group, "dist-world-size", false)->size); },
        "The number of ranks in GROUP (default: the world).");
  sandboxAllowed(r, "dist-world-size", "network: the process group",
               "reads a number");
  r.def("dist-local-rank", "()",
        []() -> int64_t {
          if (initialized()) return world().localRank;
          const char* v = std::getenv("LOCAL_RANK");
          return v ? std::atoll(v) : 0;
        },
        "This process's rank among the ranks on its machine (LOCAL_RANK; 0 when not set): the index of the GPU "
        "it should use. Works before dist-init too.");
  sandbox(r, "dist-local-rank", Needs::Environment, "the environment: LOCAL_RANK");
  r.def("dist-local-world-size", "()",
        []() -> int64_t {
          if (initialized()) return world().localWorldSize;
          const char* v = std::getenv("LOCAL_WORLD_SIZE");
          return v ? std::atoll(v) : 1;
        },
        "The number of ranks on this machine (LOCAL_WORLD_SIZE; 1 when not set).");
  sandbox(r, "dist-local-world-size", Needs::Environment, "the environment: LOCAL_WORLD_SIZE");
  r.def("dist-backend", "(:optional group)",
        [](Value group) { return intern(groupArg(group, "dist-backend", false)->backend); },
        "The backend of GROUP (default: the world): gloo or nccl.");
  r.def("dist-checked?", "(:optional group)",
        [](Value group) { return groupArg(group, "dist-checked?", false)->checked; },
        "True when GROUP's collectives are checked across ranks before they run (every rank is a Purple process "
        "and dist-init was not given :check-collectives #f).");
  r.def("dist-group?", "(x)", [](Value x) { return isGroupValue(x); }, "True when X is a process group.");
  r.def("dist-group-ranks", "(group)",
        [](Value group) {
          GroupPtr g = groupArg(group, "dist-group-ranks", false);
          std::vector<int64_t> ranks(g->globalRanks.begin(), g->globalRanks.end());
          return ranks;
        },
        "The world ranks of GROUP's members, in group-rank order.");

  r.def("dist-new-group", "(:optional ranks :key backend timeout)",
        [](Value ranks, Value backend, Value timeout) -> Value {
          const char* who = "dist-new-group";
          GroupPtr w = groupArg(Value::missing(), who);
          std::vector<int> members;
          if (ranks.isMissing() || ranks.isFalse()) {
            for (int k = 0; k < w->size; k++) members.push_back(k);
          } else {
            static PrimitiveInfo info{"dist-new-group"};
            for (int64_t x : intListValue(ranks, &info, 0)) {
              if (x < 0 || x >= w->size)
                throwError("dist-error", std::string(who) + ": rank " + std::to_string(x) + " is not in the world (0.." +
                                             std::to_string(w->size - 1) + ")");
              members.push_back(int(x));
            }
            std::sort(members.begin(), members.end());
            if (std::adjacent_find(members.begin(), members.end()) != members.end())
              throwError("dist-error", std::string(who) + ": a rank is listed twice");
            if (members.empty()) throwError("dist-error", std::string(who) + ": a group needs at least one rank");
          }
          std::string b = backend.isMissing() || backend.isFalse() ? w->backend : backendName(backend, who);
          Contribution c{Op::NewGroup};
          c.extra.push_back(int64_t(members.size()));
          uint64_t h = 0;   // unsigned: the hash wraps (a signed overflow is undefined behaviour)
          for (int m : members) h = h * 1000003 + uint64_t(m) + 1;
          c.extra.push_back(int64_t(h));
          checkAgreement(*w, c, who);
          return wrapGroup(newGroup(members, b, timeoutArg(timeout, w->timeout, who), who));
        },
        "Makes a process group of the world ranks RANKS (default: all). Every rank of the world must call it, in the "
        "same order and with the same RANKS, members or not (as torch.distributed.new_group); a process outside "
        "RANKS gets a group it cannot use. Collectives take the group with :group; :src and :dst stay world ranks. "
        ":backend defaults to the world's, :timeout (seconds) too.");
  sandbox(r, "dist-new-group", Needs::Process, "network: makes a process group");

  r.def("dist-destroy", "()",
        []() {
          if (initialized()) destroyAll();
        },
        "Leaves every process group (waiting for their pending work) and closes the store; dist-init may then be "
        "called again. Groups made before are unusable afterwards.");
  sandbox(r, "dist-destroy", Needs::Process, "network: tears down the process's groups");
}

}  // namespace purple
