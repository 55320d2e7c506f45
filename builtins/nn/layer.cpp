// The helpers layer.hpp declares: argument readers for the layer builtins, and printing layers
// the way PyTorch prints them (each layer's extra_repr, Python's float and tuple formats).
#include "builtins/nn/layer.hpp"
#include "interp/platform/torch_compat.hpp"
#include "interp/language/printer.hpp"
#include <cstdio>
#include <cstdlib>

namespace purple {
namespace nnlayer {

// ---- argument readers ---------------------------------------------------------------------------

IntList intsArg(Value v, const std::string& who, int i) {
  IntList out;
  if (v.isFixnum()) return {v.fixnum()};
  if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).dim() <= 1 && !tensorOf(v).is_floating_point()) {
    at::Tensor t = tensorOf(v).to(at::kCPU).to(at::kLong).contiguous();
    for (int64_t k = 0; k < t.numel(); k++) out.push_back(t.data_ptr<int64_t>()[k]);
    return out;
  }
  auto one = [&](Value x) {
    if (x.isFixnum()) return x.fixnum();
    if (isFlonum(x) && flonumValue(x) == std::floor(flonumValue(x))) return int64_t(flonumValue(x));
    throwTypeError(who, i, "an integer or a list of integers", v);
  };
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) out.push_back(one(vec->items[k]));
    return out;
  }
  if (!isList(v) || v.isNil()) throwTypeError(who, i, "an integer or a list of integers", v);
  for (Value p = v; isPair(p); p = cdr(p)) out.push_back(one(car(p)));
  return out;
}

int64_t intArg(Value v, const std::string& who, int i) {
  if (v.isFixnum()) return v.fixnum();
  if (isFlonum(v) && flonumValue(v) == std::floor(flonumValue(v))) return int64_t(flonumValue(v));
  throwTypeError(who, i, "an integer", v);
}

double realArg(Value v, const std::string& who, int i) {
  if (v.isFixnum()) return double(v.fixnum());
  if (isFlonum(v)) return flonumValue(v);
  if (isNumber(v)) return toDouble(v);
  throwTypeError(who, i, "a real number", v);
}

std::string nameOf(Value v) {
  if (isString(v)) return std::string(stringView(v));
  if (v.is(Kind::Symbol)) return std::string(symbolName(v));
  return "";
}

std::string lowerDash(std::string s) {
  for (char& c : s) c = c == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string choiceArg(Value v, const std::string& who, const char* what, std::initializer_list<const char*> choices) {
  std::string known;
  for (const char* c : choices) known += std::string(known.empty() ? "" : ", ") + "\"" + c + "\"";
  if (!isName(v)) throwError("type-error", who + ": " + what + " must be one of " + known + ", got " + toWriteString(v));
  std::string s = lowerDash(nameOf(v));
  for (const char* c : choices)
    if (s == c) return s;
  throwError("value-error", who + ": " + what + " must be one of " + known + ", got " + toWriteString(v));
}

IntList expandInts(const IntList& v, size_t d, const std::string& who, const char* what) {
  if (v.size() == d) return v;
  if (v.size() == 1) return IntList(d, v[0]);
  throwError("value-error", who + ": " + what + " needs 1 or " + std::to_string(d) + " integers, got " + std::to_string(v.size()));
}

void needArgs(const ForwardArgs& a, size_t lo, size_t hi, const std::string& who) {
  if (a.positional.size() < lo || a.positional.size() > hi)
    throwError("arity-error", who + ": forward takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
                                  " positional arguments, got " + std::to_string(a.positional.size()));
}

std::string trimMessage(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// ---- Python's formats -----------------------------------------------------------------------------

std::string pyFloat(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  // The shortest digits that read back as X, then Python's layout: scientific notation when the
  // exponent is below -4 or at least 16, else positional with at least one decimal.
  char buf[64];
  int prec = 1;
  for (; prec <= 17; prec++) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string s(buf);
  size_t e = s.find('e');
  int exp = std::atoi(s.c_str() + e + 1);
  std::string mant = s.substr(0, e);
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out = "0." + std::string(size_t(-exp - 1), '0') + digits;
  } else {
    if (digits.size() <= size_t(exp) + 1) out = digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
    else out = digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
  }
  return neg ? "-" + out : out;
}

std::string pyTuple(at::IntArrayRef v) {
  std::string s = "(";
  for (size_t k = 0; k < v.size(); k++) s += (k ? ", " : "") + std::to_string(v[k]);
  return s + (v.size() == 1 ? ",)" : ")");
}

std::string libtorchExtraRepr(const Module& m) {
  std::ostringstream os;
  m.pretty_print(os);
  return libtorchExtraRepr(os.str());
}

std::string libtorchExtraRepr(std::string s) {
  size_t open = s.find('(');
  if (open == std::string::npos || s.back() != ')') return "";
  s = s.substr(open + 1, s.size() - open - 2);
  std::string out;
  for (size_t k = 0; k < s.size();) {
    if (s.compare(k, 4, "true") == 0) out += "True", k += 4;
    else if (s.compare(k, 5, "false") == 0) out += "False", k += 5;
    else if (s[k] == '[') out += '(', k++;
    else if (s[k] == ']') out += ')', k++;
    else out += s[k++];
  }
  return out;
}

namespace {

template <size_t D, class Options>
std::string convRepr(const Options& o, bool transposed) {
  std::string s = std::to_string(o.in_channels()) + ", " + std::to_string(o.out_channels()) +
                  ", kernel_size=" + pyTuple(*o.kernel_size()) + ", stride=" + pyTuple(*o.stride());
  if (auto* p = compat::getIf<torch::ExpandingArray<D>>(&o.padding())) {
    bool zero = true;
    for (auto x : **p) zero = zero && x == 0;
    if (!zero) s += ", padding=" + pyTuple(**p);
  } else if (compat::getIf<torch::enumtype::kSame>(&o.padding())) {
    s += ", padding=same";
  } else {
    s += ", padding=valid";
  }
  bool one = true;
  for (auto x : *o.dilation()) one = one && x == 1;
  if (!one) s += ", dilation=" + pyTuple(*o.dilation());
  if (transposed) {
    bool zero = true;
    for (auto x : *o.output_padding()) zero = zero && x == 0;
    if (!zero) s += ", output_padding=" + pyTuple(*o.output_padding());
  }
  if (o.groups() != 1) s += ", groups=" + std::to_string(o.groups());
  if (!o.bias()) s += ", bias=False";
  std::string mode = torch::enumtype::get_enum_name(o.padding_mode());
  if (mode != "kZeros") s += ", padding_mode=" + lowerDash(mode.substr(1));
  return s;
}

std::string momentumText(const c10::optional<double>& m) { return m ? pyFloat(*m) : std::string("None"); }
std::string momentumText(double m) { return pyFloat(m); }

template <class Options>
std::string normRepr(const Options& o) {
  return std::to_string(o.num_features()) + ", eps=" + pyFloat(o.eps()) + ", momentum=" +
         momentumText(o.momentum()) + ", affine=" + pyBool(o.affine()) +
         ", track_running_stats=" + pyBool(o.track_running_stats());
}

}  // namespace

std::string extraRepr(const torch::nn::LinearImpl& m) {
  return "in_features=" + std::to_string(m.options.in_features()) + ", out_features=" +
         std::to_string(m.options.out_features()) + ", bias=" + pyBool(m.options.bias());
}
std::string extraRepr(const torch::nn::Conv1dImpl& m) { return convRepr<1>(m.options, false); }
std::string extraRepr(const torch::nn::Conv2dImpl& m) { return convRepr<2>(m.options, false); }
std::string extraRepr(const torch::nn::Conv3dImpl& m) { return convRepr<3>(m.options, false); }
std::string extraRepr(const torch::nn::ConvTranspose1dImpl& m) { return convRepr<1>(m.options, true); }
std::string extraRepr(const torch::nn::ConvTranspose2dImpl& m) { return convRepr<2>(m.options, true); }
std::string extraRepr(const torch::nn::ConvTranspose3dImpl& m) { return convRepr<3>(m.options, true); }
std::string extraRepr(const torch::nn::BatchNorm1dImpl& m) { return normRepr(m.options); }
std::string extraRepr(const torch::nn::BatchNorm2dImpl& m) { return normRepr(m.options); }
std::string extraRepr(const torch::nn::BatchNorm3dImpl& m) { return normRepr(m.options); }
std::string extraRepr(const torch::nn::InstanceNorm1dImpl& m) { return normRepr(m.options); }
std::string extraRepr(const torch::nn::InstanceNorm2dImpl& m) { return normRepr(m.options); }
std::string extraRepr(const torch::nn::InstanceNorm3dImpl& m) { return normRepr(m.options); }
std::string extraRepr(const torch::nn::LayerNormImpl& m) {
  return pyTuple(m.options.normalized_shape()) + ", eps=" + pyFloat(m.options.eps()) +
         ", elementwise_affine=" + pyBool(m.options.elementwise_affine());
}
std::string extraRepr(const torch::nn::GroupNormImpl& m) {
  return std::to_string(m.options.num_groups()) + ", " + std::to_string(m.options.num_channels()) +
         ", eps=" + pyFloat(m.options.eps()) + ", affine=" + pyBool(m.options.affine());
}
std::string extraRepr(const torch::nn::EmbeddingImpl& m) {
  const auto& o = m.options;
  std::string s = std::to_string(o.num_embeddings()) + ", " + std::to_string(o.embedding_dim());
  if (o.padding_idx()) s += ", padding_idx=" + std::to_string(*o.padding_idx());
  if (o.max_norm()) s += ", max_norm=" + pyFloat(*o.max_norm());
  if (o.norm_type() != 2) s += ", norm_type=" + pyFloat(o.norm_type());
  if (o.scale_grad_by_freq()) s += ", scale_grad_by_freq=True";
  if (o.sparse()) s += ", sparse=True";
  return s;
}
std::string extraRepr(const torch::nn::EmbeddingBagImpl& m) {
  const auto& o = m.options;
  std::string s = std::to_string(o.num_embeddings()) + ", " + std::to_string(o.embedding_dim());
  if (o.max_norm()) s += ", max_norm=" + pyFloat(*o.max_norm());
  if (o.norm_type() != 2) s += ", norm_type=" + pyFloat(o.norm_type());
  if (o.scale_grad_by_freq()) s += ", scale_grad_by_freq=True";
  s += ", mode=" + compat::pyReprMode(lowerDash(torch::enumtype::get_enum_name(o.mode()).substr(1)));
  if (o.padding_idx()) s += ", padding_idx=" + std::to_string(*o.padding_idx());
  return s;
}
std::string extraRepr(const torch::nn::FlattenImpl& m) {
  return "start_dim=" + std::to_string(m.options.start_dim()) + ", end_dim=" + std::to_string(m.options.end_dim());
}
std::string extraRepr(const torch::nn::GELUImpl& m) { return "approximate='" + m.options.approximate() + "'"; }
std::string extraRepr(const torch::nn::PReLUImpl& m) { return "num_parameters=" + std::to_string(m.options.num_parameters()); }
}  // namespace nnlayer
}  // namespace purple
