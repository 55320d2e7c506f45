// Activations and utility layers: (relu) is a ReLU module, (relu x) applies it. Also prelu (a
// learnable slope, LibTorch's layer), identity, softmax and log-softmax, and the other activations
// PyTorch has as modules (leaky-relu, elu, selu, silu, mish, softplus, hardtanh, relu6 ...).
#include "builtins/nn/layer.hpp"
#include "interp/platform/torch_compat.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

// nn.Identity: returns its argument, whatever it is.
struct IdentityModule : Module, ModuleForward {
  IdentityModule() : Module("Identity") {}
  std::string typeName() const override { return "Identity"; }
  void pretty_print(std::ostream& s) const override { s << "Identity()"; }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc != 1) throwError("arity-error", "Identity: forward takes 1 argument, got " + std::to_string(argc));
    return argv[0];
  }
  bool hasTensorForward() const override { return true; }
  at::Tensor tensorForward(const at::Tensor& x) override { return x; }
};

}  // namespace

void registerActivations(Registry& r) {
  r.def("relu", "(:optional x :key (inplace #f))",
        [](Value x, bool inplace) -> Value {
          if (x.isMissing())
            return makeLayer<torch::nn::ReLUImpl>("ReLU", torch::nn::ReLUOptions(inplace), inplace ? "inplace=True" : "");
          if (isTensor(x)) {
            at::Tensor t = tensorArg(x, "relu", 1);
            return wrapTensor(inplace ? at::relu_(t) : at::relu(t));
          }
          if (!isNumber(x)) throwTypeError("relu", 1, "a tensor or a real number", x);
          if (isExactRational(x)) return (isFlonum(x) || !(realArg(x, "activation", 1) < 0)) ? x : Value::fixnum(0);
          double d = realArg(x, "activation", 1);
          return makeFlonum(d > 0 ? d : 0.0);
        },
        "(relu) makes a ReLU module; (relu x) is max(0, X) for a tensor or a number.", kPrimTensorFunction);
  r.def("gelu", "(:optional x :key (approximate \"none\"))",
        [](Value x, std::string approx) -> Value {
          if (approx != "none" && approx != "tanh") throwError("value-error", "gelu: :approximate must be \"none\" or \"tanh\", got \"" + approx + "\"");
          if (x.isMissing()) return makeLayer<torch::nn::GELUImpl>("GELU", torch::nn::GELUOptions().approximate(approx));
          if (isTensor(x)) return wrapTensor(at::gelu(tensorArg(x, "gelu", 1), approx));
          if (!isNumber(x)) throwTypeError("gelu", 1, "a tensor or a real number", x);
          double d = realArg(x, "activation", 1);
          if (approx == "tanh") return makeFlonum(0.5 * d * (1 + std::tanh(std::sqrt(2 / M_PI) * (d + 0.044715 * d * d * d))));
          return makeFlonum(0.5 * d * (1 + std::erf(d / std::sqrt(2.0))));
        },
        "(gelu :approximate \"none\") makes a GELU module; (gelu x) applies the Gaussian error linear unit to a "
        "tensor or a number (:approximate \"tanh\" uses the tanh formula).");
  r.def("sigmoid", "(:optional x)",
        [](Value x) -> Value {
          if (x.isMissing()) return makeLayer<torch::nn::SigmoidImpl>("Sigmoid");
          if (isTensor(x)) return wrapTensor(at::sigmoid(tensorArg(x, "sigmoid", 1)));
          if (!isNumber(x)) throwTypeError("sigmoid", 1, "a tensor or a real number", x);
          return makeFlonum(1.0 / (1.0 + std::exp(-realArg(x, "activation", 1))));
        },
        "(sigmoid) makes a Sigmoid module; (sigmoid x) is 1/(1+e^-X) for a tensor or a number.", kPrimTensorFunction);
  r.def("tanh", "(:optional x)",
        [](Value x) -> Value {
          if (x.isMissing()) return makeLayer<torch::nn::TanhImpl>("Tanh");
          if (isTensor(x)) return wrapTensor(at::tanh(tensorArg(x, "tanh", 1)));
          if (!isNumber(x)) throwTypeError("tanh", 1, "a tensor or a real number", x);
          return makeFlonum(std::tanh(realArg(x, "activation", 1)));
        },
        "(tanh) makes a Tanh module; (tanh x) is the hyperbolic tangent of a tensor or a number.", kPrimTensorFunction);
  r.def("softmax", "(a :optional b)",
        [](Value a, Value b) -> Value {
          if (isTensor(a)) return wrapTensor(at::softmax(tensorArg(a, "softmax", 1), intOr(b, "softmax", 2, -1)));
          if (!b.isMissing()) throwError("arity-error", "softmax: the module form takes one dimension: (softmax dim)");
          int64_t d = intArg(a, "softmax", 1);
          return makeLayer<torch::nn::SoftmaxImpl>("Softmax", torch::nn::SoftmaxOptions(d), "dim=" + std::to_string(d));
        },
        "(softmax dim) makes a Softmax module over DIM; (softmax x [dim]) applies it to X (DIM defaults to -1).", kPrimTensorFunction);
  r.def("log-softmax", "(a :optional b)",
        [](Value a, Value b) -> Value {
          if (isTensor(a)) return wrapTensor(at::log_softmax(tensorArg(a, "log-softmax", 1), intOr(b, "log-softmax", 2, -1)));
          if (!b.isMissing()) throwError("arity-error", "log-softmax: the module form takes one dimension: (log-softmax dim)");
          int64_t d = intArg(a, "log-softmax", 1);
          return makeLayer<torch::nn::LogSoftmaxImpl>("LogSoftmax", torch::nn::LogSoftmaxOptions(d), "dim=" + std::to_string(d));
        },
        "(log-softmax dim) makes a LogSoftmax module over DIM; (log-softmax x [dim]) applies it to X (DIM defaults to -1).", kPrimTensorFunction);
  r.def("softmin", "(a :optional b)",
        [](Value a, Value b) -> Value {
          if (isTensor(a)) return wrapTensor(at::softmax(-tensorArg(a, "softmin", 1), intOr(b, "softmin", 2, -1)));
          if (!b.isMissing()) throwError("arity-error", "softmin: the module form takes one dimension: (softmin dim)");
          int64_t d = intArg(a, "softmin", 1);
          return makeFnLayer("Softmin", "dim=" + std::to_string(d), [d](const Module&, const at::Tensor& x) { return at::softmax(-x, d); });
        },
        "(softmin dim) makes a Softmin module over DIM; (softmin x [dim]) is softmax(-X) directly (DIM defaults to -1).", kPrimTensorFunction);

  r.def("prelu", "(:optional a b :key (init 0.25))",
        [](Value a, Value b, double init) -> Value {
          const std::string who = "prelu";
          if (isTensor(a)) {
            if (b.isMissing()) throwError("arity-error", "prelu: the functional form needs the slopes: (prelu x weight)");
            return wrapTensor(at::prelu(tensorArg(a, who, 1), tensorArg(b, who, 2)));
          }
          if (!b.isMissing()) throwError("arity-error", "prelu: the module form is (prelu [num-parameters] :init 0.25)");
          int64_t n = intOr(a, who, 1, 1);
          if (n < 1) throwError("value-error", "prelu: num-parameters must be at least 1, got " + std::to_string(n));
          return makeLayer<torch::nn::PReLUImpl>("PReLU", torch::nn::PReLUOptions().num_parameters(n).init(init));
        },
        "(prelu [num-parameters] :init 0.25) makes a PReLU module (torch.nn.PReLU): max(0, x) + a min(0, x) with a "
        "learnable slope a, one shared (NUM-PARAMETERS 1) or one per channel (dimension 1 of the input), starting at "
        ":init. (prelu x weight) applies it with slopes WEIGHT directly.", kPrimTensorFunction);

  r.def("identity", "(:optional x)",
        [](Value x) -> Value {
          if (x.isMissing()) return wrapModule(std::make_shared<IdentityModule>());
          return x;
        },
        "(identity) makes an Identity module (torch.nn.Identity), which returns its argument: a placeholder in a "
        "sequential or when a layer is switched off. (identity x) returns X.", kPrimTensorFunction);

  // Activations with numeric options: (NAME opt ...) is a module, (NAME x opt ...) applies it.
  struct Spec {
    const char* name;
    const char* tname;
    std::vector<std::pair<const char*, double>> opts;   // Python's option names and defaults
    std::vector<bool> integral;                          // printed as Python ints in the repr
    at::Tensor (*fn)(const at::Tensor&, const std::vector<double>&);
    const char* doc;
  };
  const Spec specs[] = {
      {"leaky-relu", "LeakyReLU", {{"negative_slope", 0.01}}, {false},
       [](const at::Tensor& x, const std::vector<double>& o) { return at::leaky_relu(x, o[0]); },
       "(leaky-relu [negative-slope 0.01]) makes a LeakyReLU module: max(0, x) + negative-slope min(0, x); "
       "(leaky-relu x [negative-slope]) applies it."},
      {"elu", "ELU", {{"alpha", 1.0}}, {false},
       [](const at::Tensor& x, const std::vector<double>& o) { return at::elu(x, o[0]); },
       "(elu [alpha 1.0]) makes an ELU module: x for x > 0, alpha (e^x - 1) otherwise; (elu x [alpha]) applies it."},
      {"celu", "CELU", {{"alpha", 1.0}}, {false},
       [](const at::Tensor& x, const std::vector<double>& o) { return at::celu(x, o[0]); },
       "(celu [alpha 1.0]) makes a CELU module: max(0, x) + min(0, alpha (e^(x/alpha) - 1)); (celu x [alpha]) applies it."},
      {"selu", "SELU", {}, {},
       [](const at::Tensor& x, const std::vector<double>&) { return at::selu(x); },
       "(selu) makes a SELU module (scaled ELU with the self-normalizing constants); (selu x) applies it."},
      {"silu", "SiLU", {}, {},
       [](const at::Tensor& x, const std::vector<double>&) { return at::silu(x); },
       "(silu) makes a SiLU module: x sigmoid(x), also called swish; (silu x) applies it."},
      {"mish", "Mish", {}, {},
       [](const at::Tensor& x, const std::vector<double>&) { return at::mish(x); },
       "(mish) makes a Mish module: x tanh(softplus(x)); (mish x) applies it."},
      {"softplus", "Softplus", {{"beta", 1}, {"threshold", 20}}, {compat::kSoftplusIntDefaults, compat::kSoftplusIntDefaults},
       [](const at::Tensor& x, const std::vector<double>& o) { return at::softplus(x, o[0], o[1]); },
       "(softplus [beta 1] [threshold 20]) makes a Softplus module: log(1 + e^(beta x)) / beta, linear above "
       "threshold; (softplus x [beta threshold]) applies it."},
      {"hardtanh", "Hardtanh", {{"min_val", -1.0}, {"max_val", 1.0}}, {false, false},
       [](const at::Tensor& x, const std::vector<double>& o) { return at::hardtanh(x, o[0], o[1]); },
       "(hardtanh [min-val -1.0] [max-val 1.0]) makes a Hardtanh module: x clamped to [min-val, max-val]; "
       "(hardtanh x [min max]) applies it."},
      {"relu6", "ReLU6", {}, {},
       [](const at::Tensor& x, const std::vector<double>&) { return at::hardtanh(x, 0, 6); },
       "(relu6) makes a ReLU6 module: min(max(0, x), 6); (relu6 x) applies it."},
      {"hardswish", "Hardswish", {}, {},
       [](const at::Tensor& x, const std::vector<double>&) { return at::hardswish(x); },
       "(hardswish) makes a Hardswish module: x relu6(x + 3) / 6; (hardswish x) applies it."},
      {"hardsigmoid", "Hardsigmoid", {}, {},
       [](const at::Tensor& x, const std::vector<double>&) { return at::hardsigmoid(x); },
       "(hardsigmoid) makes a Hardsigmoid module: relu6(x + 3) / 6; (hardsigmoid x) applies it."},
      {"log-sigmoid", "LogSigmoid", {}, {},
       [](const at::Tensor& x, const std::vector<double>&) { return at::log_sigmoid(x); },
       "(log-sigmoid) makes a LogSigmoid module: log(1 / (1 + e^-x)); (log-sigmoid x) applies it."},
      {"softsign", "Softsign", {}, {},
       [](const at::Tensor& x, const std::vector<double>&) { return x / (x.abs() + 1); },
       "(softsign) makes a Softsign module: x / (1 + |x|); (softsign x) applies it."},
      {"tanhshrink", "Tanhshrink", {}, {},
       [](const at::Tensor& x, const std::vector<double>&) { return x - x.tanh(); },
       "(tanhshrink) makes a Tanhshrink module: x - tanh(x); (tanhshrink x) applies it."},
      {"glu", "GLU", {{"dim", -1}}, {true},
       [](const at::Tensor& x, const std::vector<double>& o) { return at::glu(x, int64_t(o[0])); },
       "(glu [dim -1]) makes a GLU module: splits the input in halves a, b along DIM and returns a sigmoid(b); "
       "(glu x [dim]) applies it."},
  };
  for (const Spec& sp : specs) {
    Spec spec = sp;
    r.def(spec.name, "(:optional a b c)",
          [spec](Value a, Value b, Value c) -> Value {
            const std::string who = spec.name;
            bool functional = isTensor(a);
            Value given[2] = {functional ? b : a, functional ? c : b};
            if (!functional && !c.isMissing())
              throwError("arity-error", who + ": takes at most " + std::to_string(spec.opts.size()) + " options");
            std::vector<double> o;
            std::string extra;
            for (size_t k = 0; k < 2; k++) {
              if (k >= spec.opts.size()) {
                if (!given[k].isMissing())
                  throwError("arity-error", who + ": takes " + (spec.opts.empty() ? std::string("no options") :
                                                                 "at most " + std::to_string(spec.opts.size()) + " options"));
                continue;
              }
              double v = realOr(given[k], who, int(k) + (functional ? 2 : 1), spec.opts[k].second);
              o.push_back(v);
              bool asInt = spec.integral[k] && (given[k].isMissing() || given[k].isFixnum());
              extra += std::string(extra.empty() ? "" : ", ") + spec.opts[k].first + "=" +
                       (asInt ? std::to_string(int64_t(v)) : pyFloat(v));
            }
            if (functional) return wrapTensor(spec.fn(tensorArg(a, who, 1), o));
            auto fn = spec.fn;
            return makeFnLayer(spec.tname, extra, [fn, o](const Module&, const at::Tensor& x) { return fn(x, o); });
          },
          spec.doc);
  }
}

}  // namespace nnlayer
}  // namespace purple
