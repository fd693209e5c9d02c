#include "svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(double v, int precision) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

Svg::Svg(double width, double height) : width_(width), height_(height) {}

void Svg::rect(double x, double y, double w, double h, const std::string& fill,
               const std::string& extra) {
  body_ += "<rect x=\"" + fmt(x, 6) + "\" y=\"" + fmt(y, 6) + "\" width=\"" + fmt(std::max(w, 0.0), 6) +
           "\" height=\"" + fmt(std::max(h, 0.0), 6) + "\" fill=\"" + fill + "\" " + extra + "/>\n";
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
               const std::string& extra) {
  body_ += "<line x1=\"" + fmt(x1, 6) + "\" y1=\"" + fmt(y1, 6) + "\" x2=\"" + fmt(x2, 6) +
           "\" y2=\"" + fmt(y2, 6) + "\" stroke=\"" + stroke + "\" stroke-width=\"" + fmt(width) +
           "\" " + extra + "/>\n";
}

void Svg::text(double x, double y, const std::string& s, double size, const std::string& anchor,
               const std::string& extra) {
  body_ += "<text x=\"" + fmt(x, 6) + "\" y=\"" + fmt(y, 6) + "\" font-size=\"" + fmt(size) +
           "\" text-anchor=\"" + anchor + "\" " + extra + ">" + xml_escape(s) + "</text>\n";
}

void Svg::circle(double cx, double cy, double r, const std::string& fill, const std::string& extra) {
  body_ += "<circle cx=\"" + fmt(cx, 6) + "\" cy=\"" + fmt(cy, 6) + "\" r=\"" + fmt(r) +
           "\" fill=\"" + fill + "\" " + extra + "/>\n";
}

std::string Svg::str() const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt(width_, 6) + "\" height=\"" +
         fmt(height_, 6) + "\" viewBox=\"0 0 " + fmt(width_, 6) + " " + fmt(height_, 6) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + body_ + "</svg>\n";
}

void Svg::save(const std::string& path) const {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << str();
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> out;
  for (double t = std::pow(10.0, std::floor(std::log10(lo))); t <= hi * 1.0001; t *= 10)
    if (t >= lo * 0.9999) out.push_back(t);
  return out;
}

std::string duration_label(double s) {
  if (s >= 1) return fmt(s) + " s";
  if (s >= 1e-3) return fmt(s * 1e3) + " ms";
  if (s >= 1e-6) return fmt(s * 1e6) + " us";
  return fmt(s * 1e9) + " ns";
}

Svg bench_chart(const std::vector<BarRow>& rows, const std::string& title,
                const std::string& subtitle) {
  const double label_w = 470, plot_x = label_w + 20, plot_w = 520, ratio_w = 80;
  const double top = 92, row_h = 30, bar_h = 10;
  // Value labels may run past the longest bar; the ratio column starts after them.
  const double ratio_x = plot_x + plot_w + 56 + ratio_w / 2;
  const double width = ratio_x + ratio_w / 2 + 12;
  const double height = top + row_h * rows.size() + 50;
  double lo = 1e30, hi = 0;
  for (const BarRow& r : rows)
    for (double t : {r.ours_s, r.baseline_s})
      if (t > 0) {
        lo = std::min(lo, t);
        hi = std::max(hi, t);
      }
  if (hi <= 0) lo = 1e-6, hi = 1;
  lo = std::pow(10.0, std::floor(std::log10(lo)));
  hi = std::pow(10.0, std::ceil(std::log10(hi * 1.0001)));
  if (hi / lo < 100) hi = lo * 100;
  auto x_of = [&](double t) { return plot_x + plot_w * std::log10(t / lo) / std::log10(hi / lo); };

  const std::string ours_color = "#1f77b4", base_color = "#ff7f0e";
  Svg svg(width, height);
  svg.text(12, 24, title, 16, "start", "font-weight=\"bold\"");
  svg.text(12, 44, subtitle, 11, "start", "fill=\"#444\"");
  svg.rect(plot_x, 56, 12, 10, ours_color);
  svg.text(plot_x + 16, 65, "nexttok (median)", 11);
  svg.rect(plot_x + 140, 56, 12, 10, base_color);
  svg.text(plot_x + 156, 65, "baseline, same process and inputs (median)", 11);
  svg.text(ratio_x, top - 8, "baseline/ours", 10, "middle");

  double plot_bottom = top + row_h * rows.size();
  for (double t : log_ticks(lo, hi)) {
    double x = x_of(t);
    svg.line(x, top, x, plot_bottom, "#ddd");
    svg.text(x, plot_bottom + 16, duration_label(t), 10, "middle");
    svg.text(x, top - 8, duration_label(t), 10, "middle", "fill=\"#666\"");
  }
  svg.text(plot_x + plot_w / 2, plot_bottom + 34, "time per call (log scale)", 11, "middle");
  for (size_t i = 0; i < rows.size(); ++i) {
    const BarRow& r = rows[i];
    double y = top + row_h * i;
    if (i % 2) svg.rect(4, y, width - 8, row_h, "#f6f6f6");
    svg.text(label_w + 10, y + row_h / 2 + 4, r.label, 11, "end");
    double y_ours = y + row_h / 2 - bar_h - 1, y_base = y + row_h / 2 + 1;
    if (r.ours_s > 0) {
      svg.rect(plot_x, y_ours, x_of(r.ours_s) - plot_x, bar_h, ours_color);
      svg.text(x_of(r.ours_s) + 4, y_ours + bar_h - 1, duration_label(r.ours_s), 9);
    }
    if (r.baseline_s > 0) {
      svg.rect(plot_x, y_base, x_of(r.baseline_s) - plot_x, bar_h, base_color);
      svg.text(x_of(r.baseline_s) + 4, y_base + bar_h - 1, duration_label(r.baseline_s), 9);
    }
    if (!r.note.empty())
      svg.text(plot_x + 8, y + row_h / 2 + 4, r.note, 10, "start", "fill=\"#c00\"");
    std::string ratio = (r.ours_s > 0 && r.baseline_s > 0) ? fmt(r.baseline_s / r.ours_s, 3) + "x" : "n/a";
    svg.text(ratio_x, y + row_h / 2 + 4, ratio, 11, "middle", "font-weight=\"bold\"");
  }
  svg.line(plot_x, top, plot_x, plot_bottom, "#333");
  return svg;
}
