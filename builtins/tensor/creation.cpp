// Tensor creation, random numbers, and inspection: the builtins that make tensors from shapes
// and Purple data, and read their shape, dtype, device and elements back.
#include <ATen/ATen.h>
#include "builtins/tensor/util.hpp"
#include "builtins/tensor/random.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include "interp/core/gc.hpp"
#include "interp/core/interp.hpp"
#include <ATen/Dispatch.h>
#include <cmath>
#include <vector>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

// Purple data copied into a new tensor: the Value is read during the call and not kept, so the
// evaluator may still free a temporary argument right after the call.
struct Data { Value v; };

}  // namespace

template <> struct Convert<Data> {
  static constexpr bool keepsValue = false;
  static Data from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (v.isMissing()) throwConversionError(info, i, "nested lists or vectors of numbers", v);
    return Data{v};
  }
};

namespace {

constexpr size_t kMaxDataDepth = 4096;   // dimensions of nested data (LibTorch's tensors have far fewer)

size_t seqLength(Value v) {
  return v.is(Kind::Vector) ? v.as<Vector>()->extra : listLength(v);
}
template <class F> void forEachItem(Value v, F f) {
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) f(vec->items[k]);
  } else {
    for (Value p = v; isPair(p); p = cdr(p)) f(car(p));
  }
}

struct Leaf { double d; int64_t i; };

struct Flattener {
  std::string_view who;
  IntList shape;
  std::vector<Leaf> leaves;
  bool anyFloat = false, allBool = true, sawTensor = false;

  [[noreturn]] void ragged(Value at) {
    throwError("tensor-error", std::string(who) + ": nested data is not rectangular (every row at one depth "
                               "must have the same length)", cons(at, Value::nil()));
  }
  void walk(Value v, size_t depth) {
    if (stackNearlyFull()) throwError("recursion-error", std::string(who) + ": data nested too deeply");
    if (depth < shape.size()) {
      if (!isSequence(v) || seqLength(v) != size_t(shape[depth])) ragged(v);
      forEachItem(v, [&](Value x) { walk(x, depth + 1); });
      return;
    }
    if (isSequence(v)) ragged(v);
    Leaf l{0, 0};
    if (v.isFixnum()) {
      l.i = v.fixnum();
      l.d = double(l.i);
      allBool = false;
    } else if (isFlonum(v)) {
      l.d = flonumValue(v);
      anyFloat = true;
      allBool = false;
    } else if (v.isBool()) {
      l.i = v.isTrue();
      l.d = double(l.i);
    } else if (isBignum(v)) {
      throwError("tensor-error", std::string(who) + ": integer does not fit in int64", cons(v, Value::nil()));
    } else if (isNumber(v)) {   // exact rationals become floats, as Python's Fraction does
      l.d = toDouble(v);
      anyFloat = true;
      allBool = false;
    } else if (isTensor(v)) {
      sawTensor = true;
      return;
    } else {
      throwError("type-error", std::string(who) + ": tensor data must be numbers or booleans, got " +
                                   describeValueType(v),
                 cons(v, Value::nil()));
    }
    leaves.push_back(l);
  }
};

// Data that holds tensors (a list of rows that are tensors, say) is stacked level by level.
at::Tensor stackData(Value v, std::string_view who) {
  if (stackNearlyFull()) throwError("recursion-error", std::string(who) + ": data nested too deeply");
  if (isTensor(v)) {
    if (!tensorOf(v).defined()) throwError("tensor-error", std::string(who) + ": a tensor in the data was already freed");
    return tensorOf(v);
  }
  if (!isSequence(v)) return tensorFromData(v, std::nullopt, who);
  std::vector<at::Tensor> parts;
  forEachItem(v, [&](Value x) { parts.push_back(stackData(x, who)); });
  if (parts.empty()) return at::empty({0});
  // Mixed number/tensor rows promote like torch.stack after torch.tensor would.
  at::ScalarType common = parts[0].scalar_type();
  for (auto& p : parts) common = at::promote_types(common, p.scalar_type());
  at::Device device = parts[0].device();
  for (auto& p : parts) p = p.to(device, common);
  return at::stack(parts);
}

Value intsToList(at::IntArrayRef a) {
  Value r = Value::nil();
  for (size_t k = a.size(); k-- > 0;) r = cons(makeInteger(a[k]), r);
  return r;
}

template <class T, class Make>
Value nested(const T* data, at::IntArrayRef sizes, at::IntArrayRef strides, size_t dim, bool vectors, Make make) {
  int64_t n = sizes[dim];
  auto item = [&](int64_t k) -> Value {
    const T* p = data + k * strides[dim];
    // at every level: an empty tensor of shape (10^16 0) has rows to loop over and no element
    pollEvery(uint64_t(k));
    if (dim + 1 == sizes.size()) return make(*p);
    return nested(p, sizes, strides, dim + 1, vectors, make);
  };
  if (vectors) {
    Value vec = makeVector(size_t(n), Value::f());
    for (int64_t k = 0; k < n; k++) vec.as<Vector>()->items[k] = item(k);
    return vec;
  }
  Value r = Value::nil();
  for (int64_t k = n; k-- > 0;) r = cons(item(k), r);
  return r;
}

at::ScalarType fillType(const at::Scalar& s) {
  if (s.isBoolean()) return at::kBool;
  if (s.isIntegral(false)) return at::kLong;
  if (s.isComplex()) return at::kComplexFloat;
  return at::typeMetaToScalarType(at::get_default_dtype());
}

}  // namespace

at::Tensor tensorFromData(Value data, std::optional<at::ScalarType> dtype, std::string_view who) {
  Flattener f;
  f.who = who;
  for (Value cur = data; isSequence(cur);) {
    size_t n = seqLength(cur);
    if (n == SIZE_MAX)
      throwError("type-error", std::string(who) + ": tensor data must be proper lists, got an improper or circular one",
                 cons(cur, Value::nil()));
    // a list that is its own first element would go on forever
    if (f.shape.size() >= kMaxDataDepth) throwError("recursion-error", std::string(who) + ": data nested too deeply (or circular)");
    f.shape.push_back(int64_t(n));
    if (n == 0) break;
    cur = cur.is(Kind::Vector) ? cur.as<Vector>()->items[0] : car(cur);
  }
  f.walk(data, 0);
  if (f.sawTensor) {
    at::Tensor t = stackData(data, who);
    // Always a copy, as torch.tensor(t) is: the result must not alias the data's tensors.
    return t.to(dtype ? *dtype : t.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
  }
  // Floats get the default dtype (float32 unless set-default-dtype! changed it), as in PyTorch.
  at::ScalarType floatType = c10::get_default_dtype_as_scalartype();
  at::ScalarType natural = f.leaves.empty() ? floatType
                           : f.allBool      ? at::kBool
                           : f.anyFloat     ? floatType
                                            : at::kLong;
  at::ScalarType target = dtype ? *dtype : natural;
  at::Tensor t;
  // Build in a type that holds every leaf exactly, then convert once.
  if (natural == floatType) {
    t = at::empty(f.shape, at::kDouble);
    double* p = t.data_ptr<double>();
    for (size_t k = 0; k < f.leaves.size(); k++) p[k] = f.leaves[k].d;
  } else if (natural == at::kBool) {
    t = at::empty(f.shape, at::kBool);
    bool* p = t.data_ptr<bool>();
    for (size_t k = 0; k < f.leaves.size(); k++) p[k] = f.leaves[k].i != 0;
  } else {
    t = at::empty(f.shape, at::kLong);
    int64_t* p = t.data_ptr<int64_t>();
    for (size_t k = 0; k < f.leaves.size(); k++) p[k] = f.leaves[k].i;
  }
  return t.scalar_type() == target ? t : t.to(target);
}

Value tensorToNested(const at::Tensor& t0, bool vectors, std::string_view who) {
  at::Tensor t = t0.detach();
  if (t.is_complex())
    throwError("tensor-error", std::string(who) + ": complex tensors have no Purple numbers; use tensor-real "
                               "and tensor-imag first");
  if (t.is_sparse()) t = t.to_dense();
  // Refused up front when the collector's heap limit cannot hold the result (a pair and a
  // flonum, 48 bytes, per element): the work, and LibTorch's memory, are never spent.
  // The rows count too: one list or vector per index of every dimension but the last (all
  // there is, when a dimension is 0).
  size_t heapLimit = gcHeapLimit();
  uint64_t rows = 1, nodes = uint64_t(t.numel());
  for (int64_t d = 0; d + 1 < t.dim() && t.size(d) != 0; d++)
    if (__builtin_mul_overflow(rows, uint64_t(t.size(d)), &rows) || __builtin_add_overflow(nodes, rows, &nodes)) nodes = UINT64_MAX;
  if (heapLimit > 0 && nodes > heapLimit / 48)
    throwError("memory-error", std::string(who) + ": " + std::to_string(t.numel()) + " elements in " + std::to_string(rows) +
                                   " rows would not fit in the heap limit (" + std::to_string(heapLimit) + " bytes)");
  // In its own dtype on the CPU (no double-precision copy of the whole tensor); each element
  // is converted as it is boxed.
  t = t.to(at::kCPU).contiguous();
  if (t.dim() == 0) return scalarToValue(t.item());
  if (t.numel() == 0 && t.dim() == 1) return vectors ? makeVector(0) : Value::nil();
  auto sizes = t.sizes();
  auto strides = t.strides();
  Value result;
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, t.scalar_type(), "tensor->list", [&] {
    result = nested(t.data_ptr<scalar_t>(), sizes, strides, 0, vectors, [](scalar_t x) {
      if constexpr (std::is_same_v<scalar_t, bool>) return Value::boolean(x);
      else if constexpr (std::is_integral_v<scalar_t>) return makeInteger(int64_t(x));
      else return makeFlonum(double(x));
    });
  });
  return result;
}

void registerTensorCreation(Registry& r) {
  using OptType = std::optional<at::ScalarType>;
  using OptDev = std::optional<at::Device>;
  using OptGen = std::optional<GeneratorRef>;

  // ---- from shapes ----
  r.def("tensor-zeros", "(. shape :key dtype device requires-grad)",
        [](Shape s, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::zeros(s.dims, tensorOptions(dtype, device)), rg);
        },
        "A tensor of zeros. The shape is given as integers or one list: (tensor-zeros 2 3) = "
        "(tensor-zeros '(2 3)). Keywords: :dtype (default float32), :device, :requires-grad.");
  r.def("tensor-ones", "(. shape :key dtype device requires-grad)",
        [](Shape s, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::ones(s.dims, tensorOptions(dtype, device)), rg);
        },
        "A tensor of ones, shaped like tensor-zeros. Keywords: :dtype, :device, :requires-grad.");
  r.def("tensor-empty", "(. shape :key dtype device requires-grad)",
        [](Shape s, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::empty(s.dims, tensorOptions(dtype, device)), rg);
        },
        "An uninitialised tensor of the given shape (contents are whatever memory held). "
        "Keywords: :dtype, :device, :requires-grad.");
  r.def("tensor-full", "(size fill-value :key dtype device requires-grad)",
        [](Shape s, at::Scalar fill, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::full(s.dims, fill, tensorOptions(dtype ? *dtype : fillType(fill), device)), rg);
        },
        "A tensor of shape SIZE (an integer or a list) filled with FILL-VALUE. The dtype follows "
        "the value (integer -> int64, real -> float32, boolean -> bool) unless :dtype is given.");
  r.def("tensor-rand", "(. shape :key dtype device requires-grad generator)",
        [](Shape s, OptType dtype, OptDev device, bool rg, OptGen gen) {
          return withRequiresGrad(at::rand(s.dims, genOpt(gen), tensorOptions(dtype, device)), rg);
        },
        "Uniform random numbers in [0, 1) of the given shape. Seed with manual-seed, or draw from "
        "the generator given as :generator.");
  r.def("tensor-randn", "(. shape :key dtype device requires-grad generator)",
        [](Shape s, OptType dtype, OptDev device, bool rg, OptGen gen) {
          return withRequiresGrad(at::randn(s.dims, genOpt(gen), tensorOptions(dtype, device)), rg);
        },
        "Standard normal random numbers of the given shape: (tensor-randn 10 10). Seed with "
        "manual-seed, or draw from the generator given as :generator.");
  r.def("tensor-randint", "(a b :optional c :key dtype device requires-grad generator)",
        [](int64_t a, Shape b, std::optional<Shape> c, OptType dtype, OptDev device, bool rg, OptGen gen) {
          int64_t low = 0, high = a;
          IntList shape = b.dims;
          if (c) {
            if (b.dims.size() != 1) throwError("type-error", "tensor-randint: HIGH must be an integer");
            low = a;
            high = b.dims[0];
            shape = c->dims;
          }
          return withRequiresGrad(at::randint(low, high, shape, genOpt(gen), tensorOptions(dtype ? *dtype : at::kLong, device)), rg);
        },
        "Random integers: (tensor-randint HIGH SIZE) draws from [0, HIGH), (tensor-randint LOW HIGH "
        "SIZE) from [LOW, HIGH). SIZE is an integer or a list. The dtype is int64 unless :dtype. "
        ":generator draws from that generator.");
  r.def("tensor-randperm", "(n :key dtype device requires-grad generator)",
        [](int64_t n, OptType dtype, OptDev device, bool rg, OptGen gen) {
          return withRequiresGrad(at::randperm(n, genOpt(gen), tensorOptions(dtype ? *dtype : at::kLong, device)), rg);
        },
        "A random permutation of the integers 0 .. N-1 (int64 unless :dtype); :generator draws from "
        "that generator.");
  r.def("tensor-arange", "(a :optional b step :key dtype device requires-grad)",
        [](at::Scalar a, std::optional<at::Scalar> b, std::optional<at::Scalar> step, OptType dtype,
           OptDev device, bool rg) {
          at::Scalar start = b ? a : at::Scalar(int64_t(0));
          at::Scalar end = b ? *b : a;
          at::Scalar st = step ? *step : at::Scalar(int64_t(1));
          at::TensorOptions o = tensorOptions(dtype, device);
          if (!dtype) {
            // torch.arange: int64 when every bound is an integer, else the default float type.
            bool integral = start.isIntegral(false) && end.isIntegral(false) && st.isIntegral(false);
            o = o.dtype(integral ? at::kLong : at::typeMetaToScalarType(at::get_default_dtype()));
          }
          return withRequiresGrad(at::arange(start, end, st, o), rg);
        },
        "Evenly spaced values in [START, END): (tensor-arange END), (tensor-arange START END), "
        "(tensor-arange START END STEP). int64 when all bounds are integers, else float32.");
  r.def("tensor-linspace", "(start end steps :key dtype device requires-grad)",
        [](at::Scalar start, at::Scalar end, int64_t steps, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::linspace(start, end, steps, tensorOptions(dtype, device)), rg);
        },
        "STEPS values evenly spaced from START to END inclusive.");
  r.def("tensor-logspace", "(start end steps :key (base 10.0) dtype device requires-grad)",
        [](at::Scalar start, at::Scalar end, int64_t steps, double base, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::logspace(start, end, steps, base, tensorOptions(dtype, device)), rg);
        },
        "STEPS values BASE^x for x evenly spaced from START to END inclusive (:base defaults to 10).");
  r.def("tensor-eye", "(n :optional m :key dtype device requires-grad)",
        [](int64_t n, std::optional<int64_t> m, OptType dtype, OptDev device, bool rg) {
          at::TensorOptions o = tensorOptions(dtype, device);
          return withRequiresGrad(m ? at::eye(n, *m, o) : at::eye(n, o), rg);
        },
        "The N x N identity matrix, or N x M with ones on the diagonal when M is given.");

  // ---- from data ----
  auto fromData = [](Data d, OptType dtype, OptDev device, bool rg) {
    at::Tensor t = tensorFromData(d.v, dtype, "tensor-from-data");
    if (device) t = t.to(*device);
    return withRequiresGrad(t, rg);
  };
  const char* fromDataDoc =
      "A new tensor holding DATA: a number, a boolean, or nested lists/vectors of them (or of "
      "tensors, which are stacked). Like torch.tensor: all booleans give bool, any flonum gives "
      "float32, integers give int64, unless :dtype is given. Keywords: :dtype, :device, :requires-grad.";
  r.def("tensor-from-data", "(data :key dtype device requires-grad)", fromData, fromDataDoc);
  r.def("list->tensor", "(list :key dtype device requires-grad)", fromData,
        "A tensor from a (nested) list of numbers: (list->tensor '((1 2) (3 4))). Same rules and "
        "keywords as tensor-from-data.");
  r.def("vector->tensor", "(vector :key dtype device requires-grad)", fromData,
        "A tensor from a (nested) vector of numbers: (vector->tensor #(1. 2. 3.)). Same rules and "
        "keywords as tensor-from-data.");

  // ---- -like variants ----
  r.def("tensor-zeros-like", "(x :key dtype device requires-grad)",
        [](const at::Tensor& x, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::zeros_like(x, likeOptions(x, dtype, device)), rg);
        },
        "Zeros with the shape, dtype and device of X (:dtype and :device override).");
  r.def("tensor-ones-like", "(x :key dtype device requires-grad)",
        [](const at::Tensor& x, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::ones_like(x, likeOptions(x, dtype, device)), rg);
        },
        "Ones with the shape, dtype and device of X (:dtype and :device override).");
  r.def("tensor-empty-like", "(x :key dtype device requires-grad)",
        [](const at::Tensor& x, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::empty_like(x, likeOptions(x, dtype, device)), rg);
        },
        "An uninitialised tensor with the shape, dtype and device of X.");
  r.def("tensor-full-like", "(x fill-value :key dtype device requires-grad)",
        [](const at::Tensor& x, at::Scalar fill, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::full_like(x, fill, likeOptions(x, dtype, device)), rg);
        },
        "A tensor like X filled with FILL-VALUE.");
  r.def("tensor-rand-like", "(x :key dtype device requires-grad)",
        [](const at::Tensor& x, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::rand_like(x, likeOptions(x, dtype, device)), rg);
        },
        "Uniform random numbers in [0, 1) with the shape, dtype and device of X.");
  r.def("tensor-randn-like", "(x :key dtype device requires-grad)",
        [](const at::Tensor& x, OptType dtype, OptDev device, bool rg) {
          return withRequiresGrad(at::randn_like(x, likeOptions(x, dtype, device)), rg);
        },
        "Standard normal random numbers with the shape, dtype and device of X.");
  r.def("tensor-randint-like", "(x a :optional b :key dtype device requires-grad)",
        [](const at::Tensor& x, int64_t a, std::optional<int64_t> b, OptType dtype, OptDev device, bool rg) {
          at::TensorOptions o = likeOptions(x, dtype, device);
          return withRequiresGrad(b ? at::randint_like(x, a, *b, o) : at::randint_like(x, a, o), rg);
        },
        "Random integers like X: (tensor-randint-like X HIGH) or (tensor-randint-like X LOW HIGH).");

  // ---- random ----
  r.def("manual-seed", "(seed)",
        [](int64_t seed) {
          requireProcessAccess("manual-seed");
          seedDefaultGenerators(uint64_t(seed));
        },
        "Seeds every random number generator (CPU and all CUDA devices), as torch.manual_seed does: "
        "after (manual-seed 0), tensor-randn gives the same numbers as PyTorch after torch.manual_seed(0). "
        "In a data-loader worker process, the CPU generator only (CUDA cannot be used in a forked process).");
  sandbox(r, "manual-seed", Needs::Process, "global settings: seeds the global random generator");
  r.def("tensor-bernoulli", "(x :key p generator)",
        [](const at::Tensor& x, std::optional<double> p, OptGen gen) {
          return p ? at::bernoulli(x, *p, genOpt(gen)) : at::bernoulli(x, genOpt(gen));
        },
        "Draws 0/1 samples: each element is 1 with the probability given by the matching element of "
        "X, or with probability :p (for every element) when given. The result has X's shape and dtype. "
        ":generator draws from that generator.");
  r.def("tensor-multinomial", "(x num-samples :key replacement generator)",
        [](const at::Tensor& x, int64_t n, bool replacement, OptGen gen) {
          return at::multinomial(x, n, replacement, genOpt(gen));
        },
        "Indices drawn from the categorical distribution(s) with (unnormalised) weights X, one row "
        "per distribution. :replacement #t draws with replacement; :generator draws from that generator.");
  r.def("tensor-normal", "(mean std . size :key dtype device requires-grad generator)",
        [](TensorOrScalar mean, TensorOrScalar stdev, Shape size, OptType dtype, OptDev device, bool rg, OptGen gen) {
          at::Tensor t;
          if (mean.isTensor() || stdev.isTensor()) {
            if (!size.dims.empty())
              throwError("tensor-error", "tensor-normal: SIZE is only allowed when MEAN and STD are numbers");
            if (mean.isTensor() && stdev.isTensor()) t = at::normal(*mean.tensor, *stdev.tensor, genOpt(gen));
            else if (mean.isTensor()) t = at::normal(*mean.tensor, stdev.scalar.toDouble(), genOpt(gen));
            else t = at::normal(mean.scalar.toDouble(), *stdev.tensor, genOpt(gen));
            if (dtype || device) t = t.to(tensorOptions(dtype, device));
          } else {
            t = at::normal(mean.scalar.toDouble(), stdev.scalar.toDouble(), size.dims, genOpt(gen),
                           tensorOptions(dtype, device));
          }
          return withRequiresGrad(t, rg);
        },
        "Normal random numbers. With tensors MEAN and/or STD, one sample per element; with numbers, "
        "a tensor of shape SIZE (rest integers or one list): (tensor-normal 0 1 2 3).");

  // ---- inspection ----
  r.def("tensor?", "(x)", [](Value x) { return isTensor(x); }, "#t when X is a tensor.");
  r.def("tensor-shape", "(x)", [](const at::Tensor& x) { return intsToList(x.sizes()); },
        "The shape of X as a list of integers: (tensor-shape (tensor-zeros 2 3)) => (2 3).");
  r.def("tensor-size", "(x :optional dim)",
        [](const at::Tensor& x, std::optional<int64_t> dim) -> Value {
          if (dim) return makeInteger(x.size(*dim));
          return intsToList(x.sizes());
        },
        "The size of X along DIM (negative counts from the end), or its shape as a list.");
  r.def("tensor-stride", "(x :optional dim)",
        [](const at::Tensor& x, std::optional<int64_t> dim) -> Value {
          if (dim) return makeInteger(x.stride(*dim));
          return intsToList(x.strides());
        },
        "The stride of X along DIM (elements to step in storage), or all strides as a list (torch.Tensor.stride).");
  r.def("tensor-storage-offset", "(x)", [](const at::Tensor& x) { return int64_t(x.storage_offset()); },
        "The offset of X's first element in its storage, in elements (torch.Tensor.storage_offset).");
  r.def("tensor-shares-storage?", "(a b)",
        [](const at::Tensor& a, const at::Tensor& b) {
          return a.has_storage() && b.has_storage() && a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
        },
        "True when tensors A and B are views of one storage (writing to one can change the other).");
  r.def("tensor-view-as-real", "(x)", [](const at::Tensor& x) { return at::view_as_real(x); },
        "A complex tensor X seen as real numbers: a view with a last dimension of 2 (real, imaginary) "
        "(torch.view_as_real).");
  r.def("tensor-ndim", "(x)", [](const at::Tensor& x) { return int64_t(x.dim()); },
        "The number of dimensions of X.");
  r.def("tensor-numel", "(x)", [](const at::Tensor& x) { return int64_t(x.numel()); },
        "The number of elements of X.");
  r.def("tensor-dtype", "(x)", [](const at::Tensor& x) { return x.scalar_type(); },
        "The element type of X as a symbol: float32, float64, int64, bool ...");
  r.def("tensor-device", "(x)", [](const at::Tensor& x) { return x.device(); },
        "The device of X as a string: \"cpu\", \"cuda:0\" ...");
  r.def("tensor-element-size", "(x)", [](const at::Tensor& x) { return int64_t(x.element_size()); },
        "The size of one element of X in bytes.");
  r.def("tensor-data-ptr", "(x)", [](const at::Tensor& x) { return int64_t(reinterpret_cast<intptr_t>(x.data_ptr())); },
        "The address of X's first element, as an integer: two tensors sharing memory from the same element have "
        "the same one (Tensor.data_ptr() in PyTorch).");
  r.def("tensor-floating-point?", "(x)", [](const at::Tensor& x) { return x.is_floating_point(); },
        "#t when X has a floating-point dtype.");
  r.def("tensor-contiguous?", "(x)", [](const at::Tensor& x) { return x.is_contiguous(); },
        "#t when X is laid out contiguously in memory.");
  r.def("tensor-cuda?", "(x)", [](const at::Tensor& x) { return x.is_cuda(); },
        "#t when X lives on a CUDA device.");
  r.def("tensor->list", "(x)",
        [](const at::Tensor& x) { return tensorToNested(x, false, "tensor->list"); },
        "The elements of X as nested lists (floats as flonums, integers as exact integers, bool as "
        "booleans). A 0-d tensor gives its number.");
  r.def("tensor->vector", "(x)",
        [](const at::Tensor& x) { return tensorToNested(x, true, "tensor->vector"); },
        "The elements of X as nested vectors. A 0-d tensor gives its number.");
  r.def("tensor-item", "(x)",
        [](const at::Tensor& x) {
          if (x.numel() != 1)
            throwError("tensor-error", "tensor-item: a tensor with " + std::to_string(x.numel()) +
                                           " elements cannot be converted to a number (it needs exactly one)");
          return scalarToValue(x.item());
        },
        "The one element of X as a Purple number (or boolean).");

  // ---- copies ----
  r.def("tensor-clone", "(x)", [](const at::Tensor& x) { return x.clone(); },
        "A copy of X with its own storage (gradients flow back to X).");
  r.def("tensor-contiguous", "(x)", [](const at::Tensor& x) { return x.contiguous(); },
        "X laid out contiguously in memory (X itself when it already is).");

  registerTensorPrint(r);
}

}  // namespace purple
