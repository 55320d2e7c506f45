// fully-shard's activation checkpointing (fsdp.hpp, :activation-checkpointing): a unit's forward
// runs without recording, and a node of its own stands for it in the graph until the backward
// pass recomputes it. The rest of fully-shard is fsdp.cpp.
#include "builtins/distributed/fsdp.hpp"
#include "builtins/nn/value.hpp"
#include "interp/memory/tensor_value.hpp"
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/variable.h>
#include <ATen/core/grad_mode.h>
#include <ATen/CPUGeneratorImpl.h>

namespace purple {
// builtins/autograd/function.cpp: Purple code inside a backward pass, and a nested pass from it
void runPurpleCallback(Interp* in, const std::string& who, const std::function<void()>& body);
void runAutogradEngine(Interp& in, const std::function<void()>& body);
}  // namespace purple

namespace purple::dist {

void outputTensors(Value v, std::vector<at::Tensor>& out, int depth) {
  if (depth > 4) return;
  if (isTensor(v)) {
    const at::Tensor& t = tensorOf(v);
    if (t.defined() && t.is_floating_point()) out.push_back(t);
  } else if (isPair(v)) {
    outputTensors(car(v), out, depth + 1);
    outputTensors(cdr(v), out, depth);
  } else if (v.is(Kind::Vector)) {
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) outputTensors(v.as<Vector>()->items[k], out, depth + 1);
  }
}

// Activation checkpointing of one unit, as PyTorch's reentrant checkpoint: the unit's forward ran
// without recording, and this node stands for it in the graph, from its outputs to its inputs
// that need a gradient. Its backward runs the forward again with recording on (the unit gathered
// for the backward pass by its output hooks, the random state it had the first time), then a
// nested backward through that, which gives the parameters their gradients (reduced as usual)
// and the inputs theirs, returned here. Only one unit's activations are alive at a time.
namespace {

using torch::autograd::variable_list;

struct RecomputeUnit : torch::autograd::Node {
  std::weak_ptr<FsdpState> state;
  size_t unit = 0;
  std::weak_ptr<torch::nn::Module> module;
  Interp* interp = nullptr;
  Root args;
  at::Tensor rngState;

  std::string name() const override { return "FullyShardRecomputeBackward"; }

  variable_list apply(variable_list&& grads) override {
    variable_list result(num_outputs());
    auto s = state.lock();
    auto m = module.lock();
    if (!s || !m || !interp) return result;
    runPurpleCallback(interp, "fully-shard: recomputing a unit's forward for activation checkpointing", [&] {
      Interp& in = *interp;
      std::vector<Value, traceable_allocator<Value>> items;
      std::vector<at::Tensor> leaves;
      for (Value p = args.get(); isPair(p); p = cdr(p)) {
        Value v = car(p);
        if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).requires_grad()) {
          at::Tensor d = tensorOf(v).detach();
          d.requires_grad_(true);
          leaves.push_back(d);
          v = wrapTensor(d);
        }
        items.push_back(v);
      }
      struct Recomputing {
        FsdpState& s;
        at::Tensor saved;
        Recomputing(FsdpState& x, const at::Tensor& rng) : s(x) {
          s.recomputing++;
          if (rng.defined()) {
            at::Generator gen = at::detail::getDefaultCPUGenerator();
            saved = gen.get_state();
            gen.set_state(rng);
          }
        }
        ~Recomputing() {
          if (saved.defined()) {
            at::Generator gen = at::detail::getDefaultCPUGenerator();
            gen.set_state(saved);
          }
          s.recomputing--;
        }
      };
      Value out;
      {
        Recomputing r(*s, rngState);
        at::AutoGradMode on(true);
        out = callModule(in, m, items.data(), int(items.size()));
      }
      std::vector<at::Tensor> outs;
      outputTensors(out, outs, 0);
      variable_list ts, gs;
      for (size_t k = 0; k < outs.size() && k < grads.size(); k++)
        if (grads[k].defined() && outs[k].requires_grad()) {
          ts.push_back(outs[k]);
          gs.push_back(grads[k]);
        }
      if (!ts.empty()) runAutogradEngine(in, [&] { torch::autograd::backward(ts, gs); });
      for (size_t k = 0; k < leaves.size() && k < result.size(); k++) result[k] = leaves[k].grad();
    });
    return result;
  }
  // after the pass, unless it retains the graph (a second backward recomputes again)
  void release_variables() override {
    args = Root();
    rngState = at::Tensor();
  }
};

}  // namespace

void FsdpState::checkpointOutputs(size_t ui, Value output) {
  Unit& u = units[ui];
  std::vector<at::Tensor> inputs;
  for (Value p = u.checkpointArgs.get(); isPair(p); p = cdr(p))
    if (isTensor(car(p)) && tensorOf(car(p)).defined() && tensorOf(car(p)).requires_grad()) inputs.push_back(tensorOf(car(p)));
  std::vector<at::Tensor> outs;
  outputTensors(output, outs, 0);
  for (auto& t : outs) {
    bool alias = t.requires_grad() || t.is_view();
    for (auto& x : inputs) alias = alias || (t.has_storage() && x.has_storage() && t.is_alias_of(x));
    for (size_t i : u.params) alias = alias || (params[i].padded.defined() && t.has_storage() && t.storage().is_alias_of(params[i].padded.storage()));
    if (alias)
      throw std::runtime_error("fully-shard: with :activation-checkpointing, unit " + u.path +
                               " returns a view of its input or parameters (or a tensor it did not compute), which "
                               "cannot stand for the recomputation; make it a unit that computes its output, or shard "
                               "without :activation-checkpointing");
  }
  auto node = std::make_shared<RecomputeUnit>();
  node->state = weak_from_this();
  node->unit = ui;
  node->module = u.module;
  node->interp = Interp::current();
  node->args = u.checkpointArgs;
  node->rngState = u.rngState;
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  for (auto& t : outs) {
    at::Tensor handle = t;   // the same TensorImpl: every holder of the output sees its new history
    torch::autograd::set_history(handle, node);
  }
}

}  // namespace purple::dist
