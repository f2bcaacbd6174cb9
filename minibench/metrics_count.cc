#include "minibench/metrics_count.h"

namespace minibench {

double counted_total(const authrpc::MetricsRegistry& registry) {
  double total = 0;
  for (const auto& family : registry.snapshot()) {
    // process_* and the gauges say nothing about what the run did.
    if (family.type != authrpc::MetricType::kCounter || !family.name.starts_with("authrpc_")) {
      continue;
    }
    for (const auto& sample : family.samples) total += sample.value;
  }
  return total;
}

}  // namespace minibench
