// Lookup tables: embedding and embedding-bag (LibTorch's layers), each also functional when its
// first argument is a tensor of indices.
#include <torch/nn/functional/embedding.h>
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

torch::nn::EmbeddingBagMode bagMode(Value v, const std::string& who) {
  if (v.isMissing()) return torch::kMean;
  std::string m = choiceArg(v, who, ":mode", {"sum", "mean", "max"});
  if (m == "sum") return torch::kSum;
  if (m == "max") return torch::kMax;
  return torch::kMean;
}

at::Tensor indexTensor(const at::Tensor& t, const std::string& who, const char* what) {
  if (t.is_floating_point() || t.is_complex())
    throwError("type-error", who + ": " + what + " must be an integer tensor, got " + std::string(c10::toString(t.scalar_type())));
  return t;
}

// (bag input [offsets] :per-sample-weights w) -> (B, embedding-dim)
struct EmbeddingBagLayer : Layer<torch::nn::EmbeddingBagImpl> {
  using Layer<torch::nn::EmbeddingBagImpl>::Layer;
  Value forward(Interp&, const Value* argv, int argc) override {
    const std::string who = "EmbeddingBag";
    ForwardArgs a = splitForwardArgs(argv, argc, who, {"offsets", "per-sample-weights"});
    needArgs(a, 1, 3, who);
    at::Tensor input = indexTensor(tensorIn(a.positional[0], who, 1), who, "input");
    Value offsets = a.positional.size() > 1 ? a.positional[1] : a.key("offsets");
    Value weights = a.positional.size() > 2 ? a.positional[2] : a.key("per-sample-weights");
    at::Tensor off = optTensor(offsets, who, 2);
    if (input.dim() == 1 && !off.defined())
      throwError("value-error", who + ": a 1-d input needs offsets (the start of each bag); a 2-d input is one bag per row");
    if (input.dim() == 2 && off.defined())
      throwError("value-error", who + ": offsets are for a 1-d input; a 2-d input is one bag per row");
    return wrapTensor(torch::nn::EmbeddingBagImpl::forward(input, off, optTensor(weights, who, 3)));
  }
  bool hasTensorForward() const override { return false; }
  bool returnsNewValues() const override { return true; }
};

}  // namespace

void registerEmbeddings(Registry& r) {
  r.def("embedding", "(a b :key padding-idx max-norm (norm-type 2.0) (scale-grad-by-freq #f) (sparse #f))",
        [](Value a, Value b, Value paddingIdx, Value maxNorm, double normType, bool scaleGrad, bool sparse) -> Value {
          const std::string who = "embedding";
          c10::optional<int64_t> pad;
          if (!paddingIdx.isMissing() && !paddingIdx.isFalse()) pad = intArg(paddingIdx, who, 3);
          if (isTensor(a)) {
            at::Tensor idx = indexTensor(tensorArg(a, who, 1), who, "indices"), w = tensorArg(b, who, 2);
            if (!maxNorm.isMissing() && !maxNorm.isFalse()) {
              torch::NoGradGuard g;
              at::embedding_renorm_(w, idx, realArg(maxNorm, who, 4), normType);
            }
            int64_t p = pad ? (*pad < 0 ? *pad + w.size(0) : *pad) : -1;
            return wrapTensor(at::embedding(w, idx, p, scaleGrad, sparse));
          }
          torch::nn::EmbeddingOptions o(intArg(a, who, 1), intArg(b, who, 2));
          o.padding_idx(pad).norm_type(normType).scale_grad_by_freq(scaleGrad).sparse(sparse);
          if (!maxNorm.isMissing() && !maxNorm.isFalse()) o.max_norm(realArg(maxNorm, who, 4));
          return makeLayer<torch::nn::EmbeddingImpl>("Embedding", o);
        },
        "(embedding num-embeddings embedding-dim :padding-idx :max-norm ...) makes an Embedding module (torch.nn."
        "Embedding: a lookup table applied to integer tensors; the row at :padding-idx gets no gradient); (embedding "
        "indices weight :padding-idx ...) looks INDICES up in WEIGHT directly.", kPrimTensorFunction);

  r.def("embedding-bag",
        "(a b :optional c :key mode max-norm (norm-type 2.0) (scale-grad-by-freq #f) (sparse #f) per-sample-weights "
        "(include-last-offset #f) padding-idx)",
        [](Value a, Value b, Value c, Value mode, Value maxNorm, double normType, bool scaleGrad, bool sparse,
           Value perSample, bool includeLast, Value paddingIdx) -> Value {
          const std::string who = "embedding-bag";
          c10::optional<int64_t> pad;
          if (!paddingIdx.isMissing() && !paddingIdx.isFalse()) pad = intArg(paddingIdx, who, 11);
          c10::optional<double> mn;
          if (!maxNorm.isMissing() && !maxNorm.isFalse()) mn = realArg(maxNorm, who, 5);
          if (isTensor(a)) {
            at::Tensor input = indexTensor(tensorArg(a, who, 1), who, "input"), w = tensorArg(b, who, 2);
            at::Tensor off = optTensor(c, who, 3);
            if (input.dim() == 1 && !off.defined())
              throwError("value-error", who + ": a 1-d input needs offsets (the start of each bag); a 2-d input is one bag per row");
            torch::nn::functional::EmbeddingBagFuncOptions o;
            o.offsets(off).mode(bagMode(mode, who)).max_norm(mn).norm_type(normType).scale_grad_by_freq(scaleGrad);
            o.sparse(sparse).per_sample_weights(optTensor(perSample, who, 9)).include_last_offset(includeLast).padding_idx(pad);
            return wrapTensor(torch::nn::functional::embedding_bag(input, w, o));
          }
          if (!c.isMissing()) throwError("arity-error", who + ": the module form is (embedding-bag num-embeddings embedding-dim :mode ...)");
          if (!perSample.isMissing()) throwError("arity-error", who + ": :per-sample-weights is given to the module's forward");
          torch::nn::EmbeddingBagOptions o(intArg(a, who, 1), intArg(b, who, 2));
          o.mode(bagMode(mode, who)).max_norm(mn).norm_type(normType).scale_grad_by_freq(scaleGrad).sparse(sparse);
          o.include_last_offset(includeLast).padding_idx(pad);
          auto m = std::make_shared<EmbeddingBagLayer>(o);
          m->tname = "EmbeddingBag";
          return wrapModule(m);
        },
        "(embedding-bag num-embeddings embedding-dim :mode \"mean\" :max-norm :norm-type 2 :scale-grad-by-freq #f "
        ":sparse #f :include-last-offset #f :padding-idx) makes an EmbeddingBag module (torch.nn.EmbeddingBag): "
        "the sum, mean or max of the embeddings of each bag of indices, without making the (bag, index, dim) tensor. "
        "Apply it as (m input) with a 2-d INPUT (one bag per row) or (m input offsets [per-sample-weights]) with a "
        "1-d INPUT whose bags start at OFFSETS; per-sample weights need :mode \"sum\". With a tensor first, "
        "(embedding-bag input weight [offsets] :mode ...) is the functional form (torch.nn.functional.embedding_bag).");
}

}  // namespace nnlayer
}  // namespace purple
