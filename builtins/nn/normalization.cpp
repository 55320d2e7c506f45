// Normalisation layers: batch-norm1d/2d/3d, instance-norm1d/2d/3d, layer-norm, group-norm
// (LibTorch's layers), and the functional instance-norm, layer-norm and group-norm.
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

template <class Impl, class Options>
Value batchNorm(const char* tname, int64_t n, double eps, std::optional<double> momentum, bool affine, bool track) {
  Options o(n);
  o.eps(eps).affine(affine).track_running_stats(track);
  o.momentum(momentum ? c10::optional<double>(*momentum) : c10::nullopt);
  return makeLayer<Impl>(tname, o);
}

template <class Impl, class Options>
Value instanceNorm(const char* tname, int64_t n, double eps, double momentum, bool affine, bool track) {
  Options o(n);
  o.eps(eps).momentum(momentum).affine(affine).track_running_stats(track);
  return makeLayer<Impl>(tname, o);
}

}  // namespace

void registerNormalization(Registry& r) {
  using namespace torch::nn;
  const char* bnDoc =
      " Normalizes each channel C with the batch's mean and variance in training mode (updating running "
      "statistics with :momentum; #f uses a cumulative average) and with the running statistics after module-eval!. "
      "Learnable weight and bias per channel unless :affine #f.";
  r.def("batch-norm1d", "(num-features :key (eps 1e-5) (momentum 0.1) (affine #t) (track-running-stats #t))",
        [](int64_t n, double eps, std::optional<double> momentum, bool affine, bool track) {
          return batchNorm<BatchNorm1dImpl, BatchNorm1dOptions>("BatchNorm1d", n, eps, momentum, affine, track);
        },
        std::string("A BatchNorm1d module over (N, C) or (N, C, L) input (torch.nn.BatchNorm1d).") + bnDoc);
  r.def("batch-norm2d", "(num-features :key (eps 1e-5) (momentum 0.1) (affine #t) (track-running-stats #t))",
        [](int64_t n, double eps, std::optional<double> momentum, bool affine, bool track) {
          return batchNorm<BatchNorm2dImpl, BatchNorm2dOptions>("BatchNorm2d", n, eps, momentum, affine, track);
        },
        std::string("A BatchNorm2d module over (N, C, H, W) input (torch.nn.BatchNorm2d).") + bnDoc);
  r.def("batch-norm3d", "(num-features :key (eps 1e-5) (momentum 0.1) (affine #t) (track-running-stats #t))",
        [](int64_t n, double eps, std::optional<double> momentum, bool affine, bool track) {
          return batchNorm<BatchNorm3dImpl, BatchNorm3dOptions>("BatchNorm3d", n, eps, momentum, affine, track);
        },
        std::string("A BatchNorm3d module over (N, C, D, H, W) input (torch.nn.BatchNorm3d).") + bnDoc);

  const char* inDoc =
      " Normalizes each channel of each sample over its spatial dimensions. PyTorch's defaults: no learnable "
      "weight and bias (:affine #f) and no running statistics (:track-running-stats #f; with #t they are kept with "
      ":momentum and used after module-eval!). Unbatched input (one dimension less) is accepted too.";
  r.def("instance-norm1d", "(num-features :key (eps 1e-5) (momentum 0.1) (affine #f) (track-running-stats #f))",
        [](int64_t n, double eps, double momentum, bool affine, bool track) {
          return instanceNorm<InstanceNorm1dImpl, InstanceNorm1dOptions>("InstanceNorm1d", n, eps, momentum, affine, track);
        },
        std::string("An InstanceNorm1d module over (N, C, L) input (torch.nn.InstanceNorm1d).") + inDoc);
  r.def("instance-norm2d", "(num-features :key (eps 1e-5) (momentum 0.1) (affine #f) (track-running-stats #f))",
        [](int64_t n, double eps, double momentum, bool affine, bool track) {
          return instanceNorm<InstanceNorm2dImpl, InstanceNorm2dOptions>("InstanceNorm2d", n, eps, momentum, affine, track);
        },
        std::string("An InstanceNorm2d module over (N, C, H, W) input (torch.nn.InstanceNorm2d).") + inDoc);
  r.def("instance-norm3d", "(num-features :key (eps 1e-5) (momentum 0.1) (affine #f) (track-running-stats #f))",
        [](int64_t n, double eps, double momentum, bool affine, bool track) {
          return instanceNorm<InstanceNorm3dImpl, InstanceNorm3dOptions>("InstanceNorm3d", n, eps, momentum, affine, track);
        },
        std::string("An InstanceNorm3d module over (N, C, D, H, W) input (torch.nn.InstanceNorm3d).") + inDoc);
  r.def("instance-norm",
        "(x :key running-mean running-var weight bias (use-input-stats #t) (momentum 0.1) (eps 1e-5))",
        [](const at::Tensor& x, std::optional<at::Tensor> mean, std::optional<at::Tensor> var, std::optional<at::Tensor> w,
           std::optional<at::Tensor> b, bool useInputStats, double momentum, double eps) {
          if (x.dim() < 3)
            throwError("value-error", "instance-norm: input must be (N, C, spatial...), at least 3-d, got shape " + pyTuple(x.sizes()));
          return at::instance_norm(x, copt(w), copt(b), copt(mean), copt(var), useInputStats, momentum, eps,
                                   at::globalContext().userEnabledCuDNN());
        },
        "Instance normalization of X (N, C, spatial...) (torch.nn.functional.instance_norm): each channel of each "
        "sample normalized over its spatial dimensions, then scaled by :weight and shifted by :bias (per channel) when "
        "given. With :use-input-stats #f the :running-mean and :running-var are used instead; with #t they are updated "
        "in place with :momentum when given.");

  r.def("layer-norm", "(a :optional b c d :key eps elementwise-affine)",
        [](Value a, Value b, Value c, Value d, Value eps, Value affine) -> Value {
          const std::string who = "layer-norm";
          double e = realOr(eps, who, 5, 1e-5);
          if (isTensor(a)) {
            if (b.isMissing()) throwError("arity-error", "layer-norm: the functional form needs a normalized shape: (layer-norm x shape [weight bias])");
            IntList shape = intsArg(b, who, 2);
            return wrapTensor(at::layer_norm(tensorArg(a, who, 1), shape, optTensor(c, who, 3), optTensor(d, who, 4), e));
          }
          if (!b.isMissing()) throwError("arity-error", "layer-norm: the module form takes one normalized shape: (layer-norm shape :eps :elementwise-affine)");
          torch::nn::LayerNormOptions o(intsArg(a, who, 1));
          o.eps(e).elementwise_affine(optBool(affine, true));
          return makeLayer<torch::nn::LayerNormImpl>("LayerNorm", o);
        },
        "(layer-norm normalized-shape :eps 1e-5 :elementwise-affine #t) makes a LayerNorm module (torch.nn.LayerNorm: "
        "normalizes over the trailing NORMALIZED-SHAPE dimensions); (layer-norm x normalized-shape [weight bias] :eps "
        "1e-5) normalizes X directly.", kPrimTensorFunction);

  r.def("group-norm", "(a b :optional c d :key (eps 1e-5) (affine #t))",
        [](Value a, Value b, Value c, Value d, double eps, bool affine) -> Value {
          const std::string who = "group-norm";
          if (isTensor(a))
            return wrapTensor(at::group_norm(tensorArg(a, who, 1), intArg(b, who, 2), optTensor(c, who, 3), optTensor(d, who, 4), eps,
                                             at::globalContext().userEnabledCuDNN()));
          if (!c.isMissing()) throwError("arity-error", "group-norm: the module form is (group-norm num-groups num-channels :eps :affine)");
          return makeLayer<torch::nn::GroupNormImpl>("GroupNorm",
                                                     torch::nn::GroupNormOptions(intArg(a, who, 1), intArg(b, who, 2)).eps(eps).affine(affine));
        },
        "(group-norm num-groups num-channels :eps 1e-5 :affine #t) makes a GroupNorm module (torch.nn.GroupNorm): "
        "NUM-CHANNELS split into NUM-GROUPS groups, each normalized over its channels and spatial dimensions; "
        "(group-norm x num-groups [weight bias] :eps 1e-5) normalizes X directly.", kPrimTensorFunction);
}

}  // namespace nnlayer
}  // namespace purple
