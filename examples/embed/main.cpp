// A host program that embeds Purple: it gives Purple a native function and a data set as an
// at::Tensor (shared, not copied), lets a Purple script train a small linear model on it, and
// reads the learned weights back as tensors.
#include <purple/purple.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <iostream>

int main() {
  at::manual_seed(0);
  // y = 3 x1 - 2 x2 + 0.5, plus a little noise
  at::Tensor x = at::randn({256, 2});
  at::Tensor trueW = at::tensor({3.0f, -2.0f}).reshape({2, 1});
  at::Tensor y = x.matmul(trueW) + 0.5 + 0.01 * at::randn({256, 1});

  purple::Options options;
  options.limits = purple::Limits::sandbox();   // the script needs no files, processes or environment
  options.limits.maxSeconds = 60;
  options.onOutput = [](std::string_view s) { std::cout << "[purple] " << s; };
  purple::Interpreter interp(options);

  // A native function Purple calls once per epoch to report progress to the host.
  int reports = 0;
  interp.define("report", [&reports](int64_t epoch, double loss) {
    reports++;
    std::printf("epoch %3lld  loss %.5f\n", static_cast<long long>(epoch), loss);
  }, "Prints EPOCH and LOSS on the host's terminal.");

  interp.set("x", x);   // the same storage: no copy
  interp.set("y", y);

  try {
    interp.eval(R"(
      (define model (linear 2 1))
      (define opt (sgd (parameters model) :lr 0.1))
      (define (train epochs)
        (let loop ((epoch 1))
          (when (<= epoch epochs)
            (let ((loss (mse-loss (model x) y)))
              (backward loss)
              (optimizer-step opt)
              (when (= 0 (modulo epoch 20)) (report epoch (tensor-item loss))))
            (loop (+ epoch 1)))))
      (train 100)
      (display "training done\n")
    )", "train.purple");

    // Read the result back: the weight and bias tensors of the trained layer.
    purple::Value params = interp.eval("(map cdr (named-parameters model))");
    at::Tensor w = params[0].tensor();
    at::Tensor b = params[1].tensor();
    std::cout << "learned w = [" << w[0][0].item<float>() << ", " << w[0][1].item<float>()
              << "], b = " << b[0].item<float>() << "\n";

    // Call a Purple procedure with a host tensor; the result comes back as an at::Tensor.
    at::Tensor probe = at::tensor({1.0f, 1.0f}).reshape({1, 2});
    at::Tensor pred = interp.call("model", probe).to<at::Tensor>();
    std::cout << "model(1, 1) = " << pred.item<float>() << " (expected 1.5)\n";

    bool ok = reports == 5 && std::fabs(w[0][0].item<float>() - 3.0f) < 0.05 &&
              std::fabs(w[0][1].item<float>() + 2.0f) < 0.05 && std::fabs(b[0].item<float>() - 0.5f) < 0.05 &&
              std::fabs(pred.item<float>() - 1.5f) < 0.1;
    std::cout << (ok ? "OK" : "FAILED") << "\n";
    return ok ? 0 : 1;
  } catch (const purple::Error& e) {
    std::cerr << e.report() << "\n";
    return 1;
  }
}
