#include "minibench/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>

#include "minibench/run_info.h"

namespace minibench {
namespace {

using Json = nlohmann::ordered_json;

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

// "50 µs", "2 ms", "1 s"; "86 µs", "1.24 ms" for measured values.
std::string time_label(double us) {
  if (us >= 1e6) return fmt("%.3g s", us / 1e6);
  if (us >= 1e3) return fmt("%.3g ms", us / 1e3);
  return fmt("%.3g µs", us);
}

// "1×", "0.5×", "1.25×": a ratio or limit as written on the chart.
std::string times(double v) { return fmt("%g", std::round(v * 100) / 100) + "×"; }

// Width of text in the chart's 12 px sans-serif, generously estimated (no
// font metrics in a hand-written SVG): used to keep labels from touching.
double text_width(const std::string& s, double font_px = 12) {
  std::size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  return 0.62 * font_px * static_cast<double>(chars);
}

std::string text(double x, double y, const std::string& body, const std::string& attrs = {}) {
  return "<text x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", y) + "\"" +
         (attrs.empty() ? "" : " " + attrs) + ">" + body + "</text>\n";
}

std::string rect(double x, double y, double w, double h, const std::string& attrs) {
  return "<rect x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", y) + "\" width=\"" +
         fmt("%.1f", w) + "\" height=\"" + fmt("%.1f", h) + "\" " + attrs + "/>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line x1=\"" + fmt("%.1f", x1) + "\" y1=\"" + fmt("%.1f", y1) + "\" x2=\"" +
         fmt("%.1f", x2) + "\" y2=\"" + fmt("%.1f", y2) + "\" " + attrs + "/>\n";
}

// Which panel a row is drawn in.
std::string panel_of(const Row& r) {
  if (r.load) {
    return "calls over " + r.transport + (r.tls ? " + TLS" : "") + " (" +
           std::to_string(r.load->connections) + " connections x " +
           std::to_string(r.load->depth) + " calls in flight)";
  }
  if (r.name.starts_with("calls/") || r.name.ends_with("-pingpong")) {
    // The typed rows and their bytes rows (typed_calls.h): a panel of their own.
    const bool typed = r.name.find(" proto ") != std::string::npos || r.name.find(" bytes ") != std::string::npos;
    return "calls over " + r.transport +
           (typed ? " (typed calls beside bytes calls of the same size" : " (1-byte call") + " on an open connection)";
  }
  if (r.tls || r.name == "floor/tls") return "sessions over tcp + TLS";
  if (r.transport == "in-process") return "in process (no network)";
  return "sessions over " + r.transport;
}

// The footer: when, where and with what the run measured (run_info.h keys;
// absent or null ones are left out). Empty without run information.
std::vector<std::string> footer_lines(const Json& run) {
  auto str = [&](const char* key) {
    if (!run.contains(key) || run.at(key).is_null()) return std::string();
    const Json& v = run.at(key);
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  auto join = [](const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) {
      if (p.empty()) continue;
      out += (out.empty() ? "" : " · ") + p;
    }
    return out;
  };
  std::string kernel = str("kernel");  // "Linux 6.1.0-28-amd64 #1 SMP …": name and release
  if (const auto sp = kernel.find(' '); sp != std::string::npos) {
    kernel = kernel.substr(0, kernel.find(' ', sp + 1));
  }
  std::string cpus = str("cpus").empty() ? "" : str("cpus") + " CPUs";
  if (!cpus.empty() && !str("cpus_usable").empty() && str("cpus_usable") != str("cpus")) {
    cpus += " (" + str("cpus_usable") + " usable)";
  }
  const std::vector<std::string> lines = {
      join({str("time_utc").empty() ? "" : "run " + str("time_utc"),
            str("host").empty() ? "" : "host " + str("host"), str("cpu_model"), cpus, kernel,
            str("load_average").empty() ? "" : "load average " + str("load_average") + " at the start"}),
      join({str("version").empty() ? "" : "authrpc " + str("version"),
            str("commit").empty() ? "" : "commit " + str("commit"),
            str("build_type").empty() ? "" : str("build_type") + " build", str("openssl"),
            str("krb5"), str("sasl")}),
  };
  std::vector<std::string> out;
  for (const auto& l : lines) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

// Tableau-10 without its grey (kept for the floors) and red (kept for the
// warnings), in the order the methods are introduced; the interop variants
// get the lighter shades.
constexpr std::pair<const char*, const char*> kKnownColours[] = {
    {"simple", "#1f77b4"},       {"kerberos", "#2ca02c"},     {"token", "#ff7f0e"},
    {"kerberos-sasl", "#17becf"}, {"token-digest", "#9467bd"}, {"token-scram", "#8c564b"},
    {"x509", "#e377c2"},          {"jwt", "#bcbd22"},
};
constexpr const char* kSpareColours[] = {"#393b79", "#637939", "#8c6d31",
                                         "#843c39", "#7b4173", "#3182bd"};
constexpr const char* kFloorColour = "#8c8c8c";
constexpr const char* kMetColour = "#1a7f37";
constexpr const char* kNotMetColour = "#d62728";

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

namespace {

// What goes right of each row's ratio bar: the ratio, then each target
// and whether it is met (coloured), then a floor that is beaten.
struct Verdict {
  std::string plain, svg;
};

Verdict verdict_of(const Row& r, const std::vector<TargetCheck>& checks) {
  Verdict v;
  auto add = [&](const std::string& s, const std::string& attrs = {}) {
    v.plain += s;
    v.svg += attrs.empty() ? escape(s) : "<tspan " + attrs + ">" + escape(s) + "</tspan>";
  };
  if (!r.ratio || !r.floor) {
    add(r.transport == "in-process" ? "no floor (in process)" : "no floor measured", "fill=\"#555555\"");
    return v;
  }
  if (*r.floor == r.name) {
    add("1× (the floor)", "fill=\"#555555\"");
    return v;
  }
  // Three decimals where two would show a ratio equal to a limit it misses.
  bool close = false;
  for (const auto& c : checks) {
    close = close || (c.row == r.name && !c.rate && times(*r.ratio) == times(c.limit));
  }
  add(close ? fmt("%.3f×", *r.ratio) : times(*r.ratio));
  for (const auto& c : checks) {
    if (c.row != r.name) continue;
    std::string limit = c.rate ? (r.load ? "calls/s ≥ " : "sessions/s ≥ ") + times(c.limit) + " floor's"
                               : "≤ " + times(c.limit) + (c.against == *r.floor ? "" : " " + c.against);
    add(" · " + limit + ": ");
    if (!c.met) {
      add("not measured", "fill=\"#555555\"");
    } else {
      add(*c.met ? "met" : "NOT met", std::string("class=\"") + (*c.met ? "met" : "not-met") +
                                          "\" font-weight=\"bold\" fill=\"" + (*c.met ? kMetColour : kNotMetColour) +
                                          "\"");
    }
  }
  if (beats_floor(r)) {
    add(" · ");
    add("beats its floor!", std::string("class=\"beats-floor\" font-weight=\"bold\" fill=\"") + kNotMetColour + "\"");
  }
  return v;
}

// The plot's panels, scales and geometry, fixed before anything is drawn.
// Layout: row names | time bars | p50 · p99 | ratio bars | verdict.
struct Layout {
  // Panels in order of first appearance; in each, rows in the order
  // measured: every floor comes first in its group, the rows held to it
  // after it.
  std::vector<std::pair<std::string, std::vector<const Row*>>> panels;
  double x_lo = 10, x_hi = 1000;  // the time axis, µs (log)
  double r_hi = 1.5;              // the ratio axis, 0 to r_hi (linear)
  static constexpr double margin = 16, names_w = 180, time_w = 340, times_w = 130, ratio_w = 260;
  static constexpr double time_x = margin + names_w + 10, times_x = time_x + time_w + 10;
  static constexpr double ratio_x = times_x + times_w + 10, verdicts_x = ratio_x + ratio_w + 12;
  static constexpr double row_h = 24, bar_h = 15, panel_title_h = 26, panel_gap = 14, top = 104;
  double width = 0, height = 0, bars_bottom = 0;
  std::vector<std::string> footer;

  double x_of(double us) const {
    const double v = std::clamp(us, x_lo, x_hi);
    return time_x + time_w * (std::log10(v) - std::log10(x_lo)) / (std::log10(x_hi) - std::log10(x_lo));
  }
  double xr_of(double ratio) const { return ratio_x + ratio_w * std::clamp(ratio, 0.0, r_hi) / r_hi; }
};

Layout layout_of(const Report& report, const std::vector<TargetCheck>& checks) {
  Layout l;
  double lo = 1e300, hi = 0;
  // The ratio axis runs past every target and every ratio up to 3× (rows
  // further out run off its end, their ratio written beside).
  constexpr double kRatioCap = 3.0;
  for (const auto& r : report.rows()) {
    if (r.sorted_us.empty()) continue;
    const std::string key = panel_of(r);
    auto it = std::find_if(l.panels.begin(), l.panels.end(), [&](const auto& p) { return p.first == key; });
    if (it == l.panels.end()) it = l.panels.insert(l.panels.end(), {key, {}});
    it->second.push_back(&r);
    lo = std::min(lo, std::max(r.summary.p50_us, 0.1));
    hi = std::max(hi, r.summary.p99_us);
    if (r.ratio && *r.ratio <= kRatioCap) l.r_hi = std::max(l.r_hi, *r.ratio);
  }
  for (const auto& c : checks) {
    if (c.floor_limit) l.r_hi = std::max(l.r_hi, std::min(*c.floor_limit, kRatioCap));
  }
  l.r_hi = std::ceil(l.r_hi * 2 - 1e-9) / 2;
  if (l.panels.empty()) lo = 10, hi = 1000;
  l.x_lo = std::pow(10.0, std::floor(std::log10(lo)));
  l.x_hi = std::pow(10.0, std::ceil(std::log10(std::max(hi, lo))));
  if (l.x_hi <= l.x_lo) l.x_hi = l.x_lo * 10;
  double verdicts_w = 260;
  double y = Layout::top;
  for (const auto& [_, rows] : l.panels) {
    for (const Row* r : rows) verdicts_w = std::max(verdicts_w, text_width(verdict_of(*r, checks).plain));
    y += Layout::panel_title_h + Layout::row_h * static_cast<double>(rows.size()) + Layout::panel_gap;
  }
  l.width = Layout::verdicts_x + verdicts_w + Layout::margin;
  l.bars_bottom = y - Layout::panel_gap + 4;
  l.footer = footer_lines(report.run_info());
  l.height = l.bars_bottom + 60 + 18.0 * static_cast<double>(l.footer.size());
  return l;
}

// The document's head, the title and the key: what each half of a row shows.
std::string key_svg(const Layout& l, const std::string& title) {
  const double margin = Layout::margin;
  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + fmt("%.0f", l.width) +
         "\" height=\"" + fmt("%.0f", l.height) + "\" viewBox=\"0 0 " + fmt("%.0f", l.width) + " " +
         fmt("%.0f", l.height) + "\" font-family=\"DejaVu Sans, Verdana, sans-serif\" font-size=\"12\">\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += text(margin, 28, escape(title), "font-size=\"16\" font-weight=\"bold\"");
  svg += rect(margin, 42, 26, 12, "fill=\"#555555\"") +
         rect(margin + 26, 42, 22, 12, "fill=\"#555555\" fill-opacity=\"0.3\"");
  svg += text(margin + 56, 52,
              "time per session or call (log axis): solid to p50, pale to p99 · grey rows: the "
              "bare floors, measured in the same run · colour: the method");
  svg += rect(margin, 62, 40, 12, "fill=\"#555555\"") +
         line(margin + 30, 58, margin + 30, 78, "stroke=\"black\" stroke-width=\"2.5\"");
  svg += text(margin + 56, 72,
              "ratio (linear axis): the row's p50 over its floor's · black tick: a target (one "
              "held to another row is drawn at its limit over this floor) · met / NOT met beside");
  return svg;
}

// The grids, axes and their labels, and the footer. Time grid: lines at 1,
// 2, 5 × each decade; labels at the decades, and at 2 and 5 too where every
// decade has room for all three.
std::string grid_svg(const Layout& l) {
  const double top = Layout::top, bottom = l.bars_bottom;
  const double time_x = Layout::time_x, time_w = Layout::time_w;
  const double ratio_x = Layout::ratio_x, ratio_w = Layout::ratio_w;
  std::vector<std::pair<double, bool>> ticks;  // value, decade
  for (double decade = l.x_lo; decade < l.x_hi * 1.001; decade *= 10) {
    for (const double m : {1.0, 2.0, 5.0}) {
      if (decade * m <= l.x_hi * 1.001) ticks.push_back({decade * m, m == 1.0});
    }
  }
  double widest = 0;
  for (const auto& [v, _] : ticks) widest = std::max(widest, text_width(time_label(v)));
  const bool label_minor = l.x_of(2 * l.x_lo) - l.x_of(l.x_lo) >= widest + 16;
  std::string svg = "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  for (const auto& [v, decade] : ticks) {
    svg += line(l.x_of(v), top - 4, l.x_of(v), bottom, decade ? "stroke=\"#bdbdbd\"" : "");
  }
  for (double r = 0.5; r <= l.r_hi + 1e-9; r += 0.5) {
    svg += line(l.xr_of(r), top - 4, l.xr_of(r), bottom, r == 1.0 ? "stroke=\"#444444\" stroke-width=\"1.2\"" : "");
  }
  svg += "</g>\n";
  for (const auto& [v, decade] : ticks) {
    if (!decade && !label_minor) continue;
    svg += text(l.x_of(v), bottom + 18, escape(time_label(v)), "class=\"tick\" text-anchor=\"middle\"");
  }
  for (double r = 0; r <= l.r_hi + 1e-9; r += 0.5) {
    svg += text(l.xr_of(r), bottom + 18, escape(r == 0 ? "0" : times(r)), "class=\"ratio-tick\" text-anchor=\"middle\"");
  }
  svg += line(time_x, bottom, time_x + time_w, bottom, "stroke=\"black\"");
  svg += line(ratio_x, top - 4, ratio_x, bottom, "stroke=\"black\"");
  svg += line(ratio_x, bottom, ratio_x + ratio_w, bottom, "stroke=\"black\"");
  svg += text(time_x + time_w / 2, bottom + 40, "latency per session or call (log scale)",
              "text-anchor=\"middle\" font-size=\"13\"");
  svg += text(ratio_x + ratio_w / 2, bottom + 40, "p50 over the floor's p50 (linear)",
              "text-anchor=\"middle\" font-size=\"13\"");
  svg += text(Layout::times_x, top - 8, "p50 · p99", "fill=\"#555555\"");
  for (std::size_t i = 0; i < l.footer.size(); ++i) {
    svg += text(Layout::margin, bottom + 66 + 18.0 * static_cast<double>(i), escape(l.footer[i]),
                "class=\"footer\" fill=\"#444444\"");
  }
  return svg;
}

// One row at `y`: its name, time bars, p50 · p99, ratio bar with its
// targets' ticks, and its verdict.
std::string row_svg(const Layout& l, const Row& r, double y, const std::vector<TargetCheck>& checks) {
  const double time_x = Layout::time_x, ratio_x = Layout::ratio_x, bar_h = Layout::bar_h;
  const std::string fill = "fill=\"" + method_colour(r.method) + "\"";
  const double mid = y + Layout::row_h / 2, bar_top = mid - bar_h / 2;
  const double x50 = l.x_of(r.summary.p50_us), x99 = l.x_of(r.summary.p99_us);
  std::string svg = "<g><title>" + escape(r.name) + "</title>\n";
  svg += text(time_x - 10, mid + 4, escape(r.name),
              std::string("text-anchor=\"end\"") + (r.method == "none" ? " fill=\"#555555\"" : ""));
  svg += rect(time_x, bar_top, std::max(x50 - time_x, 1.0), bar_h, fill);
  if (x99 > x50) svg += rect(x50, bar_top, x99 - x50, bar_h, fill + " fill-opacity=\"0.3\"");
  svg += text(Layout::times_x, mid + 4, escape(time_label(r.summary.p50_us) + " · " + time_label(r.summary.p99_us)));
  if (r.ratio) {
    const double xr = l.xr_of(*r.ratio);
    svg += rect(ratio_x, bar_top, std::max(xr - ratio_x, 1.0), bar_h, fill + " class=\"ratio\"");
    if (*r.ratio > l.r_hi) {  // runs off the axis: a break near its end
      svg += "<path d=\"M" + fmt("%.1f", xr - 16) + " " + fmt("%.1f", bar_top + bar_h) + " L" + fmt("%.1f", xr - 10) +
             " " + fmt("%.1f", bar_top) + " M" + fmt("%.1f", xr - 10) + " " + fmt("%.1f", bar_top + bar_h) + " L" +
             fmt("%.1f", xr - 4) + " " + fmt("%.1f", bar_top) + "\" stroke=\"white\" stroke-width=\"2.5\"/>\n";
    }
  }
  for (const auto& c : checks) {
    if (c.row != r.name || !c.floor_limit) continue;
    const double xt = l.xr_of(*c.floor_limit);
    svg += line(xt, bar_top - 3, xt, bar_top + bar_h + 3, "class=\"target\" stroke=\"black\" stroke-width=\"2.5\"");
  }
  svg += text(Layout::verdicts_x, mid + 4, verdict_of(r, checks).svg);
  svg += "</g>\n";
  return svg;
}

}  // namespace

std::string plot_svg(const Report& report, const std::string& title) {
  const std::vector<TargetCheck> checks = report.target_checks();
  const Layout l = layout_of(report, checks);
  std::string svg = key_svg(l, title) + grid_svg(l);
  double y = Layout::top;
  for (const auto& [name, rows] : l.panels) {
    svg += text(Layout::margin, y + 17, escape(name), "font-size=\"14\" font-weight=\"bold\"");
    svg += line(Layout::margin, y + 22, l.width - Layout::margin, y + 22, "stroke=\"#999999\" stroke-width=\"0.6\"");
    y += Layout::panel_title_h;
    for (const Row* r : rows) {
      svg += row_svg(l, *r, y, checks);
      y += Layout::row_h;
    }
    y += Layout::panel_gap;
  }
  svg += "</svg>\n";
  return svg;
}

authrpc::Status write_plot(const std::string& path, const Report& report, const std::string& title) {
  return write_file(path, plot_svg(report, title));
}

}  // namespace minibench
