// A figure to draw: panels (axes with line, scatter and histogram series, a picture, or rows of
// labelled boxes such as a flame graph) laid out in a grid. prelude/50-plot.purple builds it as Purple data; figure.cpp reads that data
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
  enum class Kind { Line, Scatter, Histogram, Image, Boxes } kind = Kind::Line;
  std::vector<double> x, y;          // line, scatter; histogram: bin edges (n+1) and counts (n);
                                     // boxes: each box's left edge (0 to 1) and row (0 at the bottom)
  std::vector<double> widths;        // boxes: each box's width (a fraction of the panel's)
  std::vector<Color> colors;         // boxes: each box's fill
  std::vector<std::string> labels;   // boxes: each box's text, cut to fit it
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
