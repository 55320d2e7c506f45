// Data readers: `load-idx` (MNIST-format IDX files, gzipped or not, through zlib) and
// `load-csv` (numeric columns of a delimited text file into a tensor).
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include <ATen/ATen.h>
#include <zlib.h>

#include <algorithm>

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

// Reads exactly N bytes (fewer only at the end of the data) from F into DST. gzread reads
// plain files as they are.
size_t readUpTo(gzFile f, uint8_t* dst, size_t n, const std::string& who, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    unsigned ask = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
    int k = gzread(f, dst + got, ask);
    if (k < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      gzclose(f);
      formatError(who, "corrupt or truncated gzip data (" + msg + ")", path);
    }
    got += size_t(k);
    if (unsigned(k) < ask) break;
  }
  return got;
}

// The header is read first, then the data straight into the tensor's storage: loading makes no
// copy of the file in memory (the train images are 47 MB; reading the whole file into a buffer
// first, then copying it, peaked at three times that).
at::Tensor loadIdx(const std::string& path) {
  const std::string who = "load-idx";
  requireFileAccess(who);
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) fileError(who, std::string("cannot open file (") + std::strerror(errno) + ")", path);
  gzbuffer(f, 1 << 17);
  auto fail = [&](const std::string& message) {
    gzclose(f);
    formatError(who, message, path);
  };
  uint8_t magic[4];
  size_t got = readUpTo(f, magic, 4, who, path);
  if (got < 4) fail("too short for an IDX header (" + std::to_string(got) + " bytes)");
  if (magic[0] != 0 || magic[1] != 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "bad magic number 0x%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
    fail(std::string(buf) + " (not an IDX file)");
  }
  at::ScalarType type = at::kByte;
  size_t elem = 1;
  switch (magic[2]) {
    case 0x08: type = at::kByte; elem = 1; break;
    case 0x09: type = at::kChar; elem = 1; break;
    case 0x0B: type = at::kShort; elem = 2; break;
    case 0x0C: type = at::kInt; elem = 4; break;
    case 0x0D: type = at::kFloat; elem = 4; break;
    case 0x0E: type = at::kDouble; elem = 8; break;
    default: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "unknown element type code 0x%02x in the magic number", magic[2]);
      fail(buf);
    }
  }
  int ndim = magic[3];
  if (ndim == 0) fail("the header declares zero dimensions");
  size_t header = 4 + 4 * size_t(ndim);
  std::vector<uint8_t> dims(4 * size_t(ndim));
  got = readUpTo(f, dims.data(), dims.size(), who, path);
  if (got < dims.size())
    fail("truncated header: " + std::to_string(ndim) + " dimensions need " + std::to_string(header) +
         " bytes, the file has " + std::to_string(4 + got));
  std::vector<int64_t> shape;
  unsigned __int128 count = 1;
  for (int d = 0; d < ndim; d++) {
    const uint8_t* p = &dims[4 * size_t(d)];
    uint32_t n = (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
    shape.push_back(int64_t(n));
    count *= n;
  }
  unsigned __int128 need = count * elem;
  auto mismatch = [&](unsigned __int128 have) {
    // a gzip stream cut short reads as short data: say which it is
    int code = 0;
    std::string message = gzerror(f, &code);
    if (code != Z_OK && code != Z_STREAM_END) fail("corrupt or truncated gzip data (" + message + ")");
    if (have < need && gzclose(f) == Z_BUF_ERROR) formatError(who, "truncated gzip data (the file ends in mid-stream)", path);
    std::string sizes;
    for (size_t i = 0; i < shape.size(); i++) sizes += (i ? "x" : "") + std::to_string(shape[i]);
    std::string text = "size mismatch: the header declares " + sizes + " elements of " + std::to_string(elem) +
                       " bytes (" + std::to_string(uint64_t(need)) + " bytes of data) but the file has " +
                       std::to_string(uint64_t(have)) + (have < need ? " (truncated)" : " (trailing bytes)");
    if (have < need) formatError(who, text, path);   // closed above
    fail(text);
  };
  // A header that declares more than memory can hold: count what the file has instead of
  // allocating (the same message as a short file).
  if (need > (unsigned __int128)(size_t(1) << 46)) {
    uint8_t sink[1 << 16];
    size_t have = 0, k;
    while ((k = readUpTo(f, sink, sizeof sink, who, path)) > 0) have += k;
    mismatch(have);
  }
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  uint8_t* dst = static_cast<uint8_t*>(t.data_ptr());
  size_t have = readUpTo(f, dst, size_t(need), who, path);
  if (have < size_t(need)) mismatch(have);
  uint8_t extra[4096];
  size_t trailing = 0, k;
  while ((k = readUpTo(f, extra, sizeof extra, who, path)) > 0) trailing += k;
  if (trailing) mismatch((unsigned __int128)have + trailing);
  int code = 0;
  const char* msg = gzerror(f, &code);
  std::string message = msg ? msg : "";
  int closed = gzclose(f);
  if (code != Z_OK && code != Z_STREAM_END) formatError(who, "corrupt or truncated gzip data (" + message + ")", path);
  if (closed == Z_BUF_ERROR) formatError(who, "truncated gzip data (the file ends in mid-stream)", path);
  if (closed != Z_OK) formatError(who, "error reading compressed data", path);
  if (elem > 1) {
    for (size_t i = 0; i < have; i += elem)   // big-endian to host, in place
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
