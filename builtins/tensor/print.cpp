// The tensor literal and the tensor printer.
//
// Printed form (documented in docs and `(help 'tensor-set-print-options!)`):
//   - A small CPU tensor without gradient tracking whose dtype is what its literal reads as
//     (float32, int64, bool) prints as that literal, which reads back to an equal tensor:
//       #[1. 2. 3.]      #[[1 2]        #[#t #f]
//                          [3 4]]
//     Floats are written in the shortest form that reads back to the same float32 (or float64)
//     value, always with a `.` or an exponent so they read as flonums; NaN and infinities are
//     +nan.0, +inf.0 and -inf.0. Rows of matrices go on separate lines, aligned under the first.
//   - Anything else is wrapped as #<tensor BODY ANNOTATIONS>, where the annotations are present
//     only when they differ from the defaults:
//       #<tensor #[1. 2.] dtype=float64 device=cuda:0 requires-grad>
//       #<tensor #[2. 4.] grad-fn=MulBackward0>
//       #<tensor 6.>                              (0-d tensors have no literal)
//       #<tensor #[0. 1. 2. ... 997. 998. 999.] shape=(1000000)>
//     Tensors with more elements than the threshold (1000) are summarised as PyTorch does: the
//     first and last `edgeitems` (3) entries of each long dimension around `...`, plus the shape.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include "builtins/tensor/util.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_hooks.hpp"
#include "interp/memory/tensor_value.hpp"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

struct PrintOptions {
  int precision = 0;          // significant digits; 0: shortest form that reads back exactly
  int64_t threshold = 1000;   // more elements than this: summarise
  int64_t edgeItems = 3;
};
PrintOptions gPrint;

std::string cleanExponent(std::string s) {
  // "1e-05" -> "1e-5", "1e+20" -> "1e20": shorter, and still what every Scheme reader takes.
  auto e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  bool neg = !exp.empty() && exp[0] == '-';
  if (!exp.empty() && (exp[0] == '-' || exp[0] == '+')) exp = exp.substr(1);
  size_t nz = exp.find_first_not_of('0');
  exp = nz == std::string::npos ? "0" : exp.substr(nz);
  return mant + "e" + (neg ? "-" : "") + exp;
}

// The precision a float element was stored in: shortest digits are judged against it, so a
// float16 0.1 prints as 0.1 rather than as the float32 digits of its rounded value.
enum class Width { Double, Single, Half, BFloat16 };

bool sameAt(Width w, const char* text, double d) {
  switch (w) {
    case Width::Double: return std::strtod(text, nullptr) == d;
    case Width::Single: return std::strtof(text, nullptr) == float(d);
    case Width::Half: return float(c10::Half(std::strtof(text, nullptr))) == float(c10::Half(float(d)));
    case Width::BFloat16:
      return float(c10::BFloat16(std::strtof(text, nullptr))) == float(c10::BFloat16(float(d)));
  }
  return false;
}

std::string formatReal(double d, Width width) {
  if (std::isnan(d)) return "+nan.0";
  if (std::isinf(d)) return d > 0 ? "+inf.0" : "-inf.0";
  char buf[64];
  // Whole numbers print as "20." rather than %g's "2e+01"; huge ones keep the exponent.
  if (d == std::floor(d) && std::fabs(d) < 1e16 && gPrint.precision == 0) {
    std::snprintf(buf, sizeof buf, "%.0f.", d);
    return buf;
  }
  if (gPrint.precision > 0) {
    std::snprintf(buf, sizeof buf, "%.*g", gPrint.precision, d);
  } else {
    int maxDigits = width == Width::Double ? 17 : 9;
    for (int p = 1; p <= maxDigits; p++) {
      std::snprintf(buf, sizeof buf, "%.*g", p, d);
      if (sameAt(width, buf, d)) break;
    }
  }
  std::string s = cleanExponent(buf);
  if (s.find_first_of(".e") == std::string::npos) s += ".";
  return s;
}

struct Body {
  std::vector<std::string> items;   // row-major over the (possibly summarised) tensor
  std::vector<int64_t> sizes;       // of the summarised tensor
  std::vector<bool> cut;            // per dim: `...` goes after edgeItems entries
  size_t width = 0;
};

Body formatElements(at::Tensor t, bool summarise) {
  Body b;
  for (int64_t d = 0; d < t.dim(); d++) {
    bool cut = summarise && t.size(d) > 2 * gPrint.edgeItems;
    if (cut) {
      int64_t n = t.size(d);
      t = at::cat({t.narrow(d, 0, gPrint.edgeItems), t.narrow(d, n - gPrint.edgeItems, gPrint.edgeItems)}, d);
    }
    b.cut.push_back(cut);
  }
  at::ScalarType st = t.scalar_type();
  Width width = st == at::kHalf       ? Width::Half
                 : st == at::kBFloat16 ? Width::BFloat16
                 : st == at::kFloat || st == at::kComplexFloat ? Width::Single
                                                               : Width::Double;
  if (t.is_complex()) t = t.to(at::kCPU, at::kComplexDouble);
  else if (at::isFloatingType(st)) t = t.to(at::kCPU, at::kDouble);
  else if (st == at::kBool) t = t.to(at::kCPU);
  else t = t.to(at::kCPU, at::kLong);
  t = t.contiguous();
  b.sizes.assign(t.sizes().begin(), t.sizes().end());
  int64_t n = t.numel();
  b.items.reserve(size_t(n));
  if (t.is_complex()) {
    auto* p = t.data_ptr<c10::complex<double>>();
    for (int64_t k = 0; k < n; k++) {
      std::string im = formatReal(p[k].imag(), width);
      if (im[0] != '-' && im[0] != '+') im = "+" + im;
      b.items.push_back(formatReal(p[k].real(), width) + im + "i");
    }
  } else if (t.scalar_type() == at::kDouble) {
    auto* p = t.data_ptr<double>();
    for (int64_t k = 0; k < n; k++) b.items.push_back(formatReal(p[k], width));
  } else if (t.scalar_type() == at::kBool) {
    auto* p = t.data_ptr<bool>();
    for (int64_t k = 0; k < n; k++) b.items.push_back(p[k] ? "#t" : "#f");
  } else {
    auto* p = t.data_ptr<int64_t>();
    for (int64_t k = 0; k < n; k++) b.items.push_back(std::to_string(p[k]));
  }
  for (auto& s : b.items) b.width = std::max(b.width, s.size());
  return b;
}

void renderDim(std::string& out, const Body& b, size_t dim, int64_t& next, size_t column) {
  size_t nd = b.sizes.size();
  out += "[";
  int64_t n = b.sizes[dim];
  for (int64_t k = 0; k < n; k++) {
    pollEvery(uint64_t(next) + uint64_t(k));   // a tensor of many small dimensions prints long
    bool dots = b.cut[dim] && k == gPrint.edgeItems;
    for (int pass = dots ? 0 : 1; pass < 2; pass++) {
      bool first = k == 0 && pass == 1;
      if (!first) {
        if (dim + 1 == nd) out += " ";
        else {
          out.append(std::min<size_t>(nd - 1 - dim, 2), '\n');
          out.append(column + dim + 1, ' ');
        }
      }
      if (pass == 0) { out += "..."; continue; }
      if (dim + 1 == nd) {
        const std::string& s = b.items[size_t(next++)];
        out.append(b.width - s.size(), ' ');
        out += s;
      } else {
        renderDim(out, b, dim + 1, next, column);
      }
    }
  }
  out += "]";
}

size_t currentColumn(const std::string& out) {
  auto nl = out.rfind('\n');
  return nl == std::string::npos ? out.size() : out.size() - nl - 1;
}

// The dtype a literal of this tensor's elements reads as (float32 unless set-default-dtype!).
bool literalDtype(const at::Tensor& t) {
  at::ScalarType st = t.scalar_type(), floatType = c10::get_default_dtype_as_scalartype();
  if (t.numel() == 0) return st == floatType;   // `#[]` reads as float32, like torch.tensor([])
  return st == floatType || st == at::kLong || st == at::kBool;
}

}  // namespace

// How many bracket pairs an empty tensor prints as: one per index of the dimensions before its
// first zero. `(tensor-zeros 50888888888888850 0)` has no element but would print that many `[]`
// (fuzz-npy: an .npy of that shape filled memory until the process died; summarising each
// dimension is not enough either, with a dozen small ones), so past the element threshold it
// prints as `#<tensor [] shape=(...)>`, as PyTorch prints every empty tensor.
int64_t emptyGroups(const at::Tensor& t) {
  int64_t groups = 1;
  for (int64_t d = 0; d < t.dim() && t.size(d) != 0; d++)
    if (__builtin_mul_overflow(groups, t.size(d), &groups)) return INT64_MAX;
  return groups;
}

void printTensor(std::string& out, Value v) {
  const at::Tensor& t0 = tensorOf(v);
  if (!t0.defined()) {
    out += "#<tensor freed>";
    return;
  }
  try {
    at::Tensor t = t0.detach();
    std::string layout;
    if (t.is_sparse()) { layout = "sparse"; t = t.to_dense(); }
    if (t.is_quantized()) { layout = "quantized"; t = t.dequantize(); }
    bool elideEmpty = t.numel() == 0 && emptyGroups(t) > gPrint.threshold;
    bool summarise = t.numel() > gPrint.threshold || elideEmpty;
    bool hasData = t.device().type() != at::kMeta;
    bool readable = hasData && t.dim() > 0 && !summarise && t0.device().is_cpu() && !t0.requires_grad() &&
                    layout.empty() && literalDtype(t0);
    if (!readable) out += "#<tensor ";
    if (!hasData) {
      out += "...";
    } else if (elideEmpty) {
      out += "[]";
    } else {
      Body b = formatElements(t, summarise);
      if (t.dim() == 0) {
        out += b.items[0];
      } else {
        size_t column = currentColumn(out);
        out += "#";
        int64_t next = 0;
        renderDim(out, b, 0, next, column + 1);
      }
    }
    if (readable) return;
    if (summarise || !hasData) {
      out += " shape=(";
      for (int64_t d = 0; d < t0.dim(); d++) out += (d ? " " : "") + std::to_string(t0.size(d));
      out += ")";
    }
    at::ScalarType st = t0.scalar_type();
    bool defaultDtype = t0.dim() == 0 ? (st == c10::get_default_dtype_as_scalartype() || st == at::kLong ||
                                         st == at::kBool)
                                      : literalDtype(t0);
    if (!defaultDtype) out += " dtype=" + std::string(symbolName(scalarTypeToValue(st)));
    if (!t0.device().is_cpu()) out += " device=" + t0.device().str();
    if (!layout.empty()) out += " layout=" + layout;
    if (t0.requires_grad() && t0.is_leaf()) out += " requires-grad";
    if (auto fn = t0.grad_fn()) out += " grad-fn=" + fn->name();
    out += ">";
  } catch (const std::exception& e) {
    // Printing runs inside error reports and the REPL: it must not throw.
    std::string msg = e.what();
    auto nl = msg.find('\n');
    if (nl != std::string::npos) msg = msg.substr(0, nl);
    out += "#<tensor unprintable: " + msg + ">";
  }
}

Value tensorFromLiteral(Value nestedVectors) {
  at::Tensor t;
  try {
    t = tensorFromData(nestedVectors, std::nullopt, "tensor literal");
  } catch (const PurpleException& e) {
    throwError("read-error", errorMessage(e.payload()));
  } catch (const c10::Error& e) {
    throwError("read-error", std::string("tensor literal: ") + e.what_without_backtrace());
  }
  return wrapTensor(std::move(t));
}

void registerTensorPrint(Registry& r) {
  r.def("tensor-set-print-options!", "(:key precision threshold edgeitems)",
        [](std::optional<int64_t> precision, std::optional<int64_t> threshold, std::optional<int64_t> edge) {
          requireProcessAccess("tensor-set-print-options!");
          if (precision) {
            if (*precision < 0 || *precision > 17)
              throwError("tensor-error", "tensor-set-print-options!: :precision must be 0 .. 17");
            gPrint.precision = int(*precision);
          }
          if (threshold) {
            if (*threshold < 0) throwError("tensor-error", "tensor-set-print-options!: :threshold must be >= 0");
            gPrint.threshold = *threshold;
          }
          if (edge) {
            if (*edge < 1) throwError("tensor-error", "tensor-set-print-options!: :edgeitems must be >= 1");
            gPrint.edgeItems = *edge;
          }
        },
        "Sets how tensors print. :precision N writes floats with N significant digits (0, the "
        "default, writes the shortest form that reads back exactly); tensors with more than "
        ":threshold elements (default 1000) are summarised, showing :edgeitems entries (default 3) "
        "at each end of every long dimension. Small CPU float32/int64/bool tensors print as "
        "literals that read back, e.g. #[[1. 2.] [3. 4.]]; others as #<tensor #[...] dtype=float64 "
        "device=cuda:0 requires-grad grad-fn=MulBackward0>, naming only what is not the default.");
  sandbox(r, "tensor-set-print-options!", Needs::Process, "global settings: the print options of every interpreter");
}

}  // namespace purple
