// What the file readers and writers of builtins/formats throw: a one-line description of what is
// wrong with a file ("truncated at byte 812", "refers to the Python global os.system ..."). The
// builtins catch it and raise a Purple file-error naming themselves and the path, so the C++
// pieces (zip, pickle, safetensors, npy) stay free of interpreter state.
#pragma once
#include <stdexcept>
#include <string>

namespace purple::formats {

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& what) { throw FormatError(what); }

}  // namespace purple::formats
