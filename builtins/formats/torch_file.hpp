// The containers torch.save writes around its pickle: the zip format (PyTorch >= 1.6: archive/
// data.pkl plus one record per storage) and the legacy format (several pickles one after another,
// then the raw storages). Reading maps each storage's saved location ("cuda:0") to a device;
// writing gives tensors that share a storage one storage record, as torch.save does.
#pragma once
#include "builtins/formats/pyobject.hpp"
#include <functional>
#include <string>

namespace purple::formats {

struct TorchLoadOptions {
  bool safe = true;
  bool mmap = false;   // storages alias the mapped file instead of being copied
  // The device for a storage saved at LOCATION ("cpu", "cuda:1"); throws FormatError when there is
  // none. Default: the location itself, when this LibTorch has it.
  std::function<c10::Device(const std::string& location)> mapLocation;
};

// Throws FormatError for anything wrong with the file.
PyRef loadTorchFile(const std::string& path, const TorchLoadOptions& options);
// Writes ROOT in torch.save's zip format to PATH, atomically; WHO names the builtin in errors.
void saveTorchFile(const PyRef& root, const std::string& path, const std::string& who);

// The default location mapping: the saved device when it exists here, else a FormatError that
// says to pass :map-location.
c10::Device defaultLocation(const std::string& location);

}  // namespace purple::formats
