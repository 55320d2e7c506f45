// torch.save / torch.load of Purple data for other builtin families (optimizer state, ...): the
// same as torch-save and torch-load, with their errors.
#pragma once
#include "interp/language/bind.hpp"
#include <string>

namespace purple {

Value torchLoadValue(Interp& in, const std::string& path, const std::string& who);
void torchSaveValue(Value data, const std::string& path, const std::string& who);

}  // namespace purple
