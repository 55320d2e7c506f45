// Serves a TorchScript model (Purple's save-torchscript, or Python's torch.jit.save) with
// LibTorch alone: loads MODEL, reads the forward's arguments from INPUTS (a tensor, or a tuple of
// them, written by Purple's torch-save or Python's torch.save), runs the model and prints its
// outputs. With EXPECTED (the outputs, saved the same way), it compares them and exits 1 when
// any element differs by more than TOLERANCE (default 1e-6).
//
//   deploy model.pt inputs.pt [expected.pt [tolerance]]
#include <torch/script.h>
#include <torch/serialize.h>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

namespace {

c10::IValue readPickle(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return torch::pickle_load(bytes);
}

// The tensors of a model output (a tensor, or tuples and lists of them), in order.
void flatten(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& x : v.toTupleRef().elements()) flatten(x, out);
  } else if (v.isList()) {
    for (const auto& x : v.toListRef()) flatten(x, out);
  } else {
    throw std::runtime_error(std::string("unexpected output of type ") + v.tagKind());
  }
}

// torch::pickle_load gives lists as List[Any]; a model's List[Tensor] argument wants them typed.
c10::IValue typed(const c10::IValue& v) {
  if (v.isList()) {
    bool tensors = true;
    for (const auto& x : v.toListRef()) tensors &= x.isTensor();
    if (tensors) {
      c10::List<at::Tensor> l;
      for (const auto& x : v.toListRef()) l.push_back(x.toTensor());
      return l;
    }
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> xs;
    for (const auto& x : v.toTupleRef().elements()) xs.push_back(typed(x));
    return c10::ivalue::Tuple::create(std::move(xs));
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " model.pt inputs.pt [expected.pt [tolerance]]\n";
    return 2;
  }
  try {
    torch::jit::Module model = torch::jit::load(argv[1]);
    model.eval();
    c10::IValue in = readPickle(argv[2]);
    std::vector<c10::IValue> args;
    if (in.isTuple())
      for (const auto& x : in.toTupleRef().elements()) args.push_back(typed(x));
    else
      args.push_back(typed(in));

    torch::NoGradGuard noGrad;
    c10::IValue out = model.forward(args);
    std::vector<at::Tensor> got;
    flatten(out, got);
    for (size_t i = 0; i < got.size(); i++)
      std::cout << "output " << i << ": shape " << got[i].sizes() << ", sum " << got[i].sum().item<double>() << "\n";

    if (argc > 3) {
      double tolerance = argc > 4 ? std::atof(argv[4]) : 1e-6;
      std::vector<at::Tensor> want;
      flatten(readPickle(argv[3]), want);
      if (want.size() != got.size()) {
        std::cerr << "FAIL: " << got.size() << " outputs, expected " << want.size() << "\n";
        return 1;
      }
      double worst = 0;
      for (size_t i = 0; i < got.size(); i++) {
        if (got[i].sizes() != want[i].sizes()) {
          std::cerr << "FAIL: output " << i << " has shape " << got[i].sizes() << ", expected " << want[i].sizes() << "\n";
          return 1;
        }
        if (got[i].numel() > 0)
          worst = std::max(worst, (got[i].to(torch::kDouble) - want[i].to(torch::kDouble)).abs().max().item<double>());
      }
      std::cout << "max |difference| from expected: " << worst << (worst <= tolerance ? " (ok)" : " (FAIL)") << "\n";
      if (worst > tolerance) return 1;
    }
  } catch (const c10::Error& e) {
    std::cerr << "error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
