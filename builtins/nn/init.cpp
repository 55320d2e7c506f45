// Parameter initialisers (torch.nn.init): init-kaiming-uniform! ... init-orthogonal!, each filling
// a tensor in place without recording gradients; and the linear-layer seed convenience.
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

torch::nn::init::NonlinearityType nonlinearityOf(const std::string& n0, const std::string& who) {
  std::string n = lowerDash(n0);
  if (n == "linear") return torch::kLinear;
  if (n == "conv1d") return torch::kConv1D;
  if (n == "conv2d") return torch::kConv2D;
  if (n == "conv3d") return torch::kConv3D;
  if (n == "conv-transpose1d") return torch::kConvTranspose1D;
  if (n == "conv-transpose2d") return torch::kConvTranspose2D;
  if (n == "conv-transpose3d") return torch::kConvTranspose3D;
  if (n == "sigmoid") return torch::kSigmoid;
  if (n == "tanh") return torch::kTanh;
  if (n == "relu") return torch::kReLU;
  if (n == "leaky-relu") return torch::kLeakyReLU;
  throwError("value-error", who + ": unknown nonlinearity " + n0 +
                                " (linear conv1d conv2d conv3d conv-transpose1d/2d/3d sigmoid tanh relu leaky-relu)");
}

torch::nn::init::FanModeType fanModeOf(const std::string& m0, const std::string& who) {
  std::string m = lowerDash(m0);
  if (m == "fan-in") return torch::kFanIn;
  if (m == "fan-out") return torch::kFanOut;
  throwError("value-error", who + ": mode must be \"fan-in\" or \"fan-out\", got " + m0);
}

const at::Tensor& initTarget(Value v, const char* who) { return tensorArg(v, who, 1); }

}  // namespace

void registerInit(Registry& r) {
  r.def("init-kaiming-uniform!", "(t :key (a 0.0) (mode \"fan-in\") (nonlinearity \"leaky-relu\"))",
        [](Value t, double a, std::string mode, std::string nl) {
          torch::nn::init::kaiming_uniform_(initTarget(t, "init-kaiming-uniform!"), a, fanModeOf(mode, "init-kaiming-uniform!"),
                                            nonlinearityOf(nl, "init-kaiming-uniform!"));
          return t;
        },
        "Fills tensor T in place from U(-b, b), b = gain * sqrt(3 / fan) (He et al.; torch.nn.init.kaiming_uniform_). "
        ":mode \"fan-in\" or \"fan-out\"; :nonlinearity \"relu\", \"leaky-relu\" (with slope :a) .... Returns T.");
  r.def("init-kaiming-normal!", "(t :key (a 0.0) (mode \"fan-in\") (nonlinearity \"leaky-relu\"))",
        [](Value t, double a, std::string mode, std::string nl) {
          torch::nn::init::kaiming_normal_(initTarget(t, "init-kaiming-normal!"), a, fanModeOf(mode, "init-kaiming-normal!"),
                                           nonlinearityOf(nl, "init-kaiming-normal!"));
          return t;
        },
        "Fills tensor T in place from N(0, std^2), std = gain / sqrt(fan) (torch.nn.init.kaiming_normal_). Returns T.");
  r.def("init-xavier-uniform!", "(t :key (gain 1.0))",
        [](Value t, double gain) {
          torch::nn::init::xavier_uniform_(initTarget(t, "init-xavier-uniform!"), gain);
          return t;
        },
        "Fills tensor T in place from U(-a, a), a = gain * sqrt(6 / (fan-in + fan-out)) (Glorot). Returns T.", kPrimTensorFunction);
  r.def("init-xavier-normal!", "(t :key (gain 1.0))",
        [](Value t, double gain) {
          torch::nn::init::xavier_normal_(initTarget(t, "init-xavier-normal!"), gain);
          return t;
        },
        "Fills tensor T in place from N(0, std^2), std = gain * sqrt(2 / (fan-in + fan-out)) (Glorot). Returns T.", kPrimTensorFunction);
  r.def("init-normal!", "(t :optional (mean 0.0) (std 1.0))",
        [](Value t, double mean, double std) {
          torch::nn::init::normal_(initTarget(t, "init-normal!"), mean, std);
          return t;
        },
        "Fills tensor T in place from N(MEAN, STD^2). Returns T.", kPrimTensorFunction);
  r.def("init-uniform!", "(t :optional (low 0.0) (high 1.0))",
        [](Value t, double lo, double hi) {
          torch::nn::init::uniform_(initTarget(t, "init-uniform!"), lo, hi);
          return t;
        },
        "Fills tensor T in place from U(LOW, HIGH). Returns T.", kPrimTensorFunction);
  r.def("init-zeros!", "(t)",
        [](Value t) {
          torch::nn::init::zeros_(initTarget(t, "init-zeros!"));
          return t;
        },
        "Fills tensor T with zeros in place. Returns T.", kPrimTensorFunction);
  r.def("init-ones!", "(t)",
        [](Value t) {
          torch::nn::init::ones_(initTarget(t, "init-ones!"));
          return t;
        },
        "Fills tensor T with ones in place. Returns T.", kPrimTensorFunction);
  r.def("init-constant!", "(t value)",
        [](Value t, double v) {
          torch::nn::init::constant_(initTarget(t, "init-constant!"), v);
          return t;
        },
        "Fills tensor T with VALUE in place. Returns T.", kPrimTensorFunction);
  r.def("init-orthogonal!", "(t :key (gain 1.0))",
        [](Value t, double gain) {
          torch::nn::init::orthogonal_(initTarget(t, "init-orthogonal!"), gain);
          return t;
        },
        "Fills tensor T (at least 2-d) in place with a (semi-)orthogonal matrix scaled by GAIN. Returns T.", kPrimTensorFunction);


  // ---- seed conveniences ----
  r.def("linear-layer", "(in-features out-features x :key (bias #t))",
        [](int64_t in, int64_t out, const at::Tensor& x, bool bias) {
          torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(bias));
          return l->forward(x);
        },
        "One-shot convenience: makes a fresh, randomly initialised Linear layer IN-FEATURES -> OUT-FEATURES and applies "
        "it to X. The layer is not kept, so its weights cannot be trained; use (linear in out) in models.");
}

}  // namespace nnlayer
}  // namespace purple
