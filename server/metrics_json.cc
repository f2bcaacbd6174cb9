#include "authrpc/server/metrics_json.h"

namespace authrpc {
namespace {

const char* type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

nlohmann::json metrics_json(const MetricsSnapshot& snapshot) {
  nlohmann::json families = nlohmann::json::array();
  for (const auto& family : snapshot) {
    nlohmann::json samples = nlohmann::json::array();
    for (const auto& sample : family.samples) {
      nlohmann::json labels = nlohmann::json::object();
      for (const auto& [name, value] : sample.labels) labels[name] = value;
      if (family.type != MetricType::kHistogram) {
        samples.push_back({{"labels", std::move(labels)}, {"value", sample.value}});
        continue;
      }
      const auto& h = sample.histogram;
      nlohmann::json buckets = nlohmann::json::array();
      for (std::size_t i = 0; i < h.upper_bounds.size() && i < h.cumulative.size(); ++i) {
        buckets.push_back({h.upper_bounds[i], h.cumulative[i]});
      }
      buckets.push_back({"+Inf", h.count});
      samples.push_back(
          {{"labels", std::move(labels)}, {"count", h.count}, {"sum", h.sum_seconds}, {"buckets", std::move(buckets)}});
    }
    families.push_back({{"name", family.name},
                        {"type", type_name(family.type)},
                        {"help", family.help},
                        {"samples", std::move(samples)}});
  }
  return {{"metrics", std::move(families)}};
}

}  // namespace authrpc
