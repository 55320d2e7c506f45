// PNG written directly (signature, IHDR, IDAT through zlib, IEND): an image of a tensor needs
// no imaging library, and the bytes are the same every time for the same pixels.
#include "builtins/display/image.hpp"
#include "builtins/builtins.hpp"
#include "builtins/nn/value.hpp"
#include <zlib.h>
#include <cstdint>
#include <string>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

bool isChannelCount(int64_t n) { return n == 1 || n == 3 || n == 4; }

void putU32(std::string& out, uint32_t v) {
  out += char(v >> 24);
  out += char(v >> 16);
  out += char(v >> 8);
  out += char(v);
}

void chunk(std::string& out, const char* type, const std::string& data) {
  putU32(out, uint32_t(data.size()));
  std::string body = std::string(type, 4) + data;
  out += body;
  putU32(out, uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
}

}  // namespace

at::Tensor imagePixels(const at::Tensor& image, bool normalize, std::string_view who) {
  at::Tensor t = image.detach().to(at::kCPU);
  if (t.dim() == 4 && t.size(0) == 1) t = t.squeeze(0);
  if (t.dim() == 2) {
    t = t.unsqueeze(2);
  } else if (t.dim() == 3) {
    if (isChannelCount(t.size(0))) t = t.permute({1, 2, 0});
    else if (!isChannelCount(t.size(2)))
      throwError("type-error", std::string(who) + ": an image is [H W], [C H W] or [H W C] with C 1, 3 or 4; got shape " +
                                   c10::str(t.sizes()));
  } else {
    throwError("type-error", std::string(who) + ": an image is [H W], [C H W] or [H W C] with C 1, 3 or 4; got shape " +
                                 c10::str(t.sizes()));
  }
  if (t.size(0) == 0 || t.size(1) == 0) throwError("type-error", std::string(who) + ": the image is empty");
  if (t.scalar_type() == at::kByte) return t.contiguous();
  if (t.scalar_type() == at::kBool) return (t.to(at::kByte) * 255).contiguous();
  if (t.is_complex()) throwError("type-error", std::string(who) + ": a complex tensor is no image");
  at::Tensor f = t.to(at::kFloat);
  if (normalize) {
    float lo = f.min().item<float>(), hi = f.max().item<float>();
    f = hi > lo ? (f - lo) / (hi - lo) : at::zeros_like(f);
  } else if (!at::isFloatingType(t.scalar_type())) {
    return f.clamp(0, 255).to(at::kByte).contiguous();   // integer intensities 0..255
  }
  return f.nan_to_num(0).clamp(0, 1).mul(255).round().to(at::kByte).contiguous();
}

std::string encodePng(const at::Tensor& pixels) {
  int64_t h = pixels.size(0), w = pixels.size(1), c = pixels.size(2);
  const uint8_t* data = pixels.data_ptr<uint8_t>();
  std::string raw;
  raw.reserve(size_t(h * (w * c + 1)));
  for (int64_t y = 0; y < h; y++) {
    raw += char(0);   // filter: none
    raw.append(reinterpret_cast<const char*>(data + y * w * c), size_t(w * c));
  }
  uLongf bound = compressBound(uLong(raw.size()));
  std::string packed(bound, '\0');
  if (compress2(reinterpret_cast<Bytef*>(&packed[0]), &bound, reinterpret_cast<const Bytef*>(raw.data()),
                uLong(raw.size()), 6) != Z_OK)
    throwError("error", "PNG: compression failed");
  packed.resize(bound);
  std::string out("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  putU32(ihdr, uint32_t(w));
  putU32(ihdr, uint32_t(h));
  ihdr += char(8);                                       // bits per channel
  ihdr += char(c == 1 ? 0 : c == 3 ? 2 : 6);             // grey, RGB, RGBA
  ihdr += std::string(3, '\0');                          // deflate, adaptive filters, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", packed);
  chunk(out, "IEND", "");
  return out;
}

at::Tensor imageGrid(const std::vector<at::Tensor>& images, int64_t columns, int64_t padding, double fill,
                     bool normalize) {
  if (images.empty()) throwError("type-error", "image-grid: no images");
  std::vector<at::Tensor> pixels;
  int64_t h = 0, w = 0, c = 1;
  for (const at::Tensor& img : images) {
    at::Tensor p = imagePixels(img, normalize, "image-grid");
    h = std::max(h, p.size(0));
    w = std::max(w, p.size(1));
    c = std::max(c, p.size(2));
    pixels.push_back(p);
  }
  int64_t n = int64_t(pixels.size());
  columns = std::max<int64_t>(1, std::min(columns, n));
  int64_t rows = (n + columns - 1) / columns;
  uint8_t fillByte = uint8_t(std::lround(std::clamp(fill, 0.0, 1.0) * 255));
  at::Tensor grid = at::full({padding + rows * (h + padding), padding + columns * (w + padding), c}, fillByte, at::kByte);
  for (int64_t i = 0; i < n; i++) {
    at::Tensor p = pixels[size_t(i)];
    if (p.size(2) != c) p = c == 4 && p.size(2) == 3 ? at::cat({p, at::full({p.size(0), p.size(1), 1}, 255, at::kByte)}, 2)
                                                    : p.expand({p.size(0), p.size(1), c});
    int64_t y = padding + (i / columns) * (h + padding), x = padding + (i % columns) * (w + padding);
    grid.slice(0, y, y + p.size(0)).slice(1, x, x + p.size(1)).copy_(p);
  }
  return grid.permute({2, 0, 1}).contiguous();   // [C H W], as make_grid returns
}

namespace {

Value bytevectorOf(const std::string& bytes) {
  Value bv = makeBytevector(bytes.size());
  std::copy(bytes.begin(), bytes.end(), bv.as<Bytevector>()->bytes);
  return bv;
}

std::vector<at::Tensor> imageList(Interp& in, Value images) {
  std::vector<at::Tensor> out;
  if (isTensor(images)) {
    const at::Tensor& t = tensorOf(images);
    if (t.dim() == 4 || (t.dim() == 3 && !isChannelCount(t.size(0)) && !isChannelCount(t.size(2)))) {
      for (int64_t i = 0; i < t.size(0); i++) out.push_back(t[i]);   // a batch [N C H W] or [N H W]
      return out;
    }
    out.push_back(t);
    return out;
  }
  PrimitiveInfo info;
  info.name = "image-grid";
  for (const at::Tensor& t : Convert<std::vector<at::Tensor>>::from(in, images, &info, 0)) out.push_back(t);
  return out;
}

}  // namespace

void registerImages(Registry& r) {
  r.def("tensor->png", "(image :key (normalize #f))",
        [](const at::Tensor& image, bool normalize) { return bytevectorOf(encodePng(imagePixels(image, normalize, "tensor->png"))); },
        "The PNG file bytes (a bytevector) of IMAGE, a tensor shaped [H W], [C H W] or [H W C] with C 1, 3 or 4\n"
        "(grey, RGB, RGBA). uint8 pixels are taken as they are; floats are intensities in [0, 1], or with\n"
        ":normalize #t rescaled from their minimum to their maximum.");
  r.def("save-png", "(image path :key (normalize #f))",
        [](const at::Tensor& image, std::string path, bool normalize) {
          std::string png = encodePng(imagePixels(image, normalize, "save-png"));
          writeFileAtomically(path, png.data(), png.size(), "save-png");
        },
        "Writes IMAGE (as tensor->png takes it) to the PNG file PATH, atomically.");
  sandbox(r, "save-png", Needs::Files, "files: writes a PNG file");
  r.def("image-grid", "(images :key (columns 8) (padding 2) (fill 0.0) (normalize #f))",
        [](Interp& in, Value images, int64_t columns, int64_t padding, double fill, bool normalize) {
          if (columns < 1) throwError("type-error", "image-grid: :columns must be at least 1");
          if (padding < 0) throwError("type-error", "image-grid: :padding must not be negative");
          return imageGrid(imageList(in, images), columns, padding, fill, normalize);
        },
        "One uint8 image [C H W] showing IMAGES (a batch tensor [N C H W] or [N H W], or a list of images)\n"
        "in rows of COLUMNS with PADDING pixels of grey level FILL (0 black .. 1 white) between them, as\n"
        "torchvision.utils.make_grid; each image is converted as tensor->png converts it.");
}

}  // namespace purple
