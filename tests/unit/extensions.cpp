// Unit tests of load-inline's and cuda-raw-kernel's text handling (builtins/extensions/): reading
// declarations out of C++ and CUDA source, the compiler output a Purple error shows, cache keys.
// (Compiling and loading are tested end to end in tests/extensions/.)
#include "builtins/extensions/compile_errors.hpp"
#include "builtins/extensions/extension_cache.hpp"
#include "builtins/extensions/source_scan.hpp"
#include <string>

#include "tests/unit/doctest_after_torch.hpp"

using namespace purple::extensions;

namespace {

std::string paramText(const std::vector<DeclaredParam>& ps) {
  std::string s;
  for (const auto& p : ps) s += "[" + p.type + "|" + p.name + "]";
  return s;
}

const char* kSource = R"(#include <torch/extension.h>
// bias_gelu(torch::Tensor not_this) { is a comment
torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias);   // a declaration, not the definition
const char* text = "bias_gelu(int nor_this) {";
torch::Tensor bias_gelu(torch::Tensor x, const torch::Tensor& bias) {
  return bias_gelu_impl(x, bias);
}
auto many(int64_t n, double s = 1.0, std::vector<int64_t> shape = {1, 2}, torch::Tensor) -> std::vector<at::Tensor> {
  return {};
}
#define NOT_A_DEFINITION(x) void hidden(x) {}
struct P { int a; };
template <typename T, int N>
__global__ void __launch_bounds__(256) scale(T* __restrict__ v, const T s, unsigned long long n, P p) { }
extern "C" __global__ void plain(void) {}
)";

}  // namespace

TEST_CASE("extensions: a function's parameters read from its definition") {
  auto f = findParameters(kSource, "bias_gelu");
  REQUIRE(f);
  CHECK(paramText(*f) == "[torch::Tensor|x][const torch::Tensor&|bias]");
  CHECK(paramText(*findParameters(kSource, "many")) ==
        "[int64_t|n][double|s][std::vector<int64_t>|shape][torch::Tensor|]");
  CHECK(findParameters(kSource, "plain")->empty());
  CHECK(paramText(*findParameters(kSource, "ns::bias_gelu")) == paramText(*f));
  CHECK_FALSE(findParameters(kSource, "hidden"));        // only inside a macro
  CHECK_FALSE(findParameters(kSource, "bias_gelu_impl"));   // only called
  CHECK_FALSE(findParameters(kSource, "missing"));
}

TEST_CASE("extensions: a template kernel's parameters for one instance") {
  auto f = findFunction(kSource, "scale");
  REQUIRE(f);
  CHECK(f->templateParams == std::vector<std::string>{"T", "N"});
  CHECK(paramText(f->params) == "[T* __restrict__|v][const T|s][unsigned long long|n][P|p]");
  auto args = templateArguments("scale<float, 4>");
  CHECK(args == std::vector<std::string>{"float", "4"});
  CHECK(substituteWords("const T*", f->templateParams, args) == "const float*");
  CHECK(substituteWords("Tx", f->templateParams, args) == "Tx");   // whole words only
  CHECK(templateArguments("plain").empty());
}

TEST_CASE("extensions: identifiers") {
  CHECK(isIdentifier("bias_gelu"));
  CHECK_FALSE(isIdentifier("bias-gelu"));
  CHECK_FALSE(isIdentifier("1x"));
  CHECK_FALSE(isIdentifier("ns::f"));
  CHECK(isIdentifier("ns::f", true));
  CHECK_FALSE(isIdentifier("ns::", true));
  CHECK_FALSE(isIdentifier(""));
}

TEST_CASE("extensions: the compiler output a compile-error shows") {
  std::string gcc =
      "In file included from /usr/include/c10/core/Something.h:3:\n"
      "/usr/include/c10/util/noise.h:10:5: note: lots of context\n"
      "my_ops.cpp: In function 'at::Tensor f(at::Tensor)':\n"
      "my_ops.cpp:3:52: error: 'undefined_name' was not declared in this scope\n"
      "    3 | torch::Tensor f(torch::Tensor x) { return x + undefined_name; }\n"
      "      |                                                    ^~~~~~~~~~~~~~\n"
      "/usr/include/more/noise.h:1:1: note: unrelated\n";
  std::string s = compilerOutputSummary(gcc, {"my_ops.cpp"});
  CHECK(s.find("my_ops.cpp:3:52: error") != std::string::npos);
  CHECK(s.find("    3 | torch::Tensor") != std::string::npos);
  CHECK(s.find("^~~~") != std::string::npos);
  CHECK(s.find("unrelated") == std::string::npos);
  CHECK(s.find("lots of context") == std::string::npos);
  CHECK(compilerOutputSummary("ld: something odd\n", {"x.cpp"}) == "ld: something odd");   // nothing matched: the start
  std::string many;
  for (int i = 0; i < 100; i++) many += "x.cpp:" + std::to_string(i) + ": error: e\n";
  CHECK(compilerOutputSummary(many, {"x.cpp"}, {}, 5).size() < 5 * 25);
  CHECK(compilerOutputSummary("a: In instantiation of struct purple_ext::Holder<int*>\n", {"x.cpp"}, {"struct purple_ext::"})
            .find("Holder<int*>") != std::string::npos);
  CHECK(colonLineNumbers("k.cu(3): error: identifier \"q\" is undefined\nother(4): x\n", "k.cu") ==
        "k.cu:3: error: identifier \"q\" is undefined\nother(4): x\n");
}

TEST_CASE("extensions: cache keys") {
  CHECK(hashHex("a").size() == 32);
  CHECK(hashHex("a") == hashHex("a"));
  CHECK(hashHex("a") != hashHex("b"));
  CHECK(hashHex("") != hashHex(std::string(1, '\0')));
  CHECK(shimHash().size() == 32);
}
