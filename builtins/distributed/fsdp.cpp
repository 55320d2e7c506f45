// fully-shard (fsdp.hpp): sharding, gathering, and the hooks that launch the reductions
// (fsdp_reduce.cpp).
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

// ---- helpers fsdp_reduce.cpp shares (fsdp.hpp) -------------------------------------------------

at::ScalarType wireDtype(const Group& g, at::ScalarType dt) {
  return g.backend == "gloo" && dt == at::kBFloat16 ? at::kFloat : dt;
}

[[noreturn]] void failInHook(const char* what, const std::exception& e) {
  throw std::runtime_error(describeCommFailure(std::string("fully-shard: ") + what, e));
}

void emptyStorage(const at::Tensor& t) {
  if (!t.defined()) return;
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  if (s->nbytes() == 0) return;
  s->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}

namespace {

using torch::autograd::variable_list;

std::atomic<bool> gNoAllgatherBase{false};   // the backend has no single-tensor all-gather (Gloo in 1.13)

bool unsupportedCollective(const std::exception& e) {
  std::string m = e.what();
  return m.find("support") != std::string::npos;
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
