// Optimizer state dicts in PyTorch's layout (optim_state.hpp): the table of optimizer layouts,
// the conversion both ways, and the builtins optimizer-state-dict, load-optimizer-state-dict!,
// save-optimizer-state and load-optimizer-state!.
#include "builtins/nn/optim_state.hpp"
#include "interp/platform/torch_compat.hpp"
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/formats/torch_io.hpp"
#include "interp/language/equality.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <fstream>
#include <gc/gc_allocator.h>
#include <map>
#include <mutex>
#include <sstream>
#include "interp/limits/sandbox.hpp"

namespace purple {

using torch::optim::Optimizer;

// ---- conversions ----------------------------------------------------------------------------

Value fieldToValue(double x) { return makeFlonum(x); }
Value fieldToValue(int64_t x) { return makeInteger(x); }
Value fieldToValue(bool x) { return Value::boolean(x); }
Value fieldToValue(const std::tuple<double, double>& x) {
  Value v = makeVector(2);
  v.as<Vector>()->items[0] = makeFlonum(std::get<0>(x));
  v.as<Vector>()->items[1] = makeFlonum(std::get<1>(x));
  return v;
}
Value fieldToValue(const c10::optional<int64_t>& x) { return x ? makeInteger(*x) : Value::unspecified(); }
Value fieldToValue(const c10::optional<std::string>& x) { return x ? makeString(*x) : Value::unspecified(); }
Value fieldToValue(const at::Tensor& x) { return x.defined() ? wrapTensor(x) : Value::unspecified(); }
namespace {
template <class Seq>
Value tensorList(const Seq& xs) {
  std::vector<Value, traceable_allocator<Value>> vs;
  for (auto& x : xs) vs.push_back(fieldToValue(x));
  return listFromArray(vs.data(), vs.size());
}
}  // namespace
Value fieldToValue(const std::deque<at::Tensor>& x) { return tensorList(x); }
Value fieldToValue(const std::vector<at::Tensor>& x) { return tensorList(x); }
Value fieldToValue(const c10::optional<std::vector<at::Tensor>>& x) { return x ? tensorList(*x) : Value::unspecified(); }

namespace {
[[noreturn]] void badField(Value v, const FieldContext& c, const char* expected) {
  throwError("type-error", c.who + ": \"" + c.key + "\" must be " + expected + ", got " + toWriteString(v));
}
bool isNone(Value v) { return v.isUnspecified() || v.isFalse(); }
}  // namespace

void fieldFromValue(Value v, double& out, const FieldContext& c) {
  if (isTensor(v) && tensorOf(v).numel() == 1) out = tensorOf(v).item<double>();
  else if (isRealNumber(v)) out = toDouble(v);
  else badField(v, c, "a number");
}
void fieldFromValue(Value v, int64_t& out, const FieldContext& c) {
  double d;
  fieldFromValue(v, d, c);
  out = int64_t(d);
}
void fieldFromValue(Value v, bool& out, const FieldContext& c) {
  if (!v.isBool()) badField(v, c, "a boolean");
  out = v.isTrue();
}
void fieldFromValue(Value v, std::tuple<double, double>& out, const FieldContext& c) {
  std::vector<Value> xs;
  if (v.is(Kind::Vector))
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) xs.push_back(v.as<Vector>()->items[k]);
  else if (isList(v))
    for (Value p = v; isPair(p); p = cdr(p)) xs.push_back(car(p));
  if (xs.size() != 2 || !isRealNumber(xs[0]) || !isRealNumber(xs[1])) badField(v, c, "a pair of numbers");
  out = std::make_tuple(toDouble(xs[0]), toDouble(xs[1]));
}
void fieldFromValue(Value v, c10::optional<int64_t>& out, const FieldContext& c) {
  if (isNone(v)) out = c10::nullopt;
  else {
    int64_t i;
    fieldFromValue(v, i, c);
    out = i;
  }
}
void fieldFromValue(Value v, c10::optional<std::string>& out, const FieldContext& c) {
  if (isNone(v)) out = c10::nullopt;
  else if (isString(v)) out = std::string(stringView(v));
  else badField(v, c, "a string or None");
}
void fieldFromValue(Value v, at::Tensor& out, const FieldContext& c) {
  if (isNone(v)) {
    out = at::Tensor();
    return;
  }
  if (!isTensor(v)) badField(v, c, "a tensor");
  at::Tensor t = tensorArg(v, c.who, 2).detach();
  // As Python's Optimizer.load_state_dict: buffers follow their parameter's device and (floating)
  // dtype; a copy, so that two optimizers never share buffers.
  if (c.param) t = at::isFloatingType(c.param->scalar_type()) ? t.to(c.param->device(), c.param->scalar_type()) : t.to(c.param->device());
  out = t.clone();
}
namespace {
template <class Seq>
void tensorsFromValue(Value v, Seq& out, const FieldContext& c) {
  out.clear();
  if (!isList(v)) badField(v, c, "a list of tensors");
  for (Value p = v; isPair(p); p = cdr(p)) {
    at::Tensor t;
    fieldFromValue(car(p), t, c);
    out.push_back(t);
  }
}
}  // namespace
void fieldFromValue(Value v, std::deque<at::Tensor>& out, const FieldContext& c) { tensorsFromValue(v, out, c); }
void fieldFromValue(Value v, std::vector<at::Tensor>& out, const FieldContext& c) { tensorsFromValue(v, out, c); }
void fieldFromValue(Value v, c10::optional<std::vector<at::Tensor>>& out, const FieldContext& c) {
  if (isNone(v)) {
    out = c10::nullopt;
    return;
  }
  std::vector<at::Tensor> xs;
  tensorsFromValue(v, xs, c);
  out = xs;
}

StateField noneWhenAbsent(StateField f) {
  auto get = std::move(f.get);
  f.get = [get](const OptimizerParamState& s) {
    Value v = get(s);
    return v.isMissing() ? Value::unspecified() : v;
  };
  return f;
}

GroupField fixedOption(std::string name, Value value, bool mustMatch) {
  Root keep(value);
  return {name, [keep](const OptimizerOptions&) { return keep.get(); },
          [keep, name, mustMatch](OptimizerOptions&, Value v, const std::string& who) {
            if (!mustMatch) return;
            bool same = v.isBool() && keep.get().isBool() ? v == keep.get() : isNone(v) && isNone(keep.get());
            if (!same)
              throwError("value-error", who + ": \"" + name + "\" = " + toWriteString(v) + " is not supported by Purple's optimizer (only " +
                                            toWriteString(keep.get()) + ")");
          }};
}

std::vector<GroupField> pythonFlags(std::initializer_list<const char*> keys) {
  std::vector<GroupField> out;
  for (std::string k : keys) {
    if (k == "foreach" || k == "fused") out.push_back(fixedOption(k, Value::unspecified()));
    else out.push_back(fixedOption(k, Value::f(), k == "maximize"));
  }
  return out;
}

std::vector<GroupField> withFlags(std::vector<GroupField> options, std::initializer_list<const char*> keys) {
  for (auto& f : pythonFlags(keys)) options.push_back(std::move(f));
  return options;
}

// ---- the table -----------------------------------------------------------------------------

namespace {

// Every interpreter reads the table, from any thread. It is written only while the layouts are
// registered, once per process; map insertion leaves the entries already read in place.
std::map<std::string, OptimizerLayout>& layouts() {
  static std::map<std::string, OptimizerLayout> table;
  return table;
}
std::mutex gLayoutsLock;

// LibTorch keys its state map by the parameter's TensorImpl: a string in 1.13, a pointer later.
template <class Map>
typename Map::key_type stateKeyOf(const Map&, const at::Tensor& p) {
  return compat::optimizerStateKey<typename Map::key_type>(p);
}

#define OPT(Options, key, member) option<torch::optim::Options>(key, [](auto& o) -> auto& { return o.member(); })
#define STEP(State, as) stepCount<torch::optim::State>("step", [](auto& s) -> auto& { return s.step(); }, StepAs::as)
#define BUF(State, key, member) buffer<torch::optim::State>(key, [](auto& s) -> auto& { return s.member(); })

// Python's keys, in its order, for the Python of this LibTorch (torch_compat.hpp, 7.); the ones
// LibTorch lacks are written with Python's defaults.
void builtinLayouts() {
  using namespace torch::optim;
  constexpr bool v2 = compat::kPythonOptimState2;
  OptimizerLayout sgd{"sgd",
                      withFlags({OPT(SGDOptions, "lr", lr), OPT(SGDOptions, "momentum", momentum),
                                 OPT(SGDOptions, "dampening", dampening), OPT(SGDOptions, "weight_decay", weight_decay),
                                 OPT(SGDOptions, "nesterov", nesterov)},
                                v2 ? std::initializer_list<const char*>{"maximize", "foreach", "differentiable", "fused"}
                                   : std::initializer_list<const char*>{"maximize", "foreach", "differentiable"}),
                      {noneWhenAbsent(BUF(SGDParamState, "momentum_buffer", momentum_buffer))},
                      [] { return std::make_unique<SGDParamState>(); }};
  // Python 1.13's SGD gives every parameter it steps a state, {"momentum_buffer": None} without
  // momentum; LibTorch's keeps none then, as Python 2.x does.
  if (!v2)
    sgd.afterStep = [](Optimizer& opt) {
      auto& states = opt.state();
      for (auto& g : opt.param_groups()) {
        if (static_cast<SGDOptions&>(g.options()).momentum() != 0) continue;
        for (auto& p : g.params())
          if (p.grad().defined()) {
            auto key = stateKeyOf(states, p);
            if (!states.count(key)) states[key] = std::make_unique<SGDParamState>();
          }
      }
    };
  // A state without a buffer under momentum (Python's None, or steps taken without momentum):
  // Python starts the buffer from the gradient, as LibTorch does for a parameter without state.
  sgd.beforeStep = [](Optimizer& opt) {
    auto& states = opt.state();
    for (auto& g : opt.param_groups()) {
      if (static_cast<SGDOptions&>(g.options()).momentum() == 0) continue;
      for (auto& p : g.params()) {
        auto it = states.find(stateKeyOf(states, p));
        if (it != states.end() && !static_cast<SGDParamState&>(*it->second).momentum_buffer().defined()) states.erase(it);
      }
    }
  };
  registerOptimizerLayout(std::move(sgd));
  auto adamOptions = [&](auto tag) {
    using O = decltype(tag);
    return std::vector<GroupField>{
        option<O>("lr", [](auto& o) -> auto& { return o.lr(); }), option<O>("betas", [](auto& o) -> auto& { return o.betas(); }),
        option<O>("eps", [](auto& o) -> auto& { return o.eps(); }), option<O>("weight_decay", [](auto& o) -> auto& { return o.weight_decay(); }),
        option<O>("amsgrad", [](auto& o) -> auto& { return o.amsgrad(); })};
  };
  registerOptimizerLayout({"adam",
                           withFlags(adamOptions(AdamOptions(1e-3)), {"maximize", "foreach", "capturable", "differentiable", "fused"}),
                           {STEP(AdamParamState, Tensor), BUF(AdamParamState, "exp_avg", exp_avg), BUF(AdamParamState, "exp_avg_sq", exp_avg_sq),
                            BUF(AdamParamState, "max_exp_avg_sq", max_exp_avg_sq)},
                           [] { return std::make_unique<AdamParamState>(); }});
  registerOptimizerLayout({"adamw",
                           withFlags(adamOptions(AdamWOptions(1e-3)),
                                     v2 ? std::initializer_list<const char*>{"foreach", "maximize", "capturable", "differentiable", "fused"}
                                        : std::initializer_list<const char*>{"foreach", "maximize", "capturable"}),
                           {STEP(AdamWParamState, Tensor), BUF(AdamWParamState, "exp_avg", exp_avg),
                            BUF(AdamWParamState, "exp_avg_sq", exp_avg_sq), BUF(AdamWParamState, "max_exp_avg_sq", max_exp_avg_sq)},
                           [] { return std::make_unique<AdamWParamState>(); }});
  registerOptimizerLayout({"rmsprop",
                           withFlags({OPT(RMSpropOptions, "lr", lr), OPT(RMSpropOptions, "momentum", momentum),
                                      OPT(RMSpropOptions, "alpha", alpha), OPT(RMSpropOptions, "eps", eps),
                                      OPT(RMSpropOptions, "centered", centered), OPT(RMSpropOptions, "weight_decay", weight_decay)},
                                     v2 ? std::initializer_list<const char*>{"capturable", "foreach", "maximize", "differentiable"}
                                        : std::initializer_list<const char*>{"foreach", "maximize", "differentiable"}),
                           {v2 ? STEP(RMSpropParamState, Tensor) : STEP(RMSpropParamState, Int),
                            BUF(RMSpropParamState, "square_avg", square_avg),
                            BUF(RMSpropParamState, "momentum_buffer", momentum_buffer), BUF(RMSpropParamState, "grad_avg", grad_avg)},
                           [] { return std::make_unique<RMSpropParamState>(); }});
  registerOptimizerLayout({"adagrad",
                           withFlags({OPT(AdagradOptions, "lr", lr), OPT(AdagradOptions, "lr_decay", lr_decay), OPT(AdagradOptions, "eps", eps),
                            OPT(AdagradOptions, "weight_decay", weight_decay),
                            OPT(AdagradOptions, "initial_accumulator_value", initial_accumulator_value)},
                                     v2 ? std::initializer_list<const char*>{"foreach", "maximize", "differentiable", "fused"}
                                        : std::initializer_list<const char*>{"foreach", "maximize"}),
                           {STEP(AdagradParamState, Tensor), BUF(AdagradParamState, "sum", sum)},
                           [] { return std::make_unique<AdagradParamState>(); }});
  OptimizerLayout lbfgs{"lbfgs",
                        {OPT(LBFGSOptions, "lr", lr), OPT(LBFGSOptions, "max_iter", max_iter), OPT(LBFGSOptions, "max_eval", max_eval),
                         OPT(LBFGSOptions, "tolerance_grad", tolerance_grad), OPT(LBFGSOptions, "tolerance_change", tolerance_change),
                         OPT(LBFGSOptions, "history_size", history_size), OPT(LBFGSOptions, "line_search_fn", line_search_fn)},
                        {BUF(LBFGSParamState, "func_evals", func_evals), BUF(LBFGSParamState, "n_iter", n_iter),
                         BUF(LBFGSParamState, "al", al), BUF(LBFGSParamState, "d", d), BUF(LBFGSParamState, "t", t),
                         BUF(LBFGSParamState, "old_dirs", old_dirs), BUF(LBFGSParamState, "old_stps", old_stps),
                         BUF(LBFGSParamState, "ro", ro), BUF(LBFGSParamState, "H_diag", H_diag),
                         BUF(LBFGSParamState, "prev_flat_grad", prev_flat_grad), BUF(LBFGSParamState, "prev_loss", prev_loss)},
                        [] { return std::make_unique<LBFGSParamState>(); }};
  lbfgs.firstParamOnly = true;
  registerOptimizerLayout(std::move(lbfgs));
}

const OptimizerLayout* findLayout(const std::string& kind) {
  static bool ready = (builtinLayouts(), true);
  (void)ready;
  std::lock_guard<std::mutex> lock(gLayoutsLock);
  auto it = layouts().find(kind);
  return it == layouts().end() ? nullptr : &it->second;
}

const OptimizerLayout& layoutOf(const OptimizerObj* o, const char* who) {
  const OptimizerLayout* layout = findLayout(o->optKind);
  if (layout) return *layout;
  throwError("value-error", std::string(who) + ": optimizer kind " + o->optKind + " has no state-dict layout (optim_state.hpp)");
}

Value str(const char* s) { return makeString(s); }

// A dict given as a hash table or an alist: the value under KEY (a string or an integer), or
// missing().
Value dictRef(Interp& in, Value dict, Value key) {
  if (isHashTable(dict)) return hashTableGet(in, dict, key);
  for (Value p = dict; isPair(p); p = cdr(p))
    if (isPair(car(p)) && equalValues(car(car(p)), key)) return cdr(car(p));
  return Value::missing();
}

std::vector<std::pair<Value, Value>> dictEntries(Value dict, const std::string& who, const char* what) {
  std::vector<std::pair<Value, Value>> out;
  if (isHashTable(dict)) {
    auto* h = dict.as<HashTable>();
    for (uint32_t i = 0; i < h->entryUsed; i++)
      if (!h->entries[2 * i].isUnbound()) out.emplace_back(h->entries[2 * i], h->entries[2 * i + 1]);
  } else if (isList(dict)) {
    for (Value p = dict; isPair(p); p = cdr(p)) {
      if (!isPair(car(p))) throwError("type-error", who + ": " + what + " must be a dict (a hash table or an alist)");
      out.emplace_back(car(car(p)), cdr(car(p)));
    }
  } else {
    throwError("type-error", who + ": " + what + " must be a dict (a hash table or an alist), got " + toWriteString(dict));
  }
  return out;
}

std::vector<Value> sequence(Value v, const std::string& who, const char* what) {
  std::vector<Value> out;
  if (v.is(Kind::Vector))
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) out.push_back(v.as<Vector>()->items[k]);
  else if (isList(v))
    for (Value p = v; isPair(p); p = cdr(p)) out.push_back(car(p));
  else
    throwError("type-error", who + ": " + what + " must be a list, got " + toWriteString(v));
  return out;
}

}  // namespace

void registerOptimizerLayout(OptimizerLayout layout) {
  std::string kind = layout.kind;
  std::lock_guard<std::mutex> lock(gLayoutsLock);
  layouts().insert_or_assign(kind, std::move(layout));
}

void beforeOptimizerStep(OptimizerObj* o) {
  const OptimizerLayout* layout = findLayout(o->optKind);
  if (layout && layout->beforeStep) layout->beforeStep(*o->opt);
}

void afterOptimizerStep(OptimizerObj* o) {
  const OptimizerLayout* layout = findLayout(o->optKind);
  if (layout && layout->afterStep) layout->afterStep(*o->opt);
}

Value optimizerStateDict(Interp& in, OptimizerObj* o) {
  const OptimizerLayout& layout = layoutOf(o, "optimizer-state-dict");
  if (layout.stateDict) return layout.stateDict(in, o);
  Optimizer& opt = *o->opt;
  Value state = makeHashTable(HashEquiv::Equal);
  std::vector<Value, traceable_allocator<Value>> groups;
  int64_t index = 0;
  auto& states = opt.state();
  for (size_t g = 0; g < opt.param_groups().size(); g++) {
    auto& group = opt.param_groups()[g];
    Value gt = makeHashTable(HashEquiv::Equal);
    for (auto& f : layout.group) hashTablePut(in, gt, makeString(f.name), f.get(group.options()));
    if (o->initialLrs && g < o->initialLrs->size()) hashTablePut(in, gt, str("initial_lr"), makeFlonum((*o->initialLrs)[g]));
    std::vector<Value, traceable_allocator<Value>> ids;
    for (auto& p : group.params()) {
      auto it = states.find(stateKeyOf(states, p));
      if (it != states.end() && (!layout.firstParamOnly || index == 0)) {
        Value st = makeHashTable(HashEquiv::Equal);
        for (auto& f : layout.state) {
          Value v = f.get(*it->second);
          if (!v.isMissing()) hashTablePut(in, st, makeString(f.name), v);
        }
        hashTablePut(in, state, makeInteger(index), st);
      }
      ids.push_back(makeInteger(index++));
    }
    hashTablePut(in, gt, str("params"), listFromArray(ids.data(), ids.size()));
    groups.push_back(gt);
  }
  Value sd = makeHashTable(HashEquiv::Equal);
  hashTablePut(in, sd, str("state"), state);
  hashTablePut(in, sd, str("param_groups"), listFromArray(groups.data(), groups.size()));
  return sd;
}

void loadOptimizerStateDict(Interp& in, OptimizerObj* o, Value sd, const std::string& who) {
  const OptimizerLayout& layout = layoutOf(o, who.c_str());
  if (layout.loadStateDict) {
    layout.loadStateDict(in, o, sd);
    return;
  }
  Optimizer& opt = *o->opt;
  Value stateV = dictRef(in, sd, str("state")), groupsV = dictRef(in, sd, str("param_groups"));
  if (stateV.isMissing() || groupsV.isMissing())
    throwError("value-error", who + ": an optimizer state dict has \"state\" and \"param_groups\" (as Python's opt.state_dict())");
  std::vector<Value> saved = sequence(groupsV, who, "\"param_groups\"");
  auto& groups = opt.param_groups();
  if (saved.size() != groups.size())
    throwError("value-error", who + ": the state dict has " + std::to_string(saved.size()) + " parameter groups, the optimizer " +
                                  std::to_string(groups.size()));
  // Saved parameter ids map to this optimizer's parameters by position, as in Python.
  std::map<int64_t, at::Tensor> byId;
  for (size_t g = 0; g < groups.size(); g++) {
    Value ids = dictRef(in, saved[g], str("params"));
    if (ids.isMissing()) throwError("value-error", who + ": parameter group " + std::to_string(g) + " has no \"params\"");
    std::vector<Value> xs = sequence(ids, who, "\"params\"");
    if (xs.size() != groups[g].params().size())
      throwError("value-error", who + ": parameter group " + std::to_string(g) + " has " + std::to_string(xs.size()) +
                                    " parameters in the state dict and " + std::to_string(groups[g].params().size()) + " in the optimizer");
    for (size_t k = 0; k < xs.size(); k++) {
      if (!xs[k].isFixnum()) throwError("type-error", who + ": parameter ids must be integers, got " + toWriteString(xs[k]));
      byId[xs[k].fixnum()] = groups[g].params()[k];
    }
  }
  // Check everything before changing anything: a bad state dict leaves the optimizer as it was.
  std::vector<std::unique_ptr<OptimizerOptions>> newOptions;
  std::vector<double> initial;
  for (size_t g = 0; g < groups.size(); g++) {
    auto opts = groups[g].options().clone();
    for (auto& f : layout.group) {
      Value v = dictRef(in, saved[g], makeString(f.name));
      if (!v.isMissing()) f.set(*opts, v, who);
    }
    Value lr0 = dictRef(in, saved[g], str("initial_lr"));
    if (isRealNumber(lr0)) initial.push_back(toDouble(lr0));
    newOptions.push_back(std::move(opts));
  }
  std::vector<std::pair<at::Tensor, std::unique_ptr<OptimizerParamState>>> newStates;
  for (auto& [id, st] : dictEntries(stateV, who, "\"state\"")) {
    if (!id.isFixnum()) throwError("type-error", who + ": \"state\" must be keyed by parameter ids (integers), got " + toWriteString(id));
    auto it = byId.find(id.fixnum());
    if (it == byId.end()) throwError("value-error", who + ": \"state\" has parameter id " + toWriteString(id) + ", which no group lists");
    auto ps = layout.makeState();
    for (auto& f : layout.state) {
      Value v = dictRef(in, st, makeString(f.name));
      if (!v.isMissing()) f.set(*ps, v, it->second, who);
    }
    newStates.emplace_back(it->second, std::move(ps));
  }
  for (size_t g = 0; g < groups.size(); g++) groups[g].set_options(std::move(newOptions[g]));
  auto& states = opt.state();
  states.clear();
  for (auto& [p, ps] : newStates) states[stateKeyOf(states, p)] = std::move(ps);
  if (initial.size() == groups.size()) o->initialLrs = std::make_shared<std::vector<double>>(initial);
}

namespace {

// Files from before optimizer state dicts were Python's: LibTorch's own archive.
bool isLibTorchArchive(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string head(4, '\0');
  if (!f.read(&head[0], 4) || head != "PK\x03\x04") return false;
  std::stringstream s;
  s << f.rdbuf();
  std::string rest = s.str();
  return rest.find("data.pkl") == std::string::npos;
}

void loadLibTorchArchive(Optimizer& opt, const std::string& path) {
  torch::serialize::InputArchive ar;
  ar.load_from(path);
  opt.load(ar);
}

}  // namespace

void registerOptimizerState(Registry& r) {
  r.def("optimizer-state-dict", "(opt)",
        [](Interp& in, OptimizerRef opt) { return optimizerStateDict(in, opt.obj); },
        "OPT's state exactly as Python's opt.state_dict() lays it out: a hash table with \"state\" (parameter index -> "
        "a hash table of buffers, e.g. \"step\", \"exp_avg\", \"exp_avg_sq\" for Adam) and \"param_groups\" (a list of "
        "hash tables of hyper-parameters with \"params\", the indices). The buffers are OPT's own tensors. torch-save "
        "writes it so that Python's opt.load_state_dict(torch.load(path)) resumes it, and load-optimizer-state-dict! "
        "takes it back (or Python's).");
  r.def("load-optimizer-state-dict!", "(opt state)",
        [](Interp& in, Value optV, Value state) {
          OptimizerObj* o = optimizerArg(optV, "load-optimizer-state-dict!", 1);
          if (isString(state)) state = torchLoadValue(in, std::string(stringView(state)), "load-optimizer-state-dict!");
          loadOptimizerStateDict(in, o, state, "load-optimizer-state-dict!");
          return optV;
        },
        "Restores OPT's hyper-parameters, moments and step counts from STATE, a state dict as optimizer-state-dict "
        "makes and Python's opt.state_dict() saves (read with torch-load), or a path to such a file. As in Python, "
        "saved parameters match OPT's by position: the same groups, of the same sizes, in the same order. Buffers are "
        "copied to each parameter's device and dtype. Returns OPT.");
  r.def("save-optimizer-state", "(opt path)",
        [](Interp& in, OptimizerRef opt, std::string path) {
          Value sd = optimizerStateDict(in, opt.obj);
          const OptimizerLayout* layout = findLayout(opt.obj->optKind);
          if (layout && layout->writesFile && !layout->writesFile(opt.obj)) return;
          torchSaveValue(sd, path, "save-optimizer-state");
        },
        "Writes OPT's state dict to PATH atomically, as Python's torch.save(opt.state_dict(), PATH) does; Python "
        "resumes it with opt.load_state_dict(torch.load(PATH)), Purple with load-optimizer-state!. For a "
        "zero-redundancy-optimizer every rank calls it (the state is gathered) and rank 0 of its group writes.");
  sandbox(r, "save-optimizer-state", Needs::Files, "files: writes optimizer state");
  r.def("load-optimizer-state!", "(opt path)",
        [](Interp& in, Value optV, std::string path) {
          OptimizerObj* o = optimizerArg(optV, "load-optimizer-state!", 1);
          requireFileAccess("load-optimizer-state!");
          if (isLibTorchArchive(path)) loadLibTorchArchive(*o->opt, path);
          else loadOptimizerStateDict(in, o, torchLoadValue(in, path, "load-optimizer-state!"), "load-optimizer-state!");
          return optV;
        },
        "Restores OPT's state from PATH: a file written by save-optimizer-state or by Python's "
        "torch.save(opt.state_dict(), PATH) (or LibTorch's archive, as older Purple wrote). Returns OPT.");
  sandbox(r, "load-optimizer-state!", Needs::Files, "files: reads optimizer state");
}

}  // namespace purple
