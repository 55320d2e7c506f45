// BatchNorm{1,2,3}d's and InstanceNorm{1,2,3}d's pretty_print, which Debian's LibTorch 1.13
// declares in its headers but does not export. GCC's optimised builds never reference them;
// clang, and GCC at -O0/-O1, emit the base classes' vtables, which do, and libpurple then fails
// to link (the sanitizer and fuzzing builds, docs/hardening.md). Same text as LibTorch's own.
#include <torch/nn/functional/batchnorm.h>
#include <torch/nn/functional/instancenorm.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/instancenorm.h>

#include <ostream>

namespace torch::nn {

template <size_t D, typename Derived>
void BatchNormImplBase<D, Derived>::pretty_print(std::ostream& stream) const {
  stream << std::boolalpha << "torch::nn::BatchNorm" << D << "d(" << this->options.num_features() << ", "
         << "eps=" << this->options.eps() << ", "
         << "momentum=";
  if (this->options.momentum().has_value()) stream << this->options.momentum().value();
  else stream << "None";
  stream << ", affine=" << this->options.affine() << ", track_running_stats=" << this->options.track_running_stats()
         << ")";
}

template <size_t D, typename Derived>
void InstanceNormImpl<D, Derived>::pretty_print(std::ostream& stream) const {
  stream << std::boolalpha << "torch::nn::InstanceNorm" << D << "d(" << this->options.num_features() << ", "
         << "eps=" << this->options.eps() << ", momentum=" << this->options.momentum()
         << ", affine=" << this->options.affine() << ", track_running_stats=" << this->options.track_running_stats()
         << ")";
}

template void BatchNormImplBase<1, BatchNorm1dImpl>::pretty_print(std::ostream&) const;
template void BatchNormImplBase<2, BatchNorm2dImpl>::pretty_print(std::ostream&) const;
template void BatchNormImplBase<3, BatchNorm3dImpl>::pretty_print(std::ostream&) const;
template void InstanceNormImpl<1, InstanceNorm1dImpl>::pretty_print(std::ostream&) const;
template void InstanceNormImpl<2, InstanceNorm2dImpl>::pretty_print(std::ostream&) const;
template void InstanceNormImpl<3, InstanceNorm3dImpl>::pretty_print(std::ostream&) const;

}  // namespace torch::nn
