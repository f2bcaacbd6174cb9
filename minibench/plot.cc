#include "minibench/plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace minibench {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// "50 µs", "2 ms", "1 s".
std::string time_label(double us) {
  if (us >= 1e6) return fmt("%g s", us / 1e6);
  if (us >= 1e3) return fmt("%g ms", us / 1e3);
  return fmt("%g µs", us);
}

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
constexpr std::size_t kMaxPoints = 400;  // per line; enough for a smooth curve

}  // namespace

std::string plot_svg(const std::vector<Row>& all_rows, const std::string& title) {
  std::vector<const Row*> rows;
  double lo = 1e300, hi = 0;
  for (const auto& r : all_rows) {
    if (r.sorted_us.empty()) continue;
    rows.push_back(&r);
    lo = std::min(lo, std::max(r.sorted_us.front(), 0.1));
    hi = std::max(hi, r.sorted_us.back());
  }
  if (rows.empty()) lo = 10, hi = 1000;
  const double x_lo = std::pow(10.0, std::floor(std::log10(lo)));
  double x_hi = std::pow(10.0, std::ceil(std::log10(hi)));
  if (x_hi <= x_lo) x_hi = x_lo * 10;

  const double left = 80, top = 60, plot_w = 660, legend_w = 300;
  const double legend_h = 22.0 * static_cast<double>(rows.size()) + 30;
  const double plot_h = std::max(440.0, legend_h);
  const double width = left + plot_w + 30 + legend_w, height = top + plot_h + 70;
  auto x_of = [&](double us) {
    const double v = std::clamp(us, x_lo, x_hi);
    return left + plot_w * (std::log10(v) - std::log10(x_lo)) /
                      (std::log10(x_hi) - std::log10(x_lo));
  };
  auto y_of = [&](double q) { return top + plot_h * (1.0 - q); };

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + fmt("%.0f", width) +
         "\" height=\"" + fmt("%.0f", height) + "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " +
         fmt("%.0f", height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", left) + "\" y=\"30\" font-size=\"16\" font-weight=\"bold\">" +
         escape(title) + "</text>\n";

  // Grid and axes: x at 1, 2, 5 × each decade; y every 10 %.
  svg += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  std::string labels;
  for (double decade = x_lo; decade < x_hi * 1.001; decade *= 10) {
    for (const double m : {1.0, 2.0, 5.0}) {
      const double v = decade * m;
      if (v > x_hi * 1.001) break;
      const double x = x_of(v);
      svg += "<line x1=\"" + fmt("%.1f", x) + "\" y1=\"" + fmt("%.1f", top) + "\" x2=\"" +
             fmt("%.1f", x) + "\" y2=\"" + fmt("%.1f", top + plot_h) + "\"" +
             (m == 1.0 ? " stroke=\"#bbbbbb\"" : "") + "/>\n";
      labels += "<text x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", top + plot_h + 18) +
                "\" text-anchor=\"middle\">" + escape(time_label(v)) + "</text>\n";
    }
  }
  for (int p = 0; p <= 10; ++p) {
    const double y = y_of(p / 10.0);
    svg += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" +
           fmt("%.1f", left + plot_w) + "\" y2=\"" + fmt("%.1f", y) + "\"/>\n";
    labels += "<text x=\"" + fmt("%.1f", left - 8) + "\" y=\"" + fmt("%.1f", y + 4) +
              "\" text-anchor=\"end\">" + std::to_string(p * 10) + " %</text>\n";
  }
  svg += "</g>\n";
  svg += "<rect x=\"" + fmt("%.1f", left) + "\" y=\"" + fmt("%.1f", top) + "\" width=\"" +
         fmt("%.1f", plot_w) + "\" height=\"" + fmt("%.1f", plot_h) +
         "\" fill=\"none\" stroke=\"black\"/>\n";
  svg += labels;
  svg += "<text x=\"" + fmt("%.1f", left + plot_w / 2) + "\" y=\"" +
         fmt("%.1f", top + plot_h + 45) +
         "\" text-anchor=\"middle\" font-size=\"13\">latency per iteration (log scale)</text>\n";
  svg += "<text transform=\"translate(20 " + fmt("%.1f", top + plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">iterations at or below "
         "(cumulative %)</text>\n";

  // One line per row.
  const double legend_x = left + plot_w + 30;
  svg += "<text x=\"" + fmt("%.1f", legend_x) + "\" y=\"" + fmt("%.1f", top + 4) +
         "\" font-weight=\"bold\">row (p50)</text>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = *rows[i];
    const std::string colour = kColours[i % std::size(kColours)];
    const bool floor = r.method == "none";
    const char* dash = floor ? "6 3" : (i / std::size(kColours)) % 2 ? "2 2" : "";
    const std::size_t n = r.sorted_us.size();
    const std::size_t points = std::min(n, kMaxPoints);
    std::string path;
    for (std::size_t k = 0; k < points; ++k) {
      const std::size_t idx = points == n ? k : (k * (n - 1)) / (points - 1 ? points - 1 : 1);
      const double q = static_cast<double>(idx + 1) / static_cast<double>(n);
      path += (k == 0 ? "M" : " L") + fmt("%.1f", x_of(r.sorted_us[idx])) + " " +
              fmt("%.1f", y_of(q));
    }
    svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + colour +
           "\" stroke-width=\"1.6\"" +
           (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) +
           "><title>" + escape(r.name) + "</title></path>\n";
    const double ly = top + 24 + 22.0 * static_cast<double>(i);
    svg += "<line x1=\"" + fmt("%.1f", legend_x) + "\" y1=\"" + fmt("%.1f", ly - 4) + "\" x2=\"" +
           fmt("%.1f", legend_x + 28) + "\" y2=\"" + fmt("%.1f", ly - 4) + "\" stroke=\"" +
           colour + "\" stroke-width=\"2\"" +
           (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) + "/>\n";
    svg += "<text x=\"" + fmt("%.1f", legend_x + 36) + "\" y=\"" + fmt("%.1f", ly) + "\">" +
           escape(r.name + " (" + time_label(std::round(r.summary.p50_us)) + ")") + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

authrpc::Status write_plot(const std::string& path, const std::vector<Row>& rows,
                           const std::string& title) {
  std::ofstream file(path, std::ios::trunc);
  file << plot_svg(rows, title);
  file.close();
  if (!file) {
    return authrpc::Status(std::error_code(errno, std::generic_category()), "write " + path);
  }
  return {};
}

}  // namespace minibench
