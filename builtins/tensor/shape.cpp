// Shape operations: views and copies that rearrange elements without computing on them, and
// joining and splitting tensors. Functions that give several tensors return a list.
// Optional dimensions are keywords (:dim 1) and, as in PyTorch, may also come positionally.
#include <ATen/ATen.h>
#include "builtins/tensor/util.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include <algorithm>

namespace purple {

namespace {

// An integer or a list of integers, remembering which (split takes a size or a list of sizes).
struct IntOrList {
  bool isList = false;
  IntList values;
};

}  // namespace

template <> struct Convert<IntOrList> {
  static constexpr bool keepsValue = false;
  static IntOrList from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    IntOrList r;
    if (v.isMissing()) throwConversionError(info, i, "an integer or a list of integers", v);
    if (isSequence(v)) {
      r.isList = true;
      r.values = intSequence(v, info, i);
    } else {
      r.values.push_back(intElement(v, info, i));
    }
    return r;
  }
};

void registerTensorShape(Registry& r) {
  r.def("tensor-reshape", "(x . shape)",
        [](const at::Tensor& x, Shape s) { return at::reshape(x, s.dims); },
        "X with a new shape holding the same elements (a view when possible, else a copy). One "
        "dimension may be -1 to be inferred: (tensor-reshape x 2 -1) or (tensor-reshape x '(2 -1)).");
  r.def("tensor-view", "(x . shape)",
        [](const at::Tensor& x, Shape s) { return x.view(s.dims); },
        "A view of X with a new shape sharing its storage (X must be laid out compatibly; see "
        "tensor-reshape). One dimension may be -1.");
  r.def("tensor-view-as", "(x other)",
        [](const at::Tensor& x, const at::Tensor& other) { return x.view_as(other); },
        "A view of X with the shape of OTHER.");
  r.def("tensor-reshape-as", "(x other)",
        [](const at::Tensor& x, const at::Tensor& other) { return x.reshape_as(other); },
        "X reshaped to the shape of OTHER.");
  r.def("tensor-permute", "(x . dims)",
        [](const at::Tensor& x, Shape dims) { return x.permute(dims.dims); },
        "A view of X with its dimensions reordered: (tensor-permute x 2 0 1) or (tensor-permute x '(2 0 1)).");
  r.def("tensor-movedim", "(x source destination)",
        [](const at::Tensor& x, Dims src, Dims dst) { return at::movedim(x, src.dims, dst.dims); },
        "A view of X with dimension(s) SOURCE moved to position(s) DESTINATION.");
  r.def("tensor-squeeze", "(x :optional dim :key dim)",
        [](const at::Tensor& x, std::optional<Dims> dimPos, std::optional<Dims> dim) {
          if (!dim) dim = dimPos;
          if (!dim) return at::squeeze(x);
          // Squeeze the highest dimension first so the lower indices stay valid.
          IntList ds = dim->dims;
          for (auto& d : ds) d = c10::maybe_wrap_dim(d, x.dim());
          std::sort(ds.rbegin(), ds.rend());
          at::Tensor t = x;
          for (int64_t d : ds) t = at::squeeze(t, d);
          return t;
        },
        "X without its dimensions of size 1, or only :dim (an integer or a list) when that has size 1.");
  r.def("tensor-unsqueeze", "(x dim)",
        [](const at::Tensor& x, int64_t dim) { return at::unsqueeze(x, dim); },
        "A view of X with a new dimension of size 1 inserted at DIM: (tensor-unsqueeze x 0).");
  r.def("tensor-flatten", "(x :optional start-dim end-dim :key start-dim end-dim)",
        [](const at::Tensor& x, std::optional<int64_t> startPos, std::optional<int64_t> endPos,
           std::optional<int64_t> start, std::optional<int64_t> end) {
          return at::flatten(x, start ? *start : startPos ? *startPos : 0, end ? *end : endPos ? *endPos : -1);
        },
        "X with dimensions :start-dim .. :end-dim merged into one (all of them by default).");
  r.def("tensor-unflatten", "(x dim sizes)",
        [](const at::Tensor& x, int64_t dim, Shape sizes) { return x.unflatten(dim, sizes.dims); },
        "X with dimension DIM split into the dimensions SIZES (a list; one may be -1).");
  r.def("tensor-expand", "(x . sizes)",
        [](const at::Tensor& x, Shape s) { return x.expand(s.dims); },
        "A view of X broadcast to SIZES (size-1 dimensions repeat without copying; -1 keeps a size).");
  r.def("tensor-expand-as", "(x other)",
        [](const at::Tensor& x, const at::Tensor& other) { return x.expand_as(other); },
        "A view of X broadcast to the shape of OTHER.");
  r.def("tensor-broadcast-to", "(x . shape)",
        [](const at::Tensor& x, Shape s) { return at::broadcast_to(x, s.dims); },
        "A view of X broadcast to SHAPE.");
  r.def("tensor-repeat", "(x . sizes)",
        [](const at::Tensor& x, Shape s) { return x.repeat(s.dims); },
        "X tiled SIZES times along each dimension (a copy): (tensor-repeat x 2 1).");
  r.def("tensor-tile", "(x . dims)",
        [](const at::Tensor& x, Shape s) { return at::tile(x, s.dims); },
        "X repeated DIMS times along each dimension, padding DIMS with ones on the left.");
  r.def("tensor-cat", "(tensors :optional dim :key dim)",
        [](TensorList ts, std::optional<int64_t> dimPos, std::optional<int64_t> dim) {
          return at::cat(ts.items, dim ? *dim : dimPos ? *dimPos : 0);
        },
        "The tensors of the list TENSORS joined along an existing dimension: "
        "(tensor-cat (list a b) :dim 1).");
  r.def("tensor-stack", "(tensors :optional dim :key dim)",
        [](TensorList ts, std::optional<int64_t> dimPos, std::optional<int64_t> dim) {
          return at::stack(ts.items, dim ? *dim : dimPos ? *dimPos : 0);
        },
        "The same-shaped tensors of the list TENSORS joined along a new dimension :dim.");
  r.def("tensor-hstack", "(tensors)", [](TensorList ts) { return at::hstack(ts.items); },
        "The tensors of the list TENSORS joined column-wise (along dim 1; dim 0 for 1-d tensors).");
  r.def("tensor-vstack", "(tensors)", [](TensorList ts) { return at::vstack(ts.items); },
        "The tensors of the list TENSORS joined row-wise (1-d tensors become rows).");
  r.def("tensor-split", "(x split-size-or-sections :optional dim :key dim)",
        [](const at::Tensor& x, IntOrList s, std::optional<int64_t> dimPos, std::optional<int64_t> dimKey) {
          int64_t dim = dimKey ? *dimKey : dimPos ? *dimPos : 0;
          return s.isList ? at::split_with_sizes(x, s.values, dim) : at::split(x, s.values[0], dim);
        },
        "A list of views of X along :dim: pieces of SPLIT-SIZE (the last may be smaller), or of "
        "the sizes in the list SECTIONS: (tensor-split x 2) or (tensor-split x '(1 3) :dim 1).");
  r.def("tensor-chunk", "(x chunks :optional dim :key dim)",
        [](const at::Tensor& x, int64_t chunks, std::optional<int64_t> dimPos, std::optional<int64_t> dim) {
          return at::chunk(x, chunks, dim ? *dim : dimPos ? *dimPos : 0);
        },
        "A list of at most CHUNKS views of X of (nearly) equal size along :dim.");
  r.def("tensor-unbind", "(x :optional dim :key dim)",
        [](const at::Tensor& x, std::optional<int64_t> dimPos, std::optional<int64_t> dim) {
          return at::unbind(x, dim ? *dim : dimPos ? *dimPos : 0);
        },
        "A list of the slices of X along :dim, each without that dimension.");
  r.def("tensor-flip", "(x dims)",
        [](const at::Tensor& x, Dims dims) { return at::flip(x, dims.dims); },
        "A copy of X with the order of elements reversed along DIMS (an integer or a list).");
  r.def("tensor-roll", "(x shifts :key dims)",
        [](const at::Tensor& x, Dims shifts, std::optional<Dims> dims) {
          return at::roll(x, shifts.dims, dims ? dims->dims : IntList{});
        },
        "X with elements shifted by SHIFTS along :dims (wrapping around); without :dims, the "
        "flattened tensor is rolled and the shape restored.");
  r.def("tensor-narrow", "(x dim start length)",
        [](const at::Tensor& x, int64_t dim, int64_t start, int64_t length) {
          return at::narrow(x, dim, start, length);
        },
        "A view of X holding LENGTH entries from START along DIM: (tensor-narrow x 0 0 10).");

  r.def("tensor-repeat-interleave", "(x repeats :key dim output-size)",
        [](const at::Tensor& x, Value repeats, std::optional<int64_t> dim, std::optional<int64_t> outputSize) {
          c10::optional<int64_t> d = copt(dim);
          if (repeats.isFixnum()) {
            if (repeats.fixnum() < 0) throwError("value-error", "tensor-repeat-interleave: repeats must be non-negative");
            return at::repeat_interleave(x, repeats.fixnum(), d, copt(outputSize));
          }
          at::Tensor r = isTensor(repeats) ? tensorOf(repeats) : tensorFromData(repeats, at::kLong, "tensor-repeat-interleave");
          if (r.is_floating_point()) throwError("type-error", "tensor-repeat-interleave: repeats must be integers");
          return at::repeat_interleave(x, r.to(at::kLong), d, copt(outputSize));
        },
        "X with each element repeated REPEATS times (torch.repeat_interleave): REPEATS is an integer or one count per "
        "element along :dim (a list or a tensor). Without :dim X is flattened first. (tensor-repeat-interleave #[1 2] "
        "2) is #[1 1 2 2].", kPrimTensorFunction);
  r.def("tensor-meshgrid", "(. tensors :key (indexing \"ij\"))",
        [](RestArgs rest, std::string indexing) {
          if (indexing != "ij" && indexing != "xy")
            throwError("value-error", "tensor-meshgrid: :indexing must be \"ij\" or \"xy\", got \"" + indexing + "\"");
          std::vector<at::Tensor> ts;
          auto add = [&](Value v) {
            if (!isTensor(v)) throwTypeError("tensor-meshgrid", int(ts.size()) + 1, "a tensor", v);
            ts.push_back(tensorOf(v));
          };
          Value l = rest.list;
          if (isPair(l) && cdr(l).isNil() && (isPair(car(l)) || car(l).isNil())) {   // one list of tensors
            l = car(l);
            if (!isList(l)) throwTypeError("tensor-meshgrid", 1, "a proper list of tensors", l);
          }
          for (Value p = l; isPair(p); p = cdr(p)) add(car(p));
          for (auto& t : ts)
            if (t.dim() > 1) throwError("value-error", "tensor-meshgrid: every tensor must be 0-d or 1-d");
          return at::meshgrid(ts, indexing);
        },
        "Coordinate grids from 1-d TENSORS (given as arguments or one list) (torch.meshgrid): a list of tensors, each "
        "of shape (n1, n2, ...), the k-th varying along dimension k with :indexing \"ij\" (the default) or swapping "
        "the first two dimensions with \"xy\" (Cartesian, as NumPy).");
}

}  // namespace purple
