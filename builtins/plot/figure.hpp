// A figure to draw: panels (axes with line, scatter and histogram series, or a picture) laid
// out in a grid. prelude/50-plot.purple builds it as Purple data; figure.cpp reads that data
// into these structures; render.cpp draws them with PLplot.
#pragma once
#include <ATen/ATen.h>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace purple::plot {

struct Color {
  int r = 0, g = 0, b = 0;
  double alpha = 1.0;
};

struct Series {
  enum class Kind { Line, Scatter, Histogram, Image } kind = Kind::Line;
  std::vector<double> x, y;          // line, scatter; histogram: bin edges (n+1) and counts (n)
  std::string label;                 // in the legend when not empty
  std::optional<Color> color;        // default: the next colour of the palette
  double width = 2.0;                // line width (lines, histogram outlines)
  double size = 1.0;                 // marker scale
  at::Tensor pixels;                 // image: uint8 [H W C], C 1 or 3 or 4
};

struct Panel {
  std::string title, xLabel, yLabel;
  std::optional<std::pair<double, double>> xRange, yRange;
  bool logX = false, logY = false;
  bool grid = true;
  std::string legend = "upper-right";   // upper-right, upper-left, lower-right, lower-left, none
  std::vector<Series> series;
};

struct Figure {
  int width = 800, height = 500;     // pixels
  int columns = 1;
  std::string title;                 // above all panels
  std::vector<Panel> panels;
};

// The figure as PNG or SVG file bytes.
enum class Format { Png, Svg };
std::string render(const Figure& figure, Format format);

}  // namespace purple::plot
