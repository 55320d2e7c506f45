// Deploying what Purple trains: jit-trace (LibTorch's C++ tracer records the operations one call
// of a Purple procedure or module runs, as torch.jit.trace does), jit-compile (TorchScript source
// through LibTorch's C++ frontend), save-torchscript (a file torch.jit.load and torch::jit::load
// read), jit-call, and export-onnx (python3-torch's torch.onnx.export, through the Python bridge).
//
// Tracing a module: a torch::jit::Module mirrors the Purple module's tree, child by child, and
// holds the very same parameter and buffer tensors as attributes. The tracer is given it as
// `self`, so it maps those tensors to attribute reads (prim::GetAttr), not constants: the traced
// module's parameters are the model's own, and state-dict, module-to and load-state-dict! work
// on it. A procedure is traced with an empty module as `self`; tensors it captures become
// constants (and one that requires gradients is an error, as in Python).
//
// Whatever happens inside the traced call (a Purple error, an escape, a LibTorch error),
// tracer::trace abandons the tracing state before the exception leaves it, so the next trace and
// normal evaluation run as before.
#include <torch/nn/module.h>
#include <torch/script.h>
#include <torch/jit.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/passes/canonicalize.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/shape_analysis.h>
#include "builtins/builtins.hpp"
#include "builtins/formats/torchscript.hpp"
#include "builtins/nn/value.hpp"
#include "interp/core/file_io.hpp"
#include "interp/language/printer.hpp"
#include "interp/limits/sandbox.hpp"
#include "interp/memory/tensor_value.hpp"
#include <gc/gc_allocator.h>
#include <sstream>

namespace purple {

namespace {

using formats::fromIValue;
using formats::scriptModuleOf;
using formats::wrapScriptModule;
namespace jit = torch::jit;
namespace tracer = torch::jit::tracer;

std::string what(Value v) { return toWriteString(v).substr(0, 80) + " (" + describeValueType(v) + ")"; }

// A TorchScript class name from a Purple type name: letters, digits and _ only.
std::string className(const std::string& name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "M" + s;
  return "__torch__.purple." + s;
}

// A torch::jit::Module holding M's own parameters, buffers and (mirrored) children.
jit::Module mirror(const torch::nn::Module& m, const std::shared_ptr<jit::CompilationUnit>& cu, int depth = 0) {
  if (depth > 200) throwError("value-error", "jit-trace: submodules nested too deeply");
  jit::Module jm(className(moduleTypeName(m)), cu, /*shouldMangle=*/true);
  jm.register_attribute("training", c10::BoolType::get(), m.is_training());
  for (const auto& p : m.named_parameters(/*recurse=*/false))
    if (p.value().defined()) jm.register_parameter(p.key(), p.value(), /*is_buffer=*/false);
  for (const auto& b : m.named_buffers(/*recurse=*/false))
    if (b.value().defined()) jm.register_buffer(b.key(), b.value());
  for (const auto& c : m.named_children()) jm.register_module(c.key(), mirror(*c.value(), cu, depth + 1));
  return jm;
}

jit::Module emptyModule(const std::string& name) {
  jit::Module jm(className(name), std::make_shared<jit::CompilationUnit>(), true);
  jm.register_attribute("training", c10::BoolType::get(), false);
  return jm;
}

// One example input: a tensor, a list of tensors (List[Tensor]) or a vector (a tuple) of these.
c10::IValue traceInput(Value v, const std::string& where, int depth = 0) {
  if (depth > 100) throwError("value-error", "jit-trace: " + where + " is nested too deeply");
  if (isTensor(v)) return tensorArg(v, "jit-trace", 2);
  if (isPair(v) && isList(v)) {
    c10::List<at::Tensor> l;
    for (Value p = v; isPair(p); p = cdr(p)) {
      if (!isTensor(car(p)))
        throwError("type-error", "jit-trace: " + where + " is a list holding " + what(car(p)) +
                                     ", which LibTorch cannot trace: a list input must hold tensors only");
      l.push_back(tensorArg(car(p), "jit-trace", 2));
    }
    return l;
  }
  if (v.is(Kind::Vector) && v.as<Vector>()->extra > 0) {
    std::vector<c10::IValue> xs;
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++)
      xs.push_back(traceInput(v.as<Vector>()->items[k], where + " item " + std::to_string(k), depth + 1));
    return c10::ivalue::Tuple::create(std::move(xs));
  }
  throwError("type-error", "jit-trace: " + where + " is " + what(v) +
                               ", which LibTorch cannot trace: inputs must be tensors, or lists or vectors of tensors "
                               "(numbers and other values are constants: capture them in the procedure instead)");
}

// What the traced call returned, as the trace's output.
c10::IValue traceOutput(Value v, int depth = 0) {
  if (depth > 100) throwError("value-error", "jit-trace: the traced result is nested too deeply");
  if (isTensor(v)) return tensorArg(v, "jit-trace", 1);
  if (isPair(v) && isList(v)) {
    bool tensors = true;
    for (Value p = v; isPair(p); p = cdr(p)) tensors &= isTensor(car(p));
    if (tensors) {
      c10::List<at::Tensor> l;
      for (Value p = v; isPair(p); p = cdr(p)) l.push_back(tensorArg(car(p), "jit-trace", 1));
      return l;
    }
    // A list of mixed results, such as an LSTM's (output (h c)): a tuple, as Python has it.
    std::vector<c10::IValue> xs;
    for (Value p = v; isPair(p); p = cdr(p)) xs.push_back(traceOutput(car(p), depth + 1));
    return c10::ivalue::Tuple::create(std::move(xs));
  }
  if (v.is(Kind::Vector) && v.as<Vector>()->extra > 0) {
    std::vector<c10::IValue> xs;
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) xs.push_back(traceOutput(v.as<Vector>()->items[k], depth + 1));
    return c10::ivalue::Tuple::create(std::move(xs));
  }
  throwError("type-error", "jit-trace: the traced procedure returned " + what(v) +
                               ", which cannot be traced: a trace must return a tensor, a list of tensors, or a vector "
                               "of these");
}

jit::Stack traceInputs(Value list, const std::string& what) {
  jit::Stack s;
  int k = 1;
  for (Value p = list; isPair(p); p = cdr(p), k++) s.push_back(traceInput(car(p), what + " " + std::to_string(k)));
  return s;
}

struct Trace {
  std::shared_ptr<jit::Graph> graph;
  jit::Stack outputs;
};

// Runs F (a procedure, or the module PM when it is set) under the tracer, with SELF as the
// traced module.
// METHOD: a method of PM other than forward (define-module's method clauses) to run instead.
Trace runTrace(Interp& in, Value f, const std::shared_ptr<torch::nn::Module>& pm, jit::Stack inputs, jit::Module& self,
               const std::string& method = "") {
  if (tracer::isTracing()) throwError("value-error", "jit-trace: already tracing (jit-trace cannot be called inside a traced procedure)");
  Root proc(f);
  try {
    auto result = tracer::trace(
        std::move(inputs),
        [&](jit::Stack args) -> jit::Stack {
          std::vector<Value, traceable_allocator<Value>> vs;
          for (auto& a : args) vs.push_back(fromIValue(a));
          Value r;
          if (!method.empty()) {
            auto* mf = dynamic_cast<ModuleForward*>(pm.get());
            if (!mf || !mf->callMethod(in, method, vs.data(), int(vs.size()), r))
              throwError("value-error", "jit-trace: " + moduleTypeName(*pm) + " has no method " + method);
          } else {
            r = pm ? callModule(in, pm, vs.data(), int(vs.size())) : in.apply(proc.get(), vs.data(), int(vs.size()));
          }
          jit::Stack out;
          out.push_back(traceOutput(r));
          return out;
        },
        [](const torch::autograd::Variable&) { return std::string(); },
        /*strict=*/false, /*force_outplace=*/false, &self);
    return {result.first->graph, std::move(result.second)};
  } catch (const PurpleException&) {
    throw;
  } catch (const c10::Error& e) {
    throwError("value-error", std::string("jit-trace: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throwError("value-error", std::string("jit-trace: ") + e.what());
  }
}

// The graph without what may differ between two traces of the same code: shapes, value names.
std::string canonicalText(const std::shared_ptr<jit::Graph>& g) {
  auto c = g->copy();
  jit::EraseShapeInformation(c);
  return jit::Canonicalize(c)->toString(false);
}

std::string firstDifference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  while (true) {
    bool ga = bool(std::getline(sa, la)), gb = bool(std::getline(sb, lb));
    if (!ga && !gb) return "";
    if (!ga) la = "(nothing)";
    if (!gb) lb = "(nothing)";
    if (la != lb || !ga || !gb) {
      auto trim = [](std::string s) { return s.substr(s.find_first_not_of(' ') == std::string::npos ? 0 : s.find_first_not_of(' ')); };
      return "first trace: " + trim(la) + "; check trace: " + trim(lb);
    }
  }
}

// Tensors of two outputs, in order.
void flatten(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) out.push_back(v.toTensor());
  else if (v.isTuple()) for (const auto& x : v.toTupleRef().elements()) flatten(x, out);
  else if (v.isList()) for (const auto& x : v.toListRef()) flatten(x, out);
}

void checkTrace(Interp& in, Value f, const std::shared_ptr<torch::nn::Module>& pm, jit::Module& traced,
                const std::string& reference, Value checkInputs) {
  if (checkInputs.isMissing() || checkInputs.isFalse()) return;
  if (!isList(checkInputs)) throwTypeError("jit-trace", 3, "a list of argument lists (:check-inputs)", checkInputs);
  int k = 1;
  for (Value p = checkInputs; isPair(p); p = cdr(p), k++) {
    Value args = car(p);
    if (isTensor(args) || args.is(Kind::Vector)) args = cons(args, Value::nil());
    if (!isList(args)) throwError("type-error", "jit-trace: :check-inputs entry " + std::to_string(k) + " must be a list of inputs, got " + what(args));
    std::string where = "check input set " + std::to_string(k) + ", input";
    Trace t = runTrace(in, f, pm, traceInputs(args, where), traced);
    std::string text = canonicalText(t.graph);
    if (text != reference)
      throwError("value-error", "jit-trace: the trace differs on check input set " + std::to_string(k) +
                                    " (the code took another path, or read a size or value as a number, which tracing "
                                    "freezes; trace only tensor operations, or use jit-compile): " +
                                    firstDifference(reference, text));
    jit::Stack again = traceInputs(args, where);
    again.insert(again.begin(), traced._ivalue());
    c10::IValue got;
    {
      torch::NoGradGuard ng;
      got = traced.get_method("forward").function()(std::move(again));
    }
    std::vector<at::Tensor> want, have;
    flatten(t.outputs.at(0), want);
    flatten(got, have);
    bool same = want.size() == have.size();
    for (size_t i = 0; same && i < want.size(); i++)
      same = want[i].sizes() == have[i].sizes() &&
             at::allclose(want[i].detach().to(at::kDouble), have[i].detach().to(at::kDouble), 1e-5, 1e-5, true);
    if (!same)
      throwError("value-error", "jit-trace: on check input set " + std::to_string(k) +
                                    ", the traced module's outputs differ from the procedure's (beyond 1e-5)");
  }
}

Value traceToModule(Interp& in, Value f, Value inputs, Value checkInputs, Value methods) {
  std::shared_ptr<torch::nn::Module> pm;
  if (isModule(f)) pm = moduleArg(f, "jit-trace", 1);
  else if (!isProcedure(f)) throwTypeError("jit-trace", 1, "a module or a procedure", f);
  if (pm && scriptModuleOf(*pm)) return wrapModule(pm);   // already TorchScript
  jit::Module self = pm ? mirror(*pm, std::make_shared<jit::CompilationUnit>())
                        : emptyModule(f.is(Kind::Closure) && f.as<Closure>()->name.is(Kind::Symbol)
                                          ? std::string(symbolName(f.as<Closure>()->name))
                                          : "Traced");
  bool hasMethods = !methods.isMissing() && !methods.isFalse() && !methods.isNil();
  if (hasMethods && !pm) throwError("type-error", "jit-trace: :methods needs a module, got a procedure");
  if (!inputs.isNil() || !hasMethods) {
    Trace t = runTrace(in, f, pm, traceInputs(inputs, "example input"), self);
    std::string reference = canonicalText(t.graph);
    auto* fn = self._ivalue()->compilation_unit()->create_function(c10::QualifiedName(*self.type()->name(), "forward"), t.graph);
    self.type()->addMethod(fn);
    checkTrace(in, f, pm, self, reference, checkInputs);
  }
  // each (name input ...) of :methods: that method traced on its inputs, as torch.jit.trace_module does
  if (hasMethods) {
    if (!isList(methods)) throwError("type-error", "jit-trace: :methods must be a list of (method input ...), got " + toWriteString(methods));
    for (Value p = methods; isPair(p); p = cdr(p)) {
      Value entry = car(p);
      if (!isPair(entry) || !(car(entry).is(Kind::Symbol) || isString(car(entry))) || !isList(cdr(entry)))
        throwError("type-error", "jit-trace: each :methods entry must be (method input ...), got " + toWriteString(entry));
      std::string name = car(entry).is(Kind::Symbol) ? std::string(symbolName(car(entry))) : std::string(stringView(car(entry)));
      if (name == "forward") throwError("value-error", "jit-trace: forward is traced on the example inputs, not through :methods");
      Trace t = runTrace(in, f, pm, traceInputs(cdr(entry), name + " input"), self, name);
      std::string tsName = name;
      for (char& c : tsName)
        if (c == '-') c = '_';   // a TorchScript (Python) name
      auto* fn = self._ivalue()->compilation_unit()->create_function(c10::QualifiedName(*self.type()->name(), tsName), t.graph);
      self.type()->addMethod(fn);
    }
  }
  return wrapScriptModule(self);
}

jit::Module& scriptArg(const std::shared_ptr<torch::nn::Module>& m, const char* who) {
  jit::Module* s = scriptModuleOf(*m);
  if (!s)
    throwError("type-error", std::string(who) + ": " + moduleTypeName(*m) +
                                 " is not a TorchScript module; make one with (jit-trace model example-input ...), "
                                 "jit-compile or load-torchscript");
  return *s;
}

Value compileSource(const std::string& source) {
  std::shared_ptr<jit::CompilationUnit> cu;
  try {
    cu = torch::jit::compile(source);
  } catch (const c10::Error& e) {
    throwError("syntax-error", std::string("jit-compile: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throwError("syntax-error", std::string("jit-compile: ") + e.what());
  }
  auto fns = cu->get_functions();
  if (fns.empty()) throwError("syntax-error", "jit-compile: the source defines no function");
  jit::Module m(className("Compiled"), std::make_shared<jit::CompilationUnit>(), true);
  m.register_attribute("training", c10::BoolType::get(), false);
  auto addMethod = [&](jit::Function* f, const std::string& name) {
    auto g = jit::toGraphFunction(*f).graph()->copy();
    jit::Inline(*g);
    g->insertInput(0, "self")->setType(m.type());
    m.type()->addMethod(m._ivalue()->compilation_unit()->create_function(c10::QualifiedName(*m.type()->name(), name), g));
  };
  bool hasForward = false;
  for (auto* f : fns) {
    addMethod(f, f->name());
    hasForward |= f->name() == "forward";
  }
  if (!hasForward && fns.size() == 1) addMethod(fns[0], "forward");
  return wrapScriptModule(m);
}

// export-onnx's Python half: the module arrives as the bytes of a TorchScript archive, the ONNX
// model leaves as bytes, which Purple writes atomically.
const char* kOnnxExport = R"PY(
def _purple_export_onnx(script, inputs, opset, input_names, output_names, dynamic_axes):
    import io, warnings, torch
    m = torch.jit.load(io.BytesIO(script))
    out = io.BytesIO()
    kw = {}
    if opset is not None: kw["opset_version"] = opset
    if input_names is not None: kw["input_names"] = list(input_names)
    if output_names is not None: kw["output_names"] = list(output_names)
    if dynamic_axes is not None: kw["dynamic_axes"] = {k: list(v) for k, v in dynamic_axes.items()}
    with warnings.catch_warnings():   # a loaded ScriptModule has no Python signature to read
        warnings.filterwarnings("ignore", message="no signature found")
        torch.onnx.export(m, tuple(inputs), out, **kw)
    return out.getvalue()
)PY";

Value callGlobal(Interp& in, const char* name, std::initializer_list<Value> args) {
  Value f = in.lookupGlobal(name);
  if (f.isUnbound()) throwError("error", std::string("export-onnx: the Python bridge does not define ") + name);
  return in.apply(f, args);
}

Value inputsVector(Value list) {
  size_t n = listLength(list);
  Value v = makeVector(n);
  size_t k = 0;
  for (Value p = list; isPair(p) && k < n; p = cdr(p), k++) v.as<Vector>()->items[k] = car(p);
  return v;
}

std::string scriptBytes(jit::Module& m) {
  std::ostringstream os;
  m.save(os);
  return os.str();
}

}  // namespace

void registerJit(Registry& r) {
  r.def("jit-trace", "(f . example-inputs :key check-inputs methods)",
        [](Interp& in, Value f, RestArgs inputs, Value checkInputs, Value methods) -> Value {
          return traceToModule(in, f, inputs.list, checkInputs, methods);
        },
        "Traces F, a module or a procedure, on EXAMPLE-INPUTS (tensors, or lists or vectors of tensors) with "
        "LibTorch's tracer, as torch.jit.trace does: the LibTorch operations one call runs are recorded into a "
        "TorchScript module, which is returned. Call it like any module; save it with save-torchscript for Python's "
        "torch.jit.load or a C++ program's torch::jit::load. A module's parameters and buffers stay the traced "
        "module's own (parameters, state-dict, module-to, load-state-dict! and optimizers work on it, and it shares "
        "them with F); tensors a procedure captures become constants. F must return a tensor, or a list or vector of "
        "tensors. What the call decided from data (if on a tensor's value, loops over a size, numbers read with "
        "tensor-item or tensor-size) is frozen: :check-inputs (a list of argument lists) traces again on each and "
        "raises an error when the graph or the outputs differ. :methods traces a define-module's other methods too, "
        "as torch.jit.trace_module does: (jit-trace vae x :methods (list (list 'encode x) (list 'decode z))) gives a "
        "module whose encode and decode (module-call, or Python's m.encode) run the traces; with :methods, the "
        "example inputs may be left out to trace only the methods. Use jit-compile for control flow.");

  r.def("save-torchscript", "(module path)",
        [](ModuleRef m, std::string path) {
          jit::Module& s = scriptArg(m.ptr, "save-torchscript");
          std::string bytes;
          try {
            bytes = scriptBytes(s);
          } catch (const c10::Error& e) {
            throwError("value-error", std::string("save-torchscript: ") + e.what_without_backtrace());
          }
          writeFileAtomically(path, bytes.data(), bytes.size(), "save-torchscript");
          return Value::unspecified();
        },
        "Writes the TorchScript MODULE (from jit-trace, jit-compile or load-torchscript) to PATH, atomically, in "
        "torch.jit.save's format: Python's torch.jit.load, a C++ program's torch::jit::load (examples/deploy) and "
        "load-torchscript read it, with its current parameters and buffers.");
  sandbox(r, "save-torchscript", Needs::Files, "files: writes the file PATH");

  r.def("jit-compile", "(source)", [](std::string source) { return compileSource(source); },
        "Compiles TorchScript SOURCE (Python-syntax functions with type annotations, as torch.jit.script reads) "
        "with LibTorch's C++ frontend into a TorchScript module whose methods are the functions of SOURCE; calling "
        "the module calls `forward` (or the only function). Loops and `if` on tensor values are kept, so they "
        "survive save-torchscript. Call other functions with jit-call. Example: (define f (jit-compile \"def "
        "forward(x: Tensor, n: int) -> Tensor:\\n    for i in range(n):\\n        x = x * 2\\n    return x\\n\"))");

  r.def("jit-call", "(module name . args)",
        [](ModuleRef m, Value name, RestArgs args) -> Value {
          jit::Module& s = scriptArg(m.ptr, "jit-call");
          std::string n = isString(name) ? std::string(stringView(name))
                          : name.is(Kind::Symbol) ? std::string(symbolName(name))
                                                  : (throwTypeError("jit-call", 2, "a string or a symbol", name), "");
          std::vector<Value, traceable_allocator<Value>> vs;
          for (Value p = args.list; isPair(p); p = cdr(p)) vs.push_back(car(p));
          return formats::callScriptMethod(s, n, vs.data(), int(vs.size()), "jit-call");
        },
        "Calls method NAME (a string or symbol) of the TorchScript MODULE on ARGS: (jit-call m 'encode x).");

  r.def("export-onnx", "(module example-inputs path :key opset input-names output-names dynamic-axes)",
        [](Interp& in, Value mv, Value inputs, std::string path, Value opset, Value inputNames, Value outputNames,
           Value dynamicAxes) -> Value {
          if (!isModule(mv)) throwTypeError("export-onnx", 1, "a module", mv);
          if (isTensor(inputs) || inputs.is(Kind::Vector)) inputs = cons(inputs, Value::nil());
          if (!isList(inputs)) throwTypeError("export-onnx", 2, "a list of example inputs", inputs);
          // The module as TorchScript: traced here unless it already is.
          Value traced = traceToModule(in, mv, inputs, Value::missing(), Value::missing());
          std::string bytes = scriptBytes(*scriptModuleOf(*moduleArg(traced, "export-onnx", 1)));
          Value script = makeBytevector(bytes.size());
          if (!bytes.empty()) std::memcpy(script.as<Bytevector>()->bytes, bytes.data(), bytes.size());
          // The Python bridge: its error says why it is missing.
          try {
            in.importLibrary(cons(intern("purple"), cons(intern("python"), Value::nil())));
          } catch (const PurpleException& e) {
            throwError("error", std::string("export-onnx needs the Python bridge and python3-torch: ") + e.what());
          }
          if (in.lookupGlobal("%purple-export-onnx").isUnbound()) {
            callGlobal(in, "py-exec", {makeString(kOnnxExport)});
            in.defineGlobal("%purple-export-onnx", callGlobal(in, "py-eval", {makeString("_purple_export_onnx")}));
          }
          auto opt = [](Value v) { return v.isMissing() ? Value::unspecified() : v; };
          Value onnx = callGlobal(in, "py-call", {in.lookupGlobal("%purple-export-onnx"), script, inputsVector(inputs), opt(opset),
                                                  opt(inputNames), opt(outputNames), opt(dynamicAxes)});
          if (!onnx.is(Kind::Bytevector)) throwError("error", "export-onnx: torch.onnx.export returned no bytes");
          writeFileAtomically(path, reinterpret_cast<const char*>(onnx.as<Bytevector>()->bytes), onnx.obj()->extra,
                              "export-onnx");
          return Value::unspecified();
        },
        "Exports MODULE to the ONNX file PATH with python3-torch's torch.onnx.export, through the Python bridge: "
        "MODULE (traced first on EXAMPLE-INPUTS, a list of inputs, unless it is TorchScript already) goes to Python "
        "as a TorchScript archive and the ONNX bytes come back and are written atomically. :opset sets the opset "
        "version; :input-names and :output-names (lists of strings) and :dynamic-axes (a hash table of name -> list "
        "of axes) are passed on. An error says so when Purple was built without the Python bridge.");
  sandbox(r, "export-onnx", Needs::Files | Needs::Process, "files and Python: runs python3-torch, writes the file PATH");
}

}  // namespace purple
