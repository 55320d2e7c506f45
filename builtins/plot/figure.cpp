// Reads the figure that prelude/50-plot.purple describes as Purple data (alists, see below) into
// a plot::Figure, checking every field so that a mistake is a Purple error naming it, and
// registers the one builtin the prelude draws with.
//
//   figure: ((width . 800) (height . 500) (columns . 1) (title . "...") (panels . (panel ...)))
//   panel:  ((title . s) (x-label . s) (y-label . s) (x-range . (lo hi)) (y-range . (lo hi))
//            (log-x . #f) (log-y . #f) (grid . #t) (legend . upper-right) (series . (series ...)))
//   series: ((kind . line|scatter|histogram|image) (x . data) (y . data) (label . s)
//            (color . "#rrggbb" / name / #f) (width . 2.0) (size . 1.0)
//            (bins . 30) (range . (lo hi)) (density . #f)       ; histogram of y
//            (image . tensor) (normalize . #f)                  ; image
//            (x . lefts) (y . rows) (widths . data) (colors . ("#rrggbb" ...)) (labels . (s ...)))   ; boxes
//   data: a tensor, list or vector of real numbers.
#include "builtins/builtins.hpp"
#include "builtins/display/image.hpp"
#include "builtins/plot/figure.hpp"
#include "interp/language/printer.hpp"
#include <cmath>
#include <cstdlib>
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

using plot::Color;
using plot::Figure;
using plot::Panel;
using plot::Series;

[[noreturn]] void bad(const std::string& what, Value got);

Value field(Value alist, const char* key) {
  Value k = intern(key);
  if (!isList(alist)) bad("a figure's description must be a proper alist", alist);   // circular too
  for (Value p = alist; isPair(p); p = cdr(p))
    if (isPair(car(p)) && car(car(p)) == k) return cdr(car(p));
  return Value::missing();
}

[[noreturn]] void bad(const std::string& what, Value got) {
  throwError("type-error", "plot: " + what + ", got", cons(got, Value::nil()));
}

std::string text(Value alist, const char* key) {
  Value v = field(alist, key);
  if (v.isMissing() || v.isFalse()) return "";
  if (isString(v)) return std::string(stringView(v));
  if (isSymbol(v)) return std::string(symbolName(v));
  return toDisplayString(v);
}

double real(Value v, const std::string& what) {
  if (v.isFixnum()) return double(v.fixnum());
  if (isFlonum(v)) return flonumValue(v);
  if (isNumber(v)) {
    PrimitiveInfo info;
    info.name = "plot";
    return realValue(v, &info, 0);
  }
  if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).numel() == 1) return tensorOf(v).item<double>();
  bad(what + " must be a real number", v);
}

bool flag(Value alist, const char* key, bool dflt) {
  Value v = field(alist, key);
  return v.isMissing() ? dflt : v.isTrue();
}

std::vector<double> numbers(Value v, const std::string& what) {
  std::vector<double> out;
  if (v.isMissing() || v.isFalse()) return out;
  if (isTensor(v)) {
    const at::Tensor& t = tensorOf(v);
    if (!t.defined()) bad(what + " is a freed tensor", v);
    if (t.is_complex()) bad(what + " must be real", v);
    at::Tensor d = t.detach().to(at::kCPU).to(at::kDouble).contiguous().reshape({-1});
    out.assign(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
    return out;
  }
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t i = 0; i < vec->extra; i++) out.push_back(real(vec->items[i], what + " (each element)"));
    return out;
  }
  if (!isList(v)) bad(what + " must be a tensor, list or vector of numbers", v);
  for (Value p = v; isPair(p); p = cdr(p)) out.push_back(real(car(p), what + " (each element)"));
  return out;
}

std::optional<std::pair<double, double>> range(Value alist, const char* key) {
  Value v = field(alist, key);
  if (v.isMissing() || v.isFalse()) return std::nullopt;
  std::vector<double> r = numbers(v, std::string(":") + key);
  if (r.size() != 2 || !(r[0] < r[1])) bad(std::string(":") + key + " must be a list (low high) with low < high", v);
  return std::make_pair(r[0], r[1]);
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<Color> colorValue(Value v);

std::optional<Color> color(Value alist) { return colorValue(field(alist, "color")); }

std::optional<Color> colorValue(Value v) {
  if (v.isMissing() || v.isFalse()) return std::nullopt;
  std::string s = isString(v) ? std::string(stringView(v)) : isSymbol(v) ? std::string(symbolName(v)) : "";
  if (s.size() == 7 || s.size() == 9) {
    if (s[0] == '#') {
      int d[8];
      bool ok = true;
      for (size_t i = 1; i < s.size(); i++) ok = ok && (d[i - 1] = hexDigit(s[i])) >= 0;
      if (ok) return Color{d[0] * 16 + d[1], d[2] * 16 + d[3], d[4] * 16 + d[5], s.size() == 9 ? (d[6] * 16 + d[7]) / 255.0 : 1.0};
    }
  }
  static const std::pair<const char*, Color> names[] = {
      {"blue", {31, 119, 180}},  {"orange", {255, 127, 14}}, {"green", {44, 160, 44}}, {"red", {214, 39, 40}},
      {"purple", {148, 103, 189}}, {"brown", {140, 86, 75}}, {"pink", {227, 119, 194}}, {"gray", {127, 127, 127}},
      {"grey", {127, 127, 127}}, {"olive", {188, 189, 34}},  {"cyan", {23, 190, 207}},  {"black", {0, 0, 0}},
      {"white", {255, 255, 255}}, {"yellow", {255, 221, 0}}, {"magenta", {255, 0, 255}}, {"navy", {0, 0, 128}}};
  for (const auto& n : names)
    if (s == n.first) return n.second;
  bad(":color must be \"#rrggbb\", \"#rrggbbaa\" or a colour name (blue orange green red purple brown pink gray olive cyan black white yellow magenta navy)", v);
}

Series readSeries(Value s) {
  Series out;
  std::string kind = text(s, "kind");
  out.label = text(s, "label");
  out.color = color(s);
  Value width = field(s, "width");
  if (!width.isMissing()) out.width = real(width, ":width");
  Value size = field(s, "size");
  if (!size.isMissing()) out.size = real(size, ":size");
  if (kind == "line" || kind == "scatter") {
    out.kind = kind == "line" ? Series::Kind::Line : Series::Kind::Scatter;
    out.y = numbers(field(s, "y"), "the y values");
    Value x = field(s, "x");
    if (x.isMissing() || x.isFalse()) {
      for (size_t i = 0; i < out.y.size(); i++) out.x.push_back(double(i));
    } else {
      out.x = numbers(x, "the x values");
      if (out.x.size() != out.y.size())
        throwError("type-error", "plot: " + std::to_string(out.x.size()) + " x values but " + std::to_string(out.y.size()) +
                                     " y values" + (out.label.empty() ? "" : " in series " + out.label));
    }
  } else if (kind == "histogram") {
    out.kind = Series::Kind::Histogram;
    std::vector<double> data = numbers(field(s, "y"), "the histogram's data");
    std::vector<double> finite;
    for (double d : data)
      if (std::isfinite(d)) finite.push_back(d);
    Value binsValue = field(s, "bins");
    int64_t bins = binsValue.isMissing() || binsValue.isFalse() ? 0 : int64_t(real(binsValue, ":bins"));
    if (bins == 0) bins = std::clamp<int64_t>(int64_t(std::ceil(std::log2(std::max<size_t>(finite.size(), 1)) + 1)), 10, 50);
    if (bins < 1 || bins > 100000) bad(":bins must be between 1 and 100000", binsValue);
    auto r = range(s, "range");
    double lo = r ? r->first : 0, hi = r ? r->second : 1;
    if (!r && !finite.empty()) {
      lo = *std::min_element(finite.begin(), finite.end());
      hi = *std::max_element(finite.begin(), finite.end());
      if (lo == hi) lo -= 0.5, hi += 0.5;
    }
    out.x.resize(size_t(bins) + 1);
    for (int64_t i = 0; i <= bins; i++) out.x[size_t(i)] = lo + (hi - lo) * double(i) / double(bins);
    out.y.assign(size_t(bins), 0.0);
    for (double d : finite) {
      if (d < lo || d > hi) continue;
      int64_t b = std::min<int64_t>(bins - 1, int64_t((d - lo) / (hi - lo) * double(bins)));
      out.y[size_t(b)] += 1;
    }
    if (flag(s, "density", false) && !finite.empty()) {
      double binWidth = (hi - lo) / double(bins), total = 0;
      for (double c : out.y) total += c;
      for (double& c : out.y) c /= total * binWidth;
    }
  } else if (kind == "image") {
    out.kind = Series::Kind::Image;
    Value img = field(s, "image");
    if (!isTensor(img) || !tensorOf(img).defined()) bad("an image must be a tensor", img);
    out.pixels = imagePixels(tensorOf(img), flag(s, "normalize", false), "plot");
  } else if (kind == "boxes") {
    out.kind = Series::Kind::Boxes;
    out.x = numbers(field(s, "x"), "the boxes' left edges");
    out.y = numbers(field(s, "y"), "the boxes' rows");
    out.widths = numbers(field(s, "widths"), "the boxes' widths");
    Value colors = field(s, "colors"), labels = field(s, "labels");
    if (!isList(colors) || !isList(labels)) bad("boxes need lists of colors and labels", cons(colors, labels));
    for (Value p = colors; isPair(p); p = cdr(p)) out.colors.push_back(colorValue(car(p)).value_or(Color{200, 200, 200}));
    for (Value p = labels; isPair(p); p = cdr(p)) {
      if (!isString(car(p))) bad("a box's label must be a string", car(p));
      out.labels.emplace_back(stringView(car(p)));
    }
    size_t n = out.x.size();
    if (out.y.size() != n || out.widths.size() != n || out.colors.size() != n || out.labels.size() != n)
      throwError("type-error", "plot: boxes need as many rows, widths, colors and labels as left edges");
  } else {
    bad("a series' kind is line, scatter, histogram, image or boxes", field(s, "kind"));
  }
  return out;
}

Figure readFigure(Value f) {
  Figure out;
  Value w = field(f, "width"), h = field(f, "height"), c = field(f, "columns");
  if (!w.isMissing()) out.width = int(real(w, ":width"));
  if (!h.isMissing()) out.height = int(real(h, ":height"));
  if (!c.isMissing()) out.columns = int(real(c, ":columns"));
  if (out.width < 64 || out.width > 8000 || out.height < 64 || out.height > 8000)
    throwError("type-error", "plot: :width and :height must be between 64 and 8000 pixels");
  if (out.columns < 1) throwError("type-error", "plot: :columns must be at least 1");
  out.title = text(f, "title");
  Value panels = field(f, "panels");
  if (!isList(panels)) bad("the panels must be a list", panels);
  for (Value p = panels; isPair(p); p = cdr(p)) {
    Value pa = car(p);
    Panel panel;
    panel.title = text(pa, "title");
    panel.xLabel = text(pa, "x-label");
    panel.yLabel = text(pa, "y-label");
    panel.xRange = range(pa, "x-range");
    panel.yRange = range(pa, "y-range");
    panel.logX = flag(pa, "log-x", false);
    panel.logY = flag(pa, "log-y", false);
    if ((panel.logX && panel.xRange && panel.xRange->first <= 0) || (panel.logY && panel.yRange && panel.yRange->first <= 0))
      throwError("type-error", "plot: a range on a log axis must be positive");
    panel.grid = flag(pa, "grid", true);
    Value legend = field(pa, "legend");
    if (!legend.isMissing()) {
      panel.legend = legend.isFalse() ? "none" : text(pa, "legend");
      if (legend.isTrue() && !isSymbol(legend) && !isString(legend)) panel.legend = "upper-right";
      static const char* places[] = {"upper-right", "upper-left", "lower-right", "lower-left", "none"};
      if (std::find_if(std::begin(places), std::end(places), [&](const char* s) { return panel.legend == s; }) == std::end(places))
        bad(":legend is upper-right, upper-left, lower-right, lower-left or #f", legend);
    }
    Value series = field(pa, "series");
    if (!isList(series)) bad("a panel's series must be a list", series);
    for (Value s = series; isPair(s); s = cdr(s)) panel.series.push_back(readSeries(car(s)));
    out.panels.push_back(std::move(panel));
  }
  return out;
}

Value bytevectorOf(const std::string& bytes) {
  Value bv = makeBytevector(bytes.size());
  std::copy(bytes.begin(), bytes.end(), bv.as<Bytevector>()->bytes);
  return bv;
}

}  // namespace

void registerPlot(Registry& r) {
  r.def("%plot-render", "(figure format)",
        [](Value figure, std::string format) -> Value {
          Figure f = readFigure(figure);
          if (format == "check") return Value::boolean(true);   // bad input is an error where the plot is made
          if (format == "png") return bytevectorOf(plot::render(f, plot::Format::Png));
          if (format == "svg") return makeString(plot::render(f, plot::Format::Svg));
          throwError("type-error", "plot: the format is png or svg, got " + format);
        },
        "Internal: draws FIGURE (prelude/50-plot.purple's description) with PLplot as png (a bytevector) or svg (a string);\n"
        "check: only validates it.");
  sandboxAllowed(r, "%plot-render", "files: a private temporary file in TMPDIR",
               "PLplot draws into a temporary file that is read back and removed at once; the script chooses no path");
}

}  // namespace purple
