// Tiny-tensor dispatch, LibTorch C++ side (same work as dispatch.py and dispatch.purple).
// Build: g++ -O2 -std=c++17 dispatch.cpp -ltorch_cpu -lc10 (bench/run.sh does it).
// Run:   dispatch N THREADS [add|matmul-relu|both]   (the profile runs one loop at a time)
// Prints "WORK ...", "RESULT name seconds checksum" (wall clock, timed region only) and
// "CPU name seconds" (processor time of the same region) for each loop.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const char* which = argc > 3 ? argv[3] : "both";
  bool doAdd = std::strcmp(which, "matmul-relu") != 0, doMm = std::strcmp(which, "add") != 0;
  at::set_num_threads(threads);
  at::globalContext().setFlushDenormal(true);
  at::manual_seed(0);

  at::Tensor x = at::ones({2});
  at::Tensor a = at::randn({4, 4});
  at::Tensor b = at::randn({4, 4});
  // Warm-up: first calls resolve dispatch tables and allocate.
  for (int i = 0; i < 1000; i++) { at::add(x, 1); at::relu(at::matmul(a, b)); }

  at::Tensor r;
  if (doAdd) {
    std::printf("WORK add: %ld x (x + 1) on a float32 tensor of 2 elements, results dropped\n", n);
    std::fflush(stdout);
    std::clock_t c0 = std::clock();
    double t0 = now();
    for (long i = 0; i < n; i++) r = at::add(x, 1);
    double t1 = now();
    std::clock_t c1 = std::clock();
    std::printf("RESULT add %.9f %g\n", t1 - t0, r.sum().item<double>());
    std::printf("CPU add %.9f\n", double(c1 - c0) / CLOCKS_PER_SEC);
  }
  if (doMm) {
    std::printf("WORK matmul-relu: %ld x relu(a @ b) on float32 4x4 tensors, results dropped\n", n);
    std::fflush(stdout);
    std::clock_t c0 = std::clock();
    double t0 = now();
    for (long i = 0; i < n; i++) r = at::relu(at::matmul(a, b));
    double t1 = now();
    std::clock_t c1 = std::clock();
    std::printf("RESULT matmul-relu %.9f %.4f\n", t1 - t0, r.sum().item<double>());
    std::printf("CPU matmul-relu %.9f\n", double(c1 - c0) / CLOCKS_PER_SEC);
  }
  return 0;
}
