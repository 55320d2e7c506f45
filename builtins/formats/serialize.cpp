// torch.save and torch.load from Purple: torch-save / torch-load for any data, save-state-dict /
// load-state-dict for a model's tensors. Files are PyTorch's own (the zip format that torch.save
// writes, and the legacy format read too), with Python data mapped as python_values.hpp says; the
// pickle reader and writer are Purple's own (unpickler.cpp, pickler.cpp), since LibTorch's cannot
// read OrderedDicts and more. Reading is safe by default (weights_only): no Python global outside
// the allow-list is accepted.
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/formats/format_error.hpp"
#include "builtins/formats/python_values.hpp"
#include "builtins/formats/torch_file.hpp"
#include "builtins/formats/torch_io.hpp"
#include "builtins/formats/unpickler.hpp"
#include "builtins/nn/value.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace formats {

[[noreturn]] void rethrowFileError(const std::string& who, const std::string& path) {
  try {
    throw;
  } catch (const FormatError& e) {
    throwError("file-error", who + ": " + path + ": " + e.what());
  } catch (const c10::Error& e) {
    throwError("file-error", who + ": " + path + ": " + e.what_without_backtrace());
  }
}

// :map-location as Python takes it: a device for everything, a table (hash table or alist) from
// saved locations to devices, or a procedure from the saved location (a string) to a device.
std::function<c10::Device(const std::string&)> locationMapper(Interp& in, Value spec, const std::string& who) {
  if (spec.isMissing() || spec.isFalse()) return nullptr;
  if (isString(spec) || spec.is(Kind::Symbol)) {
    c10::Device d = deviceFromValue(spec, who);
    return [d](const std::string&) {
      return defaultLocation(d.str());   // checks that the device exists here
    };
  }
  if (isHashTable(spec) || isList(spec)) {
    std::vector<std::pair<std::string, c10::Device>> table;
    if (isHashTable(spec)) {
      auto* h = spec.as<HashTable>();
      for (uint32_t i = 0; i < h->entryUsed; i++)
        if (!h->entries[2 * i].isUnbound())
          table.emplace_back(deviceFromValue(h->entries[2 * i], who).str(), deviceFromValue(h->entries[2 * i + 1], who));
    } else {
      for (Value p = spec; isPair(p); p = cdr(p)) {
        if (!isPair(car(p))) throwTypeError(who, 2, "a device, a table of devices or a procedure for :map-location", spec);
        table.emplace_back(deviceFromValue(car(car(p)), who).str(), deviceFromValue(cdr(car(p)), who));
      }
    }
    return [table](const std::string& loc) {
      for (auto& [from, to] : table)
        if (from == loc || (from == "cuda" && loc.rfind("cuda", 0) == 0)) return defaultLocation(to.str());
      return defaultLocation(loc);
    };
  }
  if (isProcedure(spec)) {
    Interp* interp = &in;
    return [interp, spec, who](const std::string& loc) {
      Value arg = makeString(loc);
      Value r = interp->apply(spec, &arg, 1);
      return defaultLocation(deviceFromValue(r, who).str());
    };
  }
  throwTypeError(who, 2, "a device, a table of devices or a procedure for :map-location", spec);
}

PyRef load(Interp& in, const std::string& who, const std::string& path, bool safe, Value mapLocation, bool mmap) {
  requireFileAccess(who);
  TorchLoadOptions o;
  o.safe = safe;
  o.mmap = mmap;
  o.mapLocation = locationMapper(in, mapLocation, who);
  try {
    return loadTorchFile(path, o);
  } catch (const PurpleException&) {
    throw;
  } catch (...) {
    rethrowFileError(who, path);
  }
}

void refuseSafetensorsPath(const std::string& who, const std::string& path) {
  static const std::string ext = ".safetensors";
  if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    throwError("value-error", who + ": " + path + " is a .safetensors path; write it with save-safetensors (" + who +
                                  " writes another format, which no safetensors reader could open)");
}

void save(const PyRef& root, const std::string& who, const std::string& path) {
  refuseSafetensorsPath(who, path);
  try {
    saveTorchFile(root, path, who);
  } catch (const PurpleException&) {
    throw;
  } catch (...) {
    rethrowFileError(who, path);
  }
}

}  // namespace formats

using namespace formats;

Value torchLoadValue(Interp& in, const std::string& path, const std::string& who) {
  return toPurple(load(in, who, path, true, Value::missing(), false));
}

void torchSaveValue(Value data, const std::string& path, const std::string& who) { save(toPython(data, who), who, path); }

void registerSerialize(Registry& r) {
  r.def("torch-save", "(data path)",
        [](Value data, std::string path) { save(toPython(data, "torch-save"), "torch-save", path); },
        "Writes DATA to PATH, atomically, as Python's torch.save(data, PATH) would: Python reads it back with "
        "torch.load. Hash tables become dicts, lists lists, vectors tuples, tensors tensors (tensors sharing a "
        "storage keep sharing it), the unspecified value None, and an alist with string keys (like state-dict's) a "
        "dict, so a whole checkpoint is one call: (torch-save (alist->hash-table `((\"model\" . ,(state-dict m)) "
        "(\"optimizer\" . ,(optimizer-state-dict opt)) (\"epoch\" . 5))) \"ckpt.pt\"). See docs/formats.md.");
  sandbox(r, "torch-save", Needs::Files, "files: writes a torch.save file");
  r.def("torch-load", "(path :key (safe #t) map-location (mmap #f))",
        [](Interp& in, std::string path, bool safe, Value mapLocation, bool mmap) {
          return toPurple(load(in, "torch-load", path, safe, mapLocation, mmap));
        },
        "Reads a file written by Python's torch.save (the zip format or the legacy one) or by torch-save. Dicts and "
        "OrderedDicts become hash tables (in their order), lists lists, tuples vectors, None the unspecified value, "
        "torch.Size a list, dtypes symbols, devices strings. :map-location moves storages as Python's map_location "
        "does: a device (\"cpu\"), a table from saved locations to devices, or a procedure from the saved location to "
        "a device; without it a tensor saved on a GPU needs one here. Safe by default, like weights_only=True: a "
        "pickle naming any Python global beyond tensors, containers and torch/NumPy data is refused; with :safe #f "
        "such objects become hash tables with \"__class__\", \"__args__\" and \"__state__\" (nothing is ever run). "
        ":mmap #t maps CPU storages from the file instead of copying them.");
  sandbox(r, "torch-load", Needs::Files, "files: reads a torch.save file");
  r.def("save-state-dict", "(source path)",
        [](Value source, std::string path) {
          std::vector<std::pair<std::string, at::Tensor>> entries =
              isModule(source) ? moduleStateDict(*moduleArg(source, "save-state-dict", 1)) : stateDictFromValue(source, "save-state-dict");
          if (isModule(source) && !moduleStateDictWriter(*moduleArg(source, "save-state-dict", 1))) return;   // fully-shard: rank 0 writes
          PyRef d = PyObject::dict();
          d->flag = true;   // an OrderedDict, as model.state_dict() is
          for (auto& e : entries) d->entries.emplace_back(PyObject::str(e.first), PyObject::tensorOf(e.second.detach()));
          save(d, "save-state-dict", path);
        },
        "Writes the state dict of SOURCE (a module, or an alist / hash table of name -> tensor) to PATH, atomically, "
        "exactly as Python's torch.save(model.state_dict(), PATH) does (an OrderedDict of tensors): Python reads it "
        "with model.load_state_dict(torch.load(PATH)). For a model made by fully-shard every rank calls it (the "
        "parameters are gathered) and rank 0 of its group writes.");
  sandbox(r, "save-state-dict", Needs::Files, "files: writes a checkpoint");
  r.def("load-state-dict", "(path :key (safe #t) map-location)",
        [](Interp& in, std::string path, bool safe, Value mapLocation) {
          PyRef o = load(in, "load-state-dict", path, safe, mapLocation, false);
          if (o->type != PyType::Dict)
            throwError("value-error", "load-state-dict: " + path + " holds a " + pyTypeName(*o) + ", not a state dict; read it with torch-load");
          std::vector<std::pair<std::string, at::Tensor>> entries;
          for (auto& [k, v] : o->entries) {
            if (k->type != PyType::Str || v->type != PyType::Tensor) {
              std::string hint;
              for (auto& [k2, v2] : o->entries)
                if (k2->type == PyType::Str && v2->type == PyType::Dict) hint = " (it looks like a checkpoint: read it with torch-load and take its \"" + k2->text + "\" entry)";
              throwError("value-error", "load-state-dict: " + path + " holds a dict that is not name -> tensor" + hint);
            }
            entries.emplace_back(k->text, v->tensor);
          }
          return stateDictToValue(entries);
        },
        "Reads a state dict from PATH -- written by save-state-dict or by Python's torch.save(model.state_dict(), "
        "PATH), OrderedDicts and the legacy format included -- as an alist (\"name\" . tensor) in the file's order. "
        "Give it, or PATH itself, to load-state-dict!. :safe and :map-location as for torch-load.");
  sandbox(r, "load-state-dict", Needs::Files, "files: reads a checkpoint");
}

}  // namespace purple
