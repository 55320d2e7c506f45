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

std::string shapeOf(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t k = 0; k < t.dim(); k++) s += (k ? ", " : "") + std::to_string(t.size(k));
  return s + (t.dim() == 1 ? ",)" : ")");
}

void sameShape(const at::Tensor& a, const at::Tensor& b, const char* who, const char* what) {
  if (a.sizes() != b.sizes())
    throwError("value-error", std::string(who) + ": " + what + " must have the same shape, got " + shapeOf(a) + " and " + shapeOf(b));
}

at::Tensor reduce(const at::Tensor& loss, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return loss.mean();
  if (reduction == at::Reduction::Sum) return loss.sum();
  return loss;
}

// Lengths for ctc-loss: a list of integers or an integer tensor, as a CPU int64 tensor.
at::Tensor lengthsOf(Value v, const char* who, int i) {
  if (isTensor(v)) {
    const at::Tensor& t = tensorArg(v, who, i);
    if (t.is_floating_point()) throwError("type-error", std::string(who) + ": lengths must be integers");
    return t.to(at::kLong);
  }
  std::vector<int64_t> l;
  if (!isList(v)) throwTypeError(who, i, "a list of integers or an integer tensor", v);
  for (Value p = v; isPair(p); p = cdr(p)) {
    if (!car(p).isFixnum()) throwTypeError(who, i, "a list of integers or an integer tensor", v);
    l.push_back(car(p).fixnum());
  }
  return at::tensor(l, at::kLong);
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

  // ---- embedding and ranking losses ----
  r.def("cosine-embedding-loss", "(input1 input2 target :key (margin 0.0) reduction)",
        [](const at::Tensor& a, const at::Tensor& b, const at::Tensor& y, double margin, OptS red) {
          sameShape(a, b, "cosine-embedding-loss", "input1 and input2");
          return at::cosine_embedding_loss(a, b, sameDtype(y, a), margin, reductionArg(red, "cosine-embedding-loss"));
        },
        "Cosine embedding loss (torch.nn.functional.cosine_embedding_loss): for each pair of rows of INPUT1 and INPUT2 "
        "(N, D), 1 - cos when TARGET is 1 and max(0, cos - :margin) when it is -1.");
  r.def("margin-ranking-loss", "(input1 input2 target :key (margin 0.0) reduction)",
        [](const at::Tensor& a, const at::Tensor& b, const at::Tensor& y, double margin, OptS red) {
          return at::margin_ranking_loss(a, b, sameDtype(y, a), margin, reductionArg(red, "margin-ranking-loss"));
        },
        "Margin ranking loss (torch.nn.functional.margin_ranking_loss): max(0, -TARGET (INPUT1 - INPUT2) + :margin), "
        "TARGET being 1 where INPUT1 should rank higher and -1 where INPUT2 should.");
  r.def("triplet-margin-loss", "(anchor positive negative :key (margin 1.0) (p 2.0) (eps 1e-6) (swap #f) reduction)",
        [](const at::Tensor& a, const at::Tensor& pos, const at::Tensor& neg, double margin, double p, double eps, bool swap,
           OptS red) {
          return at::triplet_margin_loss(a, pos, neg, margin, p, eps, swap, reductionArg(red, "triplet-margin-loss"));
        },
        "Triplet margin loss (torch.nn.functional.triplet_margin_loss): max(d(ANCHOR, POSITIVE) - d(ANCHOR, NEGATIVE) "
        "+ :margin, 0) with the :p-norm distance (plus :eps); :swap #t uses the distance from POSITIVE to NEGATIVE "
        "when it is smaller.");
  r.def("hinge-embedding-loss", "(input target :key (margin 1.0) reduction)",
        [](const at::Tensor& x, const at::Tensor& y, double margin, OptS red) {
          return at::hinge_embedding_loss(x, sameDtype(y, x), margin, reductionArg(red, "hinge-embedding-loss"));
        },
        "Hinge embedding loss (torch.nn.functional.hinge_embedding_loss): INPUT where TARGET is 1, max(0, :margin - "
        "INPUT) where it is -1.");
  r.def("soft-margin-loss", "(input target :key reduction)",
        [](const at::Tensor& x, const at::Tensor& y, OptS red) {
          return at::soft_margin_loss(x, sameDtype(y, x), reductionArg(red, "soft-margin-loss"));
        },
        "Two-class logistic loss log(1 + exp(-TARGET INPUT)) with TARGET in {1, -1} (torch.nn.functional.soft_margin_loss).");
  r.def("multi-margin-loss", "(input target :key (p 1) (margin 1.0) weight reduction)",
        [](const at::Tensor& x, const at::Tensor& y, int64_t p, double margin, OptT w, OptS red) {
          if (p != 1 && p != 2) throwError("value-error", "multi-margin-loss: :p must be 1 or 2, got " + std::to_string(p));
          return at::multi_margin_loss(x, classTarget(y), p, margin, optT(w), reductionArg(red, "multi-margin-loss"));
        },
        "Multi-class hinge loss (torch.nn.functional.multi_margin_loss) of scores INPUT (N, C) against class indices "
        "TARGET (N): the mean over classes i of max(0, :margin - x[y] + x[i])^:p.");
  r.def("multilabel-margin-loss", "(input target :key reduction)",
        [](const at::Tensor& x, const at::Tensor& y, OptS red) {
          return at::multilabel_margin_loss(x, classTarget(y), reductionArg(red, "multilabel-margin-loss"));
        },
        "Multi-label hinge loss (torch.nn.functional.multilabel_margin_loss): TARGET (N, C) lists each sample's class "
        "indices, ended by -1.");
  r.def("multilabel-soft-margin-loss", "(input target :key weight reduction)",
        [](const at::Tensor& x, const at::Tensor& y0, OptT w, OptS red) {
          at::Tensor y = sameDtype(y0, x);
          at::Tensor loss = -(y * at::log_sigmoid(x) + (1 - y) * at::log_sigmoid(-x));
          if (w) loss = loss * *w;
          int64_t classDim = x.dim() - 1;
          loss = loss.sum(classDim) / x.size(classDim);
          return reduce(loss, reductionArg(red, "multilabel-soft-margin-loss"));
        },
        "Multi-label one-versus-all logistic loss (torch.nn.functional.multilabel_soft_margin_loss) of logits INPUT "
        "(N, C) against 0/1 TARGET (N, C), averaged over classes; :weight per class.");

  // ---- likelihood losses ----
  r.def("poisson-nll-loss", "(input target :key (log-input #t) (full #f) (eps 1e-8) reduction)",
        [](const at::Tensor& x, const at::Tensor& y, bool logInput, bool full, double eps, OptS red) {
          return at::poisson_nll_loss(x, sameDtype(y, x), logInput, full, eps, reductionArg(red, "poisson-nll-loss"));
        },
        "Negative log-likelihood of TARGET under a Poisson distribution (torch.nn.functional.poisson_nll_loss): "
        "exp(INPUT) - TARGET INPUT with :log-input #t (INPUT is the log rate), else INPUT - TARGET log(INPUT + :eps); "
        ":full #t adds Stirling's approximation of log(TARGET!).");
  r.def("gaussian-nll-loss", "(input target var :key (full #f) (eps 1e-6) reduction)",
        [](const at::Tensor& x, const at::Tensor& y, const at::Tensor& var0, bool full, double eps, OptS red) {
          const char* who = "gaussian-nll-loss";
          int64_t reduction = reductionArg(red, who);
          at::Tensor var = var0;
          // torch.nn.functional.gaussian_nll_loss's shape rules: VAR like INPUT, or one dimension short, or
          // with a last dimension of 1 (one variance shared by a sample's outputs).
          if (var.sizes() != x.sizes()) {
            auto lead = x.sizes().slice(0, size_t(std::max<int64_t>(x.dim() - 1, 0)));
            if (x.dim() >= 1 && var.sizes() == lead) var = var.unsqueeze(-1);
            else if (x.dim() >= 1 && var.dim() == x.dim() && var.sizes().slice(0, size_t(var.dim() - 1)) == lead && var.size(-1) == 1) {
            } else {
              throwError("value-error", std::string(who) + ": var must have the shape of input " + shapeOf(x) +
                                            ", or that shape without its last dimension or with a last dimension of 1; got " +
                                            shapeOf(var));
            }
          }
          if ((var < 0).any().item<bool>()) throwError("value-error", std::string(who) + ": var has negative entries");
          var = var.clone();
          {
            at::NoGradGuard noGrad;   // clamped for stability, but the gradient flows as if it were not
            var.clamp_min_(eps);
          }
          at::Tensor loss = 0.5 * (at::log(var) + (x - sameDtype(y, x)).pow(2) / var);
          if (full) loss = loss + 0.5 * std::log(2 * M_PI);
          return reduce(loss, reduction);
        },
        "Negative log-likelihood of TARGET under Gaussians with means INPUT and variances VAR "
        "(torch.nn.functional.gaussian_nll_loss): 0.5 (log(max(VAR, :eps)) + (INPUT - TARGET)^2 / max(VAR, :eps)), "
        "plus 0.5 log(2 pi) with :full #t. VAR has INPUT's shape, or lacks its last dimension or has size 1 there "
        "(one variance per sample).");
  r.def("ctc-loss",
        "(log-probs targets input-lengths target-lengths :key (blank 0) reduction (zero-infinity #f))",
        [](const at::Tensor& lp, const at::Tensor& targets, Value inLengths, Value tgtLengths, int64_t blank, OptS red,
           bool zeroInf) {
          const char* who = "ctc-loss";
          if (lp.dim() != 3 && lp.dim() != 2)
            throwError("value-error", std::string(who) + ": log-probs must be (T, N, C) or unbatched (T, C), got " + shapeOf(lp));
          if (targets.is_floating_point()) throwError("type-error", std::string(who) + ": targets must be an integer tensor");
          at::Tensor il = lengthsOf(inLengths, who, 3), tl = lengthsOf(tgtLengths, who, 4);
          int64_t c = lp.size(-1);
          if (blank < 0 || blank >= c)
            throwError("value-error", std::string(who) + ": blank " + std::to_string(blank) + " is not a class index (C = " + std::to_string(c) + ")");
          return at::ctc_loss(lp, targets.to(at::kLong), il, tl, blank, reductionArg(red, who), zeroInf);
        },
        "Connectionist temporal classification loss (torch.nn.functional.ctc_loss): the negative log-likelihood of "
        "the label sequences TARGETS under per-step class LOG-PROBS (T, N, C) (from log-softmax), summed over every "
        "alignment. TARGETS is (N, S) padded or all target sequences concatenated; INPUT-LENGTHS and TARGET-LENGTHS "
        "(lists or tensors) give each sample's lengths. :blank is the blank class; \"mean\" divides each loss by its "
        "target length before averaging over the batch; :zero-infinity #t zeroes impossible alignments' infinite losses.", kPrimBorrowsArgs);
}

}  // namespace purple
