// Figures drawn with PLplot's C API through its cairo drivers (pngcairo, svgcairo): anti-aliased
// lines, real fonts, PNG and SVG from the same drawing code. PLplot keeps global state, so one
// figure is drawn at a time, each in a stream of its own; the driver writes a temporary file
// that is read back and removed.
#include "builtins/plot/figure.hpp"
#include "interp/core/error.hpp"
#include <plplot/plplot.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

namespace purple::plot {

namespace {

std::mutex gPlplot;

// matplotlib's default colours (tab10): what people expect a plot to look like.
const Color kPalette[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},  {148, 103, 189},
                          {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
constexpr int kBackground = 0, kText = 1, kGrid = 2, kFrame = 3, kScratch = 4, kFirstSeries = 8;

void requireDriver(const char* name) {
  const char** menu = nullptr;
  const char** names = nullptr;
  int n = 64;
  static const char* menuStore[64];
  static const char* nameStore[64];
  menu = menuStore;
  names = nameStore;
  plgDevs(&menu, &names, &n);
  for (int i = 0; i < n; i++)
    if (std::strcmp(names[i], name) == 0) return;
  // PLplot would ask for a device on standard input: refuse before it can.
  throwError("error", std::string("plot: PLplot's ") + name + " driver is missing (apt-get install plplot-driver-cairo)");
}

// PLplot ends the process on an internal error unless the handler does not return.
int onPlplotExit(const char* message) {
  std::fprintf(stderr, "purple: PLplot: %s\n", message);
  std::fflush(stderr);
  return 1;
}

struct AxisLog {
  bool x = false, y = false;
};

void formatTick(PLINT axis, PLFLT value, char* label, PLINT length, PLPointer data) {
  const auto* logs = static_cast<const AxisLog*>(data);
  bool log = (axis == PL_X_AXIS && logs->x) || (axis == PL_Y_AXIS && logs->y);
  double v = log ? std::pow(10.0, value) : value;
  if (std::fabs(v) < 1e-12) v = 0;
  std::snprintf(label, size_t(length), "%.6g", v);
}

struct Box {
  double x0, x1, y0, y1;   // normalized page coordinates
};

class Drawing {
 public:
  Drawing(const Figure& f) : figure_(f) {}

  void draw() {
    PLFLT xmin, xmax, ymin, ymax;
    plgspa(&xmin, &xmax, &ymin, &ymax);
    pageW_ = xmax - xmin;
    pageH_ = ymax - ymin;
    // Text scales with the figure's smaller side: 500 pixels is PLplot's natural size.
    textScale_ = std::clamp(std::min(figure_.width, figure_.height) / 500.0, 0.6, 1.6);
    plschr(0, textScale_);
    PLFLT def, ht;
    plgchr(&def, &ht);
    charMm_ = ht;
    int n = int(figure_.panels.size());
    int columns = std::max(1, std::min(figure_.columns, std::max(n, 1)));
    int rows = n == 0 ? 1 : (n + columns - 1) / columns;
    double top = 1.0;
    if (!figure_.title.empty()) {
      top = 1.0 - 3.2 * charMm_ / pageH_;
      plvpor(0, 1, top, 1);
      plwind(0, 1, 0, 1);
      plcol0(kText);
      plschr(0, textScale_ * 1.3);
      plmtex("t", -1.6, 0.5, 0.5, figure_.title.c_str());
      plschr(0, textScale_);
    }
    int seriesIndex = 0;
    for (int i = 0; i < n; i++) {
      int r = i / columns, c = i % columns;
      Box cell{double(c) / columns, double(c + 1) / columns, top - top * (r + 1) / rows, top - top * r / rows};
      drawPanel(figure_.panels[size_t(i)], cell, seriesIndex, rows * columns > 4);
    }
  }

 private:
  double mmX(double mm) const { return mm / pageW_; }
  double mmY(double mm) const { return mm / pageH_; }

  void setColor(int index, const Color& c) {
    plscol0a(index, c.r, c.g, c.b, c.alpha);
    plcol0(index);
  }

  void drawPanel(const Panel& p, const Box& cell, int& seriesIndex, bool small) {
    auto all = [&](Series::Kind k) {
      return !p.series.empty() && std::all_of(p.series.begin(), p.series.end(), [k](const Series& s) { return s.kind == k; });
    };
    if (all(Series::Kind::Image)) drawPicture(p, cell, small);
    else if (all(Series::Kind::Boxes)) drawBoxes(p, cell);
    else drawAxes(p, cell, seriesIndex);
  }

  // Rows of filled boxes with their labels, no axes (a flame graph): x from 0 to 1, row 0 at
  // the bottom. A label longer than its box is cut and ends in "..", as the SVG flame graph does.
  void drawBoxes(const Panel& p, const Box& cell) {
    double rows = 1;
    for (const Series& s : p.series)
      for (double y : s.y) rows = std::max(rows, y + 1);
    double pad = 0.2 * charMm_;
    plvpor(cell.x0 + mmX(pad), cell.x1 - mmX(pad), cell.y0 + mmY(pad), cell.y1 - mmY(pad));
    plwind(0, 1, 0, rows);
    double widthMm = (cell.x1 - cell.x0) * pageW_ - 2 * pad;
    double rowMm = ((cell.y1 - cell.y0) * pageH_ - 2 * pad) / rows;
    double scale = std::min(0.8, 0.55 * rowMm / charMm_) * textScale_;
    plschr(0, scale);
    PLFLT def, ht;
    plgchr(&def, &ht);
    double charWidthMm = 0.75 * ht;   // PLplot's sans-serif: about three quarters of its height
    for (const Series& s : p.series)
      for (size_t i = 0; i < s.x.size(); i++) {
        double x0 = s.x[i], x1 = s.x[i] + s.widths[i], y0 = s.y[i];
        setColor(kScratch, s.colors[i]);
        PLFLT bx[4] = {x0, x0, x1, x1};
        PLFLT by[4] = {y0 + 0.04, y0 + 0.96, y0 + 0.96, y0 + 0.04};
        plfill(4, bx, by);
        double boxMm = s.widths[i] * widthMm;
        auto fits = size_t(std::max(0.0, (boxMm - 1.0) / charWidthMm));
        if (fits < 3) continue;
        std::string label = s.labels[i];
        if (label.size() > fits) label = label.substr(0, fits - 2) + "..";
        plcol0(kText);
        plptex(x0 + 0.5 / widthMm, y0 + 0.5, 1, 0, 0, label.c_str());
      }
    plschr(0, textScale_);
    if (!p.title.empty()) {
      plcol0(kText);
      plmtex("t", 0.5, 0.5, 0.5, p.title.c_str());
    }
  }

  void drawPicture(const Panel& p, const Box& cell, bool small) {
    const at::Tensor& px = p.series.front().pixels;
    int64_t h = px.size(0), w = px.size(1), c = px.size(2);
    double titleMm = p.title.empty() ? 0.3 * charMm_ : (small ? 1.6 : 2.2) * charMm_;
    double padMm = 0.3 * charMm_;
    double cellW = (cell.x1 - cell.x0) * pageW_ - 2 * padMm, cellH = (cell.y1 - cell.y0) * pageH_ - titleMm - padMm;
    if (cellW <= 0 || cellH <= 0) return;
    double scale = std::min(cellW / double(w), cellH / double(h));
    double drawW = scale * w, drawH = scale * h;
    double x0 = cell.x0 * pageW_ + padMm + (cellW - drawW) / 2, y0 = cell.y0 * pageH_ + padMm + (cellH - drawH) / 2;
    plvpor(mmX(x0), mmX(x0 + drawW), mmY(y0), mmY(y0 + drawH));
    plwind(0, double(w), 0, double(h));
    const uint8_t* data = px.data_ptr<uint8_t>();
    if (c == 1) {
      std::vector<PLFLT> column(size_t(w * h));
      std::vector<PLFLT*> rows(static_cast<size_t>(w));
      for (int64_t i = 0; i < w; i++) {
        rows[size_t(i)] = &column[size_t(i * h)];
        for (int64_t j = 0; j < h; j++) rows[size_t(i)][j] = data[(h - 1 - j) * w + i];
      }
      std::vector<PLINT> grey(256);
      for (int i = 0; i < 256; i++) grey[size_t(i)] = i;
      plscmap1n(256);
      plscmap1(grey.data(), grey.data(), grey.data(), 256);
      plimage(const_cast<const PLFLT* const*>(rows.data()), PLINT(w), PLINT(h), 0, double(w), 0, double(h), 0, 255, 0,
              double(w), 0, double(h));
    } else {
      // Colour pictures: one filled rectangle per run of equal pixels in a row.
      for (int64_t y = 0; y < h; y++) {
        const uint8_t* row = data + y * w * c;
        for (int64_t x = 0; x < w;) {
          int64_t end = x + 1;
          while (end < w && std::memcmp(row + end * c, row + x * c, size_t(c)) == 0) end++;
          const uint8_t* pixel = row + x * c;
          setColor(kScratch, Color{pixel[0], pixel[1], pixel[2], c == 4 ? pixel[3] / 255.0 : 1.0});
          PLFLT bx[4] = {double(x), double(x), double(end), double(end)};
          PLFLT by[4] = {double(h - y - 1), double(h - y), double(h - y), double(h - y - 1)};
          plfill(4, bx, by);
          x = end;
        }
      }
    }
    plcol0(kFrame);
    plwidth(0.5);
    plbox("bc", 0, 0, "bc", 0, 0);
    if (!p.title.empty()) {
      plcol0(kText);
      plschr(0, textScale_ * (small ? 0.75 : 1.0));
      plmtex("t", 0.5, 0.5, 0.5, p.title.c_str());
      plschr(0, textScale_);
    }
  }

  static void extend(double v, double& lo, double& hi) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }

  static std::vector<double> logged(const std::vector<double>& v, bool log) {
    if (!log) return v;
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); i++) out[i] = v[i] > 0 ? std::log10(v[i]) : NAN;
    return out;
  }

  // Lines break at NaN (and at non-positive values on a log axis).
  static void polyline(const std::vector<double>& x, const std::vector<double>& y) {
    size_t n = std::min(x.size(), y.size()), i = 0;
    while (i < n) {
      while (i < n && !(std::isfinite(x[i]) && std::isfinite(y[i]))) i++;
      size_t start = i;
      while (i < n && std::isfinite(x[i]) && std::isfinite(y[i])) i++;
      if (i - start >= 2) plline(PLINT(i - start), &x[start], &y[start]);
      else if (i - start == 1) plstring(1, &x[start], &y[start], "•");
    }
  }

  void drawAxes(const Panel& p, const Box& cell, int& seriesIndex) {
    double left = (p.yLabel.empty() ? 5.0 : 7.0) * charMm_, bottom = (p.xLabel.empty() ? 2.6 : 4.2) * charMm_;
    double top = (p.title.empty() ? 1.2 : 3.0) * charMm_, right = 1.6 * charMm_;
    double vx0 = cell.x0 + mmX(left), vx1 = cell.x1 - mmX(right), vy0 = cell.y0 + mmY(bottom), vy1 = cell.y1 - mmY(top);
    if (vx1 <= vx0 || vy1 <= vy0) return;
    plvpor(vx0, vx1, vy0, vy1);

    // Ranges: what the data cover (histograms from 0), a little margin, or what was asked.
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    bool integralX = true, anyX = false, scatterOnly = true;
    for (const Series& s : p.series) {
      std::vector<double> xs = logged(s.x, p.logX), ys = logged(s.y, p.logY);
      for (double v : xs) {
        extend(v, xlo, xhi);
        if (std::isfinite(v)) anyX = true, integralX = integralX && !p.logX && v == std::floor(v);
      }
      for (double v : ys) extend(v, ylo, yhi);
      if (s.kind == Series::Kind::Histogram && !p.logY) extend(0, ylo, yhi);
      if (s.kind != Series::Kind::Scatter) scatterOnly = false;
    }
    if (!anyX) integralX = false;
    auto pad = [](double& lo, double& hi, double fraction) {
      if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
      if (lo == hi) {
        double d = lo == 0 ? 0.5 : std::fabs(lo) * 0.1;
        lo -= d, hi += d;
      } else {
        double d = (hi - lo) * fraction;
        lo -= d, hi += d;
      }
    };
    pad(xlo, xhi, scatterOnly ? 0.04 : 0.0);
    pad(ylo, yhi, 0.05);
    if (p.xRange) xlo = p.logX ? std::log10(p.xRange->first) : p.xRange->first, xhi = p.logX ? std::log10(p.xRange->second) : p.xRange->second;
    if (p.yRange) ylo = p.logY ? std::log10(p.yRange->first) : p.yRange->first, yhi = p.logY ? std::log10(p.yRange->second) : p.yRange->second;
    if (!(xhi > xlo)) std::swap(xlo, xhi), xhi = xlo + (xhi == xlo ? 1 : 0);
    if (!(yhi > ylo)) std::swap(ylo, yhi), yhi = ylo + (yhi == ylo ? 1 : 0);
    plwind(xlo, xhi, ylo, yhi);

    // Whole-number x (epochs, steps) over a short range: a tick at every one, no fractions.
    double xtick = 0;
    PLINT nxsub = 0;
    if (integralX && xhi - xlo <= 12) xtick = 1, nxsub = 1;
    else if (integralX) xtick = 0;
    logs_.x = p.logX;
    logs_.y = p.logY;
    plslabelfunc(formatTick, &logs_);
    std::string xopt = std::string("bcnt") + (p.logX ? "l" : "") + "o", yopt = std::string("bcntv") + (p.logY ? "l" : "") + "o";
    if (p.grid) {
      plcol0(kGrid);
      plwidth(0.6);
      plbox(p.logX ? "gl" : "g", xtick, nxsub, p.logY ? "gl" : "g", 0, 0);
    }

    // Series, each in its colour: given, or the palette's next.
    struct LegendEntry {
      std::string label;
      PLINT opt, color;
      double width;
    };
    std::vector<LegendEntry> legend;
    for (const Series& s : p.series) {
      int index = kFirstSeries + seriesIndex;
      Color color = s.color ? *s.color : kPalette[seriesIndex % 10];
      seriesIndex++;
      std::vector<double> xs = logged(s.x, p.logX), ys = logged(s.y, p.logY);
      switch (s.kind) {
        case Series::Kind::Line:
          setColor(index, color);
          plwidth(s.width);
          polyline(xs, ys);
          break;
        case Series::Kind::Scatter: {
          setColor(index, color);
          plschr(0, textScale_ * s.size);
          size_t n = std::min(xs.size(), ys.size());
          std::vector<double> fx, fy;
          for (size_t i = 0; i < n; i++)
            if (std::isfinite(xs[i]) && std::isfinite(ys[i])) fx.push_back(xs[i]), fy.push_back(ys[i]);
          if (!fx.empty()) plstring(PLINT(fx.size()), fx.data(), fy.data(), "•");
          plschr(0, textScale_);
          break;
        }
        case Series::Kind::Histogram: {
          Color fill = color;
          fill.alpha = s.color ? color.alpha * 0.6 : 0.6;
          double base = p.logY ? ylo : 0;
          for (size_t i = 0; i + 1 < xs.size() && i < ys.size(); i++) {
            if (!std::isfinite(ys[i]) || (!p.logY && s.y[i] == 0)) continue;
            PLFLT bx[4] = {xs[i], xs[i], xs[i + 1], xs[i + 1]}, by[4] = {base, ys[i], ys[i], base};
            setColor(index, fill);
            plfill(4, bx, by);
            setColor(index, color);
            plwidth(0.8);
            plline(4, bx, by);
          }
          setColor(index, fill);
          break;
        }
        case Series::Kind::Image:
        case Series::Kind::Boxes:   // only in a panel of their own (drawBoxes)
          break;
      }
      if (!s.label.empty())
        legend.push_back({s.label,
                          s.kind == Series::Kind::Line ? PL_LEGEND_LINE
                          : s.kind == Series::Kind::Scatter ? PL_LEGEND_SYMBOL
                                                            : PL_LEGEND_COLOR_BOX,
                          index, s.width});
    }

    plcol0(kText);
    plwidth(1.0);
    plbox(xopt.c_str(), xtick, nxsub, yopt.c_str(), 0, 0);
    if (!p.xLabel.empty()) plmtex("b", 3.0, 0.5, 0.5, p.xLabel.c_str());
    if (!p.yLabel.empty()) plmtex("l", 5.2, 0.5, 0.5, p.yLabel.c_str());
    if (!p.title.empty()) {
      plschr(0, textScale_ * 1.15);
      plmtex("t", 1.0, 0.5, 0.5, p.title.c_str());
      plschr(0, textScale_);
    }
    if (!legend.empty() && p.legend != "none") drawLegend(legend, p.legend);
  }

  template <class Entry> void drawLegend(const std::vector<Entry>& entries, const std::string& where) {
    PLINT n = PLINT(entries.size());
    std::vector<PLINT> opt, textColors(size_t(n), kText), boxColors, boxPatterns(size_t(n), 0), lineColors,
        lineStyles(size_t(n), 1), symbolColors, symbolNumbers(size_t(n), 1);
    std::vector<PLFLT> boxScales(size_t(n), 0.8), boxWidths(size_t(n), 1.0), lineWidths, symbolScales(size_t(n), 1.0);
    std::vector<const char*> text, symbols(size_t(n), "•");
    for (const Entry& e : entries) {
      opt.push_back(e.opt);
      text.push_back(e.label.c_str());
      boxColors.push_back(e.color);
      lineColors.push_back(e.color);
      lineWidths.push_back(e.width);
      symbolColors.push_back(e.color);
    }
    PLINT position = PL_POSITION_INSIDE;
    position |= where.find("lower") != std::string::npos ? PL_POSITION_BOTTOM : PL_POSITION_TOP;
    position |= where.find("left") != std::string::npos ? PL_POSITION_LEFT : PL_POSITION_RIGHT;
    PLFLT legendW, legendH;
    plscol0a(kScratch, 255, 255, 255, 0.85);
    plschr(0, textScale_ * 0.9);
    pllegend(&legendW, &legendH, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, position, 0.02, 0.02, 0.08, kScratch,
             kFrame, 1, 0, 0, n, opt.data(), 1.0, 1.0, 2.0, 0.0, textColors.data(), text.data(), boxColors.data(),
             boxPatterns.data(), boxScales.data(), boxWidths.data(), lineColors.data(), lineStyles.data(),
             lineWidths.data(), symbolColors.data(), symbolScales.data(), symbolNumbers.data(), symbols.data());
    plschr(0, textScale_);
  }

  const Figure& figure_;
  double pageW_ = 1, pageH_ = 1, charMm_ = 3, textScale_ = 1;
  AxisLog logs_;
};

std::string temporaryPath(const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/purple-plot-XXXXXX" + suffix;
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  int fd = mkstemps(buf.data(), int(std::strlen(suffix)));
  if (fd < 0) throwError("file-error", "plot: cannot create a temporary file in " + std::string(dir && *dir ? dir : "/tmp"));
  close(fd);
  return std::string(buf.data());
}

}  // namespace

std::string render(const Figure& figure, Format format) {
  std::lock_guard<std::mutex> lock(gPlplot);
  const char* device = format == Format::Png ? "pngcairo" : "svgcairo";
  requireDriver(device);
  std::string path = temporaryPath(format == Format::Png ? ".png" : ".svg");
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } removeAfter{path};
  plsexit(onPlplotExit);
  PLINT previous = 0, stream = 0;
  plgstrm(&previous);
  plmkstrm(&stream);
  plsdev(device);
  plsfnam(path.c_str());
  plspage(0, 0, figure.width, figure.height, 0, 0);
  int nSeries = 0;
  for (const Panel& p : figure.panels) nSeries += int(p.series.size());
  plscmap0n(kFirstSeries + std::max(nSeries, 1));
  plscol0(kBackground, 255, 255, 255);
  plscol0(kText, 38, 38, 38);
  plscol0(kGrid, 228, 228, 228);
  plscol0(kFrame, 140, 140, 140);
  plinit();
  pladv(0);
  try {
    Drawing(figure).draw();
  } catch (...) {
    plend1();
    plsstrm(previous);
    throw;
  }
  plend1();
  plsstrm(previous);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) throwError("error", std::string("plot: PLplot's ") + device + " driver wrote nothing");
  return bytes;
}

}  // namespace purple::plot
