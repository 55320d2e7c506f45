// Indexing: element access, slicing, Python-style multi-dimensional indexing, selection by index
// tensors and masks, sorting and searching.
//
// Index items (tensor-index, tensor-index-put!), one per dimension, as in Python's x[a, b, ...]:
//   3, -1             an integer selects one entry (negatives count from the end), dropping the dim
//   '(1 5) '(1 #f 2)  a list (start end step) is a range start:end:step; #f (or a missing
//                     element) takes the default, so '(2) is 2: and '(#f #f 2) is ::2
//   :all              the whole dimension (Python's `:`)
//   :new              a new dimension of size 1 (Python's None / np.newaxis)
//   :...              as many :all as needed (Python's `...`); :ellipsis also works
//   a bool tensor     a mask; an integer tensor (or a vector such as #(0 2)) picks entries
//   #t / #f           Python's x[True] / x[False]
// The symbols 'all, 'new, '... and 'ellipsis are accepted too.
#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>
#include "builtins/tensor/util.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include <type_traits>
#include <vector>

namespace purple {

namespace {

using at::indexing::TensorIndex;

struct IndexItems { std::vector<TensorIndex> items; };
// tensor-index-put!'s INDICES: a list of items, or one item that is not a list.
struct IndexSpec { std::vector<TensorIndex> items; };

std::optional<int64_t> sliceBound(Value v, const PrimitiveInfo* info, int i) {
  if (v.isFalse()) return std::nullopt;
  return intElement(v, info, i);
}

TensorIndex indexItem(Value v, const PrimitiveInfo* info, int i) {
  if (v.isFixnum()) return TensorIndex(int64_t(v.fixnum()));
  if (v.isBool()) return TensorIndex(v.isTrue());
  if (v.is(Kind::Symbol)) {
    auto name = symbolName(v);
    if (name == "all") return TensorIndex(at::indexing::Slice());
    if (name == "new" || name == "newaxis" || name == "none") return TensorIndex(at::indexing::None);
    if (name == "..." || name == "ellipsis") return TensorIndex(at::indexing::Ellipsis);
    throwError("tensor-error", info->name + ": unknown index " + std::string(name) +
                                   " (expected :all, :new or :...)",
               cons(v, Value::nil()));
  }
  if (isTensor(v)) {
    if (!tensorOf(v).defined()) throwError("tensor-error", info->name + ": an index tensor was already freed");
    return TensorIndex(tensorOf(v));
  }
  if (v.is(Kind::Vector)) return TensorIndex(tensorFromData(v, std::nullopt, info->name));
  if (v.isNil() || isPair(v)) {
    size_t n = listLength(v);
    if (n == SIZE_MAX || n > 3) throwConversionError(info, i, "a range list (start end step)", v);
    Value parts[3] = {Value::f(), Value::f(), Value::f()};
    size_t k = 0;
    for (Value p = v; isPair(p); p = cdr(p)) parts[k++] = car(p);
    auto start = sliceBound(parts[0], info, i), stop = sliceBound(parts[1], info, i),
         step = sliceBound(parts[2], info, i);
    int64_t st = step ? *step : 1;
    if (st <= 0) throwError("tensor-error", info->name + ": a range step must be greater than zero", cons(v, Value::nil()));
    return TensorIndex(at::indexing::Slice(start ? *start : 0, stop ? *stop : at::indexing::INDEX_MAX, st));
  }
  if (isExactInteger(v) || isFlonum(v)) return TensorIndex(intElement(v, info, i));
  throwConversionError(info, i, "an index (integer, range list, :all, :new, :..., or tensor)", v);
}

}  // namespace

template <> struct Convert<IndexItems> {
  static constexpr bool keepsValue = false;
  static IndexItems from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    IndexItems r;
    if (v.isMissing()) return r;
    for (Value p = v; isPair(p); p = cdr(p)) r.items.push_back(indexItem(car(p), info, i));
    return r;
  }
};

template <> struct Convert<IndexSpec> {
  static constexpr bool keepsValue = false;
  static IndexSpec from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    IndexSpec r;
    if (v.isMissing()) throwConversionError(info, i, "a list of index items", v);
    if (isPair(v) || v.isNil()) {
      if (!isList(v)) throwConversionError(info, i, "a list of index items", v);
      for (Value p = v; isPair(p); p = cdr(p)) r.items.push_back(indexItem(car(p), info, i));
    } else {
      r.items.push_back(indexItem(v, info, i));
    }
    return r;
  }
};

namespace {

// Slice bounds are int64_t in LibTorch 1.13 and c10::SymInt in 2.x.
template <class T> int64_t plainInt(const T& v) {
  if constexpr (std::is_integral_v<T>) return v;
  else return v.expect_int();
}

const at::Tensor& target(Value v, const char* who) {
  if (!isTensor(v))
    throwError("type-error", std::string(who) + ": argument 1 must be a tensor, got " + describeValueType(v),
               cons(v, Value::nil()));
  const at::Tensor& t = tensorOf(v);
  if (!t.defined()) throwError("tensor-error", std::string(who) + ": argument 1 is a tensor that was already freed");
  return t;
}

Value tensors(std::initializer_list<at::Tensor> ts) {
  Value items[4];
  size_t n = 0;
  for (const auto& t : ts) items[n++] = wrapTensor(t);
  return listFromArray(items, n);
}

}  // namespace

void registerTensorIndexing(Registry& r) {
  r.def("tensor-ref", "(x . indices)",
        [](const at::Tensor& x, Shape idx) -> Value {
          at::Tensor t = x;
          for (int64_t i : idx.dims) {
            if (t.dim() == 0)
              throwError("tensor-error", "tensor-ref: too many indices (" + std::to_string(idx.dims.size()) +
                                             ") for a tensor of " + std::to_string(x.dim()) + " dimensions");
            t = t.select(0, i);
          }
          if (t.dim() == 0) return scalarToValue(t.item());
          return wrapTensor(t);
        },
        "The element of X at the integer INDICES (negatives count from the end) as a Purple "
        "number, or, with fewer indices than dimensions, the sub-tensor there (a view): "
        "(tensor-ref m 0 -1).");
  r.def("tensor-slice", "(x dim :optional start end (step 1))",
        [](const at::Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
          return at::slice(x, dim, copt(start), copt(end), step);
        },
        "A view of X along DIM from START (inclusive) to END (exclusive) by STEP, like Python's "
        "x[start:end:step] on that dimension. START and END may be negative, or #f for the ends.");
  r.def("tensor-index", "(x . indices)",
        [](const at::Tensor& x, IndexItems idx) { return x.index(idx.items); },
        "X indexed like Python's x[i, j, ...], one item per dimension: an integer, a range list "
        "'(start end step) (#f for a default), :all, :new (a new axis), :... (the rest), a bool "
        "mask tensor or an integer index tensor (or vector). Example: (tensor-index x :all '(1 3)) "
        "is x[:, 1:3]; (tensor-index x (tensor-gt x 0)) is x[x > 0].");
  r.def("tensor-index-put!", "(x indices values :key accumulate)",
        [](Value xv, IndexSpec spec, TensorOrScalar values, bool accumulate) {
          // The TensorIndex overloads of index_put_ are non-const in 1.13; this handle shares X's impl.
          at::Tensor x = target(xv, "tensor-index-put!");
          std::vector<TensorIndex>& items = spec.items;
          if (accumulate) {
            // index_put_ with accumulation takes index tensors only (a missing one means `:`).
            c10::List<c10::optional<at::Tensor>> list;
            for (auto& it : items) {
              if (it.is_tensor()) list.push_back(it.tensor());
              else if (it.is_integer())
                list.push_back(at::scalar_tensor(it.integer(), x.options().dtype(at::kLong)));
              else if (it.is_slice() && plainInt(it.slice().start()) == 0 && plainInt(it.slice().step()) == 1 &&
                       plainInt(it.slice().stop()) == at::indexing::INDEX_MAX)
                list.push_back(c10::nullopt);
              else
                throwError("tensor-error", "tensor-index-put!: with :accumulate, indices must be integers, "
                                           "index tensors or :all");
            }
            x.index_put_(list, operandTensor(values, x.device()), true);
          } else if (values.isTensor()) {
            x.index_put_(items, *values.tensor);
          } else {
            x.index_put_(items, values.scalar);
          }
          return xv;
        },
        "Sets the entries of X selected by INDICES (a list of index items as for tensor-index, "
        "or one item such as a mask tensor) to VALUES (a tensor that broadcasts, or a number); "
        "returns X. With :accumulate #t, VALUES are added instead (repeated indices add up). "
        "Example: (tensor-index-put! x (list 0 :all) 5) is x[0, :] = 5.", kPrimTensorFunction);
  r.def("tensor-index-select", "(x dim index)",
        [](const at::Tensor& x, int64_t dim, const at::Tensor& index) { return at::index_select(x, dim, index); },
        "The entries of X along DIM at the positions in the 1-d integer tensor INDEX.");
  r.def("tensor-gather", "(x dim index)",
        [](const at::Tensor& x, int64_t dim, const at::Tensor& index) { return at::gather(x, dim, index); },
        "Values of X along DIM at INDEX (an int64 tensor of the output's shape): "
        "out[i][j] = x[index[i][j]][j] for DIM 0.");
  r.def("tensor-scatter", "(x dim index src :key reduce)",
        [](const at::Tensor& x, int64_t dim, const at::Tensor& index, TensorOrScalar src,
           std::optional<std::string> reduce) {
          if (reduce) {
            if (src.isTensor()) return at::scatter(x, dim, index, *src.tensor, c10::string_view(*reduce));
            return at::scatter(x, dim, index, src.scalar, c10::string_view(*reduce));
          }
          if (src.isTensor()) return at::scatter(x, dim, index, *src.tensor);
          return at::scatter(x, dim, index, src.scalar);
        },
        "A copy of X with SRC (a tensor or a number) written at INDEX along DIM, the inverse of "
        "tensor-gather. :reduce \"add\" or \"multiply\" combines instead of overwriting.");
  r.def("tensor-scatter-add", "(x dim index src)",
        [](const at::Tensor& x, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
          return at::scatter_add(x, dim, index, src);
        },
        "A copy of X with SRC added at INDEX along DIM (repeated indices add up).");
  r.def("tensor-masked-fill", "(x mask value)",
        [](const at::Tensor& x, const at::Tensor& mask, TensorOrScalar value) {
          return value.isTensor() ? at::masked_fill(x, mask, *value.tensor) : at::masked_fill(x, mask, value.scalar);
        },
        "A copy of X with VALUE (a number or 0-d tensor) where the bool tensor MASK is #t.");
  r.def("tensor-masked-fill!", "(x mask value)",
        [](Value xv, const at::Tensor& mask, TensorOrScalar value) {
          const at::Tensor& x = target(xv, "tensor-masked-fill!");
          if (value.isTensor()) x.masked_fill_(mask, *value.tensor);
          else x.masked_fill_(mask, value.scalar);
          return xv;
        },
        "Sets X to VALUE where the bool tensor MASK is #t, in place; returns X.", kPrimTensorFunction);
  r.def("tensor-masked-select", "(x mask)",
        [](const at::Tensor& x, const at::Tensor& mask) { return at::masked_select(x, mask); },
        "A 1-d tensor of the elements of X where the bool tensor MASK (broadcast) is #t.");
  r.def("tensor-take", "(x index)",
        [](const at::Tensor& x, const at::Tensor& index) { return at::take(x, index); },
        "The elements of X, seen as 1-d, at the integer tensor INDEX.");
  r.def("tensor-nonzero", "(x :key as-tuple)",
        [](const at::Tensor& x, bool asTuple) -> Value {
          if (!asTuple) return wrapTensor(at::nonzero(x));
          Value r = Value::nil();
          auto parts = at::nonzero_numpy(x);
          for (size_t k = parts.size(); k-- > 0;) r = cons(wrapTensor(parts[k]), r);
          return r;
        },
        "The indices of the non-zero elements of X: an N x ndim int64 tensor, or with :as-tuple #t "
        "a list of one 1-d index tensor per dimension.");
  r.def("tensor-sort", "(x :optional dim descending :key dim descending stable)",
        [](const at::Tensor& x, std::optional<int64_t> dimPos, bool descPos, std::optional<int64_t> dim,
           bool descending, bool stable) {
          return at::sort(x, c10::optional<bool>(stable), dim ? *dim : dimPos ? *dimPos : -1, descending || descPos);
        },
        "A list (values indices): X sorted along :dim (default the last), ascending unless "
        ":descending #t; :stable #t keeps equal elements in order.");
  r.def("tensor-argsort", "(x :optional dim descending :key dim descending)",
        [](const at::Tensor& x, std::optional<int64_t> dimPos, bool descPos, std::optional<int64_t> dim,
           bool descending) {
          return at::argsort(x, dim ? *dim : dimPos ? *dimPos : -1, descending || descPos);
        },
        "The indices that sort X along :dim (default the last).");
  r.def("tensor-topk", "(x k :optional dim :key dim (largest #t) (sorted #t))",
        [](const at::Tensor& x, int64_t k, std::optional<int64_t> dimPos, std::optional<int64_t> dim,
           bool largest, bool sorted) {
          return at::topk(x, k, dim ? *dim : dimPos ? *dimPos : -1, largest, sorted);
        },
        "A list (values indices) of the K largest elements of X along :dim (default the last); "
        ":largest #f gives the smallest.");
  r.def("tensor-kthvalue", "(x k :optional dim :key dim keepdim)",
        [](const at::Tensor& x, int64_t k, std::optional<int64_t> dimPos, std::optional<int64_t> dim, bool keepdim) {
          return at::kthvalue(x, k, dim ? *dim : dimPos ? *dimPos : -1, keepdim);
        },
        "A list (values indices) of the K-th smallest element of X along :dim (K counts from 1).");
  r.def("tensor-unique", "(x :key (sorted #t) return-inverse return-counts dim)",
        [](const at::Tensor& x, bool sorted, bool inverse, bool counts, std::optional<int64_t> dim) -> Value {
          std::tuple<at::Tensor, at::Tensor, at::Tensor> u =
              dim ? at::unique_dim(x, *dim, sorted, inverse, counts) : at::_unique2(x, sorted, inverse, counts);
          if (!inverse && !counts) return wrapTensor(std::get<0>(u));
          if (inverse && counts) return tensors({std::get<0>(u), std::get<1>(u), std::get<2>(u)});
          return tensors({std::get<0>(u), inverse ? std::get<1>(u) : std::get<2>(u)});
        },
        "The distinct elements of X (sorted by default), or distinct slices along :dim. With "
        ":return-inverse and/or :return-counts, a list (values [inverse] [counts]).");
  r.def("tensor-searchsorted", "(sorted-sequence values :key right)",
        [](const at::Tensor& seq, TensorOrScalar values, bool right) {
          if (values.isTensor()) return at::searchsorted(seq, *values.tensor, false, right);
          return at::searchsorted(seq, values.scalar, false, right);
        },
        "The indices where VALUES would be inserted into the sorted last dimension of "
        "SORTED-SEQUENCE to keep it sorted; :right #t places them after equal entries.");
}

}  // namespace purple
