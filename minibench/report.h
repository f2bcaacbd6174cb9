// Report: the rows a run measured, the targets they are held to, and their
// two renderings — the text table on stdout and the --json file:
//   {"rows": [{"name", "method", "transport", "tls", "n", "mean_us", "p50_us",
//              "p95_us", "p99_us", "max_us", "per_s", "floor", "ratio"}, …],
//    "targets": [{"row", "floor", "limit", "ratio", "met"}, …]}
// A row's ratio is its p50 over its floor's p50 (same run, interleaved
// blocks); a floor row is its own floor (ratio 1). Without a floor, "floor"
// and "ratio" are null.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "minibench/stats.h"
#include "rpc/result.h"

namespace minibench {

struct Row {
  std::string name;       // "simple/tcp", "floor/tcp", "calls/unix", …
  std::string method;     // authentication method; "none" for floors
  std::string transport;  // "tcp", "unix"
  bool tls = false;
  Summary summary;
  std::vector<double> block_p50_us;  // p50 of each interleaved block
  std::optional<std::string> floor;
  std::optional<double> ratio;
  std::vector<double> block_ratios;  // paired blocks: p50 / floor's p50
};

Row floor_row(std::string name, std::string transport, const Samples& samples);
// `floor` null: no floor was measured, the row has no ratio.
Row compared_row(std::string name, std::string method, std::string transport,
                 const Samples& samples, const Row* floor);

class Report {
 public:
  void add(Row row) { rows_.push_back(std::move(row)); }
  // The row named `row` must have p50 ≤ limit × its floor's p50.
  void add_target(std::string row, double limit);

  void print_rows(std::FILE* out) const;
  // One line per target: ratio, limit, met / NOT met / not measured.
  void print_targets(std::FILE* out) const;
  authrpc::Status write_json(const std::string& path) const;

 private:
  struct Target {
    std::string row;
    double limit;
  };
  const Row* find(const std::string& name) const;

  std::vector<Row> rows_;
  std::vector<Target> targets_;
};

}  // namespace minibench
