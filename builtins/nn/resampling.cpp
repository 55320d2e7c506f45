// Padding and resampling: tensor-pad (torch.nn.functional.pad, every mode) and the padding
// modules (constant-pad, zero-pad, reflection-pad, replication-pad, circular-pad in 1 to 3
// dimensions), interpolate and the upsample module, pixel-shuffle and pixel-unshuffle.
#include <torch/nn/functional/upsampling.h>
#include "builtins/nn/layer.hpp"
#include "interp/platform/torch_compat.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

std::string padMode(Value v, const std::string& who) {
  if (v.isMissing()) return "constant";
  return choiceArg(v, who, ":mode", {"constant", "reflect", "replicate", "circular"});
}

at::Tensor pad(const at::Tensor& x, const IntList& p, const std::string& mode, c10::optional<double> value,
               const std::string& who) {
  if (p.size() % 2 != 0) throwError("value-error", who + ": the padding needs an even number of integers (left right [top bottom ...]), got " + std::to_string(p.size()));
  if (int64_t(p.size()) > 2 * x.dim())
    throwError("value-error", who + ": " + std::to_string(p.size() / 2) + " padded dimensions for a " + std::to_string(x.dim()) + "-d input");
  if (mode != "constant") {
    if (value && *value != 0) throwError("value-error", who + ": :value is for mode \"constant\", not \"" + mode + "\"");
    size_t d = p.size() / 2;
    if (x.dim() != int64_t(d) + 1 && x.dim() != int64_t(d) + 2)
      throwError("value-error", who + ": mode \"" + mode + "\" pads the last " + std::to_string(d) + " dimension(s) of a " +
                                    std::to_string(d + 1) + "-d or " + std::to_string(d + 2) + "-d input, got shape " +
                                    pyTuple(x.sizes()));
    value = c10::nullopt;
  }
  return at::pad(x, p, mode, value);
}

torch::nn::functional::InterpolateFuncOptions::mode_t interpMode(const std::string& m) {
  if (m == "nearest") return torch::kNearest;
  if (m == "linear") return torch::kLinear;
  if (m == "bilinear") return torch::kBilinear;
  if (m == "bicubic") return torch::kBicubic;
  if (m == "trilinear") return torch::kTrilinear;
  if (m == "area") return torch::kArea;
  return torch::kNearestExact;
}

struct Resample {
  c10::optional<std::vector<int64_t>> size;
  c10::optional<std::vector<double>> scale;
  std::string mode = "nearest";
  c10::optional<bool> alignCorners, recompute;
  bool antialias = false;
};

Resample resampleArgs(Value size, Value scale, Value mode, Value alignCorners, Value recompute, bool antialias,
                      const std::string& who) {
  Resample r;
  if (!size.isMissing() && !size.isFalse()) r.size = intsArg(size, who, 2);
  if (!scale.isMissing() && !scale.isFalse()) {
    std::vector<double> s;
    if (isNumber(scale)) {
      s.push_back(realArg(scale, who, 3));
    } else if (isList(scale) && !scale.isNil()) {
      for (Value p = scale; isPair(p); p = cdr(p)) s.push_back(realArg(car(p), who, 3));
    } else {
      throwTypeError(who, 3, "a number or a list of numbers", scale);
    }
    r.scale = s;
  }
  if (r.size && r.scale) throwError("value-error", who + ": give either :size or :scale-factor, not both");
  if (!r.size && !r.scale) throwError("value-error", who + ": needs :size or :scale-factor");
  if (!mode.isMissing())
    r.mode = choiceArg(mode, who, ":mode", {"nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact"});
  bool interpolating = r.mode == "linear" || r.mode == "bilinear" || r.mode == "bicubic" || r.mode == "trilinear";
  if (!alignCorners.isMissing() && !alignCorners.isFalse() && !interpolating)
    throwError("value-error", who + ": :align-corners is only for the interpolating modes (linear, bilinear, bicubic, trilinear), not \"" +
                                  r.mode + "\"");
  if (interpolating) r.alignCorners = optBool(alignCorners, false);
  if (!recompute.isMissing()) r.recompute = recompute.isTrue();
  r.antialias = antialias;
  if (antialias && r.mode != "bilinear" && r.mode != "bicubic")
    throwError("value-error", who + ": :antialias is for modes \"bilinear\" and \"bicubic\"");
  return r;
}

at::Tensor resample(const at::Tensor& x, const Resample& r, const std::string& who) {
  int64_t spatial = x.dim() - 2;
  if (spatial < 1 || spatial > 3)
    throwError("value-error", who + ": input must be 3-d (N, C, L), 4-d (N, C, H, W) or 5-d (N, C, D, H, W), got shape " + pyTuple(x.sizes()));
  auto need = [&](int64_t d) {
    if (spatial != d)
      throwError("value-error", who + ": mode \"" + r.mode + "\" needs " + std::to_string(d + 2) + "-d input, got shape " + pyTuple(x.sizes()));
  };
  if (r.mode == "linear") need(1);
  if (r.mode == "bilinear" || r.mode == "bicubic") need(2);
  if (r.mode == "trilinear") need(3);
  auto sizeOk = [&](size_t n, const char* what) {
    if (n != 1 && int64_t(n) != spatial)
      throwError("value-error", who + ": " + what + " needs 1 or " + std::to_string(spatial) + " entries for " +
                                    std::to_string(x.dim()) + "-d input, got " + std::to_string(n));
  };
  torch::nn::functional::InterpolateFuncOptions o;
  if (r.size) {
    sizeOk(r.size->size(), ":size");
    o.size(r.size->size() == 1 ? std::vector<int64_t>(size_t(spatial), (*r.size)[0]) : *r.size);
  }
  if (r.scale) {
    sizeOk(r.scale->size(), ":scale-factor");
    o.scale_factor(r.scale->size() == 1 ? std::vector<double>(size_t(spatial), (*r.scale)[0]) : *r.scale);
  }
  o.mode(interpMode(r.mode)).align_corners(r.alignCorners).recompute_scale_factor(r.recompute).antialias(r.antialias);
  return torch::nn::functional::interpolate(x, o);
}

// The padding modules: (reflection-pad2d 1) pads the last 2 dimensions by 1 on each side.
Value padModule(Value padding, Value value, const std::string& who, const char* tname, size_t d, const std::string& mode) {
  IntList p = intsArg(padding, who, 1);
  if (p.size() == 1) p = IntList(2 * d, p[0]);
  if (p.size() != 2 * d)
    throwError("value-error", who + ": padding needs 1 or " + std::to_string(2 * d) + " integers, got " + std::to_string(p.size()));
  c10::optional<double> v;
  if (mode == "constant") v = value.isMissing() ? 0.0 : realArg(value, who, 2);
  std::string extra = value.isMissing() ? pyTuple(p) : "padding=" + pyTuple(p) + ", value=" + pyFloat(*v);
  return makeFnLayer(tname, extra, [p, mode, v, who](const Module&, const at::Tensor& x) { return pad(x, p, mode, v, who); });
}

void defPadModule(Registry& r, const char* name, const char* tname, size_t d, const char* mode, bool hasValue,
                  const char* doc) {
  std::string who = name, m = mode;
  if (hasValue)
    r.def(name, "(padding value)", [who, m, d, tname](Value p, Value v) { return padModule(p, v, who, tname, d, m); }, doc);
  else
    r.def(name, "(padding)", [who, m, d, tname](Value p) { return padModule(p, Value::missing(), who, tname, d, m); }, doc);
}

}  // namespace

void registerResampling(Registry& r) {
  r.def("tensor-pad", "(x padding :key mode value)",
        [](const at::Tensor& x, IntList padding, Value mode, std::optional<double> value) {
          const std::string who = "tensor-pad";
          return pad(x, padding, padMode(mode, who), copt(value), who);
        },
        "X padded (torch.nn.functional.pad): PADDING lists (left right) amounts for the last dimension, then (top "
        "bottom) for the one before, and so on; negative amounts crop. :mode \"constant\" (the default: fill with "
        ":value, 0 by default), \"reflect\" (mirror without repeating the edge), \"replicate\" (repeat the edge) or "
        "\"circular\" (wrap around); the last three pad the last 1 to 3 dimensions of a batched or unbatched input.", kPrimTensorFunction);

  defPadModule(r, "constant-pad1d", "ConstantPad1d", 1, "constant", true,
               "(constant-pad1d padding value) makes a ConstantPad1d module: pads the last dimension by PADDING (one integer "
               "or (left right)) with VALUE.");
  defPadModule(r, "constant-pad2d", "ConstantPad2d", 2, "constant", true,
               "(constant-pad2d padding value) makes a ConstantPad2d module: pads the last 2 dimensions by PADDING (one "
               "integer or (left right top bottom)) with VALUE.");
  defPadModule(r, "constant-pad3d", "ConstantPad3d", 3, "constant", true,
               "(constant-pad3d padding value) makes a ConstantPad3d module: pads the last 3 dimensions by PADDING (one "
               "integer or 6) with VALUE.");
  defPadModule(r, "zero-pad1d", "ZeroPad1d", 1, "constant", false,
               "(zero-pad1d padding) makes a ZeroPad1d module: pads the last dimension with zeros.");
  defPadModule(r, "zero-pad2d", "ZeroPad2d", 2, "constant", false,
               "(zero-pad2d padding) makes a ZeroPad2d module: pads the last 2 dimensions with zeros (PADDING: one integer "
               "or (left right top bottom)).");
  defPadModule(r, "zero-pad3d", "ZeroPad3d", 3, "constant", false,
               "(zero-pad3d padding) makes a ZeroPad3d module: pads the last 3 dimensions with zeros.");
  defPadModule(r, "reflection-pad1d", "ReflectionPad1d", 1, "reflect", false,
               "(reflection-pad1d padding) makes a ReflectionPad1d module: pads the last dimension with its mirror image "
               "(PADDING: one integer or (left right)).");
  defPadModule(r, "reflection-pad2d", "ReflectionPad2d", 2, "reflect", false,
               "(reflection-pad2d padding) makes a ReflectionPad2d module: pads the last 2 dimensions with their mirror "
               "image (PADDING: one integer or (left right top bottom)).");
  defPadModule(r, "reflection-pad3d", "ReflectionPad3d", 3, "reflect", false,
               "(reflection-pad3d padding) makes a ReflectionPad3d module: pads the last 3 dimensions with their mirror image.");
  defPadModule(r, "replication-pad1d", "ReplicationPad1d", 1, "replicate", false,
               "(replication-pad1d padding) makes a ReplicationPad1d module: pads the last dimension by repeating its edge.");
  defPadModule(r, "replication-pad2d", "ReplicationPad2d", 2, "replicate", false,
               "(replication-pad2d padding) makes a ReplicationPad2d module: pads the last 2 dimensions by repeating their edges.");
  defPadModule(r, "replication-pad3d", "ReplicationPad3d", 3, "replicate", false,
               "(replication-pad3d padding) makes a ReplicationPad3d module: pads the last 3 dimensions by repeating their edges.");
  defPadModule(r, "circular-pad1d", "CircularPad1d", 1, "circular", false,
               "(circular-pad1d padding) makes a CircularPad1d module: pads the last dimension by wrapping around.");
  defPadModule(r, "circular-pad2d", "CircularPad2d", 2, "circular", false,
               "(circular-pad2d padding) makes a CircularPad2d module: pads the last 2 dimensions by wrapping around.");
  defPadModule(r, "circular-pad3d", "CircularPad3d", 3, "circular", false,
               "(circular-pad3d padding) makes a CircularPad3d module: pads the last 3 dimensions by wrapping around.");

  r.def("interpolate",
        "(x :key size scale-factor mode align-corners recompute-scale-factor (antialias #f))",
        [](const at::Tensor& x, Value size, Value scale, Value mode, Value align, Value recompute, bool antialias) {
          const std::string who = "interpolate";
          return resample(x, resampleArgs(size, scale, mode, align, recompute, antialias, who), who);
        },
        "X (N, C, spatial...) resized to :size (an integer or one per spatial dimension) or by :scale-factor (a "
        "number or one per dimension) (torch.nn.functional.interpolate). :mode \"nearest\" (default), \"linear\" "
        "(3-d input), \"bilinear\" or \"bicubic\" (4-d), \"trilinear\" (5-d), \"area\" or \"nearest-exact\". "
        ":align-corners #t aligns the centres of the corner pixels (interpolating modes only; default #f). "
        ":recompute-scale-factor #t computes the scale from the output size; :antialias #t (bilinear, bicubic) "
        "filters when downsampling.", kPrimTensorFunction);
  r.def("upsample", "(:key size scale-factor mode align-corners recompute-scale-factor)",
        [](Value size, Value scale, Value mode, Value align, Value recompute) {
          const std::string who = "upsample";
          Resample rs = resampleArgs(size, scale, mode, align, recompute, false, who);
          auto list = [](const auto& v, auto fmt) {
            if (v.size() == 1) return fmt(v[0]);
            std::string t = "(";
            for (size_t k = 0; k < v.size(); k++) t += (k ? ", " : "") + fmt(v[k]);
            return t + ")";
          };
          std::string extra = rs.scale ? "scale_factor=" + list(*rs.scale, [](double d) { return pyFloat(d); })
                                       : "size=" + list(*rs.size, [](int64_t i) { return std::to_string(i); });
          extra += ", mode=" + compat::pyReprMode(rs.mode);   // quoted from 2.x (torch_compat.hpp, 8.)
          return makeFnLayer("Upsample", extra, [rs, who](const Module&, const at::Tensor& x) { return resample(x, rs, who); });
        },
        "An Upsample module (torch.nn.Upsample): resizes (N, C, spatial...) input to :size or by :scale-factor with "
        ":mode \"nearest\" (default), \"linear\", \"bilinear\", \"bicubic\" or \"trilinear\", as interpolate does.");

  r.def("pixel-shuffle", "(a :optional b)",
        [](Value a, Value b) -> Value {
          const std::string who = "pixel-shuffle";
          if (isTensor(a)) return wrapTensor(at::pixel_shuffle(tensorArg(a, who, 1), intArg(b, who, 2)));
          if (!b.isMissing()) throwError("arity-error", "pixel-shuffle: the module form takes one upscale factor");
          int64_t f = intArg(a, who, 1);
          if (f < 1) throwError("value-error", "pixel-shuffle: the upscale factor must be positive");
          return makeFnLayer("PixelShuffle", "upscale_factor=" + std::to_string(f),
                             [f](const Module&, const at::Tensor& x) { return at::pixel_shuffle(x, f); });
        },
        "(pixel-shuffle r) makes a PixelShuffle module (torch.nn.PixelShuffle): rearranges (*, C r^2, H, W) into (*, C, "
        "H r, W r), the sub-pixel convolution upscaling; (pixel-shuffle x r) does it directly.", kPrimTensorFunction);
  r.def("pixel-unshuffle", "(a :optional b)",
        [](Value a, Value b) -> Value {
          const std::string who = "pixel-unshuffle";
          if (isTensor(a)) return wrapTensor(at::pixel_unshuffle(tensorArg(a, who, 1), intArg(b, who, 2)));
          if (!b.isMissing()) throwError("arity-error", "pixel-unshuffle: the module form takes one downscale factor");
          int64_t f = intArg(a, who, 1);
          if (f < 1) throwError("value-error", "pixel-unshuffle: the downscale factor must be positive");
          return makeFnLayer("PixelUnshuffle", "downscale_factor=" + std::to_string(f),
                             [f](const Module&, const at::Tensor& x) { return at::pixel_unshuffle(x, f); });
        },
        "(pixel-unshuffle r) makes a PixelUnshuffle module (torch.nn.PixelUnshuffle), the inverse of pixel-shuffle: "
        "(*, C, H r, W r) into (*, C r^2, H, W); (pixel-unshuffle x r) does it directly.", kPrimTensorFunction);
}

}  // namespace nnlayer
}  // namespace purple
