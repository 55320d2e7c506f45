// Runs files through both fuzz targets' code, each in a fresh sandboxed interpreter: the inputs
// the fuzzers once crashed on (tests/fuzz/regressions/, a test of the default suite), or a new
// crash-* file to reproduce it without the fuzzing build.
//   purple_fuzz_replay FILE ...
#include "tests/fuzz/targets.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

int main(int argc, char** argv) {
  purple::fuzz::limitHeap();
  for (int i = 1; i < argc; i++) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "cannot read " << argv[i] << "\n";
      return 2;
    }
    std::stringstream bytes;
    bytes << in.rdbuf();
    std::string input = bytes.str();
    std::cout << argv[i] << ": " << input.size() << " bytes" << std::endl;
    purple::fuzz::readAll(input);
    purple::embed::Interpreter interp(purple::fuzz::sandboxOptions());
    purple::fuzz::evalSandboxed(interp, input);
  }
  std::cout << "ok: " << argc - 1 << " inputs" << std::endl;
  return 0;
}
