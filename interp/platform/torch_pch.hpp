// Precompiled header: the LibTorch headers most builtins need. Files that do not use LibTorch
// pay only a one-time load of the PCH.
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <string>
#include <vector>
#include <optional>
