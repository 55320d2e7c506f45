// fully-shard (fsdp.hpp): sharding, gathering and reducing.
//
// Collectives run in the same order on every rank, as Gloo and NCCL match them by order: the
// gathers in the order the forward and backward passes reach the units (the same graph on every
// rank, as for PyTorch's FSDP), the reductions in one fixed order, the reverse of the units',
// each launched once its unit's gradients are all there (a unit whose gradients come early waits
// for the ones before it), and every unit with trainable parameters once per backward pass
// (parameters that got no gradient contribute zeros, as under distributed-data-parallel).
//
// Hooks run on the thread of LibTorch's autograd engine; they touch C++ state only, under the
// state's lock, never a Purple value (DESIGN.md's rules). Failures there become C++ exceptions,
// which `backward` turns into Purple errors.
#include "builtins/distributed/fsdp.hpp"
#include "builtins/nn/value.hpp"
#include "interp/memory/tensor_value.hpp"
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <ATen/core/grad_mode.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/StorageImpl.h>
#include <atomic>
#include <algorithm>
#include <unordered_map>

namespace purple::dist {

namespace {

using torch::autograd::variable_list;

std::atomic<bool> gNoAllgatherBase{false};   // the backend has no single-tensor all-gather (Gloo in 1.13)

bool unsupportedCollective(const std::exception& e) {
  std::string m = e.what();
  return m.find("support") != std::string::npos;
}

// The dtype a collective moves DT in: Gloo (LibTorch 1.13) has no bfloat16, so bfloat16 travels
// as float32 there (the computation still runs in bfloat16); NCCL moves it as it is.
// Gloo: a unit's gradients are reduce-scattered in all-to-alls of at most this much (reduceInPieces).
constexpr int64_t kPieceBytes = int64_t(4) << 20;

at::ScalarType wireDtype(const Group& g, at::ScalarType dt) {
  return g.backend == "gloo" && dt == at::kBFloat16 ? at::kFloat : dt;
}

[[noreturn]] void failInHook(const char* what, const std::exception& e) {
  throw std::runtime_error(describeCommFailure(std::string("fully-shard: ") + what, e));
}

// RUN, a gather of parameters: a communication failure becomes a Purple error, or inside an
// autograd hook a C++ exception, which `backward` turns into one.
template <class Run> void gatheringParameters(bool inHook, Run&& run) {
  try {
    run();
  } catch (const PurpleException&) {
    throw;
  } catch (const std::exception& e) {
    if (inHook) failInHook("gathering parameters", e);
    throwCommError("fully-shard: gathering parameters", e);
  }
}

// Rank r's part of every rank's OUT (ranks * IN.numel() elements) is IN, gathered.
void allGatherInto(Group& g, at::Tensor& out, at::Tensor& in, bool inHook) {
  WorkPtr w;
  gatheringParameters(inHook, [&] {
    if (!gNoAllgatherBase.load()) {
      try {
        w = g.comm->_allgather_base(out, in);
      } catch (const std::exception& e) {
        if (!unsupportedCollective(e)) throw;
        gNoAllgatherBase = true;
      }
    }
    if (!w) {
      std::vector<std::vector<at::Tensor>> outs(1);
      int64_t n = in.numel();
      for (int r = 0; r < g.size; r++) outs[0].push_back(out.narrow(0, r * n, n));
      std::vector<at::Tensor> ins{in};
      w = g.comm->allgather(outs, ins);
    }
    w->wait();
  });
}

// A tensor's storage, emptied (the tensor keeps its shape, and whatever refers to the storage
// keeps referring to it) and given its bytes back.
void emptyStorage(const at::Tensor& t) {
  if (!t.defined()) return;
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  if (s->nbytes() == 0) return;
  s->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}

void refillStorage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  size_t bytes = size_t(t.numel()) * t.element_size();
  if (s->nbytes() >= bytes) return;
  s->set_data_ptr_noswap(s->allocator()->allocate(bytes));
  s->set_nbytes(bytes);
}

// The parameters of fully-sharded models, for state dicts (value.hpp's ShardedParameters).
class ShardRegistry final : public ShardedParameters {
 public:
  void add(const at::Tensor& p, const std::shared_ptr<FsdpState>& s, size_t index) {
    std::lock_guard<std::mutex> lock(mutex_);
    map_[p.unsafeGetTensorImpl()] = {s, index};
  }
  void remove(const at::Tensor& p) {
    std::lock_guard<std::mutex> lock(mutex_);
    map_.erase(p.unsafeGetTensorImpl());
  }
  bool fullShape(const at::Tensor& p, std::vector<int64_t>& shape) const override {
    auto [s, i] = find(p);
    if (!s) return false;
    shape = s->params[i].shape;
    return true;
  }
  at::Tensor gather(const at::Tensor& p) override {
    auto [s, i] = find(p);
    return s ? s->gatherWhole(i) : p;
  }
  void scatter(const at::Tensor& p, const at::Tensor& full) override {
    auto [s, i] = find(p);
    if (s) s->scatterWhole(i, full);
  }
  at::Tensor reduceOverGroup(const at::Tensor& p, const at::Tensor& value, bool max) override {
    auto [s, i] = find(p);
    if (!s || s->group->size == 1) return value;
    std::vector<at::Tensor> v{value.reshape({1}).to(at::kDouble).clone()};
    if (s->group->backend == "nccl") v[0] = v[0].to(s->params[i].shard.device());
    c10d::AllreduceOptions o;
    o.reduceOp = max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    try {
      WorkPtr w = s->group->comm->allreduce(v, o);
      waitWork(w, "clip-grad-norm!");
    } catch (const PurpleException&) {
      throw;
    } catch (const std::exception& e) {
      throwCommError("clip-grad-norm!: reducing the norm of sharded gradients", e);
    }
    return v[0].to(value.device()).to(value.scalar_type()).reshape({});
  }
  bool writes(const at::Tensor& p) const override {
    auto [s, i] = find(p);
    return !s || s->group->rank == 0;
  }
  std::pair<std::shared_ptr<FsdpState>, size_t> find(const at::Tensor& p) const {
    if (!p.defined()) return {nullptr, 0};
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(p.unsafeGetTensorImpl());
    if (it == map_.end()) return {nullptr, 0};
    return {it->second.first.lock(), it->second.second};
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const void*, std::pair<std::weak_ptr<FsdpState>, size_t>> map_;
};

ShardRegistry& registry() {
  static ShardRegistry* r = [] {
    auto* x = new ShardRegistry();   // never destroyed: finalizers may drop models at exit
    setShardedParameters(x);
    return x;
  }();
  return *r;
}

bool isContainer(const torch::nn::Module& m) {
  std::string t = moduleTypeName(m);
  return t == "Sequential" || t == "ModuleList" || t == "ModuleDict";
}

// The default units: every submodule that holds parameters, except that sequential, module-list
// and module-dict containers are split into their children (a transformer's blocks, an MLP's
// layers). A module Purple cannot hook (a part of a LibTorch layer) stays in its parent's unit.
void defaultUnits(const std::shared_ptr<torch::nn::Module>& m, const std::string& path,
                  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>& out) {
  for (auto& c : m->named_children()) {
    std::string p = path.empty() ? c.key() : path + "." + c.key();
    if (c.value()->parameters(true).empty()) continue;
    if (isContainer(*c.value())) defaultUnits(c.value(), p, out);
    else if (dynamic_cast<ModuleForward*>(c.value().get())) out.emplace_back(p, c.value());
  }
}

}  // namespace

// ---- building ---------------------------------------------------------------------------------

void FsdpState::build(const std::shared_ptr<torch::nn::Module>& root,
                      const std::vector<std::shared_ptr<torch::nn::Module>>& chosen, bool useDefault) {
  const char* who = "fully-shard";
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> found;
  if (useDefault) {
    defaultUnits(root, "", found);
  } else {
    auto all = root->named_modules("", /*include_self=*/false);
    for (auto& m : chosen) {
      std::string path;
      bool seen = false;
      for (auto& e : all)
        if (e.value().get() == m.get()) {
          path = e.key();
          seen = true;
          break;
        }
      if (!seen)
        throwError("value-error", std::string(who) + ": :units must be submodules of the model; a " + moduleTypeName(*m) +
                                      " is not one (the model itself is always the root unit)");
      if (!dynamic_cast<ModuleForward*>(m.get()))
        throwError("value-error", std::string(who) + ": the submodule " + path + " (" + moduleTypeName(*m) +
                                      ") cannot be a unit: it is a part of a LibTorch layer, whose forward Purple does not see");
      found.emplace_back(path, m);
    }
  }
  units.clear();
  params.clear();
  units.push_back(Unit{});
  units[0].module = root;
  for (auto& f : found) {
    Unit u;
    u.path = f.first;
    u.module = f.second;
    units.push_back(std::move(u));
  }
  // Each parameter belongs to the deepest unit whose path prefixes its name; one shared by
  // several units (tied weights) to the root, which is gathered for the whole forward.
  std::unordered_map<const void*, size_t> byImpl;
  auto ownerOf = [&](const std::string& name) {
    size_t best = 0, bestLen = 0;
    for (size_t u = 1; u < units.size(); u++) {
      const std::string& p = units[u].path;
      if (name.size() > p.size() && name.compare(0, p.size(), p) == 0 && name[p.size()] == '.' && p.size() + 1 > bestLen) {
        best = u;
        bestLen = p.size() + 1;
      }
    }
    return best;
  };
  int64_t W = group->size, rank = group->rank;
  for (auto& e : root->named_parameters(true)) {
    const at::Tensor& t = e.value();
    size_t owner = ownerOf(e.key());
    auto it = byImpl.find(t.unsafeGetTensorImpl());
    if (it != byImpl.end()) {
      if (params[it->second].unit != owner) params[it->second].unit = 0;
      continue;
    }
    Param p;
    p.param = t;
    p.name = e.key();
    std::optional<EarlyShard> early = earlyShardOf(t);
    p.shape = early ? early->shape : t.sizes().vec();
    p.numel = early ? early->numel : t.numel();
    p.chunk = (p.numel + W - 1) / W;
    p.start = std::min(p.numel, rank * p.chunk);
    p.length = std::max<int64_t>(0, std::min(p.chunk, p.numel - p.start));
    p.unit = owner;
    byImpl[t.unsafeGetTensorImpl()] = params.size();
    params.push_back(std::move(p));
  }
  for (size_t i = 0; i < params.size(); i++) {
    Param& p = params[i];
    Unit& u = units[p.unit];
    u.offsets.push_back(u.packed);
    u.packed += p.chunk;
    u.params.push_back(i);
    torch::NoGradGuard noGrad;
    if (earlyShardOf(p.param)) {   // already this rank's part (fully-shard-unit!)
      p.shard = p.param.detach();
      forgetEarlyShard(p.param);
    } else {
      at::Tensor flat = p.param.detach().reshape({-1});
      p.shard = flat.narrow(0, p.start, p.length).clone();
    }
    p.param.mutable_grad() = at::Tensor();
    p.param.set_data(p.shard);
    registry().add(p.param, shared_from_this(), i);
  }
  for (size_t u = units.size(); u-- > 0;) reduceOrder_.push_back(u);
  std::weak_ptr<FsdpState> self = weak_from_this();
  for (size_t u = 1; u < units.size(); u++) {
    auto m = units[u].module.lock();
    units[u].preHook = addNativeForwardPreHook(
        m, [self, u](Value args) -> Value {
          auto s = self.lock();
          return s ? s->beforeForward(u, args) : Value::f();
        },
        who);
    units[u].postHook = addNativeForwardHookLast(
        m, [self, u](Value, Value out) {
          if (auto s = self.lock()) s->afterForward(u, out, false);
        },
        who);
  }
}

FsdpState::~FsdpState() {
  for (auto& p : params) {
    registry().remove(p.param);
    if (p.accumulator) p.accumulator->del_post_hook(p.hookKey);
  }
}

void FsdpState::removeHooks() {
  for (size_t u = 1; u < units.size(); u++)
    if (auto m = units[u].module.lock()) {
      removeNativeHook(m, units[u].preHook);
      removeNativeHook(m, units[u].postHook);
    }
}

// ---- gathering and freeing --------------------------------------------------------------------

// Gloo's collectives cost a fixed time each, large enough that a transformer block's dozen
// small parameters go in one; a parameter whose whole tensor has a million elements or more
// (4 MB in float32) gets its own, which saves a copy of it.
bool FsdpState::isLarge(const Param& p) const { return p.chunk * group->size >= (int64_t(1) << 20); }

// The gathered buffer of P in DT, allocated once and refilled in place after it was freed.
void FsdpState::ensurePadded(Param& p, at::ScalarType dt) {
  if (!p.padded.defined() || p.padded.scalar_type() != dt) {
    p.padded = at::empty({group->size * p.chunk}, p.shard.options().dtype(dt));
    p.full = p.padded.narrow(0, 0, p.numel).view(p.shape);
  } else {
    refillStorage(p.padded);
  }
}

void FsdpState::unshard(Unit& u, bool inHook) {
  if (u.unsharded) return;
  torch::NoGradGuard noGrad;
  int64_t W = group->size;
  // On Gloo, whose collectives run on the CPU the backward pass runs on, the reduction in flight
  // is finished before gathering: its two buffers (the unit's gradients sent, every rank's
  // received) would otherwise be alive beside this unit's, for no overlap worth having.
  if (inHook && group->backend == "gloo" && inflight_) {
    completeReduce(units[*inflight_]);
    inflight_.reset();
  }
  // one all-gather per dtype (a unit's parameters usually share one)
  std::vector<at::ScalarType> dtypes;
  for (size_t i : u.params)
    if (std::find(dtypes.begin(), dtypes.end(), computeDtype(params[i])) == dtypes.end())
      dtypes.push_back(computeDtype(params[i]));
  for (at::ScalarType dt : dtypes) {
    std::vector<size_t> members;
    std::vector<int64_t> offs;
    int64_t S = 0;
    for (size_t i : u.params)
      if (computeDtype(params[i]) == dt && params[i].chunk > 0) {
        members.push_back(i);
        offs.push_back(S);
        S += params[i].chunk;
      }
    if (S == 0) continue;
    if (group->backend == "gloo" && wireDtype(*group, dt) == dt) {
      // Gloo (LibTorch 1.13) has no single-tensor all-gather. The unit has one buffer holding
      // every parameter's whole tensor (each a slice of it). A large parameter is gathered in
      // place by one broadcast per rank of that rank's part; the small ones by one coalesced
      // all-gather, writing every rank's parts into their places through Gloo's own receive
      // buffer. Measured on 4 ranks of 2 cores: an in-place all-reduce of the zeroed buffer moved
      // twice the bytes and cost 30-50% more system time per step; the broadcasts against the
      // coalesced gather of the whole unit, the same time, and the MLP's peak 80.1 -> 76.4 MB
      // (no receive buffer of the unit's size).
      at::Tensor* flat = nullptr;
      for (auto& f : u.flats)
        if (f.first == dt) flat = &f.second;
      if (!flat) {
        u.flats.emplace_back(dt, at::empty({W * S}, params[members[0]].shard.options().dtype(dt)));
        flat = &u.flats.back().second;
        for (size_t k = 0; k < members.size(); k++) {
          Param& p = params[members[k]];
          p.padded = flat->narrow(0, W * offs[k], W * p.chunk);
          p.full = p.padded.narrow(0, 0, p.numel).view(p.shape);
          p.inUnitBuffer = true;
        }
      } else {
        refillStorage(*flat);
      }
      std::vector<at::Tensor> ins;
      std::vector<std::vector<at::Tensor>> outs;
      outs.resize(static_cast<size_t>(W));
      std::vector<Param*> large;
      for (size_t k = 0; k < members.size(); k++) {
        Param& p = params[members[k]];
        if (isLarge(p)) {
          at::Tensor mine = p.padded.narrow(0, group->rank * p.chunk, p.chunk);
          if (p.length > 0) mine.narrow(0, 0, p.length).copy_(p.shard);
          if (p.length < p.chunk) mine.narrow(0, p.length, p.chunk - p.length).zero_();
          large.push_back(&p);
          continue;
        }
        at::Tensor in = p.shard;
        if (p.length < p.chunk || p.shard.scalar_type() != dt) {
          in = at::zeros({p.chunk}, p.shard.options().dtype(dt));
          if (p.length > 0) in.narrow(0, 0, p.length).copy_(p.shard);
        }
        ins.push_back(in);
        for (int64_t r = 0; r < W; r++) outs[size_t(r)].push_back(p.padded.narrow(0, r * p.chunk, p.chunk));
      }
      gatheringParameters(inHook, [&] {
        std::vector<WorkPtr> works;
        for (Param* p : large)
          for (int64_t r = 0; r < W; r++) {
            std::vector<at::Tensor> v{p->padded.narrow(0, r * p->chunk, p->chunk)};
            c10d::BroadcastOptions o;
            o.rootRank = r;
            works.push_back(group->comm->broadcast(v, o));
          }
        if (!ins.empty()) works.push_back(group->comm->allgather_coalesced(outs, ins));
        for (auto& w : works) w->wait();
      });
      continue;
    }
    at::Tensor in = at::empty({S}, params[members[0]].shard.options().dtype(wireDtype(*group, dt)));
    for (size_t k = 0; k < members.size(); k++) {
      Param& p = params[members[k]];
      if (p.length > 0) in.narrow(0, offs[k], p.length).copy_(p.shard);
      if (p.length < p.chunk) in.narrow(0, offs[k] + p.length, p.chunk - p.length).zero_();
    }
    at::Tensor out = at::empty({W * S}, in.options());
    allGatherInto(*group, out, in, inHook);
    at::Tensor rows = out.view({W, S});
    for (size_t k = 0; k < members.size(); k++) {
      Param& p = params[members[k]];
      ensurePadded(p, dt);
      p.padded.view({W, p.chunk}).copy_(rows.narrow(1, offs[k], p.chunk));
    }
  }
  for (size_t i : u.params) {
    Param& p = params[i];
    if (p.numel == 0 && !p.full.defined()) p.full = at::empty(p.shape, p.shard.options().dtype(computeDtype(p)));
    if (p.param.grad().defined()) {   // accumulated before: kept aside while the parameter is whole
      p.stashed = p.stashed.defined() ? p.stashed + p.param.grad() : p.param.grad();
      p.param.mutable_grad() = at::Tensor();
    }
    p.param.set_data(p.full);
    p.whole = true;
  }
  u.unsharded = true;
}

void FsdpState::reshardParam(Param& p) {
  if (p.whole) {
    // a whole gradient the hooks did not take (a parameter used outside the unit's forward)
    if (p.param.grad().defined() && !p.gradReady) p.gradFull = p.param.grad();
    p.param.mutable_grad() = at::Tensor();
    p.param.set_data(p.shard);
    p.whole = false;
  }
  if (p.stashed.defined() && !p.param.grad().defined()) {
    p.param.mutable_grad() = p.stashed;
    p.stashed = at::Tensor();
  }
  if (!p.inUnitBuffer) emptyStorage(p.padded);   // a unit's buffer is freed with the whole unit
}

void FsdpState::reshard(Unit& u) {
  for (size_t i : u.params) reshardParam(params[i]);
  releaseFlats(u);
  u.unsharded = false;
}

void FsdpState::reshardAll() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  for (auto& u : units) reshard(u);
}

// ---- forward ----------------------------------------------------------------------------------

void FsdpState::beginPass() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (passOpen_) return;
  passOpen_ = true;
  for (auto& u : units) {
    u.inBackward = false;
    u.inputHooks = u.inputsDone = 0;
    u.gradsPending = 0;
    for (size_t i : u.params) u.gradsPending += params[i].param.requires_grad() ? 1 : 0;
    u.reduceLaunched = false;
    u.keepGathered = false;
  }
  for (auto& p : params) {
    p.gradReady = false;
    p.gradFull = at::Tensor();
    p.reduced = at::Tensor();
  }
  nextReduce_ = 0;
  inflight_.reset();
  forwardOrder_.clear();
}

Value FsdpState::beforeForward(size_t ui, Value args) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Unit& u = units[ui];
  if (recomputing > 0) {   // the arguments are the first forward's, already cast and hooked
    unshard(u, true);
    return Value::f();
  }
  unshard(u, false);
  bool grad = at::GradMode::is_enabled();
  bool checkpoint = grad && passOpen_ && ui != 0 && options.activationCheckpointing;
  if (!grad && !options.paramDtype) return Value::f();
  // New arguments: floating tensors cast to the parameters' dtype (mixed precision), and inputs
  // that need a gradient passed through a view whose gradient hook says when the backward pass
  // has gone through this unit.
  std::vector<Value, traceable_allocator<Value>> items;
  bool changed = false;
  std::weak_ptr<FsdpState> self = weak_from_this();
  for (Value p = args; isPair(p); p = cdr(p)) {
    Value v = car(p);
    if (isTensor(v) && tensorOf(v).defined()) {
      const at::Tensor& x = tensorOf(v);
      at::Tensor y = x;
      if (options.paramDtype && x.is_floating_point() && x.scalar_type() != *options.paramDtype)
        y = x.to(*options.paramDtype);
      if (grad && y.requires_grad()) {
        if (y.is_same(x)) y = x.view_as(x);
        y.register_hook([self, ui](const at::Tensor&) {
          if (auto s = self.lock()) s->onInputGrad(ui);
        });
        u.inputHooks++;
      }
      if (!y.is_same(x)) {
        v = wrapTensor(y);
        changed = true;
      }
    }
    items.push_back(v);
  }
  Value result = changed ? listFromArray(items.data(), items.size()) : Value::f();
  if (checkpoint) {
    u.checkpointArgs = Root(changed ? result : args);
    u.rngState = at::detail::getDefaultCPUGenerator().get_state();
    u.checkpointing = true;
    // back on in afterForward, or by the root's forward when a unit's forward fails
    at::GradMode::set_enabled(false);
  }
  return result;
}

void FsdpState::hookAccumulator(size_t i) {
  Param& p = params[i];
  if (!p.param.requires_grad()) return;
  auto acc = torch::autograd::impl::try_get_grad_accumulator(p.param);
  if (!acc || acc == p.accumulator) return;
  if (p.accumulator) p.accumulator->del_post_hook(p.hookKey);
  p.accumulator = acc;
  std::weak_ptr<FsdpState> self = weak_from_this();
  p.hookKey = acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [self, i](const variable_list& outputs, const variable_list&) {
        if (auto s = self.lock()) s->onParamGrad(i);
        return outputs;
      }));
}

void FsdpState::hookOutputs(size_t ui, Value v, int depth) {
  if (depth > 4) return;
  if (isTensor(v)) {
    const at::Tensor& t = tensorOf(v);
    if (!t.defined()) return;
    // An output that is a view of a parameter (a positional table sliced) would lose its data
    // when the unit is freed after forward: such a unit stays gathered until its backward.
    for (size_t i : units[ui].params) {
      const Param& p = params[i];
      if (p.padded.defined() && t.has_storage() && t.storage().is_alias_of(p.padded.storage()))
        units[ui].keepGathered = true;
    }
    if (t.requires_grad()) {
      std::weak_ptr<FsdpState> self = weak_from_this();
      t.register_hook([self, ui](const at::Tensor&) {
        if (auto s = self.lock()) s->onOutputGrad(ui);
      });
    }
  } else if (isPair(v)) {
    hookOutputs(ui, car(v), depth + 1);
    hookOutputs(ui, cdr(v), depth);
  } else if (v.is(Kind::Vector)) {
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) hookOutputs(ui, v.as<Vector>()->items[k], depth + 1);
  }
}

void FsdpState::afterForward(size_t ui, Value output, bool root) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Unit& u = units[ui];
  if (recomputing > 0) {   // the recomputation's graph creates the accumulators the hooks need
    for (size_t i : u.params) hookAccumulator(i);
    return;
  }
  if (u.checkpointing) {
    u.checkpointing = false;
    at::GradMode::set_enabled(true);
    struct Clear {
      Unit& u;
      ~Clear() {
        u.checkpointArgs = Root();
        u.rngState = at::Tensor();
      }
    } clear{u};
    checkpointOutputs(ui, output);
  }
  if (!at::GradMode::is_enabled()) {   // evaluation: nothing will come back for these parameters
    if (!passOpen_ || !u.inBackward) reshard(u);
    return;
  }
  for (size_t i : u.params) hookAccumulator(i);
  hookOutputs(ui, output, 0);
  u.inBackward = true;
  // The unit that ran last in the previous training forward is the first the backward pass
  // needs: it stays gathered (as FSDP2 keeps its last unit), which saves a collective, a free and
  // a refill per step, and adds nothing to the step's peak, which its backward reaches anyway.
  if (!root) forwardOrder_.push_back(ui);
  bool last = !lastForwardOrder_.empty() && forwardOrder_ == lastForwardOrder_;
  if (!root && options.reshardAfterForward && !u.keepGathered && !last) reshard(u);
}

// ---- backward ---------------------------------------------------------------------------------

void FsdpState::queueFinal() {
  if (finalQueued_) return;
  finalQueued_ = true;
  std::weak_ptr<FsdpState> self = weak_from_this();
  torch::autograd::Engine::get_default_engine().queue_callback([self] {
    if (auto s = self.lock()) s->finalize();
  });
}

void FsdpState::onOutputGrad(size_t ui) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  queueFinal();
  Unit& u = units[ui];
  unshard(u, true);
}

void FsdpState::maybeReshardInBackward(Unit& u) {
  // Once the gradient has reached the unit's inputs, the unit's backward is done with every
  // parameter whose own gradient is in as well.
  if (&u == &units[0] || u.inputHooks == 0 || u.inputsDone < u.inputHooks) return;
  bool all = true;
  for (size_t i : u.params) {
    Param& p = params[i];
    if (!p.param.requires_grad() || p.gradReady) reshardParam(p);
    else all = false;
  }
  if (all) {
    // On Gloo the unit's reduction, about to start, receives into the gathered buffer (its
    // parameters are sharded again; a gather before then would refill it)
    if (group->backend == "gloo" && !u.reduceLaunched) u.flatsKept = true;
    else releaseFlats(u);
    u.unsharded = false;
  }
}

void FsdpState::releaseFlats(Unit& u) {
  for (auto& f : u.flats) emptyStorage(f.second);
  u.flatsKept = false;
}

void FsdpState::onInputGrad(size_t ui) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Unit& u = units[ui];
  u.inputsDone++;
  maybeReshardInBackward(u);
  launchReady();
}

void FsdpState::onParamGrad(size_t i) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  queueFinal();
  Param& p = params[i];
  if (!passOpen_ || p.gradReady) return;
  p.gradFull = p.param.grad();
  p.param.mutable_grad() = at::Tensor();
  p.gradReady = true;
  Unit& u = units[p.unit];
  if (u.gradsPending > 0) u.gradsPending--;
  maybeReshardInBackward(u);
  if (u.gradsPending == 0) launchReady();
}

// On Gloo a unit's reduction also waits for the gradient to reach the unit's inputs: then its
// backward is done with the gathered parameters (maybeReshardInBackward), and the reduction can
// receive into their buffer. It runs at once when it starts, so it overlaps nothing by starting
// earlier.
bool FsdpState::readyToReduce(const Unit& u) const {
  if (u.gradsPending > 0) return false;
  return group->backend != "gloo" || &u == &units[0] || u.inputHooks == 0 || u.inputsDone >= u.inputHooks;
}

void FsdpState::launchReady() {
  while (nextReduce_ < reduceOrder_.size() && readyToReduce(units[reduceOrder_[nextReduce_]]))
    launchReduce(units[reduceOrder_[nextReduce_++]]);
}

void FsdpState::launchReduce(Unit& u) {
  u.reduceLaunched = true;
  bool trainable = false;
  for (size_t i : u.params) trainable = trainable || params[i].param.requires_grad();
  if (!trainable || u.packed == 0) {
    if (u.flatsKept) releaseFlats(u);
    return;
  }
  if (inflight_) {   // one reduction in flight at a time: its buffers are a unit's gradients
    completeReduce(units[*inflight_]);
    inflight_.reset();
  }
  torch::NoGradGuard noGrad;
  int64_t W = group->size, S = u.packed;
  const Param& first = params[u.params[0]];
  at::ScalarType dt = options.reduceDtype.value_or(computeDtype(first));
  if (group->backend == "gloo") {
    at::ScalarType wire = wireDtype(*group, dt);
    at::Tensor into;   // the unit's gathered buffer, kept for this (maybeReshardInBackward)
    if (u.flatsKept && u.flats.size() == 1 && u.flats[0].first == wire && u.flats[0].second.numel() == W * S)
      into = u.flats[0].second;
    if (into.defined() || W * S * int64_t(c10::elementSize(wire)) >= 2 * kPieceBytes) {
      reduceInPieces(u, wire, into);
      if (u.flatsKept) releaseFlats(u);
      return;
    }
    if (u.flatsKept) releaseFlats(u);
  }
  if (group->backend == "gloo") {
    // A unit smaller than two pieces, with no gathered buffer to receive into (its parameters
    // of several dtypes, or gathered whole with no resharding in backward): an all-reduce of each
    // whole gradient in place, each rank keeping its part of the sum. The all-to-all would take
    // two more copies of the unit at once (packed and received: the transformer's peak 29.5 ->
    // 32.6 MB per rank), or, in pieces, as many rounds (8 pieces: 0.52x DDP's samples/s
    // against 0.73x).
    u.works.assign(u.params.size(), WorkPtr());
    u.gradients.assign(u.params.size(), at::Tensor());
    u.smallOffsets.assign(u.params.size(), -1);
    at::ScalarType wire = wireDtype(*group, dt);
    // flat, and not an autograd view (whose base would be one more holder of the storage:
    // completeReduce frees a gradient's storage once this tensor is its only holder)
    auto fullGradient = [&](Param& p) {
      at::Tensor g;
      if (!p.gradFull.defined()) {
        g = at::zeros({p.numel}, p.shard.options().dtype(wire));
      } else if (p.gradFull.is_contiguous()) {
        g = at::empty({0}, p.gradFull.options());
        g.set_(p.gradFull.storage(), p.gradFull.storage_offset(), {p.numel}, {1});
      } else {
        g = p.gradFull.reshape({-1});
      }
      p.gradFull = at::Tensor();
      return g;
    };
    try {
      // the small parameters' gradients packed, all-reduced at once
      int64_t packed = 0;
      for (size_t k = 0; k < u.params.size(); k++) {
        Param& p = params[u.params[k]];
        if (p.chunk == 0 || !p.param.requires_grad() || isLarge(p)) continue;
        u.smallOffsets[k] = packed;
        packed += p.numel;
      }
      u.recv = at::Tensor();
      if (packed > 0) {
        u.recv = at::empty({packed}, first.shard.options().dtype(wire));
        for (size_t k = 0; k < u.params.size(); k++)
          if (u.smallOffsets[k] >= 0) {
            Param& p = params[u.params[k]];
            u.recv.narrow(0, u.smallOffsets[k], p.numel).copy_(fullGradient(p));
          }
        std::vector<at::Tensor> v{u.recv};
        u.work = group->comm->allreduce(v);
      }
      // each large one in place
      for (size_t k = 0; k < u.params.size(); k++) {
        Param& p = params[u.params[k]];
        if (p.chunk == 0 || !p.param.requires_grad() || !isLarge(p)) continue;
        at::Tensor g = fullGradient(p);
        if (g.scalar_type() != wire || !g.is_contiguous()) g = g.to(wire).contiguous();
        std::vector<at::Tensor> v{g};
        u.works[k] = group->comm->allreduce(v);
        u.gradients[k] = g;
      }
    } catch (const std::exception& e) {
      failInHook("reducing gradients", e);
    }
    u.gloo = true;
    inflight_ = size_t(&u - &units[0]);
    return;
  }
  at::Tensor send = at::empty({W, S}, first.shard.options().dtype(wireDtype(*group, dt)));
  for (size_t k = 0; k < u.params.size(); k++) {
    Param& p = params[u.params[k]];
    if (p.chunk == 0) continue;
    packColumns(send.narrow(1, u.offsets[k], p.chunk), p.gradFull.defined() ? p.gradFull.reshape({-1}) : at::Tensor(), p, 0);
    p.gradFull = at::Tensor();
  }
  try {
    if (group->backend == "nccl") {
      u.recv = at::empty({S}, send.options());
      std::vector<at::Tensor> outs{u.recv};
      std::vector<std::vector<at::Tensor>> ins(1);
      for (int64_t r = 0; r < W; r++) ins[0].push_back(send.select(0, r));
      u.work = group->comm->reduce_scatter(outs, ins, c10d::ReduceScatterOptions());
    } else {
      // Gloo: rank j's block of every rank goes to rank j, which adds the blocks it receives
      u.recv = at::empty({W * S}, send.options());
      at::Tensor flatSend = send.view({-1});
      std::vector<int64_t> equal;
      u.work = group->comm->alltoall_base(u.recv, flatSend, equal, equal, c10d::AllToAllOptions());
    }
  } catch (const std::exception& e) {
    failInHook("reducing gradients", e);
  }
  u.send = send;
  inflight_ = size_t(&u - &units[0]);
}

// Gloo (LibTorch 1.13) has no reduce-scatter; its all-to-all makes one: rank r's part of
// every rank's gradients goes to rank r, which adds what it receives. Each rank sends and
// receives (W-1)/W of the unit's gradients in one round, where an all-reduce of them moves
// twice that in 2 (W-1) steps (on 4 ranks of 2 cores, the MLP trained at 0.86x DDP's samples/s
// against 0.74x). The all-to-all needs its input packed rank-major and a receive buffer: done
// whole, those are two more copies of the unit beside its gradients (the MLP's peak went 76 ->
// 108 MB). So it runs in pieces of at most kPieceBytes, one after another, each gradient freed
// once packed, and receives into the unit's gathered buffer when its backward is done with it
// (RECEIVE-INTO): the transformer's units, one piece each, then take no more memory than the
// all-reduce in place. Nothing overlaps it anyway: the next unit's backward starts with
// gathering that unit, after this.
void FsdpState::reduceInPieces(Unit& u, at::ScalarType wire, const at::Tensor& receiveInto) {
  torch::NoGradGuard noGrad;
  int64_t W = group->size, S = u.packed;
  const Param& first = params[u.params[0]];
  at::TensorOptions opts = first.shard.options().dtype(wire);
  int64_t width = std::max<int64_t>(1, std::min(S, kPieceBytes / (W * int64_t(c10::elementSize(wire)))));
  std::vector<at::Tensor> flats(u.params.size());
  for (size_t k = 0; k < u.params.size(); k++) {
    Param& p = params[u.params[k]];
    if (p.gradFull.defined()) flats[k] = p.gradFull.reshape({-1});
    p.gradFull = at::Tensor();
  }
  at::Tensor mine = at::empty({S}, opts);
  at::Tensor send = at::empty({W, width}, opts);
  at::Tensor recv = receiveInto.defined() ? receiveInto : at::empty({W * width}, opts);
  try {
    for (int64_t c0 = 0; c0 < S; c0 += width) {
      int64_t n = std::min(width, S - c0);
      at::Tensor piece = n == width ? send : at::empty({W, n}, opts);
      for (size_t k = 0; k < u.params.size(); k++) {
        Param& p = params[u.params[k]];
        int64_t a = std::max(c0, u.offsets[k]), b = std::min(c0 + n, u.offsets[k] + p.chunk);
        if (p.chunk == 0 || a >= b) continue;
        packColumns(piece.narrow(1, a - c0, b - a), flats[k], p, a - u.offsets[k]);
        if (b == u.offsets[k] + p.chunk) flats[k] = at::Tensor();   // all packed: freed now
      }
      at::Tensor into = recv.narrow(0, receiveInto.defined() ? W * c0 : 0, W * n);
      at::Tensor flatSend = piece.view({-1});
      std::vector<int64_t> equal;
      group->comm->alltoall_base(into, flatSend, equal, equal, c10d::AllToAllOptions())->wait();
      at::Tensor sum = mine.narrow(0, c0, n);
      at::sum_out(sum, into.view({W, n}), {0});
    }
  } catch (const std::exception& e) {
    failInHook("reducing gradients", e);
  }
  flats.clear();
  send = recv = at::Tensor();
  mine.div_(double(W));
  for (size_t k = 0; k < u.params.size(); k++) {
    Param& p = params[u.params[k]];
    if (p.param.requires_grad() && p.chunk > 0)
      p.reduced = mine.narrow(0, u.offsets[k], p.length).to(p.shard.scalar_type(), false, true);
  }
}

// Columns [FROM, FROM + BLOCK's width) of P's gradient FLAT laid out rank-major ([ranks, chunk]:
// row r holds the elements rank r keeps), into BLOCK; zeros past the gradient's end, and for
// a parameter that has none.
void FsdpState::packColumns(at::Tensor block, const at::Tensor& flat, const Param& p, int64_t from) {
  int64_t W = group->size, m = block.size(1);
  if (!flat.defined()) {
    block.zero_();
    return;
  }
  int64_t rows = p.numel / p.chunk, rest = p.numel - rows * p.chunk;
  if (rows > 0) block.narrow(0, 0, rows).copy_(flat.narrow(0, 0, rows * p.chunk).view({rows, p.chunk}).narrow(1, from, m));
  if (rows < W) {
    at::Tensor partial = block.select(0, rows);
    int64_t have = std::clamp<int64_t>(rest - from, 0, m);
    if (have > 0) partial.narrow(0, 0, have).copy_(flat.narrow(0, rows * p.chunk + from, have));
    if (have < m) partial.narrow(0, have, m - have).zero_();
    if (rows + 1 < W) block.narrow(0, rows + 1, W - rows - 1).zero_();
  }
}

void FsdpState::completeReduce(Unit& u) {
  if (u.gloo) {
    u.gloo = false;
    torch::NoGradGuard noGrad;
    double W = double(group->size);
    try {
      if (u.work) u.work->wait();
      for (auto& w : u.works)
        if (w) w->wait();
    } catch (const std::exception& e) {
      u.work.reset();
      u.works.clear();
      u.gradients.clear();
      u.recv = at::Tensor();
      failInHook("reducing gradients", e);
    }
    for (size_t k = 0; k < u.params.size(); k++) {
      Param& p = params[u.params[k]];
      at::Tensor whole = u.smallOffsets[k] >= 0 ? u.recv.narrow(0, u.smallOffsets[k], p.numel) : u.gradients[k];
      if (!whole.defined()) continue;
      p.reduced = whole.narrow(0, p.start, p.length).div(W).to(p.shard.scalar_type());
    }
    // Gloo's worker thread drops its reference to a finished collective's tensors a moment after
    // wait returns, so a whole gradient could outlive this by a varying time, alive beside the
    // next unit's gather (measured: a 16 MB higher peak in one step of three). Nothing else holds
    // these buffers (no other tensor shares their storage): their memory goes back now.
    for (auto& g : u.gradients)
      if (g.defined() && g.storage().use_count() == 1) emptyStorage(g);
    if (u.recv.defined() && u.recv.storage().use_count() == 1) emptyStorage(u.recv);
    u.work.reset();
    u.works.clear();
    u.gradients.clear();
    u.recv = at::Tensor();
    return;
  }
  if (!u.work) return;
  try {
    u.work->wait();
  } catch (const std::exception& e) {
    u.work.reset();
    failInHook("reducing gradients", e);
  }
  u.work.reset();
  torch::NoGradGuard noGrad;
  int64_t W = group->size, S = u.packed;
  at::Tensor sum = group->backend == "nccl" ? u.recv : u.recv.view({W, S}).sum(0);
  sum.div_(double(W));
  for (size_t k = 0; k < u.params.size(); k++) {
    Param& p = params[u.params[k]];
    if (!p.param.requires_grad()) continue;
    p.reduced = sum.narrow(0, u.offsets[k], p.length).to(p.shard.scalar_type(), false, true);
  }
  u.send = at::Tensor();
  u.recv = at::Tensor();
}

void FsdpState::finalize() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  finalQueued_ = false;
  if (!passOpen_) return;
  while (nextReduce_ < reduceOrder_.size()) launchReduce(units[reduceOrder_[nextReduce_++]]);
  if (inflight_) {
    completeReduce(units[*inflight_]);
    inflight_.reset();
  }
  for (auto& u : units) reshard(u);
  lastForwardOrder_ = forwardOrder_;
  for (auto& p : params) {
    if (!p.reduced.defined()) continue;
    at::Tensor g = p.param.grad();
    p.param.mutable_grad() = g.defined() ? g.add(p.reduced) : p.reduced;
    p.reduced = at::Tensor();
  }
  passOpen_ = false;
}

// ---- state dicts ------------------------------------------------------------------------------

at::Tensor FsdpState::gatherWhole(size_t i) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Param& p = params[i];
  torch::NoGradGuard noGrad;
  if (p.numel == 0) return at::empty(p.shape, p.shard.options());
  at::Tensor in = at::zeros({p.chunk}, p.shard.options());
  if (p.length > 0) in.narrow(0, 0, p.length).copy_(p.shard);
  at::Tensor out = at::empty({group->size * p.chunk}, p.shard.options());
  allGatherInto(*group, out, in, false);
  return out.narrow(0, 0, p.numel).view(p.shape);
}

void FsdpState::scatterWhole(size_t i, const at::Tensor& full) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Param& p = params[i];
  reshard(units[p.unit]);
  torch::NoGradGuard noGrad;
  if (p.length > 0) p.shard.copy_(full.reshape({-1}).narrow(0, p.start, p.length));
}

}  // namespace purple::dist
