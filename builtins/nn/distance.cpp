// Distances between pairs of vectors: cosine-similarity and pairwise-distance, each a function
// of two tensors or, called without them, a module (torch.nn.CosineSimilarity,
// torch.nn.PairwiseDistance) applied as (m x1 x2); and tensor-normalize (F.normalize).
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

// A parameterless module of two tensors.
struct PairLayer : Module, ModuleForward {
  using Fn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;
  PairLayer(std::string name, std::string extraRepr, Fn f)
      : Module(name), tname(std::move(name)), extra(std::move(extraRepr)), fn(std::move(f)) {}
  std::string tname, extra;
  Fn fn;
  std::string typeName() const override { return tname; }
  void pretty_print(std::ostream& s) const override { s << tname << "(" << extra << ")"; }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc != 2) throwError("arity-error", tname + ": forward takes 2 tensors, got " + std::to_string(argc) + " arguments");
    return wrapTensor(fn(tensorIn(argv[0], tname, 1), tensorIn(argv[1], tname, 2)));
  }
};

void checkBroadcast(const at::Tensor& a, const at::Tensor& b, const std::string& who) {
  try {
    at::infer_size(a.sizes(), b.sizes());
  } catch (const c10::Error&) {
    throwError("value-error", who + ": the shapes " + pyTuple(a.sizes()) + " and " + pyTuple(b.sizes()) + " do not broadcast");
  }
}

at::Tensor cosine(const at::Tensor& a, const at::Tensor& b, int64_t dim, double eps) {
  checkBroadcast(a, b, "cosine-similarity");
  return at::cosine_similarity(a, b, dim, eps);
}

at::Tensor pairwise(const at::Tensor& a, const at::Tensor& b, double p, double eps, bool keepdim) {
  checkBroadcast(a, b, "pairwise-distance");
  return at::pairwise_distance(a, b, p, eps, keepdim);
}

}  // namespace

void registerDistances(Registry& r) {
  r.def("cosine-similarity", "(:optional x1 x2 :key (dim 1) (eps 1e-8))",
        [](Value a, Value b, int64_t dim, double eps) -> Value {
          const std::string who = "cosine-similarity";
          if (a.isMissing()) {
            return wrapModule(std::make_shared<PairLayer>("CosineSimilarity", "",
                                                          [dim, eps](const at::Tensor& x, const at::Tensor& y) { return cosine(x, y, dim, eps); }));
          }
          if (b.isMissing()) throwError("arity-error", who + ": needs two tensors, or none for the module");
          return wrapTensor(cosine(tensorArg(a, who, 1), tensorArg(b, who, 2), dim, eps));
        },
        "(cosine-similarity x1 x2 :dim 1 :eps 1e-8): x1 . x2 / max(|x1| |x2|, eps) along DIM, the two broadcast "
        "together (torch.nn.functional.cosine_similarity). (cosine-similarity :dim :eps) makes a CosineSimilarity "
        "module, applied as (m x1 x2).", kPrimTensorFunction);
  r.alias("tensor-cosine-similarity", "cosine-similarity");
  r.def("pairwise-distance", "(:optional x1 x2 :key (p 2.0) (eps 1e-6) (keepdim #f))",
        [](Value a, Value b, double p, double eps, bool keepdim) -> Value {
          const std::string who = "pairwise-distance";
          if (a.isMissing()) {
            return wrapModule(std::make_shared<PairLayer>("PairwiseDistance", "",
                                                          [p, eps, keepdim](const at::Tensor& x, const at::Tensor& y) {
                                                            return pairwise(x, y, p, eps, keepdim);
                                                          }));
          }
          if (b.isMissing()) throwError("arity-error", who + ": needs two tensors, or none for the module");
          return wrapTensor(pairwise(tensorArg(a, who, 1), tensorArg(b, who, 2), p, eps, keepdim));
        },
        "(pairwise-distance x1 x2 :p 2.0 :eps 1e-6 :keepdim #f): the p-norm of x1 - x2 + eps over the last dimension "
        "(torch.nn.functional.pairwise_distance). (pairwise-distance :p :eps :keepdim) makes a PairwiseDistance "
        "module, applied as (m x1 x2).", kPrimTensorFunction);
  r.def("tensor-normalize", "(x :key (p 2.0) (dim 1) (eps 1e-12))",
        [](const at::Tensor& x, double p, int64_t dim, double eps) {
          if (x.dim() == 0) throwError("value-error", "tensor-normalize: X must have at least one dimension");
          return x / at::norm(x, p, {dim}, true).clamp_min(eps).expand_as(x);
        },
        "X divided by its :p-norm along :dim, each norm at least :eps (torch.nn.functional.normalize): unit-length "
        "rows with the defaults. (normalize mean std) is the data transform, not this.");
}

}  // namespace nnlayer
}  // namespace purple
