// A small SVG writer (self-contained documents, no external fonts or styles)
// and the bench chart drawn with it.
#pragma once

#include <string>
#include <vector>

class Svg {
 public:
  Svg(double width, double height);
  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& extra = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke,
            double width = 1, const std::string& extra = "");
  // anchor: "start" | "middle" | "end"
  void text(double x, double y, const std::string& s, double size = 12,
            const std::string& anchor = "start", const std::string& extra = "");
  void circle(double cx, double cy, double r, const std::string& fill, const std::string& extra = "");
  void raw(const std::string& element) { body_ += element + "\n"; }
  std::string str() const;
  // Throws std::runtime_error when the file cannot be written.
  void save(const std::string& path) const;

 private:
  double width_, height_;
  std::string body_;
};

std::string xml_escape(const std::string& s);
std::string fmt(double v, int precision = 3);

// Decade ticks of a log axis covering [lo, hi]: 1, 10, 100, ... in range.
std::vector<double> log_ticks(double lo, double hi);
// "1 us", "10 ms", ...
std::string duration_label(double seconds);

struct BarRow {
  std::string label;
  double ours_s = 0;      // <= 0: missing
  double baseline_s = 0;  // <= 0: missing
  std::string note;       // shown in place of missing bars (e.g. an error)
};

// Horizontal grouped bars, log-x: our median time beside the baseline's.
Svg bench_chart(const std::vector<BarRow>& rows, const std::string& title,
                const std::string& subtitle);
