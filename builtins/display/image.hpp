// Tensors as pictures: an image-shaped tensor to 8-bit pixels, and pixels to PNG. Used by the
// display protocol (notebooks), image files, plots and TensorBoard's image summaries.
#pragma once
#include <ATen/ATen.h>
#include <string>
#include <string_view>
#include <vector>

namespace purple {

// An image-shaped tensor as contiguous uint8 pixels [H, W, C] with C 1 (grey), 3 (RGB) or 4
// (RGBA). Accepted: [H W], [C H W] and [H W C] (C in 1, 3, 4; [C H W] wins when both fit, as in
// PyTorch), and a batch of one [1 C H W]. uint8 is taken as is, bool as black and white; other
// dtypes are taken as intensities in [0, 1] (clamped), or, with `normalize`, rescaled from their
// minimum and maximum. Throws a Purple error naming `who` for any other shape.
at::Tensor imagePixels(const at::Tensor& image, bool normalize, std::string_view who);
// PNG bytes of uint8 pixels [H W C] (C 1, 3 or 4), zlib-compressed.
std::string encodePng(const at::Tensor& pixels);
// Like torchvision.utils.make_grid: the images (each as imagePixels takes it) side by side in
// rows of `columns`, `padding` pixels of grey level `fill` (0..1) between them; uint8 [C H W].
at::Tensor imageGrid(const std::vector<at::Tensor>& images, int64_t columns, int64_t padding, double fill, bool normalize);

}  // namespace purple
