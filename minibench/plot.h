// `--plot FILE.svg`: every row's latency CDF on one chart — x: latency per
// session (or call) on a log scale in µs/ms, y: fraction of iterations at or
// below it (0–100 %), one line per row, floors dashed, a legend with each
// row's p50. Hand-written SVG 1.1 (no dependency), readable in a browser.
// Called by minibench/main.cc after the run.
#pragma once

#include <string>
#include <vector>

#include "minibench/report.h"
#include "rpc/result.h"

namespace minibench {

// The SVG document for `rows` (rows without samples are left out).
std::string plot_svg(const std::vector<Row>& rows, const std::string& title);

authrpc::Status write_plot(const std::string& path, const std::vector<Row>& rows,
                           const std::string& title);

}  // namespace minibench
