// fully-shard and what goes with it: the wrapper module (the root unit), and the procedures that
// inspect a sharded model. The sharding itself is fsdp.cpp's.
//
// The wrapper, like distributed-data-parallel's, has the model's parameters, buffers and children
// under their own names: optimizers, clipping, fit and state dicts see the model. Its forward
// gathers the root unit, runs the model (whose units gather themselves through native hooks),
// and hooks the outputs so that the backward pass gathers the units again as it reaches them.
#include "builtins/distributed/fsdp.hpp"
#include "builtins/nn/value.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include "interp/limits/sandbox.hpp"
#include "interp/language/printer.hpp"
#include <ATen/core/grad_mode.h>

namespace purple::dist {

bool isDataParallel(const torch::nn::Module& m);

namespace {

using torch::nn::Module;
using ModulePtr = std::shared_ptr<Module>;

struct FullyShardedModule : Module, ModuleForward {
  FullyShardedModule(ModulePtr m, std::shared_ptr<FsdpState> s)
      : Module("FullyShardedDataParallel"), inner(std::move(m)), state(std::move(s)) {
    for (auto& p : inner->named_parameters(false)) register_parameter(p.key(), p.value(), p.value().requires_grad());
    for (auto& b : inner->named_buffers(false)) register_buffer(b.key(), b.value());
    for (auto& c : inner->named_children()) register_module(c.key(), c.value());
    Module::train(inner->is_training());
  }
  ~FullyShardedModule() override { state->removeHooks(); }

  ModulePtr inner;
  std::shared_ptr<FsdpState> state;

  std::string typeName() const override { return "FullyShardedDataParallel"; }
  void pretty_print(std::ostream& s) const override { s << "FullyShardedDataParallel"; }
  void train(bool on) override {
    inner->train(on);
    Module::train(on);
  }

  Value forward(Interp& in, const Value* argv, int argc) override {
    if (at::GradMode::is_enabled()) state->beginPass();
    Value args = listFromArray(argv, size_t(argc));
    Value replaced = state->beforeForward(0, args);
    if (!replaced.isFalse()) args = replaced;
    std::vector<Value, traceable_allocator<Value>> items;
    for (Value p = args; isPair(p); p = cdr(p)) items.push_back(car(p));
    Value out;
    {
      // activation checkpointing turns recording off inside each unit's forward and back on after
      // it; a forward that fails in between must not leave it off
      at::AutoGradMode restore(at::GradMode::is_enabled());
      out = callModule(in, inner, items.data(), int(items.size()));
    }
    state->afterForward(0, out, true);
    if (state->options.outputDtype) out = castFloating(out, *state->options.outputDtype);
    return out;
  }

  static Value castFloating(Value v, at::ScalarType dt) {
    if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).is_floating_point() && tensorOf(v).scalar_type() != dt)
      return wrapTensor(tensorOf(v).to(dt));
    if (isPair(v)) return cons(castFloating(car(v), dt), castFloating(cdr(v), dt));
    return v;
  }
};

FullyShardedModule* shardedArg(Value v, std::string_view who, int index) {
  if (isModule(v))
    if (auto* f = dynamic_cast<FullyShardedModule*>(moduleArg(v, who, index).get())) return f;
  throwTypeError(who, index, "a module made by fully-shard", v);
}

std::optional<at::ScalarType> dtypeOption(Value v, std::string_view who) {
  if (v.isMissing() || v.isFalse()) return std::nullopt;
  at::ScalarType t = scalarTypeFromValue(v, who);
  if (!at::isFloatingType(t))
    throwError("value-error", std::string(who) + ": mixed-precision dtypes must be floating types, got " + toWriteString(v));
  return t;
}

}  // namespace

}  // namespace purple::dist

namespace purple {

using namespace dist;

void registerDistSharding(Registry& r) {
  r.def("fully-shard",
        "(model :key group units (reshard-after-forward #t) param-dtype reduce-dtype output-dtype "
        "(activation-checkpointing #f))",
        [](Value model, Value group, Value units, bool reshard, Value paramDtype, Value reduceDtype,
           Value outputDtype, bool checkpointing) -> Value {
          const char* who = "fully-shard";
          ModulePtr inner = moduleArg(model, who, 1);
          if (dynamic_cast<FullyShardedModule*>(inner.get()))
            throwError("dist-error", std::string(who) + ": the model is already sharded");
          if (isDataParallel(*inner))
            throwError("dist-error", std::string(who) + ": the model is wrapped by distributed-data-parallel; shard the "
                                                        "model itself (fully-shard replaces DDP)");
          GroupPtr g = groupArg(group, who);
          FsdpOptions o;
          o.reshardAfterForward = reshard;
          o.paramDtype = dtypeOption(paramDtype, who);
          o.reduceDtype = dtypeOption(reduceDtype, who);
          o.outputDtype = dtypeOption(outputDtype, who);
          o.activationCheckpointing = checkpointing;
          std::vector<ModulePtr> chosen;
          bool useDefault = units.isMissing() || units.isFalse();
          if (!useDefault) {
            if (!isList(units)) throwTypeError(who, 0, "a list of submodules (:units)", units);
            for (Value p = units; isPair(p); p = cdr(p)) chosen.push_back(moduleArg(car(p), who, 0));
          }
          std::vector<at::Tensor> params = inner->parameters(true);
          // parameters fully-shard-unit! has already cut are compared by their whole shapes, and not
          // broadcast: each rank has its own part only (equal on every rank when they were cut)
          std::vector<at::Tensor> shapes, state;
          for (auto& p : params) {
            std::optional<EarlyShard> e = earlyShardOf(p);
            if (!e) {
              shapes.push_back(p);
              state.push_back(p);
              continue;
            }
            if (e->groupSize != g->size || e->groupRank != g->rank)
              throwError("dist-error", std::string(who) + ": a parameter was cut by fully-shard-unit! for another group "
                                                          "(give both the same :group)");
            shapes.push_back(at::empty(e->shape, p.options().device(at::kMeta)));
          }
          checkSameModel(*g, shapes, who);
          // as distributed-data-parallel: rank 0's parameters and buffers on every rank
          for (auto& b : inner->buffers(true)) state.push_back(b);
          // in pieces of at most 4 MB, large parameters in place: a model sharded because it
          // does not fit a rank is not copied whole once more here
          if (g->size > 1 && !state.empty()) broadcastPacked(*g, state, 0, who, int64_t(4) << 20);
          auto s = std::make_shared<FsdpState>(g, o);
          s->build(inner, chosen, useDefault);
          return wrapModule(std::make_shared<FullyShardedModule>(inner, s));
        },
        "Shards MODEL's parameters, gradients and optimizer state across :group (default: the world), as "
        "PyTorch's FSDP2 (fully_shard): each parameter keeps only this rank's part of its elements (1/N of them), "
        "so an optimizer made on (parameters sharded) keeps 1/N of its state. MODEL is cut into units, :units (a "
        "list of submodules) or by default every submodule with parameters, sequential, module-list and "
        "module-dict containers split into their children (an MLP's layers, a transformer's blocks); the model's "
        "own remaining parameters form the root unit. Each unit's parameters are gathered from every rank just "
        "before its forward and freed after it (:reshard-after-forward #f keeps them until the backward pass), "
        "gathered again when the backward pass reaches the unit, and its gradients reduced with one reduce-scatter: "
        "every rank keeps the average of its part. Rank 0's parameters are copied to every rank first. Mixed "
        "precision: :param-dtype 'bfloat16 gathers the parameters (and casts the units' floating inputs) in that "
        "type, keeping float32 shards for the optimizer; :reduce-dtype reduces gradients in another type; "
        ":output-dtype casts the model's floating outputs. :activation-checkpointing #t runs each unit's forward "
        "without keeping its activations and recomputes it (with the random state it had) when the backward pass "
        "reaches the unit, as PyTorch's checkpoint_wrapper on FSDP units: one unit's activations alive at a time, for "
        "one more forward's compute. Returns a wrapper with the model's parameters, buffers "
        "and state-dict keys: state-dict gathers whole tensors (every rank must call it), load-state-dict! takes "
        "each rank's part, and save-sharded-checkpoint writes one part per rank. Move the model to its device "
        "first, and make the optimizer after sharding.");
  sandbox(r, "fully-shard", Needs::Process, "network: gathers parameters and reduces gradients");
  r.def("fully-shard-unit!", "(module :key group)",
        [](Value module, Value group) -> Value {
          const char* who = "fully-shard-unit!";
          ModulePtr m = moduleArg(module, who, 1);
          if (dynamic_cast<FullyShardedModule*>(m.get()) || isDataParallel(*m))
            throwError("dist-error", std::string(who) + ": give the module itself, before fully-shard or "
                                                        "distributed-data-parallel wraps the model");
          GroupPtr g = groupArg(group, who);
          ShardedParameters* sp = shardedParameters();
          std::vector<int64_t> shape;
          std::vector<at::Tensor> todo;
          for (auto& p : m->parameters(true))
            if (!earlyShardOf(p) && !(sp && sp->fullShape(p, shape))) todo.push_back(p);
          shardEarly(*g, todo, who);
          return module;
        },
        "Deferred initialisation for fully-shard: keeps only this rank's part of MODULE's parameters (as fully-shard "
        "will divide them among the ranks of :group), at once, and returns MODULE. Build a model whose whole replica "
        "does not fit one rank layer by layer, each layer cut as it is built, so that only one layer is ever whole: "
        "(fully-shard (sequential (fully-shard-unit! (linear 4096 4096)) (relu) (fully-shard-unit! (linear 4096 10)))). "
        "fully-shard then adopts the parts, and nothing is broadcast: every rank must build the same values, so seed "
        "them alike ((manual-seed 0) on every rank before building); the ranks' values are compared, and differing "
        "ones are an error. Until fully-shard wraps the model, its forward cannot run. A collective: every rank calls it.");
  sandbox(r, "fully-shard-unit!", Needs::Process, "network: compares the ranks' parameters");
  r.def("fully-sharded?", "(x)",
        [](Value x) { return isModule(x) && dynamic_cast<FullyShardedModule*>(moduleArg(x, "fully-sharded?", 1).get()) != nullptr; },
        "True when X was made by fully-shard.");
  r.def("fully-sharded-module", "(m)",
        [](Value v) { return wrapModule(shardedArg(v, "fully-sharded-module", 1)->inner); },
        "The model a fully-shard wrapper shards.");
  r.def("fully-shard-units", "(m)",
        [](Value v) {
          FsdpState& s = *shardedArg(v, "fully-shard-units", 1)->state;
          Value out = Value::nil();
          for (size_t u = s.units.size(); u-- > 0;) {
            int64_t n = 0;
            for (size_t i : s.units[u].params) n += s.params[i].numel;
            out = cons(cons(makeString(s.units[u].path), makeInteger(n)), out);
          }
          return out;
        },
        "The units of a fully-sharded model M, as a list of (path . parameter-count): the root (\"\") first, then "
        "each submodule gathered on its own, e.g. ((\"\" . 0) (\"0\" . 200960) (\"2\" . 1290)).");
  r.def("fully-shard-local-state-dict", "(m)",
        [](Value v) {
          ShardedParameters* sp = shardedParameters();
          auto entries = moduleLocalStateDict(*shardedArg(v, "fully-shard-local-state-dict", 1));
          Value out = Value::nil();
          std::vector<int64_t> shape;
          for (size_t k = entries.size(); k-- > 0;) {
            const at::Tensor& t = entries[k].second;
            bool sharded = sp && sp->fullShape(t, shape);
            out = cons(cons(makeString(entries[k].first), t.defined() ? wrapTensor(sharded ? t.detach() : t.detach().clone())
                                                                          : Value::unspecified()),
                       out);
          }
          return out;
        },
        "The state dict of the fully-sharded model M as this rank holds it, without gathering: (name . tensor), "
        "a sharded parameter's entry being this rank's part (1-D, its elements START .. START+LENGTH-1 of the "
        "flattened whole, sharded-parameter-info), a buffer's its whole value. save-sharded-checkpoint writes it.");
  r.def("sharded-parameter-info", "(m)",
        [](Value v) {
          FsdpState& s = *shardedArg(v, "sharded-parameter-info", 1)->state;
          Value out = Value::nil();
          for (size_t i = s.params.size(); i-- > 0;) {
            const auto& p = s.params[i];
            Value shape = Value::nil();
            for (size_t k = p.shape.size(); k-- > 0;) shape = cons(makeInteger(p.shape[k]), shape);
            Value items[] = {makeString(p.name), shape, makeInteger(p.start), makeInteger(p.length),
                             makeString(s.units[p.unit].path)};
            out = cons(listFromArray(items, 5), out);
          }
          return out;
        },
        "For each parameter of the fully-sharded model M: (name whole-shape start length unit), where this rank "
        "holds elements START .. START+LENGTH-1 of the flattened whole tensor.");
}

}  // namespace purple
