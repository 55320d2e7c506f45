// Runs files through the fuzz targets' code: the inputs the fuzzers once crashed on
// (tests/fuzz/regressions/, a test of the default suite), or a new crash-* file to reproduce it
// without the fuzzing build. A file named pickle-*, zip-*, safetensors-* or npy-* goes through
// that format's target; any other through the reader and a fresh sandboxed interpreter.
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
    std::string name = argv[i];
    name = name.substr(name.find_last_of('/') + 1);
    auto is = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
    if (is("pickle-")) purple::fuzz::unpickleAll(input);
    if (is("zip-")) purple::fuzz::loadZip(input);
    if (is("safetensors-")) purple::fuzz::loadSafetensors(input);
    if (is("npy-")) purple::fuzz::loadNpy(input);
    if (is("pickle-") || is("zip-") || is("safetensors-") || is("npy-")) continue;
    purple::fuzz::readAll(input);
    purple::embed::Interpreter interp(purple::fuzz::sandboxOptions());
    purple::fuzz::evalSandboxed(interp, input);
  }
  std::cout << "ok: " << argc - 1 << " inputs" << std::endl;
  return 0;
}
