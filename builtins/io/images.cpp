// Image files: read-image (JPEG through libjpeg-turbo, PNG through libpng) to a uint8 tensor
// [C H W] as torchvision.io.read_image gives it, and write-png / write-jpeg back.
//
// Both libraries report errors by calling a handler that must not return: libjpeg's default one
// calls exit(), libpng's aborts. Ours longjmp back to a setjmp inside small C-style functions
// (jpegStart, jpegPixels, pngStart, pngPixels, jpegEncode) that hold no C++ object with a destructor between the setjmp and
// the call that can fail, so no destructor is ever skipped; the C++ side (the tensor, the Purple
// error) lives outside them. Every decoding problem, truncated data included, is a file-error
// naming the path.
#include "builtins/builtins.hpp"
#include "builtins/display/image.hpp"
#include "interp/core/file_io.hpp"
#include "interp/core/gc.hpp"
#include "interp/limits/sandbox.hpp"
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#include <png.h>

namespace purple {

namespace {

enum class ReadMode { Unchanged, Gray, GrayAlpha, Rgb, RgbAlpha };

ReadMode readModeOf(const std::string& s) {
  if (s == "unchanged") return ReadMode::Unchanged;
  if (s == "gray" || s == "grey") return ReadMode::Gray;
  if (s == "gray-alpha" || s == "grey-alpha") return ReadMode::GrayAlpha;
  if (s == "rgb") return ReadMode::Rgb;
  if (s == "rgb-alpha") return ReadMode::RgbAlpha;
  throwError("type-error", "read-image: :mode is 'unchanged, 'gray, 'gray-alpha, 'rgb or 'rgb-alpha; got " + s);
}

[[noreturn]] void imageFileError(const char* who, const std::string& path, const std::string& what) {
  throwError("file-error", std::string(who) + ": " + path + ": " + what);
}

// A decompression bomb (a small file that claims a huge picture) is refused before the pixels
// are allocated: past the heap limit it is a memory-error here; past an embedder's tensor budget
// the allocator refuses it. The 2^31-pixel ceiling keeps every index inside an int.
void checkImageSize(const char* who, const std::string& path, int64_t h, int64_t w, int64_t c) {
  if (h <= 0 || w <= 0) imageFileError(who, path, "the image is empty");
  if (h * w > (int64_t(1) << 31)) imageFileError(who, path, "the image is too large (" + std::to_string(w) + " x " +
                                                          std::to_string(h) + " pixels)");
  checkAllocationBudget("an image", size_t(h * w * c));
}

// ---- JPEG ------------------------------------------------------------------------------------

struct JpegErrors {
  jpeg_error_mgr mgr;   // first: libjpeg hands us a pointer to it
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpegFail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  e->mgr.format_message(cinfo, e->message);
  longjmp(e->jump, 1);
}

// libjpeg only warns about data that ends early or is corrupt, and fills the rest with grey;
// torchvision and PIL refuse such files, and so do we.
void jpegMessage(j_common_ptr cinfo, int level) {
  if (level < 0) jpegFail(cinfo);
}

void jpegQuiet(j_common_ptr) {}

struct JpegReader {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  bool created = false;
};

// Header and output geometry. False with reader.errors.message set on failure.
bool jpegStart(JpegReader& r, const unsigned char* data, unsigned long size, int wantedChannels) {
  r.cinfo.err = jpeg_std_error(&r.errors.mgr);
  r.errors.mgr.error_exit = jpegFail;
  r.errors.mgr.emit_message = jpegMessage;
  r.errors.mgr.output_message = jpegQuiet;
  r.errors.message[0] = 0;
  if (setjmp(r.errors.jump)) return false;
  jpeg_create_decompress(&r.cinfo);
  r.created = true;
  jpeg_mem_src(&r.cinfo, data, size);
  jpeg_read_header(&r.cinfo, TRUE);
  if (r.cinfo.jpeg_color_space == JCS_CMYK || r.cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(r.errors.message, sizeof r.errors.message, "CMYK JPEG images are not supported");
    return false;
  }
  if (wantedChannels == 1) r.cinfo.out_color_space = JCS_GRAYSCALE;
  else if (wantedChannels == 3) r.cinfo.out_color_space = JCS_RGB;
  jpeg_calc_output_dimensions(&r.cinfo);
  return true;
}

bool jpegPixels(JpegReader& r, unsigned char* out) {
  if (setjmp(r.errors.jump)) return false;
  jpeg_start_decompress(&r.cinfo);
  size_t stride = size_t(r.cinfo.output_width) * size_t(r.cinfo.output_components);
  while (r.cinfo.output_scanline < r.cinfo.output_height) {
    JSAMPROW row = out + size_t(r.cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&r.cinfo, &row, 1);
  }
  jpeg_finish_decompress(&r.cinfo);
  return true;
}

at::Tensor decodeJpeg(const std::string& bytes, ReadMode mode, const std::string& path) {
  if (mode == ReadMode::GrayAlpha || mode == ReadMode::RgbAlpha)
    imageFileError("read-image", path, "a JPEG image has no alpha channel (use :mode 'gray or 'rgb)");
  int wanted = mode == ReadMode::Gray ? 1 : mode == ReadMode::Rgb ? 3 : 0;
  // Heap-allocated: the reader outlives no frame it was made in, and jmp_buf is large.
  auto reader = std::make_unique<JpegReader>();
  struct Destroy {
    JpegReader* r;
    ~Destroy() { if (r->created) jpeg_destroy_decompress(&r->cinfo); }
  } destroy{reader.get()};
  if (!jpegStart(*reader, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()),
                 wanted))
    imageFileError("read-image", path, std::string("not a readable JPEG image: ") + reader->errors.message);
  int64_t h = reader->cinfo.output_height, w = reader->cinfo.output_width, c = reader->cinfo.output_components;
  checkImageSize("read-image", path, h, w, c);
  at::Tensor hwc = at::empty({h, w, c}, at::kByte);
  if (!jpegPixels(*reader, hwc.data_ptr<uint8_t>()))
    imageFileError("read-image", path, std::string("not a readable JPEG image: ") + reader->errors.message);
  return hwc.permute({2, 0, 1}).contiguous();
}

// ---- PNG -------------------------------------------------------------------------------------

struct PngSource {
  const unsigned char* data;
  size_t size, at;
};

struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngSource source{};
  char message[256] = {0};
  int channels = 0;
  png_uint_32 width = 0, height = 0;
};

void pngFail(png_structp png, png_const_charp what) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof r->message, "%s", what);
  png_longjmp(png, 1);
}

void pngWarn(png_structp, png_const_charp) {}

void pngReadBytes(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  if (r->source.size - r->source.at < n) png_error(png, "the file is truncated");
  std::memcpy(out, r->source.data + r->source.at, n);
  r->source.at += n;
}

// Header and the conversions MODE asks for, as torchvision's decode_png sets them.
bool pngStart(PngReader& r, ReadMode mode) {
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, pngFail, pngWarn);
  if (!r.png) {
    std::snprintf(r.message, sizeof r.message, "out of memory");
    return false;
  }
  if (setjmp(png_jmpbuf(r.png))) return false;
  r.info = png_create_info_struct(r.png);
  if (!r.info) png_error(r.png, "out of memory");
  png_set_read_fn(r.png, nullptr, pngReadBytes);
  png_read_info(r.png, r.info);
  int depth = 0, colour = 0, interlace = 0;
  png_get_IHDR(r.png, r.info, &r.width, &r.height, &depth, &colour, &interlace, nullptr, nullptr);
  if (depth > 8) png_error(r.png, "16-bit PNG images are not supported (torchvision 0.14 refuses them too)");
  bool hasTrns = png_get_valid(r.png, r.info, PNG_INFO_tRNS) != 0;
  if (colour == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(r.png);
  if (colour == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(r.png);
  if (hasTrns) png_set_tRNS_to_alpha(r.png);
  bool colourIn = (colour & PNG_COLOR_MASK_COLOR) != 0 || colour == PNG_COLOR_TYPE_PALETTE;
  bool alphaIn = (colour & PNG_COLOR_MASK_ALPHA) != 0 || hasTrns;
  bool wantColour = colourIn, wantAlpha = alphaIn;
  switch (mode) {
    case ReadMode::Unchanged: break;
    case ReadMode::Gray: wantColour = false; wantAlpha = false; break;
    case ReadMode::GrayAlpha: wantColour = false; wantAlpha = true; break;
    case ReadMode::Rgb: wantColour = true; wantAlpha = false; break;
    case ReadMode::RgbAlpha: wantColour = true; wantAlpha = true; break;
  }
  if (alphaIn && !wantAlpha) png_set_strip_alpha(r.png);
  if (!alphaIn && wantAlpha) png_set_add_alpha(r.png, 0xff, PNG_FILLER_AFTER);
  if (colourIn && !wantColour) png_set_rgb_to_gray(r.png, 1, 0.2989, 0.587);   // torchvision's weights
  if (!colourIn && wantColour) png_set_gray_to_rgb(r.png);
  png_set_interlace_handling(r.png);
  png_read_update_info(r.png, r.info);
  r.channels = png_get_channels(r.png, r.info);
  return true;
}

bool pngPixels(PngReader& r, unsigned char* out) {
  if (setjmp(png_jmpbuf(r.png))) return false;
  size_t stride = png_get_rowbytes(r.png, r.info);
  int passes = png_set_interlace_handling(r.png);
  for (int pass = 0; pass < passes; pass++)
    for (png_uint_32 y = 0; y < r.height; y++) png_read_row(r.png, out + size_t(y) * stride, nullptr);
  png_read_end(r.png, nullptr);
  return true;
}

at::Tensor decodePng(const std::string& bytes, ReadMode mode, const std::string& path) {
  auto reader = std::make_unique<PngReader>();
  struct Destroy {
    PngReader* r;
    ~Destroy() { if (r->png) png_destroy_read_struct(&r->png, r->info ? &r->info : nullptr, nullptr); }
  } destroy{reader.get()};
  reader->source = {reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), 0};
  if (!pngStart(*reader, mode)) imageFileError("read-image", path, std::string("not a readable PNG image: ") + reader->message);
  int64_t h = reader->height, w = reader->width, c = reader->channels;
  checkImageSize("read-image", path, h, w, c);
  if (int64_t(png_get_rowbytes(reader->png, reader->info)) != w * c)
    imageFileError("read-image", path, "unexpected PNG row layout");
  at::Tensor hwc = at::empty({h, w, c}, at::kByte);
  if (!pngPixels(*reader, hwc.data_ptr<uint8_t>()))
    imageFileError("read-image", path, std::string("not a readable PNG image: ") + reader->message);
  return hwc.permute({2, 0, 1}).contiguous();
}

at::Tensor readImage(const std::string& path, ReadMode mode) {
  requireFileAccess("read-image");
  std::string bytes = readWholeFile(path, "read-image");
  static const unsigned char kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return decodePng(bytes, mode, path);
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF && static_cast<unsigned char>(bytes[1]) == 0xD8 &&
      static_cast<unsigned char>(bytes[2]) == 0xFF)
    return decodeJpeg(bytes, mode, path);
  imageFileError("read-image", path, "neither a JPEG nor a PNG image");
}

// ---- writing ---------------------------------------------------------------------------------

// A uint8 [C H W] image with C as WHO accepts it, as contiguous [H W C] pixels.
at::Tensor pixelsToWrite(const at::Tensor& image, const char* who, bool alphaAllowed) {
  if (image.scalar_type() != at::kByte || image.dim() != 3 ||
      !(image.size(0) == 1 || image.size(0) == 3 || (alphaAllowed && image.size(0) == 4)))
    throwError("type-error", std::string(who) + ": the image must be a uint8 tensor [C H W] with C 1 or 3" +
                                 (alphaAllowed ? " (or 4, with alpha)" : "") + "; got " + c10::str(image.scalar_type()) +
                                 " " + c10::str(image.sizes()));
  if (image.size(1) == 0 || image.size(2) == 0) throwError("type-error", std::string(who) + ": the image is empty");
  return image.detach().to(at::kCPU).permute({1, 2, 0}).contiguous();
}

struct JpegWriter {
  jpeg_compress_struct cinfo;
  JpegErrors errors;
  bool created = false;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
};

bool jpegEncode(JpegWriter& w, const unsigned char* pixels, int height, int width, int channels, int quality) {
  w.cinfo.err = jpeg_std_error(&w.errors.mgr);
  w.errors.mgr.error_exit = jpegFail;
  w.errors.mgr.output_message = jpegQuiet;
  if (setjmp(w.errors.jump)) return false;
  jpeg_create_compress(&w.cinfo);
  w.created = true;
  jpeg_mem_dest(&w.cinfo, &w.buffer, &w.size);
  w.cinfo.image_width = JDIMENSION(width);
  w.cinfo.image_height = JDIMENSION(height);
  w.cinfo.input_components = channels;
  w.cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&w.cinfo);
  jpeg_set_quality(&w.cinfo, quality, TRUE);
  jpeg_start_compress(&w.cinfo, TRUE);
  size_t stride = size_t(width) * size_t(channels);
  while (w.cinfo.next_scanline < w.cinfo.image_height) {
    JSAMPROW row = const_cast<unsigned char*>(pixels) + size_t(w.cinfo.next_scanline) * stride;
    jpeg_write_scanlines(&w.cinfo, &row, 1);
  }
  jpeg_finish_compress(&w.cinfo);
  return true;
}

std::string encodeJpeg(const at::Tensor& hwc, int quality) {
  auto writer = std::make_unique<JpegWriter>();
  struct Destroy {
    JpegWriter* w;
    ~Destroy() {
      if (w->created) jpeg_destroy_compress(&w->cinfo);
      std::free(w->buffer);
    }
  } destroy{writer.get()};
  if (hwc.size(0) > JPEG_MAX_DIMENSION || hwc.size(1) > JPEG_MAX_DIMENSION)
    throwError("type-error", "write-jpeg: a JPEG image is at most " + std::to_string(JPEG_MAX_DIMENSION) + " pixels a side");
  if (!jpegEncode(*writer, hwc.data_ptr<uint8_t>(), int(hwc.size(0)), int(hwc.size(1)), int(hwc.size(2)), quality))
    throwError("error", std::string("write-jpeg: ") + writer->errors.message);
  return std::string(reinterpret_cast<const char*>(writer->buffer), writer->size);
}

}  // namespace

void registerImageFiles(Registry& r) {
  r.def("read-image", "(path :key (mode \"unchanged\"))",
        [](std::string path, std::string mode) { return readImage(path, readModeOf(mode)); },
        "Reads the JPEG or PNG file PATH as a uint8 tensor [C H W] (torchvision.io.read_image). C is what the\n"
        "file holds with :mode 'unchanged (1 grey, 2 grey and alpha, 3 RGB, 4 RGB and alpha; a palette becomes\n"
        "RGB, transparency an alpha channel); :mode 'gray, 'gray-alpha, 'rgb or 'rgb-alpha (a symbol or a\n"
        "string) converts. A file that is corrupt, truncated, 16-bit or CMYK is a file-error naming PATH.");
  sandbox(r, "read-image", Needs::Files, "files: reads an image file");
  r.def("write-png", "(image path)",
        [](const at::Tensor& image, std::string path) {
          std::string png = encodePng(pixelsToWrite(image, "write-png", true));
          writeFileAtomically(path, png.data(), png.size(), "write-png");
        },
        "Writes IMAGE, a uint8 tensor [C H W] with C 1 (grey), 3 (RGB) or 4 (RGBA), to the PNG file PATH,\n"
        "atomically (torchvision.io.write_png). read-image reads back the same pixels.");
  sandbox(r, "write-png", Needs::Files, "files: writes a PNG file");
  r.def("write-jpeg", "(image path :key (quality 75))",
        [](const at::Tensor& image, std::string path, int64_t quality) {
          if (quality < 1 || quality > 100) throwError("type-error", "write-jpeg: :quality is 1 to 100");
          std::string jpeg = encodeJpeg(pixelsToWrite(image, "write-jpeg", false), int(quality));
          writeFileAtomically(path, jpeg.data(), jpeg.size(), "write-jpeg");
        },
        "Writes IMAGE, a uint8 tensor [C H W] with C 1 (grey) or 3 (RGB), to the JPEG file PATH at :quality\n"
        "1..100, atomically (torchvision.io.write_jpeg).");
  sandbox(r, "write-jpeg", Needs::Files, "files: writes a JPEG file");
  r.def("file->tensor", "(path)",
        [](std::string path) {
          requireFileAccess("file->tensor");
          std::string bytes = readWholeFile(path, "file->tensor");
          checkAllocationBudget("a tensor", bytes.size());
          at::Tensor t = at::empty({int64_t(bytes.size())}, at::kByte);
          if (!bytes.empty()) std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
          return t;
        },
        "The bytes of the file PATH as a one-dimensional uint8 tensor (torchvision.io.read_file): binary\n"
        "formats such as CIFAR-10's are then cut with tensor operations.");
  sandbox(r, "file->tensor", Needs::Files, "files: reads a file");
}

}  // namespace purple
