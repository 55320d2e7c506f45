// Files Python PyTorch reads: state dicts and general data in torch.save's zip format, written
// with LibTorch's pickler (torch::pickle_save), read with torch::pickle_load, which also reads
// what Python's torch.save writes. Every write goes to a temporary file renamed over the target,
// so a crash never leaves a half-written checkpoint.
//
// Data mapping (torch-save / torch-load):
//   tensor <-> Tensor        integer <-> int        real <-> float        boolean <-> bool
//   string, symbol -> str    #f with torch-load of None
//   alist with string keys, hash table <-> dict (an alist, in order, when loaded)
//   list <-> list            vector <-> tuple
#include <torch/csrc/jit/serialization/pickle.h>
#include "builtins/nn/value.hpp"
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "interp/numbers.hpp"
#include "interp/printer.hpp"
#include "interp/tensor_value.hpp"
#include <fstream>
#include <iterator>

namespace purple {

namespace {

std::vector<char> readFile(const std::string& path, const char* who) {
  requireFileAccess(who);
  std::ifstream f(path, std::ios::binary);
  if (!f) throwError("file-error", std::string(who) + ": cannot open " + path, cons(makeString(path), Value::nil()));
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool isStringKeyedAlist(Value v) {
  if (!isPair(v) || !isList(v)) return false;
  for (Value p = v; isPair(p); p = cdr(p))
    if (!isPair(car(p)) || !isString(car(car(p)))) return false;
  return true;
}

c10::IValue toIValue(Value v, const char* who, int depth = 0) {
  if (depth > 1000) throwError("value-error", std::string(who) + ": data nested too deeply (or circular)");
  if (isTensor(v)) return c10::IValue(tensorArg(v, who, 1).detach());
  if (v.isFixnum()) return c10::IValue(int64_t(v.fixnum()));
  if (isFlonum(v)) return c10::IValue(flonumValue(v));
  if (v.isBool()) return c10::IValue(v.isTrue());
  if (isString(v)) return c10::IValue(std::string(stringView(v)));
  if (v.is(Kind::Symbol)) return c10::IValue(std::string(symbolName(v)));
  if (v.isUnspecified()) return c10::IValue();
  if (isHashTable(v) || isStringKeyedAlist(v)) {
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    auto put = [&](Value k, Value x) {
      if (!isString(k) && !k.is(Kind::Symbol)) throwError("type-error", std::string(who) + ": dict keys must be strings, got " + toWriteString(k));
      d.insert_or_assign(isString(k) ? std::string(stringView(k)) : std::string(symbolName(k)), toIValue(x, who, depth + 1));
    };
    if (isHashTable(v)) {
      auto* h = v.as<HashTable>();
      for (uint32_t i = 0; i < h->entryUsed; i++)
        if (!h->entries[2 * i].isUnbound()) put(h->entries[2 * i], h->entries[2 * i + 1]);
    } else {
      for (Value p = v; isPair(p); p = cdr(p)) put(car(car(p)), cdr(car(p)));
    }
    return c10::IValue(d);
  }
  if (v.isNil() || isList(v)) {
    c10::impl::GenericList l(c10::AnyType::get());
    for (Value p = v; isPair(p); p = cdr(p)) l.push_back(toIValue(car(p), who, depth + 1));
    return c10::IValue(l);
  }
  if (v.is(Kind::Vector)) {
    std::vector<c10::IValue> items;
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) items.push_back(toIValue(vec->items[k], who, depth + 1));
    return c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
  }
  if (isNumber(v)) return c10::IValue(toDouble(v));
  throwError("type-error", std::string(who) + ": cannot save " + toWriteString(v) +
                               " (tensors, numbers, booleans, strings, lists, vectors, alists and hash tables can be saved)");
}

Value fromIValue(const c10::IValue& iv, const char* who) {
  if (iv.isTensor()) return wrapTensor(iv.toTensor());
  if (iv.isInt()) return makeInteger(iv.toInt());
  if (iv.isDouble()) return makeFlonum(iv.toDouble());
  if (iv.isBool()) return Value::boolean(iv.toBool());
  if (iv.isString()) return makeString(iv.toStringRef());
  if (iv.isNone()) return Value::f();
  if (iv.isGenericDict()) {
    std::vector<Value> items;
    for (const auto& e : iv.toGenericDict()) {
      Value k = e.key().isString() ? makeString(e.key().toStringRef()) : fromIValue(e.key(), who);
      items.push_back(cons(k, fromIValue(e.value(), who)));
    }
    return listFromArray(items.data(), items.size());
  }
  if (iv.isList()) {
    std::vector<Value> items;
    for (const auto& x : iv.toListRef()) items.push_back(fromIValue(x, who));
    return listFromArray(items.data(), items.size());
  }
  if (iv.isTuple()) {
    const auto& elems = iv.toTupleRef().elements();
    Value vec = makeVector(elems.size());
    for (size_t k = 0; k < elems.size(); k++) vec.as<Vector>()->items[k] = fromIValue(elems[k], who);
    return vec;
  }
  throwError("value-error", std::string(who) + ": the file holds a " + iv.tagKind() + ", which Purple cannot represent");
}

// LibTorch's unpickler reads collections.OrderedDict (what Python's model.state_dict() is) as
// None, so a file holding one fails deep inside it; say what to do instead.
c10::IValue loadPickled(const std::string& path, const char* who) {
  std::vector<char> bytes = readFile(path, who);
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    if (msg.find("GenericDict") != std::string::npos)
      throwError("value-error", std::string(who) + ": cannot read " + path +
                                    ": LibTorch cannot read Python's OrderedDict; save a plain dict from Python: "
                                    "torch.save(dict(model.state_dict()), path)");
    throw;
  }
}

void savePickled(const c10::IValue& iv, const std::string& path, const char* who) {
  std::vector<char> bytes = torch::jit::pickle_save(iv);
  writeFileAtomically(path, bytes.data(), bytes.size(), who);
}

}  // namespace

void registerSerialize(Registry& r) {
  r.def("save-state-dict", "(source path)",
        [](Value source, std::string path) {
          std::vector<std::pair<std::string, at::Tensor>> entries =
              isModule(source) ? moduleStateDict(*moduleArg(source, "save-state-dict", 1)) : stateDictFromValue(source, "save-state-dict");
          c10::Dict<std::string, at::Tensor> d;
          for (auto& e : entries) d.insert_or_assign(e.first, e.second.detach());
          savePickled(c10::IValue(d), path, "save-state-dict");
        },
        "Writes the state dict of SOURCE (a module, or an alist / hash table of name -> tensor) to PATH, atomically, "
        "in torch.save's format: Python reads it with torch.load(PATH) and model.load_state_dict(...).");
  r.def("load-state-dict", "(path)",
        [](std::string path) {
          c10::IValue iv = loadPickled(path, "load-state-dict");
          if (!iv.isGenericDict())
            throwError("value-error", "load-state-dict: " + path + " does not hold a dict of tensors (from Python, save "
                                      "torch.save(dict(model.state_dict()), path): LibTorch reads an OrderedDict as None)");
          std::vector<std::pair<std::string, at::Tensor>> entries;
          for (const auto& e : iv.toGenericDict()) {
            if (!e.key().isString() || !e.value().isTensor())
              throwError("value-error", "load-state-dict: " + path + " holds a dict that is not name -> tensor");
            entries.emplace_back(e.key().toStringRef(), e.value().toTensor());
          }
          return stateDictToValue(entries);
        },
        "Reads a state dict written by save-state-dict or by Python's torch.save(dict(model.state_dict()), PATH): an "
        "alist (\"name\" . tensor) in the file's order. Give it, or PATH itself, to load-state-dict!. (LibTorch cannot "
        "read Python's OrderedDict, so Python must save a plain dict.)");
  r.def("torch-save", "(data path)",
        [](Value data, std::string path) { savePickled(toIValue(data, "torch-save"), path, "torch-save"); },
        "Writes DATA to PATH atomically in torch.save's format (Python's torch.load reads it): tensors, numbers, "
        "booleans, strings, lists (Python lists), vectors (tuples), and alists with string keys or hash tables "
        "(dicts). Checkpoints can combine state dicts, epochs and histories this way.");
  r.def("torch-load", "(path)",
        [](std::string path) { return fromIValue(loadPickled(path, "torch-load"), "torch-load"); },
        "Reads data written by torch-save or by Python's torch.save: dicts become alists (in order), lists lists, "
        "tuples vectors, None #f. Python OrderedDicts cannot be read (LibTorch's unpickler limitation): convert them "
        "with dict(...) before saving.");
}

}  // namespace purple
