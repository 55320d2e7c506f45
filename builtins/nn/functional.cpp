// Functional nn ops that have no module of the same name: tensor-linear, batch-norm, one-hot,
// scaled-dot-product-attention. (conv2d, max-pool2d, avg-pool2d, layer-norm, dropout, embedding
// and the activations are functional when their first argument is a tensor: see modules.cpp.)
#include <ATen/ATen.h>
#include "interp/platform/torch_compat.hpp"
#include "builtins/nn/value.hpp"
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include <cmath>
#include <limits>

namespace purple {

namespace {

c10::optional<at::Tensor> optT(const std::optional<at::Tensor>& t) {
  return t ? c10::optional<at::Tensor>(*t) : c10::optional<at::Tensor>(c10::nullopt);
}

// softmax(Q K^T * scale + mask) V, as torch.nn.functional.scaled_dot_product_attention computes it.
at::Tensor sdpaReference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                         double dropoutP, bool isCausal, c10::optional<double> scale) {
  TORCH_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, "query, key and value need at least 2 dimensions");
  int64_t L = q.size(-2), S = k.size(-2);
  double s = scale ? *scale : 1.0 / std::sqrt(double(q.size(-1)));
  at::Tensor attn = at::matmul(q, k.transpose(-2, -1)) * s;
  if (isCausal) {
    TORCH_CHECK(!mask.defined(), "pass either an attention mask or is-causal, not both");
    at::Tensor keep = at::ones({L, S}, q.options().dtype(at::kBool)).tril();
    attn = attn.masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());
  }
  if (mask.defined()) {
    if (mask.scalar_type() == at::kBool) attn = attn.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
    else attn = attn + mask;
  }
  attn = at::softmax(attn, -1);
  if (dropoutP > 0) attn = at::dropout(attn, dropoutP, true);
  return at::matmul(attn, v);
}

}  // namespace

void registerNnFunctional(Registry& r) {
  r.def("tensor-linear", "(x weight :optional bias)",
        [](const at::Tensor& x, const at::Tensor& w, std::optional<at::Tensor> b) { return at::linear(x, w, optT(b)); },
        "X W^T + BIAS (torch.nn.functional.linear): WEIGHT is (OUT x IN), BIAS (OUT) when given.");

  r.def("batch-norm",
        "(x running-mean running-var :key weight bias (training #f) (momentum 0.1) (eps 1e-5))",
        [](const at::Tensor& x, std::optional<at::Tensor> mean, std::optional<at::Tensor> var, std::optional<at::Tensor> w,
           std::optional<at::Tensor> b, bool training, double momentum, double eps) {
          return at::batch_norm(x, optT(w), optT(b), optT(mean), optT(var), training, momentum, eps,
                                at::globalContext().userEnabledCuDNN());
        },
        "Batch normalization of X (N, C, ...) over channel C (torch.nn.functional.batch_norm). RUNNING-MEAN and "
        "RUNNING-VAR (or #f) are used when :training is #f and updated in place with :momentum when it is #t.");

  r.def("one-hot", "(indices :optional (num-classes -1))",
        [](const at::Tensor& idx, int64_t n) {
          at::Tensor i = idx.scalar_type() == at::kLong ? idx : idx.to(at::kLong);
          return at::one_hot(i, n);
        },
        "An int64 tensor with a trailing dimension of size NUM-CLASSES (default: max index + 1) holding 1 at each "
        "index of INDICES and 0 elsewhere (torch.nn.functional.one_hot).");

  r.def("scaled-dot-product-attention", "(query key value :key attn-mask (dropout-p 0.0) (is-causal #f) scale)",
        [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::optional<at::Tensor> mask, double p,
           bool causal, std::optional<double> scale) {
          c10::optional<double> sc = scale ? c10::optional<double>(*scale) : c10::nullopt;
          return compat::scaledDotProductAttention(q, k, v, optT(mask), p, causal, sc, [&] {
            return sdpaReference(q, k, v, mask ? *mask : at::Tensor(), p, causal, sc);
          });
        },
        "Attention softmax(QUERY KEY^T * scale + mask) VALUE over the last two dimensions "
        "(torch.nn.functional.scaled_dot_product_attention). :attn-mask is boolean (true = attend) or additive; "
        ":is-causal masks out future positions; :scale defaults to 1/sqrt(E). On LibTorch 2.x this is LibTorch's own "
        "kernel (fused where it can be); on 1.13, which lacks one, the same arithmetic is written out.");
}

}  // namespace purple
