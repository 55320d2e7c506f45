// Dropout layers: dropout, dropout1d/2d/3d (whole channels), alpha-dropout and
// feature-alpha-dropout (for SELU networks). Each is a module, (dropout2d 0.3), or applied to
// a tensor, (dropout2d x 0.3 :training #t). Modules drop only in training mode.
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

enum class DropKind { Plain, Channels1d, Channels2d, Channels3d, Alpha, FeatureAlpha };

struct DropSpec {
  const char* name;       // the builtin
  const char* tname;      // PyTorch's class
  DropKind kind;
};

double checkedP(double p, const std::string& who) {
  if (!(p >= 0 && p <= 1)) throwError("value-error", who + ": dropout probability must be between 0 and 1, got " + pyFloat(p));
  return p;
}

// torch.nn.functional.dropout1d/2d/3d: which input ranks are batched, as Python 1.13 and 2.x
// decide (a 3-d input to dropout2d is channel-wise 1-d dropout over (N, C, L)).
at::Tensor dropChannels(const at::Tensor& x, double p, bool training, bool inplace, int unbatched, int batched,
                        const std::string& who) {
  int64_t d = x.dim();
  bool ok = d == batched || d == unbatched || (batched == 4 && d == 3);
  if (!ok)
    throwError("value-error", who + ": input must be " + std::to_string(unbatched) + "-d or " + std::to_string(batched) +
                                  "-d, got shape " + pyTuple(x.sizes()));
  bool isBatched = d == batched || (batched == 4 && d == 3);
  at::Tensor in = isBatched ? x : x.unsqueeze(0);
  if (inplace) {
    at::feature_dropout_(in, p, training);   // IN is a view of X
    return x;
  }
  at::Tensor r = at::feature_dropout(in, p, training);
  return isBatched ? r : r.squeeze(0);
}

at::Tensor applyDropout(DropKind kind, const at::Tensor& x0, double p, bool training, bool inplace, const std::string& who) {
  at::Tensor x = x0;
  switch (kind) {
    case DropKind::Plain:
      if (inplace) return at::dropout_(x, p, training);
      return at::dropout(x, p, training);
    case DropKind::Channels1d: return dropChannels(x, p, training, inplace, 2, 3, who);
    case DropKind::Channels2d: return dropChannels(x, p, training, inplace, 3, 4, who);
    case DropKind::Channels3d: return dropChannels(x, p, training, inplace, 4, 5, who);
    case DropKind::Alpha:
      if (inplace) return at::alpha_dropout_(x, p, training);
      return at::alpha_dropout(x, p, training);
    case DropKind::FeatureAlpha:
      if (inplace) return at::feature_alpha_dropout_(x, p, training);
      return at::feature_alpha_dropout(x, p, training);
  }
  return x;
}

void defDropout(Registry& r, DropSpec spec, const std::string& doc) {
  std::string who = spec.name;
  r.def(spec.name, "(:optional a b :key training (inplace #f))",
        [spec, who](Value a, Value b, Value training, bool inplace) -> Value {
          if (isTensor(a)) {
            double p = checkedP(realOr(b, who, 2, 0.5), who);
            return wrapTensor(applyDropout(spec.kind, tensorArg(a, who, 1), p, optBool(training, true), inplace, who));
          }
          if (!b.isMissing()) throwError("arity-error", who + ": the module form takes one probability: (" + who + " p)");
          if (!training.isMissing()) throwError("arity-error", who + ": :training is for the functional form; a module follows module-train! / module-eval!");
          double p = checkedP(realOr(a, who, 1, 0.5), who);
          if (spec.kind == DropKind::Plain)
            return makeLayer<torch::nn::DropoutImpl>("Dropout", torch::nn::DropoutOptions(p).inplace(inplace));
          DropKind kind = spec.kind;
          return makeFnLayer(spec.tname, "p=" + pyFloat(p) + ", inplace=" + pyBool(inplace),
                             [kind, p, inplace, who](const Module& m, const at::Tensor& x) {
                               return applyDropout(kind, x, p, m.is_training(), inplace, who);
                             });
        },
        doc);
}

}  // namespace

void registerDropout(Registry& r) {
  const char* common =
      " With a tensor first, (NAME x [p] :training #t :inplace #f) applies it directly; pass :training "
      "(module-training? m) inside a module's forward.";
  defDropout(r, {"dropout", "Dropout", DropKind::Plain},
             std::string("(dropout [p]) makes a Dropout module (p = 0.5, torch.nn.Dropout): zeroes each element with "
                         "probability P and scales the rest by 1/(1-P) in training mode; the identity after "
                         "module-eval!.") + common);
  defDropout(r, {"dropout1d", "Dropout1d", DropKind::Channels1d},
             std::string("(dropout1d [p]) makes a Dropout1d module (torch.nn.Dropout1d): zeroes whole channels of (N, C, "
                         "L) or (C, L) input with probability P.") + common);
  defDropout(r, {"dropout2d", "Dropout2d", DropKind::Channels2d},
             std::string("(dropout2d [p]) makes a Dropout2d module (torch.nn.Dropout2d): zeroes whole channels of (N, C, "
                         "H, W) input with probability P (a 3-d input is read as (N, C, L), as PyTorch does).") + common);
  defDropout(r, {"dropout3d", "Dropout3d", DropKind::Channels3d},
             std::string("(dropout3d [p]) makes a Dropout3d module (torch.nn.Dropout3d): zeroes whole channels of (N, C, "
                         "D, H, W) or (C, D, H, W) input with probability P.") + common);
  defDropout(r, {"alpha-dropout", "AlphaDropout", DropKind::Alpha},
             std::string("(alpha-dropout [p]) makes an AlphaDropout module (torch.nn.AlphaDropout): dropout that keeps "
                         "the mean and variance of its input, for SELU networks.") + common);
  defDropout(r, {"feature-alpha-dropout", "FeatureAlphaDropout", DropKind::FeatureAlpha},
             std::string("(feature-alpha-dropout [p]) makes a FeatureAlphaDropout module (torch.nn.FeatureAlphaDropout): "
                         "alpha dropout of whole channels.") + common);
}

}  // namespace nnlayer
}  // namespace purple
