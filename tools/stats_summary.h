// `authrpc stats`' reading of a sys.stats answer (the JSON of
// server/metrics_json.h): the numbers an operator asks for first — uptime,
// version, connections, sessions by mechanism and outcome, calls by method
// and code with their p50/p99, token operations, the process — as text.
// Part of the CLI program (tools/authrpc_cli_main.cc; docs/CLI.md), not of
// the client library. The client reads the JSON itself: client/ never
// includes server/.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "authrpc/base/result.h"

namespace authrpc::cli {

// A histogram's cumulative buckets, (upper bound in seconds, observations
// at or below it), ascending; the last bound is +Inf and its count is the
// total.
using CumulativeBuckets = std::vector<std::pair<double, std::uint64_t>>;

// The q-quantile (0 ≤ q ≤ 1) as Prometheus' histogram_quantile() computes
// it: the bucket the rank q × total falls in, and a linear interpolation
// between its lower and upper bound (the first bucket starts at 0). A rank in
// the +Inf bucket gives the largest finite bound. NaN without observations
// or with fewer than two buckets.
double histogram_quantile(double q, const CumulativeBuckets& buckets);

// A length of time as the CLI prints one: "2h 03m 04s", "3d 00h 00m 01s";
// "-" for a negative or NaN one. Fractions of a second are dropped.
std::string duration_text(double seconds);

// The summary of a sys.stats answer; kProtocolError naming what is wrong if
// `stats` is not one.
Result<std::string> stats_summary(const nlohmann::json& stats);

}  // namespace authrpc::cli
