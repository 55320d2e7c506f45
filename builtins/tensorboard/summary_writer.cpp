// TensorBoard logs: (summary-writer DIR) and add-scalar, add-scalars, add-histogram, add-image,
// add-images, add-text, as torch.utils.tensorboard.SummaryWriter writes them: event files named
// events.out.tfevents.TIME.HOST.PID.N, a file_version event first, then one Event per value,
// each a TFRecord (record_writer.hpp) holding a protobuf Event (tensorboard.proto).
#include "builtins/builtins.hpp"
#include "builtins/display/image.hpp"
#include "builtins/tensorboard/record_writer.hpp"
#include "tensorboard.pb.h"
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

using tensorboard::RecordWriter;

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::atomic<int> gFileCounter{0};

std::string eventFileName(const std::string& suffix) {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  char buf[512];
  std::snprintf(buf, sizeof buf, "events.out.tfevents.%010lld.%s.%d.%d%s", (long long)now(), host, int(getpid()),
                gFileCounter++, suffix.c_str());
  return buf;
}

void makeDirectories(const std::string& path) {
  for (size_t i = 1; i <= path.size(); i++) {
    if (i < path.size() && path[i] != '/') continue;
    std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), 0777) != 0 && errno != EEXIST)
      throwError("file-error", "summary-writer: cannot create " + part + " (" + std::strerror(errno) + ")");
  }
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) throwError("file-error", "summary-writer: not a directory: " + path);
}

struct SummaryWriter {
  std::string logDir, suffix;
  std::unique_ptr<RecordWriter> events;
  std::map<std::string, std::unique_ptr<RecordWriter>> scalarRuns;   // add-scalars: one run per tag
  bool closed = false;

  static std::unique_ptr<RecordWriter> openRun(const std::string& dir, const std::string& suffix) {
    makeDirectories(dir);
    auto w = std::make_unique<RecordWriter>(dir + "/" + eventFileName(suffix));
    ::tensorboard::Event version;
    version.set_wall_time(now());
    version.set_file_version("brain.Event:2");
    w->write(version.SerializeAsString());
    return w;
  }

  void check(const char* who) const {
    if (closed) throwError("error", std::string(who) + ": the summary writer of " + logDir + " is closed");
  }

  static void writeSummary(RecordWriter& w, ::tensorboard::Summary summary, int64_t step, double wallTime) {
    ::tensorboard::Event e;
    e.set_wall_time(wallTime);
    e.set_step(step);
    *e.mutable_summary() = std::move(summary);
    w.write(e.SerializeAsString());
  }

  void write(::tensorboard::Summary summary, int64_t step, double wallTime) {
    writeSummary(*events, std::move(summary), step, wallTime);
  }

  void close() {
    if (closed) return;
    events->close();
    for (auto& kv : scalarRuns) kv.second->close();
    closed = true;
  }
};

void destroyWriter(void* p) { delete static_cast<SummaryWriter*>(p); }

SummaryWriter& writerArg(Value v, const char* who) {
  if (v.is(Kind::Foreign)) {
    auto* f = v.as<Foreign>();
    if (f->typeName == intern("summary-writer") && f->ptr) return *static_cast<SummaryWriter*>(f->ptr);
  }
  throwTypeError(who, 1, "a summary-writer", v);
}

int64_t stepOf(std::optional<int64_t> step) { return step ? *step : 0; }
double wallTimeOf(std::optional<double> t) { return t ? *t : now(); }

double scalarOf(Value v, const char* who) {
  if (v.isFixnum()) return double(v.fixnum());
  if (isFlonum(v)) return flonumValue(v);
  if (isNumber(v)) {
    PrimitiveInfo info;
    info.name = who;
    return realValue(v, &info, 2);
  }
  if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).numel() == 1) return tensorOf(v).item<double>();
  throwTypeError(who, 3, "a real number or a one-element tensor", v);
}

// As torch.utils.tensorboard.summary.make_histogram: equal-width bins over [min, max], empty
// bins trimmed from both ends except one on the left (TensorBoard shows only right limits).
::tensorboard::HistogramProto histogram(const at::Tensor& values, int64_t bins, const char* who) {
  at::Tensor v = values.detach().to(at::kCPU).to(at::kDouble).reshape({-1});
  if (v.numel() == 0) throwError("type-error", std::string(who) + ": the tensor has no elements");
  if (!at::isfinite(v).all().item<bool>()) throwError("type-error", std::string(who) + ": the values must be finite (no NaN or infinity)");
  double lo = v.min().item<double>(), hi = v.max().item<double>();
  double left = lo, right = hi;
  if (left == right) left -= 0.5, right += 0.5;   // numpy's range for one distinct value
  at::Tensor counts = at::histc(v, bins, left, right);
  std::vector<double> c(counts.data_ptr<double>(), counts.data_ptr<double>() + bins);
  std::vector<double> limits(size_t(bins) + 1);
  for (int64_t i = 0; i <= bins; i++) limits[size_t(i)] = left + (right - left) * double(i) / double(bins);
  int64_t first = 0, last = bins - 1;
  while (first < bins && c[size_t(first)] == 0) first++;
  while (last > first && c[size_t(last)] == 0) last--;
  ::tensorboard::HistogramProto h;
  h.set_min(lo);
  h.set_max(hi);
  h.set_num(double(v.numel()));
  h.set_sum(v.sum().item<double>());
  h.set_sum_squares(v.dot(v).item<double>());
  if (first > 0) {
    h.add_bucket(c[size_t(first - 1)]);
    h.add_bucket_limit(limits[size_t(first)]);
  } else {
    h.add_bucket(0);
    h.add_bucket_limit(limits[0]);
  }
  for (int64_t i = first; i <= last; i++) {
    h.add_bucket(c[size_t(i)]);
    h.add_bucket_limit(limits[size_t(i + 1)]);
  }
  return h;
}

at::Tensor imageInLayout(const at::Tensor& img, const std::string& formats, const char* who) {
  std::string f = formats;
  for (char& ch : f) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  if (f == "CHW" || f == "HWC" || f == "HW") {
    if (int64_t(f.size()) != img.dim())
      throwError("type-error", std::string(who) + ": :dataformats " + formats + " does not fit a tensor of shape " + c10::str(img.sizes()));
    if (f == "HWC") return img.permute({2, 0, 1});
    return img;
  }
  throwError("type-error", std::string(who) + ": :dataformats is \"CHW\", \"HWC\" or \"HW\", got " + formats);
}

::tensorboard::Summary::Image imageSummary(const at::Tensor& chwOrHw) {
  at::Tensor pixels = imagePixels(chwOrHw, false, "add-image");
  ::tensorboard::Summary::Image img;
  img.set_height(int(pixels.size(0)));
  img.set_width(int(pixels.size(1)));
  img.set_colorspace(int(pixels.size(2)));
  img.set_encoded_image_string(encodePng(pixels));
  return img;
}

}  // namespace

void registerTensorBoard(Registry& r) {
  r.def("summary-writer", "(:optional log-dir :key (filename-suffix \"\"))",
        [](std::optional<std::string> dir, std::string suffix) {
          std::string logDir = dir ? *dir : "runs/" + std::to_string((long long)now());
          auto* w = new SummaryWriter();
          std::unique_ptr<SummaryWriter> owner(w);
          w->logDir = logDir;
          w->suffix = suffix;
          w->events = SummaryWriter::openRun(logDir, suffix);
          return makeForeign(owner.release(), destroyWriter, intern("summary-writer"));
        },
        "A TensorBoard log writer for LOG-DIR (default runs/TIME), as torch.utils.tensorboard.SummaryWriter:\n"
        "it creates the directory and an event file events.out.tfevents.TIME.HOST.PID.N there; add-scalar,\n"
        "add-scalars, add-histogram, add-image, add-images and add-text append to it, and every record reaches\n"
        "the file at once (tensorboard --logdir LOG-DIR shows them while training runs).");
  sandbox(r, "summary-writer", Needs::Files, "files: makes a log directory and an event file");
  r.def("summary-writer-log-dir", "(writer)", [](Value w) { return writerArg(w, "summary-writer-log-dir").logDir; },
        "The directory WRITER logs to.");
  r.def("summary-writer-file", "(writer)", [](Value w) { return writerArg(w, "summary-writer-file").events->path(); },
        "The event file WRITER appends to.");
  r.def("add-scalar", "(writer tag value :optional step walltime)",
        [](Value wv, std::string tag, Value value, std::optional<int64_t> step, std::optional<double> wall) {
          SummaryWriter& w = writerArg(wv, "add-scalar");
          w.check("add-scalar");
          ::tensorboard::Summary s;
          auto* v = s.add_value();
          v->set_tag(tag);
          v->set_simple_value(float(scalarOf(value, "add-scalar")));
          w.write(std::move(s), stepOf(step), wallTimeOf(wall));
        },
        "Logs VALUE (a number or one-element tensor) under TAG at STEP (default 0), as add_scalar does.");
  sandboxAllowed(r, "add-scalar", "files: a writer's event file",
               "writes only through a writer: summary-writer, refused, is the only way to make one, so only a writer the host handed in");
  r.def("add-scalars", "(writer main-tag values :optional step walltime)",
        [](Value wv, std::string mainTag, Value values, std::optional<int64_t> step, std::optional<double> wall) {
          SummaryWriter& w = writerArg(wv, "add-scalars");
          w.check("add-scalars");
          if (!isList(values)) throwTypeError("add-scalars", 3, "an alist of (tag . value)", values);
          double t = wallTimeOf(wall);
          for (Value p = values; isPair(p); p = cdr(p)) {
            Value entry = car(p);
            if (!isPair(entry)) throwTypeError("add-scalars", 3, "an alist of (tag . value)", values);
            Value key = car(entry);
            std::string tag = isString(key) ? std::string(stringView(key)) : isSymbol(key) ? std::string(symbolName(key)) : "";
            if (tag.empty()) throwTypeError("add-scalars", 3, "an alist whose keys are strings or symbols", values);
            // As PyTorch: one run (subdirectory) per tag, each logging MAIN-TAG.
            std::string flatMain = mainTag;
            for (char& ch : flatMain)
              if (ch == '/') ch = '_';
            std::string run = w.logDir + "/" + flatMain + "_" + tag;
            auto& child = w.scalarRuns[run];
            if (!child) child = SummaryWriter::openRun(run, w.suffix);
            ::tensorboard::Summary s;
            auto* v = s.add_value();
            v->set_tag(mainTag);
            v->set_simple_value(float(scalarOf(cdr(entry), "add-scalars")));
            SummaryWriter::writeSummary(*child, std::move(s), stepOf(step), t);
          }
        },
        "Logs several scalars under MAIN-TAG at STEP, VALUES an alist of (tag . value), as add_scalars does:\n"
        "each tag goes to a run of its own, LOG-DIR/MAIN-TAG_TAG, so TensorBoard draws them in one chart.");
  sandboxAllowed(r, "add-scalars", "files: a writer's event file",
               "as add-scalar");
  r.def("add-histogram", "(writer tag values :optional step walltime :key (bins 64))",
        [](Value wv, std::string tag, const at::Tensor& values, std::optional<int64_t> step, std::optional<double> wall,
           int64_t bins) {
          SummaryWriter& w = writerArg(wv, "add-histogram");
          w.check("add-histogram");
          if (bins < 1) throwError("type-error", "add-histogram: :bins must be at least 1");
          ::tensorboard::Summary s;
          auto* v = s.add_value();
          v->set_tag(tag);
          *v->mutable_histo() = histogram(values, bins, "add-histogram");
          w.write(std::move(s), stepOf(step), wallTimeOf(wall));
        },
        "Logs the distribution of VALUES (a tensor, e.g. a layer's weights) under TAG at STEP: min, max, count,\n"
        "sum, sum of squares and :bins equal-width buckets, as add_histogram writes them.");
  sandboxAllowed(r, "add-histogram", "files: a writer's event file",
               "as add-scalar");
  r.def("add-image", "(writer tag image :optional step walltime :key (dataformats \"CHW\"))",
        [](Value wv, std::string tag, const at::Tensor& image, std::optional<int64_t> step, std::optional<double> wall,
           std::string formats) {
          SummaryWriter& w = writerArg(wv, "add-image");
          w.check("add-image");
          ::tensorboard::Summary s;
          auto* v = s.add_value();
          v->set_tag(tag);
          *v->mutable_image() = imageSummary(imageInLayout(image, formats, "add-image"));
          w.write(std::move(s), stepOf(step), wallTimeOf(wall));
        },
        "Logs IMAGE (floats in [0, 1] or uint8; :dataformats \"CHW\" (default), \"HWC\" or \"HW\") under TAG at\n"
        "STEP as a PNG, as add_image does.");
  sandboxAllowed(r, "add-image", "files: a writer's event file",
               "as add-scalar");
  r.def("add-images", "(writer tag images :optional step walltime :key (columns 8))",
        [](Value wv, std::string tag, const at::Tensor& images, std::optional<int64_t> step,
           std::optional<double> wall, int64_t columns) {
          SummaryWriter& w = writerArg(wv, "add-images");
          w.check("add-images");
          if (images.dim() != 4 && images.dim() != 3)
            throwError("type-error", "add-images: expected a batch [N C H W] or [N H W], got shape " + c10::str(images.sizes()));
          if (columns < 1) throwError("type-error", "add-images: :columns must be at least 1");
          std::vector<at::Tensor> list;
          for (int64_t i = 0; i < images.size(0); i++) list.push_back(images[i]);
          at::Tensor grid = imageGrid(list, columns, 2, 0.0, false);
          ::tensorboard::Summary s;
          auto* v = s.add_value();
          v->set_tag(tag);
          *v->mutable_image() = imageSummary(grid);
          w.write(std::move(s), stepOf(step), wallTimeOf(wall));
        },
        "Logs a batch of IMAGES ([N C H W] or [N H W]) under TAG at STEP as one grid picture of COLUMNS\n"
        "images a row, as add_images does.");
  sandboxAllowed(r, "add-images", "files: a writer's event file",
               "as add-scalar");
  r.def("add-text", "(writer tag text :optional step walltime)",
        [](Value wv, std::string tag, std::string text, std::optional<int64_t> step, std::optional<double> wall) {
          SummaryWriter& w = writerArg(wv, "add-text");
          w.check("add-text");
          ::tensorboard::Summary s;
          auto* v = s.add_value();
          v->set_tag(tag + "/text_summary");
          v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
          auto* t = v->mutable_tensor();
          t->set_dtype(::tensorboard::DT_STRING);
          t->mutable_tensor_shape()->add_dim()->set_size(1);
          t->add_string_val(text);
          w.write(std::move(s), stepOf(step), wallTimeOf(wall));
        },
        "Logs TEXT (Markdown in TensorBoard's text tab) under TAG at STEP, as add_text does.");
  sandboxAllowed(r, "add-text", "files: a writer's event file",
               "as add-scalar");
  r.def("summary-writer-flush", "(writer)",
        [](Value wv) {
          SummaryWriter& w = writerArg(wv, "summary-writer-flush");
          if (w.closed) return;
          w.events->flush();
          for (auto& kv : w.scalarRuns) kv.second->flush();
        },
        "Makes sure everything WRITER logged is on disk (each record already reached the operating system).");
  sandboxAllowed(r, "summary-writer-flush", "files: a writer's event file",
               "as add-scalar");
  r.def("summary-writer-close", "(writer)", [](Value wv) { writerArg(wv, "summary-writer-close").close(); },
        "Flushes and closes WRITER's event files; adding to it afterwards is an error.");
  sandboxAllowed(r, "summary-writer-close", "files: a writer's event file",
               "as add-scalar");
}

}  // namespace purple
