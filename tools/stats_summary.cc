#include "authrpc/tools/stats_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

namespace authrpc::cli {
namespace {

using Labels = std::map<std::string, std::string>;

struct Sample {
  Labels labels;
  double value = 0;
  std::uint64_t count = 0;
  CumulativeBuckets buckets;
};
struct Family {
  std::string type;
  std::vector<Sample> samples;
};
using Families = std::map<std::string, Family, std::less<>>;

Status malformed(const std::string& what) {
  return {Errc::kProtocolError, "the sys.stats answer is not the metrics JSON (docs/OPERATIONS.md): " + what};
}

double number_or_nan(const nlohmann::json& v) {
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

Result<Families> parse(const nlohmann::json& stats) {
  if (!stats.is_object() || !stats.contains("metrics") || !stats["metrics"].is_array()) {
    return malformed("no \"metrics\" array");
  }
  Families out;
  for (const auto& f : stats["metrics"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("type") ||
        !f["type"].is_string() || !f.contains("samples") || !f["samples"].is_array()) {
      return malformed("a metric without a name, type or samples");
    }
    Family& family = out[f["name"].get<std::string>()];
    family.type = f["type"].get<std::string>();
    for (const auto& s : f["samples"]) {
      if (!s.is_object()) return malformed("a sample that is not an object");
      Sample sample;
      if (s.contains("labels")) {
        if (!s["labels"].is_object()) return malformed("labels that are not an object");
        for (const auto& [name, value] : s["labels"].items()) {
          if (!value.is_string()) return malformed("a label value that is not a string");
          sample.labels[name] = value.get<std::string>();
        }
      }
      if (family.type == "histogram") {
        if (!s.contains("count") || !s["count"].is_number_unsigned() || !s.contains("buckets") ||
            !s["buckets"].is_array()) {
          return malformed("a histogram sample without count or buckets");
        }
        sample.count = s["count"].get<std::uint64_t>();
        for (const auto& b : s["buckets"]) {
          if (!b.is_array() || b.size() != 2 || !b[1].is_number_unsigned() ||
              !(b[0].is_number() || b[0] == "+Inf")) {
            return malformed("a histogram bucket that is not [upper_bound, count]");
          }
          const double bound = b[0].is_number() ? b[0].get<double>() : std::numeric_limits<double>::infinity();
          sample.buckets.emplace_back(bound, b[1].get<std::uint64_t>());
        }
      } else if (s.contains("value")) {
        sample.value = number_or_nan(s["value"]);
      }
      family.samples.push_back(std::move(sample));
    }
  }
  return out;
}

std::string label(const Labels& labels, const std::string& name) {
  const auto it = labels.find(name);
  return it == labels.end() ? std::string() : it->second;
}

// The value of the one sample of a family without labels (or of the first).
double scalar(const Families& families, std::string_view name) {
  const auto it = families.find(name);
  if (it == families.end() || it->second.samples.empty()) return std::numeric_limits<double>::quiet_NaN();
  return it->second.samples.front().value;
}

// A family's values summed by one label's value (in the label values'
// order); groups of zero left out.
std::map<std::string, double> by_label(const Families& families, std::string_view name, const std::string& key) {
  std::map<std::string, double> out;
  const auto it = families.find(name);
  if (it == families.end()) return out;
  for (const auto& s : it->second.samples) out[label(s.labels, key)] += s.value;
  std::erase_if(out, [](const auto& kv) { return !(kv.second > 0); });
  return out;
}

double total(const std::map<std::string, double>& groups) {
  double sum = 0;
  for (const auto& [_, v] : groups) sum += v;
  return sum;
}

std::string count_text(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string seconds_text(double s) {
  if (std::isnan(s)) return "-";
  char buf[32];
  if (s < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.0f us", s * 1e6);
  } else if (s < 1) {
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  }
  return buf;
}

// "ok 5, permission_denied 2" (ok first).
std::string outcomes_text(const std::map<std::string, double>& outcomes) {
  std::string out;
  auto add = [&out](const std::string& name, double v) {
    out += (out.empty() ? "" : ", ") + name + " " + count_text(v);
  };
  if (const auto ok = outcomes.find("ok"); ok != outcomes.end()) add(ok->first, ok->second);
  for (const auto& [name, v] : outcomes) {
    if (name != "ok") add(name, v);
  }
  return out;
}

// "  NAME  outcomes  p50 X  p99 Y" rows, NAME and outcomes padded.
struct Row {
  std::string name, outcomes;
  const CumulativeBuckets* latency = nullptr;
};

std::string rows_text(const std::vector<Row>& rows) {
  if (rows.empty()) return "  none\n";
  std::size_t name_width = 0, outcome_width = 0;
  for (const auto& r : rows) {
    name_width = std::max(name_width, r.name.size());
    outcome_width = std::max(outcome_width, r.outcomes.size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line = "  " + r.name + std::string(name_width - r.name.size() + 2, ' ') + r.outcomes;
    if (r.latency != nullptr) {
      line += std::string(outcome_width - r.outcomes.size() + 2, ' ');
      line += "p50 " + seconds_text(histogram_quantile(0.5, *r.latency)) + "  p99 " +
              seconds_text(histogram_quantile(0.99, *r.latency));
    }
    out += line + "\n";
  }
  return out;
}

// A histogram's buckets per value of `keys` joined with '.', summed over
// other labels (they must share bounds, as one family's children do).
std::map<std::string, CumulativeBuckets> histograms_by(const Families& families, std::string_view name,
                                                      const std::vector<std::string>& keys) {
  std::map<std::string, CumulativeBuckets> out;
  const auto it = families.find(name);
  if (it == families.end()) return out;
  for (const auto& s : it->second.samples) {
    std::string key;
    for (const auto& k : keys) key += (key.empty() ? "" : ".") + label(s.labels, k);
    auto& into = out[key];
    if (into.empty()) {
      into = s.buckets;
    } else if (into.size() == s.buckets.size()) {
      for (std::size_t i = 0; i < into.size(); ++i) into[i].second += s.buckets[i].second;
    }
  }
  return out;
}

}  // namespace

std::string duration_text(double s) {
  if (std::isnan(s) || s < 0) return "-";
  auto left = static_cast<std::uint64_t>(s);
  const auto days = left / 86400;
  left %= 86400;
  char buf[64];
  if (days > 0) {
    std::snprintf(buf, sizeof buf, "%llud %02lluh %02llum %02llus", static_cast<unsigned long long>(days),
                  static_cast<unsigned long long>(left / 3600), static_cast<unsigned long long>(left % 3600 / 60),
                  static_cast<unsigned long long>(left % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lluh %02llum %02llus", static_cast<unsigned long long>(left / 3600),
                  static_cast<unsigned long long>(left % 3600 / 60), static_cast<unsigned long long>(left % 60));
  }
  return buf;
}

double histogram_quantile(double q, const CumulativeBuckets& buckets) {
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  if (std::isnan(q)) return kNan;
  if (q < 0) return -std::numeric_limits<double>::infinity();
  if (q > 1) return std::numeric_limits<double>::infinity();
  if (buckets.size() < 2) return kNan;
  const auto observations = buckets.back().second;
  if (observations == 0) return kNan;
  double rank = q * static_cast<double>(observations);
  std::size_t b = 0;
  while (b < buckets.size() - 1 && static_cast<double>(buckets[b].second) < rank) ++b;
  if (b == buckets.size() - 1) return buckets[buckets.size() - 2].first;
  if (b == 0 && buckets[0].first <= 0) return buckets[0].first;
  double start = 0;
  const double end = buckets[b].first;
  double count = static_cast<double>(buckets[b].second);
  if (b > 0) {
    start = buckets[b - 1].first;
    count -= static_cast<double>(buckets[b - 1].second);
    rank -= static_cast<double>(buckets[b - 1].second);
  }
  if (count <= 0) return end;  // q = 0 at an empty first bucket
  return start + (end - start) * (rank / count);
}

Result<std::string> stats_summary(const nlohmann::json& stats) {
  auto parsed = parse(stats);
  if (!parsed.ok()) return parsed.status();
  const Families& f = *parsed;
  std::string out;

  std::string version = "?", commit = "?";
  if (const auto it = f.find("authrpc_build_info"); it != f.end() && !it->second.samples.empty()) {
    version = label(it->second.samples.front().labels, "version");
    commit = label(it->second.samples.front().labels, "commit");
  }
  out += "authrpc " + version + " (commit " + commit + "), up " +
         duration_text(scalar(f, "authrpc_uptime_seconds")) + "\n";

  const auto open = by_label(f, "authrpc_server_connections_open", "transport");
  const auto accepted = by_label(f, "authrpc_server_connections_accepted_total", "transport");
  const auto refused = by_label(f, "authrpc_server_connections_refused_total", "reason");
  std::string per_transport;
  for (const auto& [transport, v] : open) {
    per_transport += (per_transport.empty() ? " (" : ", ") + transport + " " + count_text(v);
  }
  if (!per_transport.empty()) per_transport += ")";
  out += "connections: " + count_text(total(open)) + " open" + per_transport + ", " +
         count_text(total(accepted)) + " accepted, " + count_text(total(refused)) + " refused, " +
         count_text(scalar(f, "authrpc_server_connections_unauthenticated")) + " negotiating now\n";

  // Sessions: outcomes per mechanism, and the successful ones' duration.
  std::map<std::string, std::map<std::string, double>> sessions;
  if (const auto it = f.find("authrpc_server_negotiations_total"); it != f.end()) {
    for (const auto& s : it->second.samples) {
      if (s.value > 0) sessions[label(s.labels, "mechanism")][label(s.labels, "outcome")] += s.value;
    }
  }
  const auto negotiation = histograms_by(f, "authrpc_server_negotiation_duration_seconds", {"mechanism"});
  std::vector<Row> rows;
  for (const auto& [mechanism, outcomes] : sessions) {
    const auto h = negotiation.find(mechanism);
    rows.push_back({mechanism, outcomes_text(outcomes), h == negotiation.end() ? nullptr : &h->second});
  }
  out += "sessions by mechanism and outcome (negotiation time of successful ones):\n" + rows_text(rows);

  // Calls: codes per service.method, and the handlers' time.
  std::map<std::string, std::map<std::string, double>> calls;
  if (const auto it = f.find("authrpc_server_calls_total"); it != f.end()) {
    for (const auto& s : it->second.samples) {
      if (s.value > 0) {
        calls[label(s.labels, "service") + "." + label(s.labels, "method")][label(s.labels, "code")] += s.value;
      }
    }
  }
  const auto processing = histograms_by(f, "authrpc_server_call_processing_seconds", {"service", "method"});
  rows.clear();
  for (const auto& [method, codes] : calls) {
    const auto h = processing.find(method);
    rows.push_back({method, outcomes_text(codes), h == processing.end() ? nullptr : &h->second});
  }
  out += "calls by method and code (handler time):\n" + rows_text(rows);

  std::map<std::string, std::map<std::string, double>> tokens;
  if (const auto it = f.find("authrpc_token_operations_total"); it != f.end()) {
    for (const auto& s : it->second.samples) {
      if (s.value > 0) tokens[label(s.labels, "operation")][label(s.labels, "outcome")] += s.value;
    }
  }
  rows.clear();
  for (const auto& [operation, outcomes] : tokens) rows.push_back({operation, outcomes_text(outcomes)});
  out += "token operations:\n" + rows_text(rows);

  char process[160];
  std::snprintf(process, sizeof process, "process: %s open fds, %.1f MiB resident, %.2f s CPU\n",
                count_text(scalar(f, "process_open_fds")).c_str(),
                scalar(f, "process_resident_memory_bytes") / (1024.0 * 1024.0),
                scalar(f, "process_cpu_seconds_total"));
  out += process;
  return out;
}

}  // namespace authrpc::cli
