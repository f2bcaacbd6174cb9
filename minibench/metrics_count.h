// What a metrics registry has counted, so that a run can show that --metrics
// reached the server and the clients (on: they counted; off: they had no
// registry): the sum of every authrpc_* counter child. Read by the server
// child's minibench_stats.metrics and by main.cc for the clients' registry.
#pragma once

#include "authrpc/base/metrics.h"

namespace minibench {

double counted_total(const authrpc::MetricsRegistry& registry);

}  // namespace minibench
