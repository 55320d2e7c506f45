// Loss functions, PyTorch's formulas and defaults (torch.nn.functional.*). Every loss takes
// :reduction "mean" (default), "sum" or "none" (a string or a symbol).
#include <ATen/ATen.h>
#include "builtins/nn/value.hpp"
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"

namespace purple {

namespace {

using OptS = std::optional<std::string>;
using OptT = std::optional<at::Tensor>;

c10::optional<at::Tensor> optT(const OptT& t) {
  return t ? c10::optional<at::Tensor>(*t) : c10::optional<at::Tensor>(c10::nullopt);
}

// Class-index targets must be int64; accept any integer dtype, as a user would expect.
at::Tensor classTarget(const at::Tensor& t) {
  if (!t.is_floating_point() && t.scalar_type() != at::kLong) return t.to(at::kLong);
  return t;
}

at::Tensor sameDtype(const at::Tensor& target, const at::Tensor& input) {
  if (target.scalar_type() != input.scalar_type() && input.is_floating_point()) return target.to(input.scalar_type());
  return target;
}

}  // namespace

void registerLosses(Registry& r) {
  r.def("mse-loss", "(input target :key reduction)",
        [](const at::Tensor& x, const at::Tensor& y, OptS red) {
          return at::mse_loss(x, sameDtype(y, x), reductionArg(red, "mse-loss"));
        },
        "Mean squared error between INPUT and TARGET (torch.nn.functional.mse_loss).");
  r.def("l1-loss", "(input target :key reduction)",
        [](const at::Tensor& x, const at::Tensor& y, OptS red) {
          return at::l1_loss(x, sameDtype(y, x), reductionArg(red, "l1-loss"));
        },
        "Mean absolute error between INPUT and TARGET (torch.nn.functional.l1_loss).");
  r.def("smooth-l1-loss", "(input target :key reduction (beta 1.0))",
        [](const at::Tensor& x, const at::Tensor& y, OptS red, double beta) {
          return at::smooth_l1_loss(x, sameDtype(y, x), reductionArg(red, "smooth-l1-loss"), beta);
        },
        "Smooth L1 loss: 0.5 d^2 / BETA where |d| < BETA, else |d| - 0.5 BETA (torch.nn.functional.smooth_l1_loss).");
  r.def("huber-loss", "(input target :key reduction (delta 1.0))",
        [](const at::Tensor& x, const at::Tensor& y, OptS red, double delta) {
          return at::huber_loss(x, sameDtype(y, x), reductionArg(red, "huber-loss"), delta);
        },
        "Huber loss: 0.5 d^2 where |d| < DELTA, else DELTA (|d| - 0.5 DELTA) (torch.nn.functional.huber_loss).");
  r.def("cross-entropy", "(input target :key weight (ignore-index -100) reduction (label-smoothing 0.0))",
        [](const at::Tensor& x, const at::Tensor& y, OptT w, int64_t ignore, OptS red, double smoothing) {
          return at::cross_entropy_loss(x, classTarget(y), optT(w), reductionArg(red, "cross-entropy"), ignore, smoothing);
        },
        "Cross-entropy between logits INPUT (N, C) or (N, C, d...) and TARGET: class indices (N) (any integer "
        "dtype), or class probabilities shaped like INPUT (torch.nn.functional.cross_entropy; applies log-softmax "
        "itself, so INPUT should be raw scores). :weight per class, :ignore-index (index targets), "
        ":label-smoothing in [0, 1].");
  r.def("nll-loss", "(input target :key weight (ignore-index -100) reduction)",
        [](const at::Tensor& x, const at::Tensor& y, OptT w, int64_t ignore, OptS red) {
          return at::nll_loss_nd(x, classTarget(y), optT(w), reductionArg(red, "nll-loss"), ignore);
        },
        "Negative log-likelihood of class indices TARGET under log-probabilities INPUT (N, C) "
        "(torch.nn.functional.nll_loss); (nll-loss (log-softmax x) y) equals (cross-entropy x y).");
  r.def("binary-cross-entropy", "(input target :key weight reduction)",
        [](const at::Tensor& x, const at::Tensor& y, OptT w, OptS red) {
          return at::binary_cross_entropy(x, sameDtype(y, x), optT(w), reductionArg(red, "binary-cross-entropy"));
        },
        "Binary cross-entropy between probabilities INPUT (in [0, 1]) and TARGET of the same shape "
        "(torch.nn.functional.binary_cross_entropy).");
  r.def("bce-with-logits", "(input target :key weight pos-weight reduction)",
        [](const at::Tensor& x, const at::Tensor& y, OptT w, OptT pw, OptS red) {
          return at::binary_cross_entropy_with_logits(x, sameDtype(y, x), optT(w), optT(pw), reductionArg(red, "bce-with-logits"));
        },
        "Binary cross-entropy on logits INPUT (sigmoid applied inside, numerically stable) against TARGET; "
        ":pos-weight weights positive examples per class (torch.nn.functional.binary_cross_entropy_with_logits).");
  r.def("kl-div", "(input target :key reduction (log-target #f))",
        [](const at::Tensor& x, const at::Tensor& y, OptS red, bool logTarget) {
          if (red && (*red == "batchmean" || *red == "batch-mean")) {
            at::Tensor s = at::kl_div(x, sameDtype(y, x), at::Reduction::Sum, logTarget);
            return x.dim() > 0 ? s / x.size(0) : s;
          }
          return at::kl_div(x, sameDtype(y, x), reductionArg(red, "kl-div"), logTarget);
        },
        "Kullback-Leibler divergence with INPUT as log-probabilities and TARGET as probabilities (log-probabilities "
        "with :log-target #t) (torch.nn.functional.kl_div). :reduction also takes \"batchmean\" (sum / batch size, "
        "the mathematically correct mean).");
}

}  // namespace purple
