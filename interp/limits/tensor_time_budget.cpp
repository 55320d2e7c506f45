// The time budget inside tensor operations (why and how: see the header).
#include "interp/limits/tensor_time_budget.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace purple {

namespace {

// Work is counted in multiply-adds or element visits. The rate is what one core reaches on dense
// matrix products here (about 13 GFLOP/s), rounded down: an operator refused would have needed
// most of the time left even at that speed, and slower kernels (a direct convolution runs at
// about a quarter of it) overshoot the budget by a bounded factor instead of without bound.
constexpr double kWorkPerSecondPerThread = 1e10;
// Kernels slower than a matrix product per step of work, measured here: a convolution with a
// large kernel takes LibTorch's direct path (3 GFLOP/s a core), and pooling compares elements
// one by one.
constexpr double kConvolutionSlowdown = 3;
constexpr double kPoolingSlowdown = 4;
// A recurrent layer multiplies small matrices one step after another: LSTM(64, 64) over 200,000
// steps did its 6.6e9 multiply-adds in 0.79 s (oneDNN, LibTorch 2.6, one core).
constexpr double kRecurrentSlowdown = 1.5;
// Below this, no operator is worth a clock read.
constexpr double kWorkWorthChecking = 1e8;
// Element-wise operators and reductions do more than one step per element (loads, the
// operation, stores); counting 4 keeps them comparable with multiply-adds.
constexpr double kWorkPerElement = 4;

thread_local std::string tRefusal;   // the refusal of an operator in progress on this thread

struct RefusalMark final : at::ObserverContext {};

using Inputs = c10::ArrayRef<const c10::IValue>;

const at::Tensor* tensorAt(Inputs in, size_t i) {
  if (i >= in.size() || !in[i].isTensor()) return nullptr;
  const at::Tensor& t = in[i].toTensor();
  return t.defined() ? &t : nullptr;
}

// The i-th argument as a list of integers (one integer is a list of one; None is empty).
std::vector<int64_t> intsAt(Inputs in, size_t i) {
  if (i >= in.size()) return {};
  if (in[i].isIntList()) return in[i].toIntVector();
  if (in[i].isInt()) return {in[i].toInt()};
  return {};
}

// Entry d of a per-dimension argument given for `dims` dimensions (one value stands for all).
int64_t perDim(const std::vector<int64_t>& v, size_t d, int64_t otherwise) {
  if (v.empty()) return otherwise;
  return v.size() == 1 ? v[0] : (d < v.size() ? v[d] : otherwise);
}

int64_t windowCount(int64_t size, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation) {
  int64_t span = dilation * (kernel - 1) + 1;
  if (stride <= 0) stride = 1;
  int64_t n = (size + 2 * padding - span) / stride + 1;
  return std::max<int64_t>(n, 0);
}

// The last two tensors are the factors (addmm, baddbmm and addbmm have the summand first):
// batch * n * k * m multiply-adds, the batch broadcast as matmul does.
double matrixProduct(Inputs in) {
  const at::Tensor* a = nullptr;
  const at::Tensor* b = nullptr;
  for (size_t i = 0; i < in.size(); i++)
    if (const at::Tensor* t = tensorAt(in, i)) {
      a = b;
      b = t;
    }
  if (!a || !b || a->dim() == 0 || b->dim() == 0) return 0;
  double n = a->dim() >= 2 ? double(a->size(-2)) : 1, k = double(a->size(-1));
  double m = b->dim() >= 2 ? double(b->size(-1)) : 1;
  double batchA = n * k > 0 ? double(a->numel()) / (n * k) : 0;
  double batchB = b->dim() >= 2 && k * m > 0 ? double(b->numel()) / (k * m) : 1;
  return std::max(batchA, batchB) * n * k * m;
}

// convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
// each output position of each image takes weight.numel() multiply-adds (for a transposed
// convolution, each input position scatters weight.numel()).
double convolution(Inputs in) {
  const at::Tensor* input = tensorAt(in, 0);
  const at::Tensor* weight = tensorAt(in, 1);
  if (!input || !weight || input->dim() < 3 || weight->dim() != input->dim()) return 0;
  auto stride = intsAt(in, 3), padding = intsAt(in, 4), dilation = intsAt(in, 5);
  bool transposed = in.size() > 6 && in[6].isBool() && in[6].toBool();
  double positions = double(input->size(0));
  for (int64_t d = 2; d < input->dim(); d++) {
    size_t s = size_t(d - 2);
    positions *= transposed ? double(input->size(d))
                            : double(windowCount(input->size(d), weight->size(d), perDim(stride, s, 1),
                                                 perDim(padding, s, 0), perDim(dilation, s, 1)));
  }
  return positions * double(weight->numel());
}

// convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
// transposed, ...): both gradients, each the forward's work.
double convolutionBackward(Inputs in) {
  const at::Tensor* gradOutput = tensorAt(in, 0);
  const at::Tensor* input = tensorAt(in, 1);
  const at::Tensor* weight = tensorAt(in, 2);
  if (!gradOutput || !input || !weight || input->dim() < 3) return 0;
  bool transposed = in.size() > 7 && in[7].isBool() && in[7].toBool();
  const at::Tensor* small = transposed ? input : gradOutput;
  double positions = double(small->numel()) / std::max<double>(1, double(small->size(1)));
  return 2 * positions * double(weight->numel());
}

// Pooling with a window over SPATIAL dimensions (1, 2 or 3, from the operator's name): every
// output visits its window. Forward: (self, kernel_size, stride, padding, ...); backward:
// (grad_output, self, kernel_size, ...), whose outputs are grad_output's.
double pooling(Inputs in, bool backward, int64_t spatial) {
  const at::Tensor* first = tensorAt(in, 0);
  if (!first) return 0;
  auto kernel = intsAt(in, backward ? 2 : 1);
  if (kernel.empty()) return 0;
  double window = 1;
  if (backward) {
    for (int64_t d = 0; d < spatial; d++) window *= double(perDim(kernel, size_t(d), 1));
    return double(first->numel()) * window;
  }
  auto stride = intsAt(in, 2), padding = intsAt(in, 3);
  // max pooling has dilation next; average pooling has ceil_mode (a bool) there
  auto dilation = in.size() > 4 && (in[4].isIntList() || in[4].isInt()) ? intsAt(in, 4) : std::vector<int64_t>{};
  spatial = std::min<int64_t>(spatial, first->dim());
  double outputs = double(first->numel());
  for (int64_t d = 0; d < spatial; d++) {
    int64_t axis = first->dim() - spatial + d;
    int64_t size = first->size(axis);
    int64_t k = perDim(kernel, size_t(d), 1);
    int64_t n = windowCount(size, k, perDim(stride, size_t(d), k), perDim(padding, size_t(d), 0),
                            perDim(dilation, size_t(d), 1));
    outputs = size > 0 ? outputs / double(size) * double(n) : 0;
    window *= double(k);
  }
  return outputs * window;
}

// Decompositions and solvers: a (batch of) m x n matrices costs about m * n * min(m, n) times a
// factor (about 10 for the iterative SVD and eigenvalue methods, 2 for the direct ones).
double cubic(Inputs in, double factor) {
  const at::Tensor* a = nullptr;
  for (size_t i = 0; i < in.size() && !a; i++)
    if (const at::Tensor* t = tensorAt(in, i); t && t->dim() >= 2) a = t;
  if (!a) return 0;
  double m = double(a->size(-2)), n = double(a->size(-1));
  double batch = m * n > 0 ? double(a->numel()) / (m * n) : 0;
  return factor * batch * m * n * std::min(m, n);
}

// Pairwise distances between the rows of x1 [.., P, M] and x2 [.., R, M] (three steps each).
double pairwise(Inputs in, size_t first) {
  const at::Tensor* x1 = tensorAt(in, first);
  const at::Tensor* x2 = tensorAt(in, first + 1);
  if (!x1 || !x2 || x1->dim() < 2 || x2->dim() < 2) return 0;
  return 3 * double(x1->numel()) * double(x2->size(-2));
}

// pdist(self [N, M]): N (N - 1) / 2 pairs.
double selfPairwise(Inputs in, size_t index) {
  const at::Tensor* x = tensorAt(in, index);
  if (!x || x->dim() != 2) return 0;
  return 1.5 * double(x->numel()) * double(x->size(0));
}

// Attention of queries [.., L, E] over keys [.., S, E]: the scores and the weighted sum.
double attention(Inputs in) {
  const at::Tensor* q = tensorAt(in, 0);
  const at::Tensor* k = tensorAt(in, 1);
  if (!q || !k || q->dim() < 2 || k->dim() < 2) return 0;
  return 2 * double(q->numel()) * double(k->size(-2));
}

// One layer of a recurrent network in one kernel (oneDNN's, which LibTorch 2.x runs LSTMs and GRUs
// on; 1.13 stepped through the sequence with a matrix product a step): every row of the input
// (each step of each sequence) is multiplied by the input weights and the hidden state by the
// hidden weights. (input, weight_ih, weight_hh, ...) forward and backward alike.
double recurrentLayer(Inputs in) {
  const at::Tensor* input = tensorAt(in, 0);
  const at::Tensor* wIh = tensorAt(in, 1);
  const at::Tensor* wHh = tensorAt(in, 2);
  if (!input || !wIh || !wHh || input->dim() < 2 || input->size(-1) == 0) return 0;
  double rows = double(input->numel()) / double(input->size(-1));
  return rows * double(wIh->numel() + wHh->numel());
}

enum class Formula { MatrixProduct, Convolution, ConvolutionBackward, Pool, PoolBackward, Cubic2, Cubic10,
                     Pairwise, PairwiseBackward, SelfPairwise, SelfPairwiseBackward, Attention, Recurrent,
                     RecurrentBackward };

const std::unordered_map<std::string_view, Formula>& formulas() {
  static const auto* table = new std::unordered_map<std::string_view, Formula>{
      {"aten::mm", Formula::MatrixProduct}, {"aten::addmm", Formula::MatrixProduct},
      {"aten::_addmm_activation", Formula::MatrixProduct}, {"aten::bmm", Formula::MatrixProduct},
      {"aten::baddbmm", Formula::MatrixProduct}, {"aten::addbmm", Formula::MatrixProduct},
      {"aten::matmul", Formula::MatrixProduct},
      {"aten::convolution", Formula::Convolution}, {"aten::_convolution", Formula::Convolution},
      {"aten::convolution_overrideable", Formula::Convolution},
      {"aten::convolution_backward", Formula::ConvolutionBackward},
      {"aten::max_pool1d", Formula::Pool}, {"aten::max_pool2d", Formula::Pool}, {"aten::max_pool3d", Formula::Pool},
      {"aten::max_pool1d_with_indices", Formula::Pool}, {"aten::max_pool2d_with_indices", Formula::Pool},
      {"aten::max_pool3d_with_indices", Formula::Pool}, {"aten::avg_pool1d", Formula::Pool},
      {"aten::avg_pool2d", Formula::Pool}, {"aten::avg_pool3d", Formula::Pool},
      {"aten::avg_pool2d_backward", Formula::PoolBackward}, {"aten::avg_pool3d_backward", Formula::PoolBackward},
      {"aten::max_pool2d_with_indices_backward", Formula::PoolBackward},
      {"aten::max_pool3d_with_indices_backward", Formula::PoolBackward},
      {"aten::_linalg_svd", Formula::Cubic10}, {"aten::linalg_svd", Formula::Cubic10}, {"aten::svd", Formula::Cubic10},
      {"aten::linalg_svdvals", Formula::Cubic10}, {"aten::_linalg_eigh", Formula::Cubic10},
      {"aten::linalg_eigh", Formula::Cubic10}, {"aten::linalg_eigvalsh", Formula::Cubic10},
      {"aten::linalg_eig", Formula::Cubic10}, {"aten::linalg_eigvals", Formula::Cubic10},
      {"aten::symeig", Formula::Cubic10}, {"aten::linalg_pinv", Formula::Cubic10}, {"aten::pinverse", Formula::Cubic10},
      {"aten::linalg_matrix_rank", Formula::Cubic10}, {"aten::linalg_cond", Formula::Cubic10},
      {"aten::linalg_lstsq", Formula::Cubic10}, {"aten::linalg_matrix_exp", Formula::Cubic10},
      {"aten::matrix_exp", Formula::Cubic10},
      {"aten::linalg_qr", Formula::Cubic2}, {"aten::qr", Formula::Cubic2}, {"aten::geqrf", Formula::Cubic2},
      {"aten::linalg_householder_product", Formula::Cubic2}, {"aten::orgqr", Formula::Cubic2},
      {"aten::ormqr", Formula::Cubic2}, {"aten::linalg_cholesky_ex", Formula::Cubic2},
      {"aten::linalg_cholesky", Formula::Cubic2}, {"aten::cholesky", Formula::Cubic2},
      {"aten::cholesky_solve", Formula::Cubic2}, {"aten::cholesky_inverse", Formula::Cubic2},
      {"aten::linalg_lu_factor_ex", Formula::Cubic2}, {"aten::linalg_lu_factor", Formula::Cubic2},
      {"aten::linalg_lu", Formula::Cubic2}, {"aten::_lu_with_info", Formula::Cubic2},
      {"aten::linalg_lu_solve", Formula::Cubic2}, {"aten::lu_solve", Formula::Cubic2},
      {"aten::linalg_inv_ex", Formula::Cubic2}, {"aten::linalg_inv", Formula::Cubic2}, {"aten::inverse", Formula::Cubic2},
      {"aten::linalg_solve_ex", Formula::Cubic2}, {"aten::_linalg_solve_ex", Formula::Cubic2},
      {"aten::linalg_solve", Formula::Cubic2}, {"aten::linalg_solve_triangular", Formula::Cubic2},
      {"aten::triangular_solve", Formula::Cubic2}, {"aten::_linalg_det", Formula::Cubic2},
      {"aten::linalg_det", Formula::Cubic2}, {"aten::det", Formula::Cubic2}, {"aten::_linalg_slogdet", Formula::Cubic2},
      {"aten::linalg_slogdet", Formula::Cubic2}, {"aten::slogdet", Formula::Cubic2}, {"aten::logdet", Formula::Cubic2},
      {"aten::linalg_ldl_factor_ex", Formula::Cubic2}, {"aten::linalg_ldl_solve", Formula::Cubic2},
      {"aten::_cdist_forward", Formula::Pairwise}, {"aten::_cdist_backward", Formula::PairwiseBackward},
      {"aten::_pdist_forward", Formula::SelfPairwise}, {"aten::_pdist_backward", Formula::SelfPairwiseBackward},
      {"aten::scaled_dot_product_attention", Formula::Attention},
      {"aten::_scaled_dot_product_attention", Formula::Attention},
      {"aten::_scaled_dot_product_flash_attention", Formula::Attention},
      {"aten::_scaled_dot_product_flash_attention_for_cpu", Formula::Attention},
      {"aten::_scaled_dot_product_efficient_attention", Formula::Attention},
      {"aten::mkldnn_rnn_layer", Formula::Recurrent}, {"aten::mkldnn_rnn_layer_backward", Formula::RecurrentBackward},
  };
  return *table;
}

// "max_pool3d_with_indices" -> 3.
int64_t spatialDims(std::string_view name) {
  if (name.find("3d") != std::string_view::npos) return 3;
  if (name.find("2d") != std::string_view::npos) return 2;
  return 1;
}

// Views, questions about a tensor and plain copies, whose estimate by input elements would be
// wrong: a view's input can stand for 10^12 elements of one expanded number at no cost, and a
// copy is bounded by the memory it allocates, which the tensor cap and the allocator refuse first.
bool boundedByMemory(std::string_view name) {
  static const auto* views = new std::unordered_set<std::string_view>{
      "aten::view", "aten::_unsafe_view", "aten::view_as", "aten::reshape", "aten::_reshape_alias",
      "aten::expand", "aten::expand_as", "aten::as_strided", "aten::select", "aten::slice", "aten::narrow",
      "aten::t", "aten::transpose", "aten::permute", "aten::movedim", "aten::squeeze", "aten::unsqueeze",
      "aten::detach", "aten::alias", "aten::unfold", "aten::diagonal", "aten::split", "aten::split_with_sizes",
      "aten::chunk", "aten::unbind", "aten::real", "aten::imag", "aten::view_as_real", "aten::view_as_complex",
      "aten::lift_fresh", "aten::size", "aten::stride", "aten::numel", "aten::dim", "aten::is_contiguous",
      "aten::is_nonzero", "aten::requires_grad_", "aten::set_requires_grad", "aten::retain_grad",
      "aten::_fw_primal", "aten::_make_dual", "aten::broadcast_to", "aten::expand_copy", "aten::resolve_conj",
      "aten::resolve_neg", "aten::_conj", "aten::_neg_view", "aten::conj", "aten::flatten", "aten::unflatten",
      "aten::contiguous", "aten::to", "aten::_to_copy", "aten::clone", "aten::copy_"};
  return views->count(name) != 0;
}

// The work of one operator call; 0 when an input lives on another device (asynchronous there).
double estimateWork(const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (!name || boundedByMemory(name)) return 0;
  Inputs in = fn.inputs();
  double elements = 0;
  for (const c10::IValue& v : in) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) continue;
      if (!t.device().is_cpu()) return 0;
      elements += double(t.numel());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector())
        if (t.defined()) elements += double(t.numel());
    }
  }
  double work = kWorkPerElement * elements;
  auto it = formulas().find(std::string_view(name));
  if (it == formulas().end()) return work;
  double special = 0;
  switch (it->second) {
    case Formula::MatrixProduct: special = matrixProduct(in); break;
    case Formula::Convolution: special = kConvolutionSlowdown * convolution(in); break;
    case Formula::ConvolutionBackward: special = kConvolutionSlowdown * convolutionBackward(in); break;
    case Formula::Pool: special = kPoolingSlowdown * pooling(in, false, spatialDims(name)); break;
    case Formula::PoolBackward: special = kPoolingSlowdown * pooling(in, true, spatialDims(name)); break;
    case Formula::Cubic2: special = cubic(in, 2); break;
    case Formula::Cubic10: special = cubic(in, 10); break;
    case Formula::Pairwise: special = pairwise(in, 0); break;
    case Formula::PairwiseBackward: special = pairwise(in, 1); break;
    case Formula::SelfPairwise: special = selfPairwise(in, 0); break;
    case Formula::SelfPairwiseBackward: special = selfPairwise(in, 1); break;
    case Formula::Attention: special = attention(in); break;
    case Formula::Recurrent: special = kRecurrentSlowdown * recurrentLayer(in); break;
    case Formula::RecurrentBackward: special = 2 * kRecurrentSlowdown * recurrentLayer(in); break;
  }
  return std::max(work, special);
}

std::string shortNumber(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", x);
  return buf;
}

std::unique_ptr<at::ObserverContext> onOperatorStart(const at::RecordFunction& fn) {
  Interp* in = Interp::current();
  if (!in || !in->hasDeadline || !tRefusal.empty()) return nullptr;
  double work = 0;
  try {
    work = estimateWork(fn);
  } catch (...) {
    return nullptr;   // a tensor kind without sizes (nested, say): LibTorch would log every throw
  }
  if (work < kWorkWorthChecking) return nullptr;
  double left = std::chrono::duration<double>(in->deadline - std::chrono::steady_clock::now()).count();
  double fits = kWorkPerSecondPerThread * double(std::max(1, at::get_num_threads())) * std::max(left, 0.0);
  if (work <= fits) return nullptr;
  std::string name = fn.name() ? fn.name() : "a tensor operation";
  if (name.rfind("aten::", 0) == 0) name = name.substr(6);
  tRefusal = "tensor operation too big for the time budget: " + name + " needs about " + shortNumber(work) +
             " operations, and about " + shortNumber(fits) + " fit in the " + shortNumber(std::max(left, 0.0)) +
             " s left";
  return std::make_unique<RefusalMark>();
}

// The operator ended (it allocated nothing after all, or it raised): its refusal goes with it.
void onOperatorEnd(const at::RecordFunction&, at::ObserverContext* mark) {
  if (mark) tRefusal.clear();
}

}  // namespace

uint64_t beginTensorTimeBudget() {
  return at::addThreadLocalCallback(at::RecordFunctionCallback(&onOperatorStart, &onOperatorEnd)
                                        .needsInputs(true)
                                        .scopes({at::RecordScope::FUNCTION}));
}

void endTensorTimeBudget(uint64_t handle) {
  if (handle) at::removeCallback(handle);
  tRefusal.clear();
}

void checkTensorWorkAtAllocation(Interp& in) {
  // Every CPU allocation passes here: the usual case is two loads, no call into LibTorch.
  if (tRefusal.empty() && !in.attention.load(std::memory_order_relaxed)) return;
  if (at::in_parallel_region()) return;   // an exception must not leave an OpenMP region
  if (!tRefusal.empty()) {
    std::string message = std::move(tRefusal);
    tRefusal.clear();
    // A stop like the budget's own: what runs out is the same budget, so Purple code cannot
    // catch it either (docs/embedding.md).
    throw PurpleInterrupt(makeError(intern("time-limit"), message, Value::nil()));
  }
  in.poll();
}

}  // namespace purple
