// zero-redundancy-optimizer: PyTorch's ZeroRedundancyOptimizer (ZeRO stage 1). The parameters
// are split across the ranks of a group; each rank keeps an ordinary optimizer (made by the
// procedure the user gives, e.g. adamw) over its own part only, so optimizer state (Adam's
// moments) takes about 1/N of its memory on each of N ranks. A step: each rank steps its part
// with the gradients every rank holds (distributed-data-parallel has averaged them), then each
// rank broadcasts the parameters it updated, so every replica ends with the same weights.
//
// The value is an optimizer like any other: its parameter groups hold every parameter (so
// optimizer-zero-grad, clipping, schedulers and optimizer-options see all of them), and its
// group options are copied into the local optimizer before each step (a scheduler's learning
// rate reaches it). Its state dict is the whole one, gathered from every rank, in the layout a
// plain optimizer over the same parameters writes (so it loads into either, at any world size).
#include "builtins/distributed/comm.hpp"
#include "builtins/nn/optim.hpp"
#include "builtins/nn/optim_state.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/builtins.hpp"
#include "interp/language/equality.hpp"
#include "interp/language/printer.hpp"
#include "interp/limits/sandbox.hpp"
#include <algorithm>
#include <numeric>

namespace purple::dist {

namespace {

using torch::optim::OptimizerOptions;
using torch::optim::OptimizerParamGroup;

const char* kWho = "zero-redundancy-optimizer";
const char* kKind = "zero-redundancy";

class ZeroOptimizer : public torch::optim::Optimizer {
 public:
  ZeroOptimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
      : Optimizer(std::move(groups), std::move(defaults)) {}

  GroupPtr group;
  Root inner;                                     // the local optimizer (an optimizer value)
  std::vector<int> owner;                         // each parameter's rank, in param_groups' order
  std::vector<std::vector<at::Tensor>> byRank;    // the parameters each rank steps
  std::vector<std::vector<int64_t>> globalIds;    // per group: the global ids of this rank's parameters

  OptimizerObj* local() const { return inner.get().as<OptimizerObj>(); }

  // The options of this optimizer's groups (a scheduler changes these) into the local one's.
  void syncOptions(OptimizerObj* self) {
    auto& mine = local()->opt->param_groups();
    for (size_t k = 0; k < mine.size(); k++) mine[k].set_options(param_groups()[k].options().clone());
    if (self) local()->initialLrs = self->initialLrs;
  }

  at::Tensor step(LossClosure closure) override {
    if (closure)
      throwError("value-error", std::string(kWho) + ": a step with a closure is not supported (each rank steps only "
                                                    "its part of the parameters)");
    OptimizerObj* o = local();
    syncOptions(nullptr);
    beforeOptimizerStep(o);
    o->opt->step();
    afterOptimizerStep(o);
    torch::NoGradGuard noGrad;
    // in pieces of at most 4 MB, large parameters in place: a packed copy of a rank's whole part
    // would be alive beside every parameter and gradient, at the step's peak
    for (int r = 0; r < group->size; r++)
      if (!byRank[size_t(r)].empty()) broadcastPacked(*group, byRank[size_t(r)], r, kWho, int64_t(4) << 20);
    return {};
  }
};

ZeroOptimizer* zeroOf(OptimizerObj* o) {
  auto* z = dynamic_cast<ZeroOptimizer*>(o->opt.get());
  if (!z) throwError("type-error", std::string(kWho) + ": not a zero-redundancy optimizer");
  return z;
}

Value str(const char* s) { return makeString(s); }

// A dict given as a hash table or an alist: the value under KEY, or missing().
Value dictGet(Interp& in, Value dict, Value key) {
  if (isHashTable(dict)) return hashTableGet(in, dict, key);
  for (Value p = dict; isPair(p); p = cdr(p))
    if (isPair(car(p)) && equalValues(car(car(p)), key)) return cdr(car(p));
  return Value::missing();
}

// A fresh hash table with DICT's entries but KEY's value replaced by VALUE.
Value copyWith(Interp& in, Value dict, Value key, Value value) {
  Value out = makeHashTable(HashEquiv::Equal);
  if (isHashTable(dict)) {
    auto* h = dict.as<HashTable>();
    for (uint32_t i = 0; i < h->entryUsed; i++)
      if (!h->entries[2 * i].isUnbound() && !equalValues(h->entries[2 * i], key))
        hashTablePut(in, out, h->entries[2 * i], h->entries[2 * i + 1]);
  } else {
    for (Value p = dict; isPair(p); p = cdr(p))
      if (isPair(car(p)) && !equalValues(car(car(p)), key)) hashTablePut(in, out, car(car(p)), cdr(car(p)));
  }
  hashTablePut(in, out, key, value);
  return out;
}

Value intList(const std::vector<int64_t>& xs) {
  Value out = Value::nil();
  for (size_t k = xs.size(); k-- > 0;) out = cons(makeInteger(xs[k]), out);
  return out;
}

// The whole state dict: every rank's local one, its ids made global, gathered (a collective).
Value zeroStateDict(Interp& in, OptimizerObj* o) {
  ZeroOptimizer* z = zeroOf(o);
  z->syncOptions(o);
  Value local = optimizerStateDict(in, z->local());
  std::vector<int64_t> ids;   // local id -> global id, as optimizerStateDict numbers them
  for (auto& g : z->globalIds) ids.insert(ids.end(), g.begin(), g.end());
  Value localState = dictGet(in, local, str("state"));
  Value mine = makeHashTable(HashEquiv::Equal);
  for (size_t j = 0; j < ids.size(); j++) {
    Value v = hashTableGet(in, localState, makeInteger(int64_t(j)));
    if (!v.isMissing()) hashTablePut(in, mine, makeInteger(ids[j]), v);
  }
  Value all = allGatherValue(*z->group, mine, "optimizer-state-dict");
  std::vector<Value, traceable_allocator<Value>> byRank;
  for (Value p = all; isPair(p); p = cdr(p)) byRank.push_back(car(p));
  Value state = makeHashTable(HashEquiv::Equal);
  for (size_t gi = 0; gi < z->owner.size(); gi++) {
    Value v = hashTableGet(in, byRank.at(size_t(z->owner[gi])), makeInteger(int64_t(gi)));
    if (!v.isMissing()) hashTablePut(in, state, makeInteger(int64_t(gi)), v);
  }
  std::vector<Value, traceable_allocator<Value>> groups;
  Value localGroups = dictGet(in, local, str("param_groups"));
  int64_t next = 0;
  size_t k = 0;
  for (Value p = localGroups; isPair(p); p = cdr(p), k++) {
    std::vector<int64_t> whole(z->param_groups()[k].params().size());
    std::iota(whole.begin(), whole.end(), next);
    next += int64_t(whole.size());
    groups.push_back(copyWith(in, car(p), str("params"), intList(whole)));
  }
  Value sd = makeHashTable(HashEquiv::Equal);
  hashTablePut(in, sd, str("state"), state);
  hashTablePut(in, sd, str("param_groups"), listFromArray(groups.data(), groups.size()));
  return sd;
}

// Loads a whole state dict (this optimizer's, or a plain optimizer's over the same parameters):
// each rank takes its parameters' entries.
void zeroLoadStateDict(Interp& in, OptimizerObj* o, Value sd) {
  ZeroOptimizer* z = zeroOf(o);
  const std::string who = "load-optimizer-state!";
  Value stateV = dictGet(in, sd, str("state")), groupsV = dictGet(in, sd, str("param_groups"));
  if (stateV.isMissing() || groupsV.isMissing() || !isList(groupsV))
    throwError("value-error", who + ": an optimizer state dict has \"state\" and \"param_groups\" (as Python's opt.state_dict())");
  std::vector<Value, traceable_allocator<Value>> saved;
  for (Value p = groupsV; isPair(p); p = cdr(p)) saved.push_back(car(p));
  if (saved.size() != z->param_groups().size())
    throwError("value-error", who + ": the state dict has " + std::to_string(saved.size()) + " parameter groups, the optimizer " +
                                  std::to_string(z->param_groups().size()));
  Value state = makeHashTable(HashEquiv::Equal);
  std::vector<Value, traceable_allocator<Value>> groups;
  int64_t localId = 0, globalStart = 0;
  for (size_t k = 0; k < saved.size(); k++) {
    Value ids = dictGet(in, saved[k], str("params"));
    size_t n = z->param_groups()[k].params().size();
    if (!isList(ids) || size_t(listLength(ids)) != n)
      throwError("value-error", who + ": parameter group " + std::to_string(k) + " of the state dict does not have the " +
                                    std::to_string(n) + " parameters of the optimizer's");
    std::vector<Value, traceable_allocator<Value>> given;   // the saved ids of this group, by position
    for (Value p = ids; isPair(p); p = cdr(p)) given.push_back(car(p));
    std::vector<int64_t> mine;
    for (int64_t gid : z->globalIds[k]) {
      Value v = dictGet(in, stateV, given.at(size_t(gid - globalStart)));
      if (!v.isMissing()) hashTablePut(in, state, makeInteger(localId), v);
      mine.push_back(localId++);
    }
    globalStart += int64_t(n);
    groups.push_back(copyWith(in, saved[k], str("params"), intList(mine)));
  }
  Value local = makeHashTable(HashEquiv::Equal);
  hashTablePut(in, local, str("state"), state);
  hashTablePut(in, local, str("param_groups"), listFromArray(groups.data(), groups.size()));
  loadOptimizerStateDict(in, z->local(), local, who);
  auto& theirs = z->local()->opt->param_groups();
  for (size_t k = 0; k < theirs.size(); k++) z->param_groups()[k].set_options(theirs[k].options().clone());
  if (z->local()->initialLrs) o->initialLrs = z->local()->initialLrs;
}

}  // namespace

}  // namespace purple::dist

namespace purple {

using namespace dist;

void registerDistZero(Registry& r) {
  {
    OptimizerLayout layout;
    layout.kind = kKind;
    layout.stateDict = zeroStateDict;
    layout.loadStateDict = zeroLoadStateDict;
    layout.writesFile = [](OptimizerObj* o) { return zeroOf(o)->group->rank == 0; };
    registerOptimizerLayout(std::move(layout));
  }
  r.defRaw(
      "zero-redundancy-optimizer", "(params make-optimizer :rest options)",
      [](Interp& in, Value* a, int n, PrimitiveInfo*) -> Value {
        if (n < 2) throwError("arity-error", std::string(kWho) + ": expected PARAMS and MAKE-OPTIMIZER, e.g. "
                                                                 "(zero-redundancy-optimizer (parameters m) adamw :lr 1e-3)");
        Value params = a[0], make = a[1];
        if (!isProcedure(make)) throwTypeError(kWho, 2, "a procedure that makes an optimizer (adamw, sgd ...)", make);
        // :group G is ours; every other option goes to MAKE-OPTIMIZER
        Value groupV = Value::missing();
        std::vector<Value, traceable_allocator<Value>> args{params};
        for (int k = 2; k < n; k++) {
          if (isKeyword(a[k]) && symbolName(a[k]) == "group" && k + 1 < n) {
            groupV = a[++k];
            continue;
          }
          args.push_back(a[k]);
        }
        GroupPtr g = groupArg(groupV, kWho);
        Value innerV = in.apply(make, args.data(), int(args.size()));
        if (!isOptimizer(innerV))
          throwError("type-error", std::string(kWho) + ": MAKE-OPTIMIZER must return an optimizer, got " + toWriteString(innerV));
        OptimizerObj* inner = innerV.as<OptimizerObj>();
        if (inner->optKind == "lbfgs" || inner->optKind == kKind)
          throwError("value-error", std::string(kWho) + ": cannot shard the state of a " + inner->optKind + " optimizer");
        auto& innerGroups = inner->opt->param_groups();
        std::vector<at::Tensor> all;
        for (auto& grp : innerGroups)
          for (auto& p : grp.params()) all.push_back(p);
        checkSameModel(*g, all, kWho);
        // PyTorch's partition: per group, largest parameters first, each to the rank with the
        // fewest elements so far (counted over all groups)
        int W = g->size;
        std::vector<int64_t> load(size_t(W), 0);
        std::vector<int> owner(all.size(), 0);
        size_t base = 0;
        for (auto& grp : innerGroups) {
          std::vector<size_t> order(grp.params().size());
          std::iota(order.begin(), order.end(), size_t(0));
          std::stable_sort(order.begin(), order.end(),
                           [&](size_t x, size_t y) { return grp.params()[x].numel() > grp.params()[y].numel(); });
          for (size_t i : order) {
            int r = int(std::min_element(load.begin(), load.end()) - load.begin());
            owner[base + i] = r;
            load[size_t(r)] += grp.params()[i].numel();
          }
          base += grp.params().size();
        }
        // this optimizer's groups hold every parameter; the local one's only this rank's
        std::vector<OptimizerParamGroup> outer;
        std::vector<std::vector<int64_t>> globalIds;
        std::vector<std::vector<at::Tensor>> byRank(static_cast<size_t>(W));
        base = 0;
        for (auto& grp : innerGroups) {
          outer.emplace_back(grp.params(), grp.options().clone());
          std::vector<at::Tensor> mine;
          std::vector<int64_t> ids;
          for (size_t i = 0; i < grp.params().size(); i++) {
            byRank[size_t(owner[base + i])].push_back(grp.params()[i]);
            if (owner[base + i] == g->rank) {
              mine.push_back(grp.params()[i]);
              ids.push_back(int64_t(base + i));
            }
          }
          base += grp.params().size();
          grp.params() = mine;
          globalIds.push_back(std::move(ids));
        }
        inner->opt->state().clear();
        auto z = std::make_shared<ZeroOptimizer>(std::move(outer), inner->opt->defaults().clone());
        z->group = g;
        z->inner.set(innerV);
        z->owner = std::move(owner);
        z->byRank = std::move(byRank);
        z->globalIds = std::move(globalIds);
        Value v = wrapOptimizer(z, kKind, inner->autoZeroGrad);
        setCurrentOptimizer(in, v);
        return v;
      },
      "PyTorch's ZeroRedundancyOptimizer: an optimizer over PARAMS (a module, tensors or parameter groups) whose "
      "state is split across the ranks of :group (default: the world). MAKE-OPTIMIZER (adamw, sgd, adam ...) is "
      "called with PARAMS and the OPTIONs (:lr 1e-3 ...); the parameters are then divided among the ranks (largest "
      "first, each to the rank with the fewest elements so far), and each rank keeps the optimizer, and its state, "
      "for its own part only. optimizer-step steps this rank's part with the gradients every rank holds (averaged "
      "by distributed-data-parallel) and broadcasts it, so every rank ends with the same weights, as one process "
      "would. Zero-grad, clipping and schedulers see every parameter. optimizer-state-dict and save-optimizer-state "
      "gather the whole state (every rank must call them), in the layout of MAKE-OPTIMIZER's own optimizer over "
      "PARAMS; load-optimizer-state! takes each rank's part of such a dict. lbfgs (a closure) is not supported. "
      "Example: (zero-redundancy-optimizer (parameters ddp-model) adamw :lr 1e-3). It becomes the current "
      "optimizer.");
  r.def("zero-redundancy-local-optimizer", "(opt)",
        [](Value v) {
          OptimizerObj* o = optimizerArg(v, "zero-redundancy-local-optimizer", 1);
          if (o->optKind != kKind) throwTypeError("zero-redundancy-local-optimizer", 1, "a zero-redundancy-optimizer", v);
          return zeroOf(o)->inner.get();
        },
        "The optimizer a zero-redundancy-optimizer OPT keeps on this rank: the one MAKE-OPTIMIZER made, over this "
        "rank's part of the parameters only, holding that part's state.");
  sandbox(r, "zero-redundancy-optimizer", Needs::Process, "network: broadcasts updated parameters on every step");
}

}  // namespace purple
