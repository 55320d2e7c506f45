// A tensor as an HTML table for notebooks: shape, dtype and device above, the values below,
// abbreviated as PyTorch abbreviates long tensors (the first and last rows and columns around
// an ellipsis), so a million-element tensor is a small table.
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include <ATen/ATen.h>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace purple {

namespace {

std::string escapeHtml(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// The indices to show along a dimension of `n`: all of them, or `edge` from each end with -1
// standing for the ellipsis between.
std::vector<int64_t> shownIndices(int64_t n, int64_t edge) {
  std::vector<int64_t> idx;
  if (n <= 2 * edge + 1) {
    for (int64_t i = 0; i < n; i++) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < edge; i++) idx.push_back(i);
    idx.push_back(-1);
    for (int64_t i = n - edge; i < n; i++) idx.push_back(i);
  }
  return idx;
}

struct Formatter {
  bool floating, integral, boolean, complex;
  std::string operator()(const at::Tensor& x) const {
    char buf[64];
    if (boolean) return x.item<bool>() ? "#t" : "#f";
    if (complex) {
      auto z = x.item<c10::complex<double>>();
      std::snprintf(buf, sizeof buf, "%.4g%+.4gi", z.real(), z.imag());
      return buf;
    }
    if (!floating) {
      std::snprintf(buf, sizeof buf, "%lld", (long long)x.item<int64_t>());
      return buf;
    }
    double d = x.item<double>();
    if (std::isnan(d)) return "+nan.0";
    if (std::isinf(d)) return d > 0 ? "+inf.0" : "-inf.0";
    if (integral) std::snprintf(buf, sizeof buf, "%.0f.", d);
    else if (d != 0 && (std::fabs(d) < 1e-3 || std::fabs(d) >= 1e6)) std::snprintf(buf, sizeof buf, "%.4e", d);
    else std::snprintf(buf, sizeof buf, "%.4f", d);
    return buf;
  }
};

std::string table2d(const at::Tensor& m, int64_t edge, const Formatter& fmt) {
  std::string out = "<table class=\"purple-tensor\" style=\"border-collapse:collapse;font-family:monospace\">";
  std::vector<int64_t> rows = shownIndices(m.size(0), edge), cols = shownIndices(m.size(1), edge);
  out += "<thead><tr><th></th>";
  for (int64_t j : cols) out += j < 0 ? "<th>&ctdot;</th>" : "<th>" + std::to_string(j) + "</th>";
  out += "</tr></thead><tbody>";
  for (int64_t i : rows) {
    out += "<tr>";
    out += i < 0 ? "<th>&vellip;</th>" : "<th>" + std::to_string(i) + "</th>";
    for (int64_t j : cols) {
      if (i < 0) out += j < 0 ? "<td>&dtdot;</td>" : "<td style=\"text-align:center\">&vellip;</td>";
      else if (j < 0) out += "<td>&ctdot;</td>";
      else out += "<td style=\"text-align:right\">" + fmt(m[i][j]) + "</td>";
    }
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

std::string tensorHtml(const at::Tensor& t0, int64_t edge) {
  at::Tensor t = t0.detach();
  std::string caption = "tensor " + escapeHtml(std::string(symbolName(scalarTypeToValue(t.scalar_type())))) + " [";
  for (int64_t i = 0; i < t.dim(); i++) caption += (i ? " " : "") + std::to_string(t.size(i));
  caption += "]";
  if (!t.device().is_cpu()) caption += " " + escapeHtml(t.device().str());
  if (t0.requires_grad()) caption += " requires-grad";
  std::string out = "<div class=\"purple-tensor\"><div style=\"font-size:smaller;color:#666\">" + caption + "</div>";
  if (!t.defined() || t.numel() == 0) return out + "<div><i>empty</i></div></div>";
  t = t.to(at::kCPU);
  Formatter fmt;
  fmt.boolean = t.scalar_type() == at::kBool;
  fmt.complex = t.is_complex();
  fmt.floating = at::isFloatingType(t.scalar_type());
  fmt.integral = false;
  if (fmt.floating) {
    at::Tensor finite = t.masked_select(at::isfinite(t));
    fmt.integral = finite.numel() > 0 && finite.eq(finite.round()).all().item<bool>() &&
                   finite.abs().max().item<double>() < 1e6;
  }
  if (t.dim() == 0) return out + "<div style=\"font-family:monospace\">" + fmt(t) + "</div></div>";
  if (t.dim() == 1) return out + table2d(t.unsqueeze(0), edge, fmt) + "</div>";
  if (t.dim() == 2) return out + table2d(t, edge, fmt) + "</div>";
  // Higher dimensions: one table per matrix of the last two dimensions, leading indices shown
  // (abbreviated too), as PyTorch prints them.
  at::Tensor flat = t.reshape({-1, t.size(-2), t.size(-1)});
  std::vector<int64_t> lead(t.sizes().begin(), t.sizes().end() - 2);
  std::vector<int64_t> shown = shownIndices(flat.size(0), std::max<int64_t>(1, edge / 2));
  for (int64_t k : shown) {
    if (k < 0) {
      out += "<div>&vellip;</div>";
      continue;
    }
    std::string index = "[";
    int64_t rest = k;
    std::vector<int64_t> digits(lead.size());
    for (size_t d = lead.size(); d-- > 0;) digits[d] = rest % lead[d], rest /= lead[d];
    for (size_t d = 0; d < digits.size(); d++) index += (d ? " " : "") + std::to_string(digits[d]);
    index += " : :]";
    out += "<div style=\"font-size:smaller;color:#666;margin-top:4px\">" + index + "</div>" + table2d(flat[k], edge, fmt);
  }
  return out + "</div>";
}

}  // namespace

void registerHtml(Registry& r) {
  r.def("tensor->html", "(tensor :key (edge-items 5))",
        [](const at::Tensor& t, int64_t edge) {
          if (edge < 1) throwError("type-error", "tensor->html: :edge-items must be at least 1");
          return tensorHtml(t, edge);
        },
        "TENSOR as an HTML table (how notebooks show tensors): dtype, shape, device and requires-grad\n"
        "above; the values below, abbreviated to the first and last EDGE-ITEMS rows and columns of long\n"
        "dimensions; tensors of more than two dimensions as one table per matrix of the last two.");
}

}  // namespace purple
