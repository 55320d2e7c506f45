// Attention and transformers: multihead-attention (LibTorch's layer), transformer-encoder-layer,
// transformer-decoder-layer, transformer-encoder, transformer-decoder and transformer.
//
// The transformer modules are Purple's own, built from LibTorch's Linear, LayerNorm, Dropout and
// MultiheadAttention, because LibTorch 1.13's lack norm_first, layer_norm_eps and batch_first.
// They follow torch/nn/modules/transformer.py: the same submodule names and registration order
// (so state dicts load from Python), the same construction order (so manual-seed gives the same
// initial weights), and the same forward arithmetic. Submodules are called through callModule /
// callModuleTensor, so hooks on them run and errors name their paths ("encoder.layers.0.linear1").
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"
#include <ATen/CPUGeneratorImpl.h>
#include <limits>

namespace purple {
namespace nnlayer {

namespace {

Value list2(Value a, Value b) {
  Value items[2] = {a, b};
  return listFromArray(items, 2);
}

at::Tensor causalMask(int64_t n, const at::TensorOptions& o) {
  return at::full({n, n}, -std::numeric_limits<double>::infinity(), o).triu(1);
}

// ---- multi-head attention ---------------------------------------------------------------------

// (m q [k v] :key-padding-mask :need-weights :attn-mask :average-attn-weights :is-causal) ->
// (output weights-or-#f). The arithmetic is torch.nn.functional.multi_head_attention_forward's,
// written here rather than LibTorch 1.13's C++ copy of it, which asserts key and value have the
// same shape (so kdim != vdim failed) and takes neither 3-D attention masks nor float padding
// masks. With kdim or vdim different from embed-dim the layer has q_proj_weight, k_proj_weight
// and v_proj_weight instead of in_proj_weight (LibTorch registers them as Python does), so state
// dicts move between Purple and Python either way.
struct MhaLayer : torch::nn::MultiheadAttentionImpl, ModuleForward {
  using torch::nn::MultiheadAttentionImpl::MultiheadAttentionImpl;
  bool batchFirst = false;
  std::string typeName() const override { return "MultiheadAttention"; }
  void pretty_print(std::ostream& s) const override { s << "MultiheadAttention"; }

  // A mask as a float tensor added to the scores: a boolean one is -inf where true.
  static at::Tensor additiveMask(const at::Tensor& m, const at::TensorOptions& o, const char* what) {
    if (m.scalar_type() == at::kBool || m.scalar_type() == at::kByte)
      return at::zeros(m.sizes(), o).masked_fill_(m.to(at::kBool), -std::numeric_limits<double>::infinity());
    if (!m.is_floating_point())
      throwError("type-error", "MultiheadAttention: " + std::string(what) + " must be a bool or floating tensor, got " +
                                   std::string(c10::toString(m.scalar_type())));
    return m.to(o.dtype());
  }

  // Sequence-first batched tensors: q (L, N, E), k (S, N, kdim), v (S, N, vdim).
  std::tuple<at::Tensor, at::Tensor> attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                               at::Tensor keyPadding, bool needWeights, at::Tensor attnMask,
                                               bool average, bool unbatched) {
    const std::string who = "MultiheadAttention";
    const int64_t L = query.size(0), N = query.size(1), E = query.size(2), S = key.size(0);
    const int64_t H = options.num_heads(), D = E / H;
    if (E != options.embed_dim())
      throwError("value-error", who + ": the query's last dimension must be embed-dim " + std::to_string(options.embed_dim()) +
                                    ", got shape " + pyTuple(query.sizes()));
    if (key.size(2) != options.kdim())
      throwError("value-error", who + ": the key's last dimension must be kdim " + std::to_string(options.kdim()) +
                                    ", got shape " + pyTuple(key.sizes()));
    if (value.size(2) != options.vdim())
      throwError("value-error", who + ": the value's last dimension must be vdim " + std::to_string(options.vdim()) +
                                    ", got shape " + pyTuple(value.sizes()));
    if (key.size(0) != value.size(0) || key.size(1) != value.size(1) || key.size(1) != N)
      throwError("value-error", who + ": query, key and value must agree in batch size and key and value in sequence "
                                      "length, got shapes " + pyTuple(query.sizes()) + ", " + pyTuple(key.sizes()) + " and " +
                                      pyTuple(value.sizes()));
    const auto fo = query.options();

    // in-projection
    at::Tensor q, k, v;
    at::Tensor bq, bk, bv;
    if (in_proj_bias.defined()) {
      auto b = in_proj_bias.chunk(3);
      bq = b[0], bk = b[1], bv = b[2];
    }
    if (_qkv_same_embed_dim) {
      if (query.is_same(key) && key.is_same(value)) {
        auto c = at::linear(query, in_proj_weight, in_proj_bias).chunk(3, -1);
        q = c[0], k = c[1], v = c[2];
      } else {
        auto w = in_proj_weight.chunk(3);
        q = at::linear(query, w[0], bq), k = at::linear(key, w[1], bk), v = at::linear(value, w[2], bv);
      }
    } else {
      q = at::linear(query, q_proj_weight, bq), k = at::linear(key, k_proj_weight, bk), v = at::linear(value, v_proj_weight, bv);
    }

    // masks, as one additive (N*H or 1, L, S') float mask
    if (attnMask.defined()) {
      attnMask = additiveMask(attnMask, fo, ":attn-mask");
      if (attnMask.dim() == 2) {
        if (attnMask.size(0) != L || attnMask.size(1) != S)
          throwError("value-error", who + ": a 2-D :attn-mask must be (L, S) = " + pyTuple({L, S}) + ", got " +
                                        pyTuple(attnMask.sizes()));
        attnMask = attnMask.unsqueeze(0);
      } else if (attnMask.dim() == 3) {
        if (attnMask.size(0) != N * H || attnMask.size(1) != L || attnMask.size(2) != S)
          throwError("value-error", who + ": a 3-D :attn-mask must be (N*num-heads, L, S) = " + pyTuple({N * H, L, S}) +
                                        ", got " + pyTuple(attnMask.sizes()));
      } else {
        throwError("value-error", who + ": :attn-mask must be 2-D (L, S) or 3-D (N*num-heads, L, S), got shape " +
                                      pyTuple(attnMask.sizes()));
      }
    }
    if (keyPadding.defined()) {
      keyPadding = additiveMask(keyPadding, fo, ":key-padding-mask");
      if (keyPadding.dim() != 2 || keyPadding.size(0) != N || keyPadding.size(1) != S)
        throwError("value-error", who + ": :key-padding-mask must be " +
                                      (unbatched ? "(S) = " + pyTuple({S}) : "(N, S) = " + pyTuple({N, S})) + ", got " +
                                      pyTuple(unbatched ? keyPadding.sizes().slice(1) : keyPadding.sizes()));
    }
    auto padOne = [](at::Tensor& m) {
      if (m.defined()) m = at::constant_pad_nd(m, {0, 1});
    };
    if (bias_k.defined() && bias_v.defined()) {
      k = at::cat({k, bias_k.repeat({1, N, 1})});
      v = at::cat({v, bias_v.repeat({1, N, 1})});
      padOne(attnMask), padOne(keyPadding);
    }
    q = q.contiguous().view({L, N * H, D}).transpose(0, 1);
    k = k.contiguous().view({k.size(0), N * H, D}).transpose(0, 1);
    v = v.contiguous().view({v.size(0), N * H, D}).transpose(0, 1);
    if (options.add_zero_attn()) {
      k = at::cat({k, at::zeros({N * H, 1, D}, k.options())}, 1);
      v = at::cat({v, at::zeros({N * H, 1, D}, v.options())}, 1);
      padOne(attnMask), padOne(keyPadding);
    }
    const int64_t S2 = k.size(1);
    if (keyPadding.defined()) {
      keyPadding = keyPadding.view({N, 1, 1, S2}).expand({-1, H, -1, -1}).reshape({N * H, 1, S2});
      attnMask = attnMask.defined() ? attnMask + keyPadding : keyPadding;
    }

    // attention and out-projection
    at::Tensor qs = q / std::sqrt(double(D));
    at::Tensor w = attnMask.defined() ? at::baddbmm(attnMask, qs, k.transpose(-2, -1)) : at::bmm(qs, k.transpose(-2, -1));
    w = at::softmax(w, -1);
    if (options.dropout() > 0.0 && is_training()) w = at::dropout(w, options.dropout(), true);
    at::Tensor out = at::bmm(w, v).transpose(0, 1).contiguous().view({L * N, E});
    out = at::linear(out, out_proj->weight, out_proj->bias).view({L, N, E});
    if (!needWeights) return {out, at::Tensor()};
    w = w.view({N, H, L, S2});
    if (average) w = w.sum(1) / double(H);
    return {out, w};
  }

  std::tuple<at::Tensor, at::Tensor> attend(at::Tensor q, at::Tensor k, at::Tensor v, at::Tensor keyPadding,
                                            bool needWeights, at::Tensor attnMask, bool average, bool isCausal) {
    const std::string who = "MultiheadAttention";
    if (q.dim() != 2 && q.dim() != 3)
      throwError("value-error", who + ": query must be (L, N, E), (N, L, E) with :batch-first #t, or unbatched (L, E); got shape " +
                                    pyTuple(q.sizes()));
    if (k.dim() != q.dim() || v.dim() != q.dim())
      throwError("value-error", who + ": query, key and value must have the same number of dimensions, got " +
                                    pyTuple(q.sizes()) + ", " + pyTuple(k.sizes()) + " and " + pyTuple(v.sizes()));
    if (isCausal && !attnMask.defined()) attnMask = causalMask(q.size(q.dim() == 3 && batchFirst ? 1 : 0), q.options());
    bool unbatched = q.dim() == 2;
    if (unbatched) {
      // keep self-attention's shared tensor shared (the fused in-projection)
      bool kq = k.is_same(q), vk = v.is_same(k);
      q = q.unsqueeze(1);
      k = kq ? q : k.unsqueeze(1);
      v = vk ? k : v.unsqueeze(1);
      if (keyPadding.defined()) {
        if (keyPadding.dim() != 1)
          throwError("value-error", who + ": with unbatched input :key-padding-mask must be 1-D (S), got shape " +
                                        pyTuple(keyPadding.sizes()));
        keyPadding = keyPadding.unsqueeze(0);
      }
    } else if (batchFirst) {
      bool kq = k.is_same(q), vk = v.is_same(k);
      q = q.transpose(0, 1);
      k = kq ? q : k.transpose(0, 1);
      v = vk ? k : v.transpose(0, 1);
    }
    auto r = attention(q, k, v, keyPadding, needWeights, attnMask, average, unbatched);
    at::Tensor out = std::get<0>(r), w = std::get<1>(r);
    if (unbatched) {
      out = out.squeeze(1);
      if (w.defined()) w = w.squeeze(0);
    } else if (batchFirst) {
      out = out.transpose(0, 1);
    }
    return {out, w};
  }

  Value forward(Interp&, const Value* argv, int argc) override {
    const std::string who = "MultiheadAttention";
    ForwardArgs a = splitForwardArgs(argv, argc, who,
                                     {"key-padding-mask", "need-weights", "attn-mask", "average-attn-weights", "is-causal"});
    needArgs(a, 1, 3, who);
    at::Tensor q = tensorIn(a.positional[0], who, 1);
    at::Tensor k = a.positional.size() > 1 ? tensorIn(a.positional[1], who, 2) : q;
    at::Tensor v = a.positional.size() > 2 ? tensorIn(a.positional[2], who, 3) : k;
    auto r = attend(q, k, v, optTensor(a.key("key-padding-mask"), who, 4), optBool(a.key("need-weights"), true),
                    optTensor(a.key("attn-mask"), who, 5), optBool(a.key("average-attn-weights"), true),
                    optBool(a.key("is-causal"), false));
    return list2(wrapTensor(std::move(std::get<0>(r))), std::get<1>(r).defined() ? wrapTensor(std::move(std::get<1>(r))) : Value::f());
  }
};

// Self- or cross-attention from inside a transformer layer: through callModule when the attention
// module has hooks (they see (q k v) and the (output #f) result), directly otherwise.
at::Tensor runAttention(const std::shared_ptr<MhaLayer>& mha, const at::Tensor& q, const at::Tensor& kv,
                        const at::Tensor& mask, const at::Tensor& padding, bool isCausal) {
  if (!mha->hooks)
    return runModuleBody(*mha, [&] { return std::get<0>(mha->attend(q, kv, kv, padding, false, mask, true, isCausal)); });
  Interp* in = Interp::current();
  std::vector<Value, traceable_allocator<Value>> args = {wrapTensor(q), wrapTensor(kv), wrapTensor(kv),
                                                         internKeyword("need-weights"), Value::f()};
  if (mask.defined()) args.insert(args.end(), {internKeyword("attn-mask"), wrapTensor(mask)});
  if (padding.defined()) args.insert(args.end(), {internKeyword("key-padding-mask"), wrapTensor(padding)});
  if (isCausal) args.insert(args.end(), {internKeyword("is-causal"), Value::t()});
  Value r = callModule(*in, mha, args.data(), int(args.size()));
  Value out = isPair(r) ? car(r) : r;
  if (!isTensor(out) || !tensorOf(out).defined())
    throwError("type-error", "MultiheadAttention: a forward hook returned " + toWriteString(r) + " where (output weights) was expected");
  return tensorOf(out);
}

// ---- transformer layers ---------------------------------------------------------------------------

struct LayerOptions {
  int64_t dModel = 512, nhead = 8, dimFeedforward = 2048;
  double dropout = 0.1, eps = 1e-5;
  bool batchFirst = false, normFirst = false;
  std::string activation = "relu";   // "relu", "gelu", or "" when activationFn / activationModule is set
  Root activationFn;                 // a Purple procedure
  ModulePtr activationModule;        // a module, registered as the child "activation" (as in Python)
};


LayerOptions layerOptions(int64_t d, int64_t h, int64_t ff, double dropout, Value act, double eps, bool batchFirst,
                          bool normFirst, const std::string& who) {
  LayerOptions o;
  if (d <= 0 || h <= 0 || ff <= 0) throwError("value-error", who + ": d-model, nhead and dim-feedforward must be positive");
  if (d % h != 0)
    throwError("value-error", who + ": d-model (" + std::to_string(d) + ") must be divisible by nhead (" + std::to_string(h) + ")");
  if (!(dropout >= 0 && dropout <= 1)) throwError("value-error", who + ": dropout must be between 0 and 1, got " + pyFloat(dropout));
  o.dModel = d, o.nhead = h, o.dimFeedforward = ff, o.dropout = dropout, o.eps = eps;
  o.batchFirst = batchFirst, o.normFirst = normFirst;
  if (act.isMissing()) return o;
  if (isModule(act)) {
    o.activation.clear();
    o.activationModule = moduleArg(act, who, 5);
  } else if (isProcedure(act)) {
    o.activation.clear();
    o.activationFn = Root(act);
  } else {
    o.activation = choiceArg(act, who, ":activation", {"relu", "gelu"});
  }
  return o;
}

// The parts both layers have: the feed-forward block and the activation.
struct TransformerLayerBase : Module, ModuleForward {
  explicit TransformerLayerBase(const std::string& name, LayerOptions o) : Module(name), opts(std::move(o)) {}
  LayerOptions opts;
  std::shared_ptr<MhaLayer> self_attn;
  ModulePtr linear1, dropout, linear2;

  std::shared_ptr<MhaLayer> makeAttention() {
    torch::nn::MultiheadAttentionOptions mo(opts.dModel, opts.nhead);
    mo.dropout(opts.dropout);
    auto m = std::make_shared<MhaLayer>(mo);
    m->batchFirst = opts.batchFirst;
    return m;
  }
  static ModulePtr linear(int64_t in, int64_t out) {
    auto m = std::make_shared<Layer<torch::nn::LinearImpl>>(torch::nn::LinearOptions(in, out));
    m->tname = "Linear";
    return m;
  }
  ModulePtr layerNorm() {
    auto m = std::make_shared<Layer<torch::nn::LayerNormImpl>>(torch::nn::LayerNormOptions({opts.dModel}).eps(opts.eps));
    m->tname = "LayerNorm";
    return m;
  }
  ModulePtr dropoutLayer() {
    auto m = std::make_shared<Layer<torch::nn::DropoutImpl>>(torch::nn::DropoutOptions(opts.dropout));
    m->tname = "Dropout";
    return m;
  }
  void registerActivation() {
    if (opts.activationModule) register_module("activation", opts.activationModule);
  }

  at::Tensor activate(const at::Tensor& x) {
    if (opts.activation == "relu") return at::relu(x);
    if (opts.activation == "gelu") return at::gelu(x);
    if (opts.activationModule) return callModuleTensor(opts.activationModule, x);
    Interp* in = Interp::current();
    Value r = in->apply(opts.activationFn.get(), {wrapTensor(x)});
    if (!isTensor(r) || !tensorOf(r).defined())
      throwError("type-error", typeName() + ": the activation returned " + toWriteString(r) + " where a tensor was expected");
    return tensorOf(r);
  }
  // linear2(dropout(activation(linear1(x)))), without the block's own final dropout
  at::Tensor feedForward(const at::Tensor& x) {
    return callModuleTensor(linear2, callModuleTensor(dropout, activate(callModuleTensor(linear1, x))));
  }
  // A copy with the same options and weights, for the layer stacks (Python deep-copies the layer).
  // The copy's construction leaves the random generator where it was, as a deep copy does.
  virtual std::shared_ptr<TransformerLayerBase> copy() const = 0;
  void copyStateFrom(const Module& from) {
    auto src = moduleStateDict(from);
    torch::NoGradGuard g;
    auto dst = moduleStateDict(*this);
    for (size_t k = 0; k < dst.size(); k++) dst[k].second.copy_(src[k].second);
  }
};

// Keeps the default generator's state across a block (copies draw no random numbers).
struct KeepRandomState {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  at::Tensor saved = gen.get_state();
  ~KeepRandomState() { gen.set_state(saved); }
};

struct EncoderLayerModule : TransformerLayerBase {
  ModulePtr norm1, norm2, dropout1, dropout2;
  explicit EncoderLayerModule(LayerOptions o) : TransformerLayerBase("TransformerEncoderLayer", std::move(o)) {
    // The order of torch.nn.TransformerEncoderLayer.__init__.
    self_attn = register_module("self_attn", makeAttention());
    linear1 = register_module("linear1", linear(opts.dModel, opts.dimFeedforward));
    dropout = register_module("dropout", dropoutLayer());
    linear2 = register_module("linear2", linear(opts.dimFeedforward, opts.dModel));
    norm1 = register_module("norm1", layerNorm());
    norm2 = register_module("norm2", layerNorm());
    dropout1 = register_module("dropout1", dropoutLayer());
    dropout2 = register_module("dropout2", dropoutLayer());
    registerActivation();
  }
  std::string typeName() const override { return "TransformerEncoderLayer"; }
  void pretty_print(std::ostream& s) const override { s << "TransformerEncoderLayer"; }
  std::shared_ptr<TransformerLayerBase> copy() const override {
    std::shared_ptr<EncoderLayerModule> m;
    {
      KeepRandomState keep;
      m = std::make_shared<EncoderLayerModule>(opts);
    }
    m->copyStateFrom(*this);
    m->train(is_training());
    return m;
  }

  at::Tensor run(const at::Tensor& src, const at::Tensor& mask, const at::Tensor& padding, bool isCausal) {
    auto sa = [&](const at::Tensor& x) { return callModuleTensor(dropout1, runAttention(self_attn, x, x, mask, padding, isCausal)); };
    auto ff = [&](const at::Tensor& x) { return callModuleTensor(dropout2, feedForward(x)); };
    at::Tensor x = src;
    if (opts.normFirst) {
      x = x + sa(callModuleTensor(norm1, x));
      x = x + ff(callModuleTensor(norm2, x));
    } else {
      x = callModuleTensor(norm1, x + sa(x));
      x = callModuleTensor(norm2, x + ff(x));
    }
    return x;
  }
  Value forward(Interp&, const Value* argv, int argc) override {
    const std::string who = typeName();
    ForwardArgs a = splitForwardArgs(argv, argc, who, {"src-mask", "src-key-padding-mask", "is-causal"});
    needArgs(a, 1, 3, who);
    auto pos = [&](size_t k, const char* key) { return a.positional.size() > k ? a.positional[k] : a.key(key); };
    return wrapTensor(run(tensorIn(a.positional[0], who, 1), optTensor(pos(1, "src-mask"), who, 2),
                          optTensor(pos(2, "src-key-padding-mask"), who, 3), optBool(a.key("is-causal"), false)));
  }
  bool hasTensorForward() const override { return true; }
  at::Tensor tensorForward(const at::Tensor& x) override { return run(x, at::Tensor(), at::Tensor(), false); }
};

struct DecoderLayerModule : TransformerLayerBase {
  std::shared_ptr<MhaLayer> multihead_attn;
  ModulePtr norm1, norm2, norm3, dropout1, dropout2, dropout3;
  explicit DecoderLayerModule(LayerOptions o) : TransformerLayerBase("TransformerDecoderLayer", std::move(o)) {
    // The order of torch.nn.TransformerDecoderLayer.__init__.
    self_attn = register_module("self_attn", makeAttention());
    multihead_attn = register_module("multihead_attn", makeAttention());
    linear1 = register_module("linear1", linear(opts.dModel, opts.dimFeedforward));
    dropout = register_module("dropout", dropoutLayer());
    linear2 = register_module("linear2", linear(opts.dimFeedforward, opts.dModel));
    norm1 = register_module("norm1", layerNorm());
    norm2 = register_module("norm2", layerNorm());
    norm3 = register_module("norm3", layerNorm());
    dropout1 = register_module("dropout1", dropoutLayer());
    dropout2 = register_module("dropout2", dropoutLayer());
    dropout3 = register_module("dropout3", dropoutLayer());
    registerActivation();
  }
  std::string typeName() const override { return "TransformerDecoderLayer"; }
  void pretty_print(std::ostream& s) const override { s << "TransformerDecoderLayer"; }
  std::shared_ptr<TransformerLayerBase> copy() const override {
    std::shared_ptr<DecoderLayerModule> m;
    {
      KeepRandomState keep;
      m = std::make_shared<DecoderLayerModule>(opts);
    }
    m->copyStateFrom(*this);
    m->train(is_training());
    return m;
  }

  struct Masks {
    at::Tensor tgtMask, memoryMask, tgtPadding, memoryPadding;
    bool tgtCausal = false, memoryCausal = false;
  };
  at::Tensor run(const at::Tensor& tgt, const at::Tensor& memory, const Masks& m) {
    auto sa = [&](const at::Tensor& x) {
      return callModuleTensor(dropout1, runAttention(self_attn, x, x, m.tgtMask, m.tgtPadding, m.tgtCausal));
    };
    auto mha = [&](const at::Tensor& x) {
      return callModuleTensor(dropout2, runAttention(multihead_attn, x, memory, m.memoryMask, m.memoryPadding, false));
    };
    auto ff = [&](const at::Tensor& x) { return callModuleTensor(dropout3, feedForward(x)); };
    at::Tensor x = tgt;
    if (opts.normFirst) {
      x = x + sa(callModuleTensor(norm1, x));
      x = x + mha(callModuleTensor(norm2, x));
      x = x + ff(callModuleTensor(norm3, x));
    } else {
      x = callModuleTensor(norm1, x + sa(x));
      x = callModuleTensor(norm2, x + mha(x));
      x = callModuleTensor(norm3, x + ff(x));
    }
    return x;
  }
  Value forward(Interp&, const Value* argv, int argc) override {
    const std::string who = typeName();
    ForwardArgs a = splitForwardArgs(argv, argc, who,
                                     {"tgt-mask", "memory-mask", "tgt-key-padding-mask", "memory-key-padding-mask",
                                      "tgt-is-causal", "memory-is-causal"});
    needArgs(a, 2, 6, who);
    auto pos = [&](size_t k, const char* key) { return a.positional.size() > k ? a.positional[k] : a.key(key); };
    Masks m;
    m.tgtMask = optTensor(pos(2, "tgt-mask"), who, 3);
    m.memoryMask = optTensor(pos(3, "memory-mask"), who, 4);
    m.tgtPadding = optTensor(pos(4, "tgt-key-padding-mask"), who, 5);
    m.memoryPadding = optTensor(pos(5, "memory-key-padding-mask"), who, 6);
    m.tgtCausal = optBool(a.key("tgt-is-causal"), false);
    m.memoryCausal = optBool(a.key("memory-is-causal"), false);
    return wrapTensor(run(tensorIn(a.positional[0], who, 1), tensorIn(a.positional[1], who, 2), m));
  }
};

// ---- stacks -----------------------------------------------------------------------------------------

struct ModuleListModule : Module {
  ModuleListModule() : Module("ModuleList") {}
  void pretty_print(std::ostream& s) const override { s << "ModuleList"; }
};

bool hooked(const Module& m) {
  auto* f = dynamic_cast<const ModuleForward*>(&m);
  return f && f->hooks;
}

// A layer of a stack, called through callModule (so its hooks run) with keyword arguments.
Value keyArgs(std::vector<Value, traceable_allocator<Value>>& args, const char* key, const at::Tensor& t) {
  if (t.defined()) args.insert(args.end(), {internKeyword(key), wrapTensor(t)});
  return Value::unspecified();
}

struct EncoderModule : Module, ModuleForward {
  std::shared_ptr<ModuleListModule> layers;
  ModulePtr norm;
  std::vector<ModulePtr> items;
  EncoderModule(const EncoderLayerModule& layer, int64_t n, ModulePtr finalNorm) : Module("TransformerEncoder") {
    layers = register_module("layers", std::make_shared<ModuleListModule>());
    for (int64_t k = 0; k < n; k++) items.push_back(layers->register_module(std::to_string(k), layer.copy()));
    if (finalNorm) norm = register_module("norm", finalNorm);
  }
  std::string typeName() const override { return "TransformerEncoder"; }
  void pretty_print(std::ostream& s) const override { s << "TransformerEncoder"; }

  at::Tensor run(Interp& in, const at::Tensor& src, const at::Tensor& mask, const at::Tensor& padding, bool isCausal) {
    at::Tensor x = src;
    for (auto& layer : items) {
      if (!hooked(*layer)) {
        auto* l = static_cast<EncoderLayerModule*>(layer.get());
        x = runModuleBody(*l, [&] { return l->run(x, mask, padding, isCausal); });
        continue;
      }
      std::vector<Value, traceable_allocator<Value>> args = {wrapTensor(x)};
      keyArgs(args, "src-mask", mask);
      keyArgs(args, "src-key-padding-mask", padding);
      if (isCausal) args.insert(args.end(), {internKeyword("is-causal"), Value::t()});
      Value r = callModule(in, layer, args.data(), int(args.size()));
      if (!isTensor(r) || !tensorOf(r).defined())
        throwError("type-error", "TransformerEncoder: a layer's hook returned " + toWriteString(r) + " where a tensor was expected");
      x = tensorOf(r);
    }
    if (norm) x = callModuleTensor(norm, x);
    return x;
  }
  Value forward(Interp& in, const Value* argv, int argc) override {
    const std::string who = typeName();
    ForwardArgs a = splitForwardArgs(argv, argc, who, {"mask", "src-key-padding-mask", "is-causal"});
    needArgs(a, 1, 3, who);
    auto pos = [&](size_t k, const char* key) { return a.positional.size() > k ? a.positional[k] : a.key(key); };
    return wrapTensor(run(in, tensorIn(a.positional[0], who, 1), optTensor(pos(1, "mask"), who, 2),
                          optTensor(pos(2, "src-key-padding-mask"), who, 3), optBool(a.key("is-causal"), false)));
  }
};


struct DecoderModule : Module, ModuleForward {
  std::shared_ptr<ModuleListModule> layers;
  ModulePtr norm;
  std::vector<ModulePtr> items;
  DecoderModule(const DecoderLayerModule& layer, int64_t n, ModulePtr finalNorm) : Module("TransformerDecoder") {
    layers = register_module("layers", std::make_shared<ModuleListModule>());
    for (int64_t k = 0; k < n; k++) items.push_back(layers->register_module(std::to_string(k), layer.copy()));
    if (finalNorm) norm = register_module("norm", finalNorm);
  }
  std::string typeName() const override { return "TransformerDecoder"; }
  void pretty_print(std::ostream& s) const override { s << "TransformerDecoder"; }

  at::Tensor run(Interp& in, const at::Tensor& tgt, const at::Tensor& memory, const DecoderLayerModule::Masks& m) {
    at::Tensor x = tgt;
    for (auto& layer : items) {
      if (!hooked(*layer)) {
        auto* l = static_cast<DecoderLayerModule*>(layer.get());
        x = runModuleBody(*l, [&] { return l->run(x, memory, m); });
        continue;
      }
      std::vector<Value, traceable_allocator<Value>> args = {wrapTensor(x), wrapTensor(memory)};
      keyArgs(args, "tgt-mask", m.tgtMask);
      keyArgs(args, "memory-mask", m.memoryMask);
      keyArgs(args, "tgt-key-padding-mask", m.tgtPadding);
      keyArgs(args, "memory-key-padding-mask", m.memoryPadding);
      if (m.tgtCausal) args.insert(args.end(), {internKeyword("tgt-is-causal"), Value::t()});
      Value r = callModule(in, layer, args.data(), int(args.size()));
      if (!isTensor(r) || !tensorOf(r).defined())
        throwError("type-error", "TransformerDecoder: a layer's hook returned " + toWriteString(r) + " where a tensor was expected");
      x = tensorOf(r);
    }
    if (norm) x = callModuleTensor(norm, x);
    return x;
  }
  Value forward(Interp& in, const Value* argv, int argc) override {
    const std::string who = typeName();
    ForwardArgs a = splitForwardArgs(argv, argc, who,
                                     {"tgt-mask", "memory-mask", "tgt-key-padding-mask", "memory-key-padding-mask",
                                      "tgt-is-causal", "memory-is-causal"});
    needArgs(a, 2, 6, who);
    auto pos = [&](size_t k, const char* key) { return a.positional.size() > k ? a.positional[k] : a.key(key); };
    DecoderLayerModule::Masks m;
    m.tgtMask = optTensor(pos(2, "tgt-mask"), who, 3);
    m.memoryMask = optTensor(pos(3, "memory-mask"), who, 4);
    m.tgtPadding = optTensor(pos(4, "tgt-key-padding-mask"), who, 5);
    m.memoryPadding = optTensor(pos(5, "memory-key-padding-mask"), who, 6);
    m.tgtCausal = optBool(a.key("tgt-is-causal"), false);
    m.memoryCausal = optBool(a.key("memory-is-causal"), false);
    return wrapTensor(run(in, tensorIn(a.positional[0], who, 1), tensorIn(a.positional[1], who, 2), m));
  }
};

// Calls a stack (encoder or decoder child of a transformer) through callModule when hooked.
at::Tensor runStack(Interp& in, const ModulePtr& stack, std::vector<Value, traceable_allocator<Value>>& args,
                    const std::function<at::Tensor()>& direct) {
  if (!hooked(*stack)) return runModuleBody(*stack, direct);
  Value r = callModule(in, stack, args.data(), int(args.size()));
  if (!isTensor(r) || !tensorOf(r).defined())
    throwError("type-error", moduleTypeName(*stack) + ": a hook returned " + toWriteString(r) + " where a tensor was expected");
  return tensorOf(r);
}

struct TransformerModule : Module, ModuleForward {
  std::shared_ptr<EncoderModule> encoder;
  std::shared_ptr<DecoderModule> decoder;
  LayerOptions opts;
  TransformerModule(const LayerOptions& o, int64_t nEnc, int64_t nDec) : Module("Transformer"), opts(o) {
    // The order of torch.nn.Transformer.__init__, then its _reset_parameters.
    auto encLayer = std::make_shared<EncoderLayerModule>(o);
    auto encNorm = std::make_shared<Layer<torch::nn::LayerNormImpl>>(torch::nn::LayerNormOptions({o.dModel}).eps(o.eps));
    encNorm->tname = "LayerNorm";
    encoder = register_module("encoder", std::make_shared<EncoderModule>(*encLayer, nEnc, encNorm));
    auto decLayer = std::make_shared<DecoderLayerModule>(o);
    auto decNorm = std::make_shared<Layer<torch::nn::LayerNormImpl>>(torch::nn::LayerNormOptions({o.dModel}).eps(o.eps));
    decNorm->tname = "LayerNorm";
    decoder = register_module("decoder", std::make_shared<DecoderModule>(*decLayer, nDec, decNorm));
    torch::NoGradGuard g;
    for (auto& p : parameters(true))
      if (p.dim() > 1) torch::nn::init::xavier_uniform_(p);
  }
  std::string typeName() const override { return "Transformer"; }
  void pretty_print(std::ostream& s) const override { s << "Transformer"; }

  Value forward(Interp& in, const Value* argv, int argc) override {
    const std::string who = typeName();
    ForwardArgs a = splitForwardArgs(argv, argc, who,
                                     {"src-mask", "tgt-mask", "memory-mask", "src-key-padding-mask", "tgt-key-padding-mask",
                                      "memory-key-padding-mask", "src-is-causal", "tgt-is-causal", "memory-is-causal"});
    needArgs(a, 2, 8, who);
    auto pos = [&](size_t k, const char* key) { return a.positional.size() > k ? a.positional[k] : a.key(key); };
    at::Tensor src = tensorIn(a.positional[0], who, 1), tgt = tensorIn(a.positional[1], who, 2);
    at::Tensor srcMask = optTensor(pos(2, "src-mask"), who, 3);
    DecoderLayerModule::Masks m;
    m.tgtMask = optTensor(pos(3, "tgt-mask"), who, 4);
    m.memoryMask = optTensor(pos(4, "memory-mask"), who, 5);
    at::Tensor srcPadding = optTensor(pos(5, "src-key-padding-mask"), who, 6);
    m.tgtPadding = optTensor(pos(6, "tgt-key-padding-mask"), who, 7);
    m.memoryPadding = optTensor(pos(7, "memory-key-padding-mask"), who, 8);
    bool srcCausal = optBool(a.key("src-is-causal"), false);
    m.tgtCausal = optBool(a.key("tgt-is-causal"), false);
    m.memoryCausal = optBool(a.key("memory-is-causal"), false);
    // torch.nn.Transformer's checks, with its messages.
    bool batched = src.dim() == 3;
    if (src.dim() != tgt.dim() || (src.dim() != 2 && src.dim() != 3))
      throwError("value-error", who + ": src and tgt must both be 3-d (batched) or 2-d (unbatched), got shapes " +
                                    pyTuple(src.sizes()) + " and " + pyTuple(tgt.sizes()));
    if (batched && src.size(opts.batchFirst ? 0 : 1) != tgt.size(opts.batchFirst ? 0 : 1))
      throwError("value-error", who + ": the batch number of src and tgt must be equal, got shapes " + pyTuple(src.sizes()) +
                                    " and " + pyTuple(tgt.sizes()));
    if (src.size(-1) != opts.dModel || tgt.size(-1) != opts.dModel)
      throwError("value-error", who + ": the feature number of src and tgt must be equal to d-model (" +
                                    std::to_string(opts.dModel) + "), got shapes " + pyTuple(src.sizes()) + " and " +
                                    pyTuple(tgt.sizes()));
    std::vector<Value, traceable_allocator<Value>> encArgs = {wrapTensor(src)};
    keyArgs(encArgs, "mask", srcMask);
    keyArgs(encArgs, "src-key-padding-mask", srcPadding);
    at::Tensor memory = runStack(in, encoder, encArgs, [&] { return encoder->run(in, src, srcMask, srcPadding, srcCausal); });
    std::vector<Value, traceable_allocator<Value>> decArgs = {wrapTensor(tgt), wrapTensor(memory)};
    keyArgs(decArgs, "tgt-mask", m.tgtMask);
    keyArgs(decArgs, "memory-mask", m.memoryMask);
    keyArgs(decArgs, "tgt-key-padding-mask", m.tgtPadding);
    keyArgs(decArgs, "memory-key-padding-mask", m.memoryPadding);
    return wrapTensor(runStack(in, decoder, decArgs, [&] { return decoder->run(in, tgt, memory, m); }));
  }
};

const char* kLayerKeys =
    " :dim-feedforward 2048, :dropout 0.1, :activation \"relu\" (or \"gelu\", a procedure or a module), "
    ":layer-norm-eps 1e-5, :batch-first #f (inputs are (S, N, E); #t: (N, S, E)), :norm-first #f (post-norm; #t "
    "normalizes before each block).";

}  // namespace

void registerTransformers(Registry& r) {
  r.def("multihead-attention",
        "(embed-dim num-heads :key (dropout 0.0) (bias #t) (add-bias-kv #f) (add-zero-attn #f) kdim vdim (batch-first #f))",
        [](int64_t e, int64_t h, double dropout, bool bias, bool addBiasKv, bool addZeroAttn, std::optional<int64_t> kdim,
           std::optional<int64_t> vdim, bool batchFirst) {
          if (e <= 0 || h <= 0 || e % h != 0)
            throwError("value-error", "multihead-attention: embed-dim (" + std::to_string(e) + ") must be divisible by num-heads (" +
                                          std::to_string(h) + ")");
          torch::nn::MultiheadAttentionOptions o(e, h);
          o.dropout(dropout).bias(bias).add_bias_kv(addBiasKv).add_zero_attn(addZeroAttn);
          if ((kdim && *kdim <= 0) || (vdim && *vdim <= 0))
            throwError("value-error", "multihead-attention: kdim and vdim must be positive");
          if (kdim) o.kdim(*kdim);
          if (vdim) o.vdim(*vdim);
          auto m = std::make_shared<MhaLayer>(o);
          m->batchFirst = batchFirst;
          return wrapModule(m);
        },
        "A multi-head attention module (torch.nn.MultiheadAttention). (m query [key value] :key-padding-mask "
        ":need-weights #t :attn-mask :average-attn-weights #t :is-causal #f) returns (output weights); weights is #f "
        "with :need-weights #f. Inputs are (L, N, E), (N, L, E) with :batch-first #t, or unbatched (L, E). A boolean "
        ":attn-mask or :key-padding-mask is true where attention is NOT allowed (PyTorch's convention); a float mask "
        "is added to the scores. :attn-mask is (L, S), or (N*num-heads, L, S) for one mask per batch element and head; "
        ":key-padding-mask is (N, S), or (S) unbatched. :kdim and :vdim (default embed-dim) are the key's and value's "
        "feature sizes: when either differs from embed-dim the layer projects with separate q_proj_weight, "
        "k_proj_weight and v_proj_weight (PyTorch's names and shapes) instead of one in_proj_weight. "
        ":is-causal #t with no mask masks out future positions.");

  r.def("transformer-encoder-layer",
        "(d-model nhead :key (dim-feedforward 2048) (dropout 0.1) activation (layer-norm-eps 1e-5) (batch-first #f) "
        "(norm-first #f))",
        [](int64_t d, int64_t h, int64_t ff, double dropout, Value act, double eps, bool bf, bool nf) {
          return wrapModule(std::make_shared<EncoderLayerModule>(
              layerOptions(d, h, ff, dropout, act, eps, bf, nf, "transformer-encoder-layer")));
        },
        std::string("A Transformer encoder layer (torch.nn.TransformerEncoderLayer): self-attention then a feed-forward "
                    "block, each with dropout, a residual connection and layer norm. (m src [src-mask "
                    "src-key-padding-mask] :is-causal #f); keywords :src-mask and :src-key-padding-mask too.") + kLayerKeys);
  r.def("transformer-decoder-layer",
        "(d-model nhead :key (dim-feedforward 2048) (dropout 0.1) activation (layer-norm-eps 1e-5) (batch-first #f) "
        "(norm-first #f))",
        [](int64_t d, int64_t h, int64_t ff, double dropout, Value act, double eps, bool bf, bool nf) {
          return wrapModule(std::make_shared<DecoderLayerModule>(
              layerOptions(d, h, ff, dropout, act, eps, bf, nf, "transformer-decoder-layer")));
        },
        std::string("A Transformer decoder layer (torch.nn.TransformerDecoderLayer): self-attention, attention over the "
                    "encoder's output (memory), then a feed-forward block. (m tgt memory [tgt-mask memory-mask "
                    "tgt-key-padding-mask memory-key-padding-mask] :tgt-is-causal #f); the masks as keywords too.") +
            kLayerKeys);
  r.def("transformer-encoder", "(encoder-layer num-layers :key norm)",
        [](Value layer, int64_t n, Value norm) {
          const char* who = "transformer-encoder";
          auto* l = dynamic_cast<EncoderLayerModule*>(moduleArg(layer, who, 1).get());
          if (!l) throwTypeError(who, 1, "a transformer-encoder-layer", layer);
          if (n < 1) throwError("value-error", "transformer-encoder: num-layers must be at least 1, got " + std::to_string(n));
          ModulePtr nm = norm.isMissing() || norm.isFalse() ? nullptr : moduleArg(norm, who, 3);
          return wrapModule(std::make_shared<EncoderModule>(*l, n, nm));
        },
        "A stack of NUM-LAYERS copies of ENCODER-LAYER (torch.nn.TransformerEncoder; the copies start with the "
        "layer's weights and train separately), then the module :norm (e.g. a layer-norm) when given. (m src [mask "
        "src-key-padding-mask] :is-causal #f).");
  r.def("transformer-decoder", "(decoder-layer num-layers :key norm)",
        [](Value layer, int64_t n, Value norm) {
          const char* who = "transformer-decoder";
          auto* l = dynamic_cast<DecoderLayerModule*>(moduleArg(layer, who, 1).get());
          if (!l) throwTypeError(who, 1, "a transformer-decoder-layer", layer);
          if (n < 1) throwError("value-error", "transformer-decoder: num-layers must be at least 1, got " + std::to_string(n));
          ModulePtr nm = norm.isMissing() || norm.isFalse() ? nullptr : moduleArg(norm, who, 3);
          return wrapModule(std::make_shared<DecoderModule>(*l, n, nm));
        },
        "A stack of NUM-LAYERS copies of DECODER-LAYER (torch.nn.TransformerDecoder), then the module :norm when given. "
        "(m tgt memory [tgt-mask memory-mask tgt-key-padding-mask memory-key-padding-mask] :tgt-is-causal #f).");
  r.def("transformer",
        "(:key (d-model 512) (nhead 8) (num-encoder-layers 6) (num-decoder-layers 6) (dim-feedforward 2048) (dropout 0.1) "
        "activation (layer-norm-eps 1e-5) (batch-first #f) (norm-first #f))",
        [](int64_t d, int64_t h, int64_t nEnc, int64_t nDec, int64_t ff, double dropout, Value act, double eps, bool bf,
           bool nf) {
          if (nEnc < 1 || nDec < 1) throwError("value-error", "transformer: the numbers of encoder and decoder layers must be at least 1");
          return wrapModule(std::make_shared<TransformerModule>(
              layerOptions(d, h, ff, dropout, act, eps, bf, nf, "transformer"), nEnc, nDec));
        },
        std::string("A full Transformer (torch.nn.Transformer, \"Attention Is All You Need\"): an encoder of "
                    ":num-encoder-layers layers and a decoder of :num-decoder-layers layers, each stack ending in a "
                    "layer norm; weight matrices start Xavier-uniform. (m src tgt [src-mask tgt-mask memory-mask "
                    "src-key-padding-mask tgt-key-padding-mask memory-key-padding-mask]) returns (T, N, E); the masks "
                    "as keywords too, and :src-is-causal, :tgt-is-causal. Use (generate-square-subsequent-mask T) for "
                    "the decoder's causal :tgt-mask.") + kLayerKeys);
  r.def("generate-square-subsequent-mask", "(size :key dtype device)",
        [](int64_t n, std::optional<at::ScalarType> dtype, std::optional<at::Device> device) {
          if (n < 0) throwError("value-error", "generate-square-subsequent-mask: size must be non-negative");
          return causalMask(n, tensorOptions(dtype, device));
        },
        "The causal mask for a sequence of SIZE steps (torch.nn.Transformer.generate_square_subsequent_mask): a (SIZE, "
        "SIZE) float tensor with -inf above the diagonal (future positions) and 0 elsewhere.");
}

}  // namespace nnlayer
}  // namespace purple
