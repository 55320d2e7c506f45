// Data readers: `load-idx` (MNIST-format IDX files, gzipped or not, through zlib) and
// `load-csv` (numeric columns of a delimited text file into a tensor).
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include <ATen/ATen.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include "interp/limits/sandbox.hpp"

namespace purple {
namespace dataload {

[[noreturn]] void fileError(const std::string& who, const std::string& message, const std::string& path) {
  throwError("file-error", who + ": " + message + ":", cons(makeString(path), Value::nil()));
}
[[noreturn]] void formatError(const std::string& who, const std::string& message, const std::string& path) {
  throwError("data-error", who + ": " + path + ": " + message);
}

// Reads a whole file, inflating it when it is gzip-compressed (zlib reads plain files as-is).
std::vector<uint8_t> readMaybeGzipped(const std::string& path, const std::string& who) {
  requireFileAccess(who);
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) fileError(who, std::string("cannot open file (") + std::strerror(errno) + ")", path);
  gzbuffer(f, 1 << 17);
  std::vector<uint8_t> out;
  size_t chunk = 1 << 20;
  while (true) {
    size_t old = out.size();
    out.resize(old + chunk);
    int n = gzread(f, out.data() + old, unsigned(chunk));
    if (n < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      gzclose(f);
      formatError(who, "corrupt or truncated gzip data (" + msg + ")", path);
    }
    out.resize(old + size_t(n));
    if (size_t(n) < chunk) break;
    if (chunk < (size_t(1) << 26)) chunk *= 2;
  }
  int code = 0;
  const char* msg = gzerror(f, &code);
  std::string message = msg ? msg : "";
  int closed = gzclose(f);
  if (code != Z_OK && code != Z_STREAM_END)
    formatError(who, "corrupt or truncated gzip data (" + message + ")", path);
  if (closed == Z_BUF_ERROR) formatError(who, "truncated gzip data (the file ends in mid-stream)", path);
  if (closed != Z_OK) formatError(who, "error reading compressed data", path);
  return out;
}

at::Tensor loadIdx(const std::string& path) {
  const std::string who = "load-idx";
  std::vector<uint8_t> bytes = readMaybeGzipped(path, who);
  if (bytes.size() < 4) formatError(who, "too short for an IDX header (" + std::to_string(bytes.size()) + " bytes)", path);
  if (bytes[0] != 0 || bytes[1] != 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "bad magic number 0x%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
    formatError(who, std::string(buf) + " (not an IDX file)", path);
  }
  at::ScalarType type;
  size_t elem;
  switch (bytes[2]) {
    case 0x08: type = at::kByte; elem = 1; break;
    case 0x09: type = at::kChar; elem = 1; break;
    case 0x0B: type = at::kShort; elem = 2; break;
    case 0x0C: type = at::kInt; elem = 4; break;
    case 0x0D: type = at::kFloat; elem = 4; break;
    case 0x0E: type = at::kDouble; elem = 8; break;
    default: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "unknown element type code 0x%02x in the magic number", bytes[2]);
      formatError(who, buf, path);
    }
  }
  int ndim = bytes[3];
  if (ndim == 0) formatError(who, "the header declares zero dimensions", path);
  size_t header = 4 + 4 * size_t(ndim);
  if (bytes.size() < header)
    formatError(who, "truncated header: " + std::to_string(ndim) + " dimensions need " + std::to_string(header) +
                         " bytes, the file has " + std::to_string(bytes.size()), path);
  std::vector<int64_t> shape;
  unsigned __int128 count = 1;
  for (int d = 0; d < ndim; d++) {
    const uint8_t* p = &bytes[4 + 4 * d];
    uint32_t n = (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
    shape.push_back(int64_t(n));
    count *= n;
  }
  unsigned __int128 need = count * elem;
  size_t have = bytes.size() - header;
  if (need != have) {
    std::string dims;
    for (size_t i = 0; i < shape.size(); i++) dims += (i ? "x" : "") + std::to_string(shape[i]);
    formatError(who, "size mismatch: the header declares " + dims + " elements of " + std::to_string(elem) +
                         " bytes (" + std::to_string(uint64_t(need)) + " bytes of data) but the file has " +
                         std::to_string(have) + (have < need ? " (truncated)" : " (trailing bytes)"), path);
  }
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  uint8_t* dst = static_cast<uint8_t*>(t.data_ptr());
  const uint8_t* src = bytes.data() + header;
  if (elem == 1) {
    std::memcpy(dst, src, have);
  } else {
    for (size_t i = 0; i < have; i += elem)   // big-endian to host
      for (size_t b = 0; b < elem; b++) dst[i + b] = src[i + elem - 1 - b];
  }
  return t;
}

std::vector<std::string> splitLine(const std::string& line, char delim) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); i++) {
    char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') { cur += '"'; i++; }
      else quoted = !quoted;
    } else if (c == delim && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r' || i + 1 != line.size()) {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

Value loadCsv(const std::string& path, bool header, Value columns, std::string delimiter,
              std::optional<at::ScalarType> dtype, int64_t skip) {
  const std::string who = "load-csv";
  if (delimiter.size() != 1) throwError("data-error", "load-csv: :delimiter must be one character:", cons(makeString(delimiter), Value::nil()));
  char delim = delimiter[0];
  requireFileAccess(who);
  std::ifstream in(path);
  if (!in) fileError(who, std::string("cannot open file (") + std::strerror(errno) + ")", path);
  std::string line;
  int64_t lineNo = 0;
  for (int64_t i = 0; i < skip && std::getline(in, line); i++) lineNo++;
  std::vector<std::string> names;
  if (header) {
    while (std::getline(in, line)) {
      lineNo++;
      if (!trim(line).empty()) break;
    }
    for (auto& n : splitLine(line, delim)) names.push_back(trim(n));
  }
  // Column selection: #f (all), or a list of indices and/or header names.
  std::vector<int64_t> picks;
  bool all = columns.isFalse() || columns.isMissing();
  if (!all) {
    if (!isList(columns)) throwTypeError(who, 2, "a list of column indices or names", columns);
    for (Value p = columns; isPair(p); p = cdr(p)) {
      Value c = car(p);
      if (c.isFixnum() && c.fixnum() >= 0) {
        picks.push_back(c.fixnum());
      } else if (isString(c) || isSymbol(c)) {
        std::string name(isString(c) ? stringView(c) : symbolName(c));
        auto found = std::find(names.begin(), names.end(), name);
        if (found == names.end())
          throwError("data-error", "load-csv: " + path + ": no column named \"" + name + "\"" +
                                       (header ? "" : " (names need :header #t)"));
        picks.push_back(int64_t(found - names.begin()));
      } else {
        throwTypeError(who, 2, "a column index or name", c);
      }
    }
  }
  std::vector<double> values;
  int64_t width = -1, rows = 0;
  while (std::getline(in, line)) {
    lineNo++;
    if (trim(line).empty()) continue;
    std::vector<std::string> fields = splitLine(line, delim);
    if (all) {
      if (width < 0) width = int64_t(fields.size());
      if (int64_t(fields.size()) != width)
        throwError("data-error", "load-csv: " + path + ":" + std::to_string(lineNo) + ": expected " +
                                     std::to_string(width) + " fields, found " + std::to_string(fields.size()));
      picks.clear();
      for (int64_t k = 0; k < width; k++) picks.push_back(k);
    }
    for (int64_t k : picks) {
      if (k >= int64_t(fields.size()))
        throwError("data-error", "load-csv: " + path + ":" + std::to_string(lineNo) + ": no column " +
                                     std::to_string(k) + " (the line has " + std::to_string(fields.size()) + " fields)");
      std::string f = trim(fields[size_t(k)]);
      char* end = nullptr;
      errno = 0;
      double d = std::strtod(f.c_str(), &end);
      if (f.empty() || end != f.c_str() + f.size()) {
        if (f == "" || f == "NA" || f == "nan" || f == "NaN") d = NAN;
        else
          throwError("data-error", "load-csv: " + path + ":" + std::to_string(lineNo) + ": column " +
                                       std::to_string(k) + " is not a number:", cons(makeString(f), Value::nil()));
      }
      values.push_back(d);
    }
    rows++;
  }
  int64_t cols = all ? std::max<int64_t>(width, 0) : int64_t(picks.size());
  at::Tensor t = at::tensor(values, at::TensorOptions().dtype(at::kDouble)).reshape({rows, cols});
  return wrapTensor(t.to(dtype ? *dtype : at::kFloat));
}

}  // namespace dataload

using namespace dataload;

void registerDataIO(Registry& r) {
  r.def("load-idx", "(path)", [](std::string path) { return loadIdx(path); },
        "Reads the IDX file at PATH (the MNIST / Fashion-MNIST format), gzip-compressed or not, "
        "into a tensor of the file's element type and shape: uint8 (N 28 28) for image files, "
        "uint8 (N) for label files. A bad magic number, a size that does not match the header, "
        "or truncated gzip data raise a data-error; a missing file raises a file-error.");
  sandbox(r, "load-idx", Needs::Files, "files: reads an IDX (MNIST) file");
  r.def("load-csv", "(path :key header columns (delimiter \",\") dtype (skip 0))",
        [](std::string path, bool header, Value columns, std::string delimiter,
           std::optional<at::ScalarType> dtype, int64_t skip) {
          return loadCsv(path, header, columns, delimiter, dtype, skip);
        },
        "Reads numeric columns of the delimited text file at PATH into a 2-d tensor (rows x "
        "columns), float32 unless :dtype says otherwise. :header #t skips (and names) the first "
        "line; :columns picks columns by index or, with a header, by name, in the order given; "
        ":delimiter is one character (default \",\"); :skip drops that many leading lines. Empty "
        "lines are ignored; empty, NA and nan fields read as NaN; anything else that is not a "
        "number is a data-error naming the line and column.");
  sandbox(r, "load-csv", Needs::Files, "files: reads a CSV file");
}

}  // namespace purple
