// TorchScript modules (torch.jit.save, traced or scripted) as Purple modules. The loaded
// torch::jit::Module is wrapped in a torch::nn::Module that registers the very same parameter and
// buffer tensors, child by child, so parameters, state-dict, module-to, optimizers and
// load-state-dict! work on it as on any Purple module, and changes show in the scripted code;
// train/eval are passed on to the script. forward converts Purple values to IValues and back
// (tensors, numbers, booleans, strings, lists, vectors as tuples, hash tables as dicts).
#include <torch/nn/module.h>
#include <torch/script.h>
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/formats/format_error.hpp"
#include "builtins/formats/mapped_file.hpp"
#include "builtins/formats/python_values.hpp"
#include "builtins/formats/torchscript.hpp"
#include "builtins/formats/zip.hpp"
#include "builtins/nn/value.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <gc/gc_allocator.h>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace formats {
[[noreturn]] void rethrowFileError(const std::string& who, const std::string& path);   // serialize.cpp
}

namespace formats {

c10::IValue toIValue(Value v, const std::string& who, int depth) {
  if (depth > 1000 || stackNearlyFull()) throwError("value-error", who + ": argument nested too deeply");
  if (isTensor(v)) return tensorArg(v, who, 1);
  if (v.isFixnum()) return int64_t(v.fixnum());
  if (isFlonum(v) || isRatnum(v)) return toDouble(v);
  if (v.isBool()) return v.isTrue();
  if (isString(v)) return std::string(stringView(v));
  if (v.is(Kind::Symbol)) return std::string(symbolName(v));
  if (v.isUnspecified()) return c10::IValue();
  if (v.is(Kind::Vector)) {
    std::vector<c10::IValue> xs;
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) xs.push_back(toIValue(v.as<Vector>()->items[k], who, depth + 1));
    return c10::ivalue::Tuple::create(std::move(xs));
  }
  if (v.isNil() || isList(v)) {
    bool allTensors = true, allInts = true, allFloats = true;
    for (Value p = v; isPair(p); p = cdr(p)) {
      allTensors &= isTensor(car(p));
      allInts &= car(p).isFixnum();
      allFloats &= isFlonum(car(p));
    }
    if (allTensors) {
      c10::List<at::Tensor> l;
      for (Value p = v; isPair(p); p = cdr(p)) l.push_back(tensorArg(car(p), who, 1));
      return l;
    }
    if (allInts) {
      c10::List<int64_t> l;
      for (Value p = v; isPair(p); p = cdr(p)) l.push_back(car(p).fixnum());
      return l;
    }
    if (allFloats) {
      c10::List<double> l;
      for (Value p = v; isPair(p); p = cdr(p)) l.push_back(flonumValue(car(p)));
      return l;
    }
    c10::impl::GenericList l(c10::AnyType::get());
    for (Value p = v; isPair(p); p = cdr(p)) l.push_back(toIValue(car(p), who, depth + 1));
    return l;
  }
  if (isHashTable(v)) {
    auto* h = v.as<HashTable>();
    c10::impl::GenericDict d(c10::StringType::get(), c10::TensorType::get());
    for (uint32_t i = 0; i < h->entryUsed; i++) {
      if (h->entries[2 * i].isUnbound()) continue;
      Value k = h->entries[2 * i];
      if (!isString(k)) throwError("type-error", who + ": dict arguments must have string keys");
      d.insert_or_assign(std::string(stringView(k)), toIValue(h->entries[2 * i + 1], who, depth + 1));
    }
    return d;
  }
  throwError("type-error", who + ": cannot pass " + toWriteString(v) + " to a TorchScript module");
}

Value fromIValue(const c10::IValue& iv, int depth) {
  if (depth > 1000 || stackNearlyFull()) throwError("value-error", "forward: result nested too deeply");
  if (iv.isTensor()) return wrapTensor(iv.toTensor());
  if (iv.isNone()) return Value::unspecified();
  if (iv.isBool()) return Value::boolean(iv.toBool());
  if (iv.isInt()) return makeInteger(iv.toInt());
  if (iv.isDouble()) return makeFlonum(iv.toDouble());
  if (iv.isString()) return makeString(iv.toStringRef());
  if (iv.isTuple()) {
    const auto& xs = iv.toTupleRef().elements();
    std::vector<Value, traceable_allocator<Value>> vs;
    for (auto& x : xs) vs.push_back(fromIValue(x, depth + 1));
    Value vec = makeVector(vs.size());
    for (size_t k = 0; k < vs.size(); k++) vec.as<Vector>()->items[k] = vs[k];
    return vec;
  }
  if (iv.isList()) {
    std::vector<Value, traceable_allocator<Value>> vs;
    for (const auto& x : iv.toListRef()) vs.push_back(fromIValue(x, depth + 1));
    return listFromArray(vs.data(), vs.size());
  }
  if (iv.isGenericDict()) {
    Value h = makeHashTable(HashEquiv::Equal);
    for (const auto& e : iv.toGenericDict()) {
      Value k = fromIValue(e.key(), depth + 1);
      Value x = fromIValue(e.value(), depth + 1);
      hashTablePut(*Interp::current(), h, k, x);
    }
    return h;
  }
  throwError("type-error", std::string("forward: the TorchScript module returned a ") + iv.tagKind() + ", which Purple cannot represent");
}

}  // namespace formats

namespace {

using namespace formats;

std::string shortTypeName(const torch::jit::Module& m) {
  std::string n = m.type()->name() ? m.type()->name()->name() : "ScriptModule";
  return n;
}

struct ScriptModule : torch::nn::Module, ModuleForward {
  torch::jit::Module script;
  std::string name;
  explicit ScriptModule(torch::jit::Module m) : torch::nn::Module(shortTypeName(m)), script(std::move(m)), name(shortTypeName(script)) {
    for (const auto& p : script.named_parameters(false)) register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& b : script.named_buffers(false)) register_buffer(b.name, b.value);
    for (const auto& c : script.named_children()) register_module(c.name, std::make_shared<ScriptModule>(c.value));
    torch::nn::Module::train(script.is_training());
  }
  std::string typeName() const override { return name; }
  void pretty_print(std::ostream& s) const override { s << name << "(TorchScript)"; }
  void train(bool on) override {
    script.train(on);
    torch::nn::Module::train(on);
  }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (!script.find_method("forward")) throwError("type-error", name + ": this TorchScript module has no forward method");
    return callScriptMethod(script, "forward", argv, argc, name);
  }
  std::vector<std::string> methodNames() const override {
    std::vector<std::string> names;
    for (const auto& m : script.get_methods())
      if (m.name() != "forward") names.push_back(m.name());
    return names;
  }
  bool callMethod(Interp&, const std::string& method, const Value* argv, int argc, Value& result) override {
    if (method == "forward" || !script.find_method(method)) return false;
    result = callScriptMethod(script, method, argv, argc, name);
    return true;
  }
};

}  // namespace

namespace formats {

Value wrapScriptModule(torch::jit::Module m) { return wrapModule(std::make_shared<ScriptModule>(std::move(m))); }

torch::jit::Module* scriptModuleOf(torch::nn::Module& m) {
  auto* s = dynamic_cast<ScriptModule*>(&m);
  return s ? &s->script : nullptr;
}

Value callScriptMethod(torch::jit::Module& m, const std::string& method, const Value* argv, int argc, const std::string& who) {
  auto fn = m.find_method(method);
  if (!fn) throwError("value-error", who + ": this TorchScript module has no method " + method);
  std::vector<c10::IValue> args;
  for (int i = 0; i < argc; i++) args.push_back(toIValue(argv[i], who));
  return fromIValue((*fn)(std::move(args)));
}

}  // namespace formats

void registerTorchScript(Registry& r) {
  r.def("load-torchscript", "(path :key map-location)",
        [](std::string path, std::optional<at::Device> device) -> Value {
          requireFileAccess("load-torchscript");
          try {
            // Check the archive with Purple's own zip reader first (truncation, CRCs, zip bombs):
            // LibTorch's reader trusts what the file says.
            auto file = MappedFile::open(path);
            if (!ZipReader::looksLikeZip(*file)) fail("not a TorchScript archive (not a zip file)");
            ZipReader zip(file);
            bool code = false;
            for (auto& e : zip.entries()) {
              code |= e.name.find("/code/") != std::string::npos || e.name.find("constants.pkl") != std::string::npos;
              if (e.size > 64 * 1024 * 1024 && e.method != 0) zip.read(e);   // inflates under the checks
              else if (e.method == 0) zip.storage(e, 1, true);               // checks the CRC without copying
            }
            if (!code) fail("a zip archive without TorchScript code: not a torch.jit.save file (a torch.save file? use torch-load)");
            torch::jit::Module m = device ? torch::jit::load(path, *device) : torch::jit::load(path);
            return wrapModule(std::make_shared<ScriptModule>(std::move(m)));
          } catch (const PurpleException&) {
            throw;
          } catch (...) {
            rethrowFileError("load-torchscript", path);
          }
        },
        "Loads a TorchScript module that Python saved with torch.jit.save (traced or scripted) as a Purple module: "
        "call it, or (forward m x ...), with tensors, numbers, lists (List[Tensor] ...), vectors (tuples) and hash "
        "tables (dicts); results come back the same way. Its parameters and buffers are the module's own (parameters, "
        "state-dict, load-state-dict!, module-to, module-train!/module-eval! and Purple's optimizers work on them, so "
        "it can be fine-tuned). :map-location loads it onto a device.");
  sandbox(r, "load-torchscript", Needs::Files, "files: reads a TorchScript archive");
}

}  // namespace purple
