// The JSON form of a MetricsSnapshot: what sys.stats returns and
// `authrpc stats` reads (tools/stats_summary.h). Stable field names
// (docs/OPERATIONS.md); the same numbers as the admin listener's /metrics.
#pragma once

#include <nlohmann/json.hpp>

#include "authrpc/base/metrics.h"

namespace authrpc {

// {"metrics": [{"name", "type", "help", "samples": [{"labels": {..}, "value"} |
//   {"labels", "count", "sum", "buckets": [[upper_bound, cumulative], ..., ["+Inf", count]]}]}]}
// "type" is "counter", "gauge" or "histogram"; "sum" and upper bounds are
// seconds; label values are as counted (a fixed set, never a peer's string).
nlohmann::json metrics_json(const MetricsSnapshot& snapshot);

}  // namespace authrpc
