#include "minibench/plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>

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

// "50 µs", "2 ms", "1 s"; "86 µs", "1.24 ms" for measured values.
std::string time_label(double us) {
  if (us >= 1e6) return fmt("%.3g s", us / 1e6);
  if (us >= 1e3) return fmt("%.3g ms", us / 1e3);
  return fmt("%.3g µs", us);
}

// Width of text in the chart's 12 px sans-serif, generously estimated (no
// font metrics in a hand-written SVG): used to keep labels from touching.
double text_width(const std::string& s, double font_px = 12) {
  std::size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  return 0.62 * font_px * static_cast<double>(chars);
}

// Which panel a row is drawn in.
std::string panel_of(const Row& r) {
  if (r.load) {
    return "calls over " + r.transport + (r.tls ? " + TLS" : "") + " (" +
           std::to_string(r.load->connections) + " connections x " +
           std::to_string(r.load->depth) + " calls in flight)";
  }
  if (r.name.starts_with("calls/") || r.name.ends_with("-pingpong")) {
    return "calls over " + r.transport + " (1-byte call on an open connection)";
  }
  if (r.tls || r.name == "floor/tls") return "sessions over tcp + TLS";
  if (r.transport == "in-process") return "in process (no network)";
  return "sessions over " + r.transport;
}

// Tableau-10 without its grey (kept for the floors), in the order the
// methods are introduced; the interop variants get the lighter shades.
constexpr std::pair<const char*, const char*> kKnownColours[] = {
    {"simple", "#1f77b4"},       {"kerberos", "#2ca02c"},     {"token", "#ff7f0e"},
    {"kerberos-sasl", "#17becf"}, {"token-digest", "#9467bd"}, {"token-scram", "#8c564b"},
    {"x509", "#e377c2"},
};
constexpr const char* kSpareColours[] = {"#d62728", "#bcbd22", "#393b79", "#637939",
                                         "#8c6d31", "#843c39", "#7b4173", "#3182bd"};
constexpr const char* kFloorColour = "#8c8c8c";

}  // namespace

std::string method_colour(const std::string& method) {
  if (method == "none") return kFloorColour;
  for (const auto& [name, colour] : kKnownColours) {
    if (method == name) return colour;
  }
  // Methods minibench has no colour for get the spares in order of asking,
  // the same one for the same method for the life of the process.
  static std::mutex mutex;
  static std::map<std::string, std::size_t> assigned;
  std::lock_guard lock(mutex);
  const auto [it, added] = assigned.emplace(method, assigned.size());
  return kSpareColours[it->second % std::size(kSpareColours)];
}

std::string plot_svg(const std::vector<Row>& all_rows, const std::string& title) {
  // Panels in order of first appearance; in each, rows in the order measured:
  // every floor comes first in its group, the rows held to it after it.
  std::vector<std::pair<std::string, std::vector<const Row*>>> panels;
  double lo = 1e300, hi = 0;
  for (const auto& r : all_rows) {
    if (r.sorted_us.empty()) continue;
    const std::string key = panel_of(r);
    auto it = std::find_if(panels.begin(), panels.end(), [&](const auto& p) { return p.first == key; });
    if (it == panels.end()) it = panels.insert(panels.end(), {key, {}});
    it->second.push_back(&r);
    lo = std::min(lo, std::max(r.summary.p50_us, 0.1));
    hi = std::max(hi, r.summary.p99_us);
  }
  if (panels.empty()) lo = 10, hi = 1000;
  const double x_lo = std::pow(10.0, std::floor(std::log10(lo)));
  double x_hi = std::pow(10.0, std::ceil(std::log10(std::max(hi, lo))));
  if (x_hi <= x_lo) x_hi = x_lo * 10;

  // Layout: row names | bars | values, panels stacked.
  const double names_w = 190, bars_w = 560, values_w = 440, margin = 16;
  const double bars_x = margin + names_w + 10, values_x = bars_x + bars_w + 12;
  const double width = values_x + values_w;
  const double row_h = 24, bar_h = 15, panel_title_h = 26, panel_gap = 14;
  const double top = 86;
  double y = top;
  for (const auto& [_, rows] : panels) {
    y += panel_title_h + row_h * static_cast<double>(rows.size()) + panel_gap;
  }
  const double bars_bottom = y - panel_gap + 4;
  const double height = bars_bottom + 64;
  auto x_of = [&](double us) {
    const double v = std::clamp(us, x_lo, x_hi);
    return bars_x + bars_w * (std::log10(v) - std::log10(x_lo)) / (std::log10(x_hi) - std::log10(x_lo));
  };

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + fmt("%.0f", width) +
         "\" height=\"" + fmt("%.0f", height) + "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " +
         fmt("%.0f", height) + "\" font-family=\"DejaVu Sans, Verdana, sans-serif\" font-size=\"12\">\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", margin) + "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">" +
         escape(title) + "</text>\n";
  // The key: what a bar shows.
  const double key_y = 52;
  svg += "<rect x=\"" + fmt("%.0f", margin) + "\" y=\"" + fmt("%.0f", key_y - 10) +
         "\" width=\"26\" height=\"12\" fill=\"#555555\"/>"
         "<rect x=\"" + fmt("%.0f", margin + 26) + "\" y=\"" + fmt("%.0f", key_y - 10) +
         "\" width=\"22\" height=\"12\" fill=\"#555555\" fill-opacity=\"0.3\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", margin + 56) + "\" y=\"" + fmt("%.0f", key_y) +
         "\">solid: p50 · pale: up to p99 · grey: the bare floor, measured in the same run · "
         "colour: the method (the same in every panel)</text>\n";

  // Grid: x at 1, 2, 5 × each decade; a label where it does not touch the
  // previous one (decades first, so they always get theirs).
  std::vector<std::pair<double, bool>> ticks;  // value, decade
  for (double decade = x_lo; decade < x_hi * 1.001; decade *= 10) {
    for (const double m : {1.0, 2.0, 5.0}) {
      if (decade * m <= x_hi * 1.001) ticks.push_back({decade * m, m == 1.0});
    }
  }
  std::vector<std::pair<double, double>> taken;  // label extents
  std::vector<double> labelled;
  for (const bool decades : {true, false}) {
    for (const auto& [v, decade] : ticks) {
      if (decade != decades) continue;
      const double x = x_of(v), w = text_width(time_label(v));
      const double a = x - w / 2 - 6, b = x + w / 2 + 6;
      const bool room = std::none_of(taken.begin(), taken.end(),
                                     [&](const auto& t) { return a < t.second && t.first < b; });
      if (!room) continue;
      taken.push_back({a, b});
      labelled.push_back(v);
    }
  }
  svg += "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  for (const auto& [v, decade] : ticks) {
    const double x = x_of(v);
    svg += "<line x1=\"" + fmt("%.1f", x) + "\" y1=\"" + fmt("%.1f", top - 4) + "\" x2=\"" +
           fmt("%.1f", x) + "\" y2=\"" + fmt("%.1f", bars_bottom) + "\"" +
           (decade ? " stroke=\"#bdbdbd\"" : "") + "/>\n";
  }
  svg += "</g>\n";
  std::sort(labelled.begin(), labelled.end());
  for (const double v : labelled) {
    svg += "<text class=\"tick\" x=\"" + fmt("%.1f", x_of(v)) + "\" y=\"" +
           fmt("%.1f", bars_bottom + 18) + "\" text-anchor=\"middle\">" + escape(time_label(v)) +
           "</text>\n";
  }
  svg += "<line x1=\"" + fmt("%.1f", bars_x) + "\" y1=\"" + fmt("%.1f", bars_bottom) + "\" x2=\"" +
         fmt("%.1f", bars_x + bars_w) + "\" y2=\"" + fmt("%.1f", bars_bottom) +
         "\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + fmt("%.1f", bars_x + bars_w / 2) + "\" y=\"" + fmt("%.1f", bars_bottom + 42) +
         "\" text-anchor=\"middle\" font-size=\"13\">latency per session or call (log scale)</text>\n";

  y = top;
  for (const auto& [name, rows] : panels) {
    svg += "<text x=\"" + fmt("%.0f", margin) + "\" y=\"" + fmt("%.1f", y + 17) +
           "\" font-size=\"14\" font-weight=\"bold\">" + escape(name) + "</text>\n";
    svg += "<line x1=\"" + fmt("%.0f", margin) + "\" y1=\"" + fmt("%.1f", y + 22) + "\" x2=\"" +
           fmt("%.0f", width - margin) + "\" y2=\"" + fmt("%.1f", y + 22) +
           "\" stroke=\"#999999\" stroke-width=\"0.6\"/>\n";
    y += panel_title_h;
    for (const Row* r : rows) {
      const std::string colour = method_colour(r->method);
      const double mid = y + row_h / 2, bar_top = mid - bar_h / 2;
      const double x50 = x_of(r->summary.p50_us), x99 = x_of(r->summary.p99_us);
      svg += "<g><title>" + escape(r->name) + "</title>\n";
      svg += "<text x=\"" + fmt("%.1f", bars_x - 10) + "\" y=\"" + fmt("%.1f", mid + 4) +
             "\" text-anchor=\"end\"" + (r->method == "none" ? " fill=\"#555555\"" : "") + ">" +
             escape(r->name) + "</text>\n";
      svg += "<rect x=\"" + fmt("%.1f", bars_x) + "\" y=\"" + fmt("%.1f", bar_top) + "\" width=\"" +
             fmt("%.1f", std::max(x50 - bars_x, 1.0)) + "\" height=\"" + fmt("%.1f", bar_h) +
             "\" fill=\"" + colour + "\"/>\n";
      if (x99 > x50) {
        svg += "<rect x=\"" + fmt("%.1f", x50) + "\" y=\"" + fmt("%.1f", bar_top) + "\" width=\"" +
               fmt("%.1f", x99 - x50) + "\" height=\"" + fmt("%.1f", bar_h) + "\" fill=\"" +
               colour + "\" fill-opacity=\"0.3\"/>\n";
      }
      std::string value = "p50 " + time_label(r->summary.p50_us) + " · p99 " +
                          time_label(r->summary.p99_us);
      if (r->ratio && r->floor && *r->floor != r->name) {
        value += " · " + fmt("%.2f", *r->ratio) + "× " + *r->floor;
      }
      const bool beaten = beats_floor(*r);
      svg += "<text x=\"" + fmt("%.1f", values_x) + "\" y=\"" + fmt("%.1f", mid + 4) + "\">" +
             escape(value) + "</text>\n";
      if (beaten) {
        svg += "<text class=\"beats-floor\" x=\"" + fmt("%.1f", values_x + text_width(value) + 8) +
               "\" y=\"" + fmt("%.1f", mid + 4) +
               "\" fill=\"#d62728\" font-weight=\"bold\">beats its floor!</text>\n";
      }
      svg += "</g>\n";
      y += row_h;
    }
    y += panel_gap;
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
