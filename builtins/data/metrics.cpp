// Classification metrics on tensors: accuracy, precision, recall, f1-score, confusion-matrix.
//
// Predictions are either class indices shaped like the targets, or scores (logits or
// probabilities) with one more dimension than the targets, the classes along dim 1 as
// cross-entropy expects; scores are turned into classes with argmax. Binary scores shaped like
// the targets need :threshold (e.g. 0.5 for probabilities, 0 for logits).
//
// Averages follow scikit-learn and torchmetrics: 'micro pools every sample (for single-label
// multiclass data all three equal the accuracy); 'macro is the unweighted mean over the classes
// that occur in the targets or the predictions (a class that occurs in neither is skipped); a
// class with no predicted (precision) or no true (recall) samples scores 0; 'weighted weighs
// each class by its support; 'none returns the per-class tensor.
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include <ATen/ATen.h>

namespace purple {
namespace metrics {

// Predictions and targets as flat int64 class tensors of equal length.
std::pair<at::Tensor, at::Tensor> classes(const at::Tensor& pred, const at::Tensor& target,
                                          std::optional<double> threshold, const std::string& who) {
  at::Tensor p = pred.detach(), t = target.detach();
  if (p.device() != t.device()) t = t.to(p.device());
  if (t.is_floating_point()) {
    if (!at::equal(t, t.round()))
      throwError("data-error", who + ": targets must be class indices (integers)");
    t = t.to(at::kLong);
  }
  if (p.dim() == t.dim() + 1) {
    if (p.dim() < 2) throwError("data-error", who + ": scores need a class dimension");
    p = p.argmax(1);
  } else if (threshold) {
    p = (p >= *threshold).to(at::kLong);
  } else if (p.is_floating_point()) {
    if (!at::equal(p, p.round()))
      throwError("data-error", who + ": predictions shaped like the targets must be class indices; "
                                     "give :threshold for binary scores");
    p = p.to(at::kLong);
  } else {
    p = p.to(at::kLong);
  }
  t = t.to(at::kLong);
  if (p.sizes() != t.sizes()) {
    std::ostringstream os;
    os << who << ": predictions of shape " << pred.sizes() << " do not match targets of shape " << target.sizes();
    throwError("data-error", os.str());
  }
  p = p.reshape(-1);
  t = t.reshape(-1);
  if (p.numel() == 0) throwError("data-error", who + ": no samples");
  if (p.min().item<int64_t>() < 0 || t.min().item<int64_t>() < 0)
    throwError("data-error", who + ": class indices must be non-negative");
  return {p, t};
}

int64_t numClasses(const at::Tensor& p, const at::Tensor& t, std::optional<int64_t> given,
                   const at::Tensor& pred, const std::string& who) {
  int64_t seen = std::max(p.max().item<int64_t>(), t.max().item<int64_t>()) + 1;
  if (given) {
    if (*given < seen)
      throwError("data-error", who + ": :num-classes is " + std::to_string(*given) +
                                   " but a class index " + std::to_string(seen - 1) + " occurs");
    return *given;
  }
  if (pred.dim() == t.dim() + 1 && pred.dim() >= 2) return std::max(seen, pred.size(1));
  return seen;
}

// Rows: true class; columns: predicted class (scikit-learn's convention).
at::Tensor confusion(const at::Tensor& p, const at::Tensor& t, int64_t k) {
  at::Tensor flat = t.to(at::kCPU) * k + p.to(at::kCPU);
  return at::bincount(flat, {}, k * k).reshape({k, k});
}

enum class Which { Precision, Recall, F1 };

Value classMetric(Which which, const at::Tensor& pred, const at::Tensor& target, Value average,
                  std::optional<int64_t> nClasses, std::optional<double> threshold, const std::string& who) {
  auto [p, t] = classes(pred, target, threshold, who);
  int64_t k = numClasses(p, t, nClasses, pred, who);
  at::Tensor cm = confusion(p, t, k).to(at::kDouble);
  at::Tensor tp = cm.diagonal();
  at::Tensor predicted = cm.sum(0), actual = cm.sum(1);
  std::string avg = "macro";
  if (!average.isMissing() && !average.isFalse()) {
    if (isSymbol(average)) avg = std::string(symbolName(average));
    else if (isString(average)) avg = std::string(stringView(average));
    else throwTypeError(who, 3, "'macro, 'micro, 'weighted or 'none", average);
  }
  auto safeDiv = [](const at::Tensor& a, const at::Tensor& b) {
    return at::where(b > 0, a / b.clamp_min(1e-300), at::zeros_like(a));
  };
  if (avg == "micro") {
    double tps = tp.sum().item<double>();
    double n = cm.sum().item<double>();
    return makeFlonum(n > 0 ? tps / n : 0.0);   // single-label: micro P = R = F1 = accuracy
  }
  at::Tensor prec = safeDiv(tp, predicted), rec = safeDiv(tp, actual);
  at::Tensor score = which == Which::Precision ? prec
                     : which == Which::Recall  ? rec
                                               : safeDiv(2 * prec * rec, prec + rec);
  if (avg == "none") return wrapTensor(score.to(at::kFloat));
  if (avg == "macro") {
    at::Tensor present = (predicted + actual) > 0;
    double count = present.sum().item<double>();
    return makeFlonum(count > 0 ? score.masked_select(present).sum().item<double>() / count : 0.0);
  }
  if (avg == "weighted") {
    double n = actual.sum().item<double>();
    return makeFlonum(n > 0 ? (score * actual).sum().item<double>() / n : 0.0);
  }
  throwError("data-error", who + ": :average must be 'macro, 'micro, 'weighted or 'none:", cons(average, Value::nil()));
}

}  // namespace metrics

using namespace metrics;

void registerMetrics(Registry& r) {
  r.def("accuracy", "(predictions targets :key threshold)",
        [](const at::Tensor& pred, const at::Tensor& target, std::optional<double> threshold) {
          auto [p, t] = classes(pred, target, threshold, "accuracy");
          return p.eq(t).to(at::kDouble).mean().item<double>();
        },
        "Fraction of samples whose predicted class equals the target, as a flonum. PREDICTIONS "
        "are class indices shaped like TARGETS, or scores (logits, probabilities) with the "
        "classes along dim 1; binary scores shaped like the targets need :threshold.");
  const char* common =
      " PREDICTIONS are class indices or scores (argmax over dim 1); :average is 'macro (the "
      "default: the mean over classes present in targets or predictions), 'micro (pooled over "
      "samples), 'weighted (by support) or 'none (a per-class float32 tensor); :num-classes "
      "fixes the number of classes; :threshold turns binary scores into classes. Classes with no "
      "predicted or no true samples score 0, as scikit-learn's zero_division=0.";
  r.def("precision", "(predictions targets :key average num-classes threshold)",
        [](const at::Tensor& p, const at::Tensor& t, Value average, std::optional<int64_t> k,
           std::optional<double> th) { return classMetric(Which::Precision, p, t, average, k, th, "precision"); },
        std::string("Precision, TP / (TP + FP), of a classifier.") + common);
  r.def("recall", "(predictions targets :key average num-classes threshold)",
        [](const at::Tensor& p, const at::Tensor& t, Value average, std::optional<int64_t> k,
           std::optional<double> th) { return classMetric(Which::Recall, p, t, average, k, th, "recall"); },
        std::string("Recall, TP / (TP + FN), of a classifier.") + common);
  r.def("f1-score", "(predictions targets :key average num-classes threshold)",
        [](const at::Tensor& p, const at::Tensor& t, Value average, std::optional<int64_t> k,
           std::optional<double> th) { return classMetric(Which::F1, p, t, average, k, th, "f1-score"); },
        std::string("F1 score, the harmonic mean of precision and recall per class, then averaged.") + common);
  r.def("confusion-matrix", "(predictions targets :key num-classes threshold)",
        [](const at::Tensor& pred, const at::Tensor& target, std::optional<int64_t> k,
           std::optional<double> threshold) {
          auto [p, t] = classes(pred, target, threshold, "confusion-matrix");
          return confusion(p, t, numClasses(p, t, k, pred, "confusion-matrix"));
        },
        "The int64 K x K confusion matrix: entry (i, j) counts samples of true class i predicted "
        "as class j (scikit-learn's layout). K is :num-classes, or one more than the largest "
        "class seen (or the score tensor's class count). PREDICTIONS are class indices or scores "
        "(argmax over dim 1).");
}

}  // namespace purple
