#include "minibench/report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string_view>

#include "minibench/floor_check.h"
#include "minibench/run_info.h"

namespace minibench {
namespace {

using Json = nlohmann::ordered_json;  // keys in the order written

std::vector<double> block_p50s(const Samples& samples) {
  std::vector<double> p50s;
  for (const auto& block : samples.blocks_us()) {
    if (!block.empty()) p50s.push_back(median(block));
  }
  return p50s;
}

double rounded(double v) { return std::round(v * 100.0) / 100.0; }

Json or_null(const std::optional<double>& v) { return v ? Json(rounded(*v)) : Json(nullptr); }
Json or_null(const std::optional<std::string>& v) { return v ? Json(*v) : Json(nullptr); }

void add_samples(Row& row, const Samples& samples) {
  row.sorted_us = samples.all_us();
  std::sort(row.sorted_us.begin(), row.sorted_us.end());
  row.server_connections = samples.connections();
  if (const auto cpu = samples.cpu(); cpu && !row.sorted_us.empty()) {
    row.cpu_us = std::chrono::duration<double, std::micro>(*cpu).count() /
                 static_cast<double>(row.sorted_us.size());
  }
}

void add_kdc_requests(Row& row, const Samples& samples) {
  row.kerberos = samples.timed_events().has_value() || row.kerberos;
  if (const auto timed = samples.timed_events(); timed && row.summary.n > 0) {
    row.kdc_requests_per_session = static_cast<double>(*timed) / static_cast<double>(row.summary.n);
  }
  row.kdc_requests_warmup = samples.warmup_events();
}

}  // namespace

Row floor_row(std::string name, std::string transport, const Samples& samples) {
  Row row;
  row.floor = name;
  row.name = std::move(name);
  row.method = "none";
  row.transport = std::move(transport);
  row.summary = summarize(samples);
  row.block_p50_us = block_p50s(samples);
  row.ratio = 1.0;
  row.block_ratios.assign(row.block_p50_us.size(), 1.0);
  add_kdc_requests(row, samples);
  add_samples(row, samples);
  return row;
}

Row compared_row(std::string name, std::string method, std::string transport,
                 const Samples& samples, const Row* floor) {
  Row row;
  row.name = std::move(name);
  row.method = std::move(method);
  row.transport = std::move(transport);
  row.summary = summarize(samples);
  row.block_p50_us = block_p50s(samples);
  if (floor != nullptr && floor->summary.p50_us > 0) {
    row.floor = floor->name;
    row.ratio = row.summary.p50_us / floor->summary.p50_us;
    const std::size_t paired = std::min(row.block_p50_us.size(), floor->block_p50_us.size());
    for (std::size_t i = 0; i < paired; ++i) {
      row.block_ratios.push_back(row.block_p50_us[i] / floor->block_p50_us[i]);
    }
  }
  add_kdc_requests(row, samples);
  add_samples(row, samples);
  return row;
}

bool beats_floor(const Row& row) {
  // A floor is its own; the resumed TLS row does less than its floor's full
  // handshake by design (it is held to simple+tls instead).
  if (!row.ratio || !row.floor || *row.floor == row.name || row.resumed || *row.ratio <= 0) {
    return false;
  }
  std::vector<double> per_block;
  for (const double r : row.block_ratios) {
    if (r > 0) per_block.push_back(1.0 / r);
  }
  return minibench::beats_floor(1.0 / *row.ratio, per_block);
}

std::string caching(const Row& row) {
  if (row.resumed) return "TLS session ticket (resumed handshake)";
  if (row.method == "kerberos" || row.method == "kerberos-sasl" || row.name == "floor/gss" ||
      row.name == "floor/gss-unix") {
    return "Kerberos service ticket in the client's credential cache";
  }
  if (row.method == "jwt") {
    return row.name.starts_with("jwt-cold")
               ? "the client's access token (server cache off: a signature check per session)"
               : "the client's access token, answered from the server's verified-token cache";
  }
  return {};
}

void Report::add_target(std::string row, double limit, std::string reference) {
  targets_.push_back({std::move(row), limit, std::move(reference)});
}

void Report::add_rate_target(std::string row, std::string label, double limit) {
  rate_targets_.push_back({std::move(row), std::move(label), limit});
}

std::optional<Report::Comparison> Report::compare_rate(const RateTarget& t) const {
  const Row* r = find(t.row);
  if (r == nullptr || !r->floor) return std::nullopt;
  const Row* floor = find(*r->floor);
  if (floor == nullptr || floor->summary.per_s <= 0) return std::nullopt;
  Comparison c{r, floor->name, r->summary.per_s / floor->summary.per_s, {}};
  const std::size_t paired = std::min(r->block_per_s.size(), floor->block_per_s.size());
  for (std::size_t i = 0; i < paired; ++i) {
    if (floor->block_per_s[i] > 0) c.block_ratios.push_back(r->block_per_s[i] / floor->block_per_s[i]);
  }
  if (r->cpu_us && floor->cpu_us && *r->cpu_us > 0) c.cpu_ratio = *floor->cpu_us / *r->cpu_us;
  return c;
}

void Report::add_metrics_cost(std::string on, std::string off, std::optional<double> limit) {
  metrics_costs_.push_back({std::move(on), std::move(off), limit});
}

std::optional<Report::Comparison> Report::compare(const Target& t) const {
  const Row* r = find(t.row);
  if (r == nullptr) return std::nullopt;
  if (t.reference.empty()) {
    if (!r->ratio) return std::nullopt;
    return Comparison{r, *r->floor, *r->ratio, r->block_ratios};
  }
  const Row* ref = find(t.reference);
  if (ref == nullptr || ref->summary.p50_us <= 0) return std::nullopt;
  Comparison c{r, ref->name, r->summary.p50_us / ref->summary.p50_us, {}};
  const std::size_t paired = std::min(r->block_p50_us.size(), ref->block_p50_us.size());
  for (std::size_t i = 0; i < paired; ++i) {
    c.block_ratios.push_back(r->block_p50_us[i] / ref->block_p50_us[i]);
  }
  return c;
}

std::vector<TargetCheck> Report::target_checks() const {
  std::vector<TargetCheck> checks;
  for (const auto& t : targets_) {
    const Row* r = find(t.row);
    TargetCheck check{t.row, t.reference, false, t.limit, std::nullopt, std::nullopt};
    if (check.against.empty() && r != nullptr && r->floor) check.against = *r->floor;
    if (const auto c = compare(t)) check.met = c->ratio <= t.limit;
    const Row* floor = r != nullptr && r->floor ? find(*r->floor) : nullptr;
    const Row* against = find(check.against);
    if (floor != nullptr && against != nullptr && floor->summary.p50_us > 0) {
      check.floor_limit = t.limit * against->summary.p50_us / floor->summary.p50_us;
    }
    checks.push_back(std::move(check));
  }
  for (const auto& t : rate_targets_) {
    const auto c = compare_rate(t);
    const Row* r = find(t.row);
    checks.push_back({t.row, r != nullptr && r->floor ? *r->floor : std::string(), true, t.limit,
                      std::nullopt, c ? std::optional<bool>(c->ratio >= t.limit) : std::nullopt});
  }
  return checks;
}

const Row* Report::find(const std::string& name) const {
  for (const auto& row : rows_) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

void Report::print_rows(std::FILE* out) const {
  int name_width = 22;  // wider for the "[metrics off]" rows
  for (const auto& r : rows_) {
    if (!r.load) name_width = std::max(name_width, static_cast<int>(r.name.size()));
  }
  // Calls under load have a table of their own (print_load_rows).
  const bool only_load = std::all_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.load; });
  if (only_load) return print_load_rows(out);
  std::fprintf(out, "%-*s %6s %9s %9s %9s %9s %9s %10s  %s\n", name_width, "name", "n", "mean_us",
               "p50_us", "p95_us", "p99_us", "max_us", "per_s", "ratio (p50/floor p50)");
  for (const auto& r : rows_) {
    if (r.load) continue;
    const auto& s = r.summary;
    std::fprintf(out, "%-*s %6zu %9.1f %9.1f %9.1f %9.1f %9.1f %10.0f  ", name_width,
                 r.name.c_str(), s.n, s.mean_us, s.p50_us, s.p95_us, s.p99_us, s.max_us, s.per_s);
    if (!r.ratio && r.transport == "in-process") {
      std::fprintf(out, "-    (in process: no network, no floor)\n");
    } else if (!r.ratio) {
      std::fprintf(out, "-    (no floor measured)\n");
    } else if (r.floor == r.name) {
      std::fprintf(out, "%.2f (floor)\n", *r.ratio);
    } else {
      std::fprintf(out, "%.2f vs %s\n", *r.ratio, r.floor->c_str());
    }
    if (!r.kerberos) continue;
    if (r.kdc_requests_per_session) {
      std::fprintf(out, "  %s: KDC requests per session %.3f (%ld in %zu timed sessions; %ld in "
                   "the warm-up)\n",
                   r.name.c_str(), *r.kdc_requests_per_session,
                   std::lround(*r.kdc_requests_per_session * static_cast<double>(s.n)), s.n,
                   r.kdc_requests_warmup.value_or(0));
    } else {
      std::fprintf(out, "  %s: KDC requests per session not counted (no KDC log: --kdc-log)\n",
                   r.name.c_str());
    }
  }
  print_load_rows(out);
}

void Report::print_load_rows(std::FILE* out) const {
  const auto first = std::find_if(rows_.begin(), rows_.end(), [](const Row& r) { return r.load; });
  if (first == rows_.end()) return;
  const LoadShape& shape = *first->load;
  std::fprintf(out,
               "%scalls under load: %zu connections (a client thread each) x %zu calls in flight, "
               "%.1f s per row; calls/s over the blocks' wall time, latency per call in µs\n",
               first == rows_.begin() ? "" : "\n", shape.connections, shape.depth, shape.seconds);
  int width = 22;
  for (const auto& r : rows_) {
    if (r.load) width = std::max(width, static_cast<int>(r.name.size()));
  }
  std::fprintf(out, "  %-*s %9s %10s %9s %9s %9s  %s\n", width, "name", "calls", "calls/s",
               "p50_us", "p99_us", "p99.9_us", "calls/s ratio");
  for (const auto& r : rows_) {
    if (!r.load) continue;
    const auto& s = r.summary;
    std::fprintf(out, "  %-*s %9zu %10.0f %9.1f %9.1f %9.1f  ", width, r.name.c_str(), s.n,
                 s.per_s, s.p50_us, s.p99_us, s.p999_us);
    const Row* floor = r.floor ? find(*r.floor) : nullptr;
    if (floor == nullptr || floor->summary.per_s <= 0) {
      std::fprintf(out, "-    (no floor measured)\n");
    } else if (floor == &r) {
      std::fprintf(out, "1.00 (floor)\n");
    } else {
      std::fprintf(out, "%.2f vs %s\n", s.per_s / floor->summary.per_s, floor->name.c_str());
    }
  }
}

void Report::print_targets(std::FILE* out) const {
  const bool kdc_rows = std::any_of(rows_.begin(), rows_.end(), [](const Row& r) {
    return r.kdc_requests_per_session.has_value();
  });
  if (targets_.empty() && rate_targets_.empty() && !kdc_rows) return print_floor_warnings(out);
  std::fprintf(out, "targets:\n");
  for (const auto& t : rate_targets_) {
    const auto c = compare_rate(t);
    if (!c) {
      std::fprintf(out, "  %s >= %g: not measured\n", t.label.c_str(), t.limit);
      continue;
    }
    const bool met = c->ratio >= t.limit;
    std::fprintf(out, "  %s = %.3f %s %g -> %s", t.label.c_str(), c->ratio, met ? ">=" : "<",
                 t.limit, met ? "met" : "NOT met");
    if (!c->block_ratios.empty()) {
      const auto [lo, hi] = std::minmax_element(c->block_ratios.begin(), c->block_ratios.end());
      std::fprintf(out, "  (per-block ratio: median %.2f, range %.2f-%.2f)",
                   median(c->block_ratios), *lo, *hi);
    }
    if (c->cpu_ratio) {
      std::fprintf(out, "  (CPU per session %.1f us, floor %.1f us: floor/row %.3f)",
                   *c->row->cpu_us, *find(c->against)->cpu_us, *c->cpu_ratio);
    }
    std::fprintf(out, "\n");
  }
  for (const auto& t : targets_) {
    const auto c = compare(t);
    const std::string against = t.reference.empty() ? "floor" : t.reference;
    if (!c) {
      std::fprintf(out, "  %-12s p50 <= %.2f x %s p50: not measured\n", t.row.c_str(), t.limit,
                   against.c_str());
      continue;
    }
    std::fprintf(out, "  %-12s p50 <= %.2f x %s p50: ratio %.2f -> %s", t.row.c_str(), t.limit,
                 c->against.c_str(), c->ratio, c->ratio <= t.limit ? "met" : "NOT met");
    if (!c->block_ratios.empty()) {
      const auto [lo, hi] = std::minmax_element(c->block_ratios.begin(), c->block_ratios.end());
      std::fprintf(out, "  (per-block ratio: median %.2f, range %.2f-%.2f)",
                   median(c->block_ratios), *lo, *hi);
    }
    std::fprintf(out, "\n");
  }
  for (const auto& r : rows_) {
    if (!r.kdc_requests_per_session || r.method == "none") continue;
    std::fprintf(out, "  %-12s KDC requests per session after warm-up = 0: %.3f -> %s\n",
                 r.name.c_str(), *r.kdc_requests_per_session,
                 *r.kdc_requests_per_session == 0 ? "met" : "NOT met");
  }
  print_floor_warnings(out);
}

void Report::print_floor_warnings(std::FILE* out) const {
  for (const auto& r : rows_) {
    if (beats_floor(r)) {
      std::fprintf(out, "%s\n", beats_floor_warning(r.name, *r.floor, 1.0 / *r.ratio).c_str());
    }
  }
}

void Report::print_metrics_cost(std::FILE* out) const {
  if (metrics_costs_.empty()) return;
  std::fprintf(out, "\nmetrics cost (--metrics compare): each row beside its \"[metrics off]\" "
                    "twin — a second server in the same child and a client, both counting "
                    "nothing — measured in the same blocks; p50 in µs\n");
  int width = 16;
  for (const auto& m : metrics_costs_) width = std::max(width, static_cast<int>(m.on.size()));
  std::fprintf(out, "  %-*s %9s %9s %8s  %s\n", width, "row", "p50 on", "p50 off", "on/off",
               "per-block on/off: median (range)");
  std::vector<std::string> lines;
  for (const auto& m : metrics_costs_) {
    const auto c = compare({m.on, m.limit.value_or(0), m.off});
    if (!c) {
      std::fprintf(out, "  %-*s not measured\n", width, m.on.c_str());
      if (m.limit) lines.push_back("metrics cost: " + m.on + " p50 on/off: not measured");
      continue;
    }
    std::fprintf(out, "  %-*s %9.1f %9.1f %8.3f", width, m.on.c_str(), c->row->summary.p50_us,
                 find(m.off)->summary.p50_us, c->ratio);
    if (!c->block_ratios.empty()) {
      const auto [lo, hi] = std::minmax_element(c->block_ratios.begin(), c->block_ratios.end());
      std::fprintf(out, "  %.3f (%.3f-%.3f)", median(c->block_ratios), *lo, *hi);
    }
    std::fprintf(out, "\n");
    if (!m.limit) continue;
    char line[160];
    std::snprintf(line, sizeof line, "metrics cost: %s p50 on/off = %.3f %s %.2f -> %s",
                  m.on.c_str(), c->ratio, c->ratio <= *m.limit ? "<=" : ">", *m.limit,
                  c->ratio <= *m.limit ? "met" : "NOT met");
    lines.push_back(line);
  }
  for (const auto& line : lines) std::fprintf(out, "%s\n", line.c_str());
}

authrpc::Status Report::write_json(const std::string& path) const {
  Json rows = Json::array();
  for (const auto& r : rows_) {
    const auto& s = r.summary;
    rows.push_back({{"name", r.name},
                    {"method", r.method},
                    {"transport", r.transport},
                    {"tls", r.tls},
                    {"n", s.n},
                    {"mean_us", rounded(s.mean_us)},
                    {"p50_us", rounded(s.p50_us)},
                    {"p95_us", rounded(s.p95_us)},
                    {"p99_us", rounded(s.p99_us)},
                    {"p999_us", rounded(s.p999_us)},
                    {"max_us", rounded(s.max_us)},
                    {"per_s", rounded(s.per_s)},
                    {"floor", or_null(r.floor)},
                    {"ratio", or_null(r.ratio)},
                    {"caching", caching(r).empty() ? Json(nullptr) : Json(caching(r))},
                    {"beats_floor", r.ratio && r.floor != r.name ? Json(beats_floor(r)) : Json(nullptr)},
                    {"server_connections", r.server_connections ? Json(*r.server_connections)
                                                                : Json(nullptr)},
                    {"metrics", r.metrics}});
    if (r.cpu_us) rows.back()["cpu_us"] = rounded(*r.cpu_us);
    if (r.load) {
      const Row* floor = r.floor ? find(*r.floor) : nullptr;
      Json block_per_s = Json::array();
      for (const double v : r.block_per_s) block_per_s.push_back(std::round(v));
      rows.back()["connections"] = r.load->connections;
      rows.back()["depth"] = r.load->depth;
      rows.back()["duration_s"] = r.load->seconds;
      rows.back()["block_per_s"] = block_per_s;
      rows.back()["per_s_ratio"] = floor != nullptr && floor->summary.per_s > 0
                                       ? Json(rounded(s.per_s / floor->summary.per_s))
                                       : Json(nullptr);
    }
    if (r.kerberos) {
      rows.back()["kdc_requests_per_session"] =
          r.kdc_requests_per_session ? Json(*r.kdc_requests_per_session) : Json(nullptr);
    }
  }
  Json targets = Json::array();
  for (const auto& t : targets_) {
    const auto c = compare(t);
    targets.push_back({{"row", t.row},
                       {"floor", c ? Json(c->against) : Json(nullptr)},
                       {"limit", t.limit},
                       {"ratio", c ? Json(rounded(c->ratio)) : Json(nullptr)},
                       {"met", c ? Json(c->ratio <= t.limit) : Json(nullptr)}});
  }
  Json rate_targets = Json::array();
  for (const auto& t : rate_targets_) {
    const auto c = compare_rate(t);
    rate_targets.push_back(
        {{"row", t.row},
         {"label", t.label},
         {"floor", c ? Json(c->against) : Json(nullptr)},
         {"limit", t.limit},
         {"ratio", c ? Json(std::round(c->ratio * 1000) / 1000) : Json(nullptr)},  // as the line prints it
         {"block_ratio_median",
          c && !c->block_ratios.empty() ? Json(rounded(median(c->block_ratios))) : Json(nullptr)},
         {"cpu_ratio", c && c->cpu_ratio ? Json(std::round(*c->cpu_ratio * 1000) / 1000) : Json(nullptr)},
         {"met", c ? Json(c->ratio >= t.limit) : Json(nullptr)}});
  }
  Json costs = Json::array();
  for (const auto& m : metrics_costs_) {
    const auto c = compare({m.on, m.limit.value_or(0), m.off});
    const Row* off = find(m.off);
    Json block_ratios = Json::array();
    if (c) {
      for (const double r : c->block_ratios) block_ratios.push_back(std::round(r * 1000.0) / 1000.0);
    }
    costs.push_back(
        {{"row", m.on},
         {"off_row", m.off},
         {"p50_on_us", c ? Json(rounded(c->row->summary.p50_us)) : Json(nullptr)},
         {"p50_off_us", off != nullptr ? Json(rounded(off->summary.p50_us)) : Json(nullptr)},
         {"ratio", c ? Json(std::round(c->ratio * 1000.0) / 1000.0) : Json(nullptr)},
         {"block_ratio_median",
          c && !c->block_ratios.empty() ? Json(std::round(median(c->block_ratios) * 1000.0) / 1000.0)
                                        : Json(nullptr)},
         {"block_ratios", block_ratios},
         {"limit", m.limit ? Json(*m.limit) : Json(nullptr)},
         {"met", c && m.limit ? Json(c->ratio <= *m.limit) : Json(nullptr)}});
  }
  const Json doc = {{"rows", rows}, {"targets", targets}, {"rate_targets", rate_targets},
                    {"metrics_cost", costs},
                    {"run", run_info_}};
  return write_file(path, doc.dump(2) + "\n");
}

// --- the summary table -----------------------------------------------------

namespace {

// Display width of UTF-8 text (µs, ×): code points, not bytes.
std::size_t width(const std::string& s) {
  std::size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

std::string pad(std::string s, std::size_t w) {
  const std::size_t have = width(s);
  if (have < w) s.append(w - have, ' ');
  return s;
}

const Row* find(const std::vector<Row>& rows, const std::string& name) {
  for (const auto& r : rows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string format(const char* fmt, double a, double b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

// "0.102 ms / 86 µs", with " (3.24×)" against `base` if given.
std::string cell(const Row* r, const Row* base) {
  if (r == nullptr) return "-";
  std::string s = format("%.3f ms / %.0f µs", r->summary.mean_us / 1000.0, r->summary.p50_us);
  if (base != nullptr && base != r && base->summary.p50_us > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.2f×)", r->summary.p50_us / base->summary.p50_us);
    s += buf;
  }
  return s;
}

struct Line {
  std::string label;
  std::string suffix;  // row name after the method: "/tcp", "+tls/tcp", ...
};

struct Column {
  std::string title;
  std::string method;
};

// One table; false if it had no cell to show.
bool print_table(std::FILE* out, const std::vector<Row>& rows, const std::vector<Line>& lines,
                 const std::vector<Column>& columns, bool first_is_base) {
  std::vector<std::vector<std::string>> cells;
  bool any = false;
  for (const auto& line : lines) {
    std::vector<std::string> texts{line.label};
    const Row* base = find(rows, "simple" + line.suffix);
    bool line_any = false;
    for (const auto& c : columns) {
      const Row* r = find(rows, c.method + line.suffix);
      line_any = line_any || r != nullptr;
      texts.push_back(cell(r, first_is_base || c.method != "simple" ? base : nullptr));
    }
    if (!line_any) continue;
    any = true;
    cells.push_back(std::move(texts));
  }
  if (!any) return false;
  std::vector<std::string> header{"transport"};
  for (const auto& c : columns) header.push_back(c.title);
  std::vector<std::size_t> widths(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) widths[i] = width(header[i]);
  for (const auto& line : cells) {
    for (std::size_t i = 0; i < line.size(); ++i) widths[i] = std::max(widths[i], width(line[i]));
  }
  auto print_line = [&](const std::vector<std::string>& texts) {
    std::string s;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      s += i + 1 < texts.size() ? pad(texts[i], widths[i] + 3) : texts[i];
    }
    std::fprintf(out, "  %s\n", s.c_str());
  };
  print_line(header);
  for (const auto& line : cells) print_line(line);
  return true;
}

}  // namespace

void print_summary(std::FILE* out, const std::vector<Row>& rows, std::size_t warmup) {
  const std::vector<Line> lines = {
      {"tcp", "/tcp"},
      {"unix", "/unix"},
      {"tcp + TLS", "+tls/tcp"},
      {"tcp + TLS, resumed (session ticket kept)", "+tls-resume/tcp"},
  };
  std::fprintf(out, "\nsummary (shape of HADOOP-6637): mean ms / p50 µs per session; secure "
                    "cells: (p50 ÷ No security p50 on the same line)\n");
  const bool main_table =
      print_table(out, rows, lines,
                  {{"No security", "simple"}, {"Kerberos", "kerberos"}, {"Delegation token", "token"}},
                  false);
  if (!main_table) std::fprintf(out, "  (no simple, kerberos or token row measured)\n");
  std::vector<Line> interop_lines(lines.begin(), lines.end() - 1);
  std::fprintf(out, "interop through Cyrus SASL (same cells, ratio to No security):\n");
  if (!print_table(out, rows, interop_lines,
                   {{"Kerberos (SASL GSSAPI)", "kerberos-sasl"},
                    {"Token (SASL DIGEST-MD5)", "token-digest"},
                    {"Token (SASL SCRAM-SHA-256)", "token-scram"}},
                   true)) {
    std::fprintf(out, "  (no kerberos-sasl, token-digest or token-scram row measured)\n");
  }
  // Bearer access tokens travel over TLS only: one line. The cold check
  // (jwt-verify/<alg>, in process) is what a token the server has not seen
  // adds to a session.
  const std::vector<Column> bearer = {{"JWT (server's token cache warm)", "jwt"},
                                      {"JWT (no cache: cold)", "jwt-cold"}};
  if (find(rows, "jwt+tls/tcp") != nullptr || find(rows, "jwt-cold+tls/tcp") != nullptr) {
    std::fprintf(out, "bearer access tokens (OAuth 2.0 JWT; same cells, ratio to No security):\n");
    print_table(out, rows, {lines[2]}, bearer, true);
  }
  constexpr std::string_view kVerifyRow = "jwt-verify/";  // then the algorithm
  std::string verify;
  for (const auto& r : rows) {
    if (!r.name.starts_with(kVerifyRow)) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s %.1f µs", r.name.substr(kVerifyRow.size()).c_str(),
                  r.summary.p50_us);
    verify += (verify.empty() ? "" : ", ") + std::string(buf);
  }
  if (!verify.empty()) {
    std::fprintf(out, "cold JWT check (signature + claims, in process, p50): %s\n", verify.c_str());
  }

  // Each session opened a connection of its own: the server's accepted
  // connections during each row equal its warm-up + timed sessions.
  std::size_t counted = 0;
  std::string mismatches;
  for (const auto& r : rows) {
    if (!r.server_connections) continue;
    ++counted;
    const long expected = static_cast<long>(warmup + r.summary.n);
    if (*r.server_connections != expected) {
      mismatches += " " + r.name + " (" + std::to_string(*r.server_connections) + " for " +
                    std::to_string(expected) + ")";
    }
  }
  if (counted > 0 && mismatches.empty()) {
    std::fprintf(out, "connections: in each of the %zu authrpc rows the server accepted exactly "
                      "warm-up + n connections (one per session)\n", counted);
  } else if (counted > 0) {
    std::fprintf(out, "connections: accepted connections differ from warm-up + n in:%s\n",
                 mismatches.c_str());
  } else {
    std::fprintf(out, "connections: not counted (an external --server has no counter to read)\n");
  }
  std::fprintf(out, "caching: every session opens a new connection and authenticates from "
                    "scratch, keeping only what a real client keeps: the Kerberos service ticket "
                    "in its credential cache (kerberos*, floor/gss*: 0 KDC requests per session "
                    "after the warm-up), and in the resumed TLS row its TLS session ticket%s\n",
               find(rows, "jwt+tls/tcp") != nullptr
                   ? "; the jwt rows send the same access token every session, as a client "
                     "does until it nears its exp"
                   : "");
}

}  // namespace minibench
