// cuda-raw-kernel: CUDA C compiled with NVRTC, as CuPy's RawKernel does, and launched on LibTorch's
// current stream as (k grid block arg ...). NVRTC compiles without a GPU, so a kernel's syntax and
// type errors are reported wherever NVRTC is installed; the launch needs the driver and CUDA tensors.
//
// NVRTC says nothing about a kernel's parameters, and a launch passes raw bytes: the kernel's
// definition is read from the source (source_scan.hpp), and every argument is checked against its
// declared type before the launch: a pointer takes a contiguous CUDA tensor of the pointee's dtype
// (any dtype for void* or a type of the user's own), an integer parameter an exact integer in its
// range, a floating-point one a real number, bool a boolean.
#include "builtins/builtins.hpp"
#include "builtins/extensions/compile_errors.hpp"
#include "builtins/extensions/cuda_libraries.hpp"
#include "builtins/extensions/extension_cache.hpp"
#include "builtins/extensions/source_scan.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/limits/sandbox.hpp"
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace purple {

namespace ext = extensions;

namespace {

constexpr const char* kWho = "cuda-raw-kernel";

struct KernelParam {
  enum Kind { Pointer, Integer, Floating, Boolean } kind = Integer;
  std::string type, name;
  int bytes = 8;                                // a value's size
  bool isUnsigned = false;
  std::optional<at::ScalarType> dtype;          // a pointer's element type, a floating value's format
};

// The types a launch can pass, by their spelling after const/volatile/__restrict__ are dropped.
bool knownType(const std::string& t, KernelParam& p) {
  struct Row { const char* names; KernelParam::Kind kind; int bytes; bool isUnsigned; at::ScalarType dtype; };
  static const Row rows[] = {
      {"|float|", KernelParam::Floating, 4, false, at::kFloat},
      {"|double|", KernelParam::Floating, 8, false, at::kDouble},
      {"|half|__half|", KernelParam::Floating, 2, false, at::kHalf},
      {"|__nv_bfloat16|nv_bfloat16|", KernelParam::Floating, 2, false, at::kBFloat16},
      {"|bool|", KernelParam::Boolean, 1, false, at::kBool},
      {"|char|signed char|int8_t|", KernelParam::Integer, 1, false, at::kChar},
      {"|unsigned char|uint8_t|", KernelParam::Integer, 1, true, at::kByte},
      {"|short|short int|signed short|int16_t|", KernelParam::Integer, 2, false, at::kShort},
      {"|int|signed|signed int|int32_t|", KernelParam::Integer, 4, false, at::kInt},
      {"|long|long int|long long|long long int|int64_t|ptrdiff_t|ssize_t|", KernelParam::Integer, 8, false, at::kLong},
  };
  // unsigned types wider than a byte have no dtype in every LibTorch Purple builds against
  static const Row unsignedRows[] = {
      {"|unsigned short|uint16_t|", KernelParam::Integer, 2, true, at::kShort},
      {"|unsigned|unsigned int|uint32_t|", KernelParam::Integer, 4, true, at::kInt},
      {"|unsigned long|unsigned long long|uint64_t|size_t|", KernelParam::Integer, 8, true, at::kLong},
  };
  std::string key = "|" + t + "|";
  for (const Row& r : rows)
    if (std::strstr(r.names, key.c_str())) {
      p.kind = r.kind, p.bytes = r.bytes, p.isUnsigned = r.isUnsigned, p.dtype = r.dtype;
      return true;
    }
  for (const Row& r : unsignedRows)
    if (std::strstr(r.names, key.c_str())) {
      p.kind = r.kind, p.bytes = r.bytes, p.isUnsigned = true, p.dtype = std::nullopt;
      return true;
    }
  return false;
}

std::string withoutQualifiers(const std::string& type) {
  std::string out;
  size_t i = 0;
  while (i < type.size()) {
    size_t j = type.find(' ', i);
    if (j == std::string::npos) j = type.size();
    std::string word = type.substr(i, j - i);
    if (word != "const" && word != "volatile" && word != "__restrict__" && word != "__restrict" && word != "restrict")
      out += (out.empty() ? "" : " ") + word;
    i = j + 1;
  }
  return out;
}

KernelParam classify(const ext::DeclaredParam& d, const std::string& kernel, size_t index) {
  KernelParam p;
  p.type = d.type;
  p.name = d.name.empty() ? "arg" + std::to_string(index) : d.name;
  std::string t = withoutQualifiers(d.type);
  size_t star = t.find('*');
  if (star != std::string::npos) {
    p.kind = KernelParam::Pointer;
    std::string element = withoutQualifiers(t.substr(0, star));
    while (!element.empty() && element.back() == ' ') element.pop_back();
    KernelParam e;
    if (t.find('*', star + 1) == std::string::npos && knownType(element, e)) p.dtype = e.dtype;
    return p;   // void*, T*, a struct: any dtype
  }
  if (!knownType(t, p))
    throwError("type-error", std::string(kWho) + ": " + kernel + "'s parameter " + std::to_string(index + 1) + " (" +
                                 p.name + ") has type " + d.type + ", which a launch cannot pass: only pointers "
                                 "(tensors), integers, floating-point numbers and bool");
  return p;
}

struct RawKernel {
  std::string name;        // as given: the kernel, or a name expression such as "scale<float>"
  std::string lowered;     // the name in the compiled module
  std::string ptx;
  std::vector<KernelParam> params;
  std::mutex lock;
  std::map<void*, void*> functions;   // per CUDA context: the loaded kernel
};

std::string nvrtcLog(const ext::Nvrtc& n, ext::Nvrtc::Program prog) {
  size_t size = 0;
  n.getProgramLogSize(prog, &size);
  std::string log(size, '\0');
  if (size) n.getProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

RawKernel* compileKernel(const std::string& name, const std::string& source, const std::vector<std::string>& userOptions) {
  std::string why;
  const ext::Nvrtc* n = ext::nvrtc(&why);
  if (!n) throwError("error", std::string(kWho) + ": " + why);
  std::string base = name.substr(0, name.find('<'));
  while (!base.empty() && base.back() == ' ') base.pop_back();
  if (!ext::isIdentifier(base, true)) throwError("type-error", std::string(kWho) + ": \"" + name + "\" does not name a kernel");
  std::vector<std::string> options;
  bool archGiven = false;
  for (const auto& o : userOptions)
    if (o.rfind("--gpu-architecture", 0) == 0 || o.rfind("-arch", 0) == 0) archGiven = true;
  if (!archGiven)
    if (int cc = ext::computeCapability(0)) options.push_back("--gpu-architecture=compute_" + std::to_string(cc));
  options.insert(options.end(), userOptions.begin(), userOptions.end());

  // the process-wide memo: one compile per kernel, source and options
  std::string key = name + '\0' + source + '\0';
  for (const auto& o : options) key += o + '\x1f';
  static std::mutex memoLock;
  static auto* memo = new std::map<std::string, RawKernel*>();
  std::string hash = ext::hashHex(key);
  {
    std::lock_guard<std::mutex> g(memoLock);
    auto it = memo->find(hash);
    if (it != memo->end()) return it->second;
  }

  std::string file = base.substr(base.rfind(':') == std::string::npos ? 0 : base.rfind(':') + 1) + ".cu";
  ext::Nvrtc::Program prog = nullptr;
  int rc = n->createProgram(&prog, source.c_str(), file.c_str(), 0, nullptr, nullptr);
  if (rc != 0) throwError("error", std::string(kWho) + ": NVRTC: " + n->getErrorString(rc));
  struct Destroy {
    const ext::Nvrtc* n;
    ext::Nvrtc::Program* p;
    ~Destroy() { n->destroyProgram(p); }
  } destroy{n, &prog};
  n->addNameExpression(prog, name.c_str());
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  rc = n->compileProgram(prog, int(argv.size()), argv.data());
  std::string log = nvrtcLog(*n, prog);
  if (rc != 0) {
    std::string summary = ext::compilerOutputSummary(ext::colonLineNumbers(log, file), {file});
    ext::throwCompileError(kWho, name + " with NVRTC (" + std::string(n->getErrorString(rc)) + ")", summary, "");
  }
  auto k = std::make_unique<RawKernel>();
  k->name = name;
  const char* lowered = nullptr;
  if (n->getLoweredName(prog, name.c_str(), &lowered) != 0 || !lowered)
    throwError("error", std::string(kWho) + ": the source defines no __global__ function " + name);
  k->lowered = lowered;
  size_t size = 0;
  n->getPTXSize(prog, &size);
  k->ptx.assign(size, '\0');
  n->getPTX(prog, k->ptx.data());
  auto found = ext::findFunction(source, base);
  if (!found)
    throwError("error", std::string(kWho) + ": cannot find the definition of " + base + " in the source, so its "
                                            "parameters cannot be checked (write the __global__ function out, not "
                                            "through a macro)");
  // a template instance ("scale<float>"): its parameter types with the template's names replaced
  std::vector<std::string> arguments = ext::templateArguments(name);
  for (size_t i = 0; i < found->params.size(); i++) {
    ext::DeclaredParam p = found->params[i];
    p.type = ext::substituteWords(p.type, found->templateParams, arguments);
    k->params.push_back(classify(p, name, i));
  }
  std::lock_guard<std::mutex> g(memoLock);
  RawKernel*& slot = (*memo)[hash];
  if (!slot) slot = k.release();   // kept for the process: procedures of it may live anywhere
  return slot;
}

// ---- the launch ------------------------------------------------------------------------------

// GRID or BLOCK: a positive integer or a list of one to three of them.
void dims(Value v, unsigned out[3], const PrimitiveInfo* info, int i) {
  out[0] = out[1] = out[2] = 1;
  const char* expected = "a positive integer or a list of one to three positive integers";
  auto one = [&](Value x) -> unsigned {
    if (!x.isFixnum() || x.fixnum() < 1 || x.fixnum() > 0x7fffffff) throwConversionError(info, i, expected, v);
    return unsigned(x.fixnum());
  };
  if (v.isFixnum()) {
    out[0] = one(v);
    return;
  }
  int k = 0;
  if (!isList(v) || v.isNil()) throwConversionError(info, i, expected, v);
  for (Value p = v; isPair(p); p = cdr(p)) {
    if (k == 3) throwConversionError(info, i, expected, v);
    out[k++] = one(car(p));
  }
}

std::string expectedText(const KernelParam& p) {
  switch (p.kind) {
    case KernelParam::Pointer:
      return std::string("a contiguous CUDA tensor") + (p.dtype ? " of dtype " + std::string(c10::toString(*p.dtype)) : "") +
             " (" + p.type + ")";
    case KernelParam::Integer: return "an exact integer that fits in " + p.type;
    case KernelParam::Floating: return "a real number (" + p.type + ")";
    case KernelParam::Boolean: return "a boolean (bool)";
  }
  return p.type;
}

// Writes argument V for parameter P into SLOT (8 bytes, aligned); returns the tensor's device for a pointer.
std::optional<at::Device> packArgument(Value v, const KernelParam& p, uint64_t* slot, const PrimitiveInfo* info, int i) {
  auto refuse = [&]() { throwConversionError(info, i, expectedText(p), v); };
  *slot = 0;
  switch (p.kind) {
    case KernelParam::Pointer: {
      if (!isTensor(v) || !tensorOf(v).defined()) refuse();
      const at::Tensor& t = tensorOf(v);
      if (!t.is_cuda())
        throwError("type-error", info->name + ": argument " + std::to_string(i + 1) + " (" + p.name +
                                     ") must be a CUDA tensor (" + p.type + "), got a tensor on " + t.device().str());
      if (p.dtype && t.scalar_type() != *p.dtype)
        throwError("type-error", info->name + ": argument " + std::to_string(i + 1) + " (" + p.name + ") must have dtype " +
                                     c10::toString(*p.dtype) + " for " + p.type + ", got " + c10::toString(t.scalar_type()));
      if (!t.is_contiguous())
        throwError("type-error", info->name + ": argument " + std::to_string(i + 1) + " (" + p.name +
                                     ") must be contiguous: a kernel reads memory in order (tensor-contiguous makes a copy)");
      void* data = t.data_ptr();
      std::memcpy(slot, &data, sizeof data);
      return t.device();
    }
    case KernelParam::Integer: {
      if (!v.isFixnum() && !isBignum(v)) refuse();
      int64_t x = v.isFixnum() ? v.fixnum() : integerValue(v, info, i);
      int bits = p.bytes * 8;
      bool fits = p.isUnsigned ? x >= 0 && (bits >= 64 || uint64_t(x) < (uint64_t(1) << bits))
                               : bits >= 64 || (x >= -(int64_t(1) << (bits - 1)) && x < (int64_t(1) << (bits - 1)));
      if (!fits) refuse();
      std::memcpy(slot, &x, size_t(p.bytes));   // little-endian: the low bytes
      return std::nullopt;
    }
    case KernelParam::Floating: {
      if (!isRealNumber(v)) refuse();
      double x = toDouble(v);
      if (p.dtype == at::kFloat) {
        float f = float(x);
        std::memcpy(slot, &f, 4);
      } else if (p.dtype == at::kHalf) {
        uint16_t bits = c10::Half(float(x)).x;
        std::memcpy(slot, &bits, 2);
      } else if (p.dtype == at::kBFloat16) {
        uint16_t bits = c10::BFloat16(float(x)).x;
        std::memcpy(slot, &bits, 2);
      } else {
        std::memcpy(slot, &x, 8);
      }
      return std::nullopt;
    }
    case KernelParam::Boolean: {
      if (!v.isBool()) refuse();
      bool b = v.isTrue();
      std::memcpy(slot, &b, 1);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Value launch(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  RawKernel& k = *static_cast<RawKernel*>(info->callable);
  int nParams = int(k.params.size());
  int positional = argc;
  unsigned sharedBytes = 0;
  if (argc >= 2 && isKeyword(argv[argc - 2]) && symbolName(argv[argc - 2]) == "shared-mem") {
    Value s = argv[argc - 1];
    if (!s.isFixnum() || s.fixnum() < 0 || s.fixnum() > 0x7fffffff)
      throwError("type-error", info->name + ": :shared-mem must be a number of bytes, got " + toWriteStringBounded(s));
    sharedBytes = unsigned(s.fixnum());
    positional = argc - 2;
  }
  if (positional != 2 + nParams) throwArityError(info->name, argc, info->signature);
  unsigned grid[3], block[3];
  dims(argv[0], grid, info, 0);
  dims(argv[1], block, info, 1);
  std::vector<uint64_t> slots(size_t(nParams) + 1);
  std::vector<void*> pointers(size_t(nParams) + 1);
  std::optional<at::Device> device;
  for (int i = 0; i < nParams; i++) {
    auto d = packArgument(argv[2 + i], k.params[size_t(i)], &slots[size_t(i)], info, 2 + i);
    if (d && device && *d != *device)
      throwError("type-error", info->name + ": its tensors are on " + device->str() + " and " + d->str() +
                                   ": a kernel runs on one device");
    if (d) device = d;
    pointers[size_t(i)] = &slots[size_t(i)];
  }
  std::string why;
  const ext::CudaDriver* driver = ext::cudaDriver(&why);
  if (!driver) throwError("error", info->name + ": cannot launch: " + why);
  int index = device ? device->index() : 0;
  ext::CudaDeviceGuard guard(index);
  void* context = nullptr;
  int rc = driver->ctxGetCurrent(&context);
  if (rc == 0 && !context) {
    int dev = 0;
    rc = driver->deviceGet(&dev, index);
    if (rc == 0) rc = driver->primaryCtxRetain(&context, dev);
    if (rc == 0) rc = driver->ctxSetCurrent(context);
  }
  if (rc != 0) throwError("error", info->name + ": no CUDA context on device " + std::to_string(index) + ": " + driver->describe(rc));
  void* function = nullptr;
  {
    std::lock_guard<std::mutex> g(k.lock);
    auto it = k.functions.find(context);
    if (it != k.functions.end()) {
      function = it->second;
    } else {
      void* module = nullptr;
      rc = driver->moduleLoadData(&module, k.ptx.c_str());
      if (rc == 0) rc = driver->moduleGetFunction(&function, module, k.lowered.c_str());
      if (rc != 0)
        throwError("error", info->name + ": loading the compiled kernel on device " + std::to_string(index) +
                                " failed: " + driver->describe(rc));
      k.functions[context] = function;
    }
  }
  rc = driver->launchKernel(function, grid[0], grid[1], grid[2], block[0], block[1], block[2], sharedBytes,
                            ext::currentCudaStream(index), pointers.data(), nullptr);
  if (rc != 0) throwError("error", info->name + ": the launch failed: " + driver->describe(rc));
  return Value::unspecified();
}

}  // namespace

void registerCudaRawKernels(Registry& r) {
  r.def("cuda-raw-kernel", "(name source :key options)",
        [](Interp& in, const std::string& name, const std::string& source, std::optional<std::vector<std::string>> options) {
          RawKernel* k = compileKernel(name, source, options.value_or(std::vector<std::string>{}));
          std::string signature = "(grid block";
          std::string cpp;
          for (const auto& p : k->params) {
            signature += " " + p.name;
            cpp += (cpp.empty() ? "" : ", ") + p.type + " " + p.name;
          }
          signature += " :key shared-mem)";
          // one metadata per kernel and process, as the kernel itself
          static std::mutex lock;
          static auto* infos = new std::map<RawKernel*, PrimitiveInfo*>();
          std::lock_guard<std::mutex> g(lock);
          PrimitiveInfo*& info = (*infos)[k];
          if (!info) {
            Registry reg(in, "extensions");
            info = reg.runtimeInfo(name, signature,
                                   "CUDA kernel " + name + "(" + cpp + "), compiled with NVRTC. (" + name +
                                       " grid block arg ... [:shared-mem bytes]) launches it on the current CUDA stream.");
            info->callable = k;
          }
          return Registry::makePrimitive(info, &launch, kPrimBorrowsArgs);
        },
        "Compiles the CUDA C SOURCE with NVRTC and returns a procedure that "
        "launches its __global__ function NAME (extern \"C\", or a name expression such as \"scale<float>\"): "
        "(k grid block arg ... [:shared-mem bytes]) with GRID and BLOCK an integer or a list of up to three, on "
        "LibTorch's current CUDA stream, asynchronously, as CuPy's RawKernel. Each argument is checked against the "
        "kernel's declared parameter: a pointer takes a contiguous CUDA tensor of the pointee's dtype, integer and "
        "floating-point parameters numbers in range, bool a boolean. :options adds NVRTC options (\"--use_fast_math\", "
        "\"-DN=4\"). A compile error is a compile-error carrying NVRTC's log (NAME.cu:LINE:). NVRTC compiles without a "
        "GPU; launching needs the CUDA driver and a CUDA LibTorch.");
  sandbox(r, "cuda-raw-kernel", Needs::Process, "the process: compiles and runs native GPU code");
  r.def("cuda-nvrtc-version", "()",
        []() -> Value {
          const ext::Nvrtc* n = ext::nvrtc(nullptr);
          int major = 0, minor = 0;
          if (!n || n->version(&major, &minor) != 0) return Value::f();
          return cons(Value::fixnum(major), cons(Value::fixnum(minor), Value::nil()));
        },
        "The version of the NVRTC cuda-raw-kernel compiles with, as (major minor), or #f when NVRTC is not "
        "installed (set PURPLE_NVRTC to the library's path when it is elsewhere).");
  sandboxAllowed(r, "cuda-nvrtc-version", "the process: loads CUDA's NVRTC library", "reads a version; runs no code of the script's");
}

}  // namespace purple
