// Data readers: `load-idx` (MNIST-format IDX files, gzipped or not, through zlib, inflated
// straight into the tensor) and
// `load-csv` (numeric columns of a delimited text file into a tensor).
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include <ATen/ATen.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "interp/limits/sandbox.hpp"

namespace purple {
namespace dataload {

[[noreturn]] void fileError(const std::string& who, const std::string& message, const std::string& path) {
  throwError("file-error", who + ": " + message + ":", cons(makeString(path), Value::nil()));
}
[[noreturn]] void formatError(const std::string& who, const std::string& message, const std::string& path) {
  throwError("data-error", who + ": " + path + ": " + message);
}

// An IDX file, gzipped or plain (zlib reads plain files as they are), read in pieces: the data
// goes straight into the tensor, so loading a 47 MB image file needs 47 MB, not the inflated
// file in a growing buffer (transiently twice its size) plus the tensor it is copied into.
class IdxStream {
 public:
  IdxStream(const std::string& path, const std::string& who) : path_(path), who_(who) {
    requireFileAccess(who);
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) fileError(who, std::string("cannot open file (") + std::strerror(errno) + ")", path);
    gzbuffer(file_, 1 << 17);
  }
  ~IdxStream() {
    if (file_) gzclose(file_);
  }
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  // Reads up to N bytes into DST; fewer only where the data ends.
  size_t read(uint8_t* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      unsigned want = unsigned(std::min(n - got, size_t(1) << 30));
      int r = gzread(file_, dst + got, want);
      if (r < 0) {
        int code = 0;
        std::string msg = gzerror(file_, &code);
        formatError(who_, "corrupt or truncated gzip data (" + msg + ")", path_);
      }
      got += size_t(r);
      if (unsigned(r) < want) break;
    }
    return got;
  }

  // Reads to the end of the data, counting the bytes.
  size_t skipRest() {
    std::vector<uint8_t> scratch(size_t(1) << 16);
    size_t total = 0, n;
    while ((n = read(scratch.data(), scratch.size())) > 0) total += n;
    return total;
  }

  // Closes the file, raising what a damaged gzip stream shows only at its end. Called before
  // any complaint about the IDX content, so that a damaged file is reported as such.
  void finish() {
    int code = 0;
    const char* msg = gzerror(file_, &code);
    std::string message = msg ? msg : "";
    int closed = gzclose(file_);
    file_ = nullptr;
    if (code != Z_OK && code != Z_STREAM_END)
      formatError(who_, "corrupt or truncated gzip data (" + message + ")", path_);
    if (closed == Z_BUF_ERROR) formatError(who_, "truncated gzip data (the file ends in mid-stream)", path_);
    if (closed != Z_OK) formatError(who_, "error reading compressed data", path_);
  }

 private:
  gzFile file_ = nullptr;
  std::string path_, who_;
};

// The most data a file of this size can hold: deflate inflates at most about 1032 to 1.
unsigned __int128 mostInflatedBytes(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || st.st_size < 0) return 0;
  return (unsigned __int128)st.st_size * 1100 + (1 << 20);
}

at::Tensor loadIdx(const std::string& path) {
  const std::string who = "load-idx";
  IdxStream in(path, who);
  uint8_t magic[4];
  size_t got = in.read(magic, 4);
  if (got < 4) {
    in.finish();
    formatError(who, "too short for an IDX header (" + std::to_string(got) + " bytes)", path);
  }
  if (magic[0] != 0 || magic[1] != 0) {
    in.finish();
    char buf[64];
    std::snprintf(buf, sizeof buf, "bad magic number 0x%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
    formatError(who, std::string(buf) + " (not an IDX file)", path);
  }
  at::ScalarType type;
  size_t elem;
  switch (magic[2]) {
    case 0x08: type = at::kByte; elem = 1; break;
    case 0x09: type = at::kChar; elem = 1; break;
    case 0x0B: type = at::kShort; elem = 2; break;
    case 0x0C: type = at::kInt; elem = 4; break;
    case 0x0D: type = at::kFloat; elem = 4; break;
    case 0x0E: type = at::kDouble; elem = 8; break;
    default: {
      in.finish();
      char buf[64];
      std::snprintf(buf, sizeof buf, "unknown element type code 0x%02x in the magic number", magic[2]);
      formatError(who, buf, path);
    }
  }
  int ndim = magic[3];
  if (ndim == 0) {
    in.finish();
    formatError(who, "the header declares zero dimensions", path);
  }
  size_t header = 4 + 4 * size_t(ndim);
  std::vector<uint8_t> dims(4 * size_t(ndim));
  got = in.read(dims.data(), dims.size());
  if (got < dims.size()) {
    in.finish();
    formatError(who, "truncated header: " + std::to_string(ndim) + " dimensions need " + std::to_string(header) +
                         " bytes, the file has " + std::to_string(4 + got), path);
  }
  std::vector<int64_t> shape;
  unsigned __int128 count = 1;
  for (int d = 0; d < ndim; d++) {
    const uint8_t* p = &dims[4 * size_t(d)];
    uint32_t n = (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
    shape.push_back(int64_t(n));
    count *= n;
  }
  unsigned __int128 need = count * elem;
  auto mismatch = [&](size_t have) {
    in.finish();
    std::string sizes;
    for (size_t i = 0; i < shape.size(); i++) sizes += (i ? "x" : "") + std::to_string(shape[i]);
    formatError(who, "size mismatch: the header declares " + sizes + " elements of " + std::to_string(elem) +
                         " bytes (" + std::to_string(uint64_t(need)) + " bytes of data) but the file has " +
                         std::to_string(have) + (have < need ? " (truncated)" : " (trailing bytes)"), path);
  };
  // A header declaring more data than the file can hold is not allocated for.
  if (need > mostInflatedBytes(path)) mismatch(in.skipRest());
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  uint8_t* dst = static_cast<uint8_t*>(t.data_ptr());
  size_t have = in.read(dst, size_t(need));
  if (have < need) mismatch(have);
  size_t trailing = in.skipRest();
  if (trailing > 0) mismatch(have + trailing);
  in.finish();
  if (elem > 1) {
    for (size_t i = 0; i < have; i += elem)   // big-endian to host
      std::reverse(dst + i, dst + i + elem);
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
