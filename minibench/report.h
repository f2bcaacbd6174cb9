// Report: the rows a run measured, the targets they are held to, and their
// two renderings — the text table on stdout and the --json file (the
// summary table of `minibench sessions` is print_summary, below):
//   {"rows": [{"name", "method", "transport", "tls", "n", "mean_us", "p50_us",
//              "p95_us", "p99_us", "p999_us", "max_us", "per_s", "floor", "ratio",
//              "caching", "beats_floor", "server_connections", "metrics"
//              [, "kdc_requests_per_session"]
//              [, "connections", "depth", "duration_s", "block_per_s",
//                 "per_s_ratio"]}, …],
//    "targets": [{"row", "floor", "limit", "ratio", "met"}, …],
//    "rate_targets": [{"row", "label", "floor", "limit", "ratio",
//                      "block_ratio_median", "met"}, …],
//    "metrics_cost": [{"row", "off_row", "p50_on_us", "p50_off_us", "ratio",
//                      "block_ratio_median", "block_ratios", "limit", "met"}, …],
//    "run": {"n", "warmup", "blocks", "concurrency", "server", …, and
//            run_info.h's time_utc, host, cpu_model, cpus, kernel, commit, …}}
// "beats_floor": the row beat its floor by more than noise (null: no floor,
// or a floor row), which makes its ratio meaningless (floor_check.h).
// "caching": what the row keeps across sessions as a real client would
// (null: nothing); "server_connections": connections the server accepted
// during the row's warm-up and timed sessions (null: not counted).
// A row's ratio is its p50 over its floor's p50 (same run, interleaved
// blocks); a floor row is its own floor (ratio 1). Without a floor, "floor"
// and "ratio" are null. Kerberos rows (and floor/gss) also carry
// "kdc_requests_per_session": the KDC's requests during the row's timed
// sessions over their number (null: not counted). A target's "floor" is what
// the row is compared with: its floor, or another row of the same run
// (kerberos/tcp ≤ 0.6 × kerberos-sasl/tcp). "metrics": whether the row's
// authrpc client and server counted (false: floors, in-process checks,
// --metrics off, "[metrics off]" rows). Calls under load (calls.h):
// rows carry their shape (K "connections", "depth" calls in flight each,
// "duration_s" of timed blocks), the calls/s of each block and
// "per_s_ratio", their calls/s over their floor's (1 for a floor, null
// without one);
// "rate_targets" hold that ratio to a lower limit (ratio ≥ limit).
// "metrics_cost" (--metrics compare; empty otherwise): each row beside
// its "[metrics off]" twin from the same blocks — p50s, their ratio, the
// median of the per-block ratios — and, for the rows held to it,
// limit 1.03 and whether it is met (null: no target).
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "minibench/stats.h"
#include "authrpc/base/result.h"

namespace minibench {

// The shape of a calls-under-load row (calls.h).
struct LoadShape {
  std::size_t connections = 0;  // K, each on a client thread of its own
  std::size_t depth = 0;        // D calls in flight per connection
  double seconds = 0;           // the row's timed blocks together
};

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
  bool kerberos = false;             // reports KDC requests (below)
  std::optional<double> kdc_requests_per_session;  // timed sessions; unset: not counted
  std::optional<long> kdc_requests_warmup;          // during the warm-up
  bool resumed = false;  // keeps TLS session tickets across sessions (the one cached row)
  // Connections the server accepted during the row (warm-up + timed); unset:
  // not counted. Equal to warmup + n when each session opened its own.
  std::optional<long> server_connections;
  std::vector<double> sorted_us;  // every timed sample, ascending (for --plot)
  // Its authrpc client and server counted into their metrics registries
  // (false: a floor, an in-process check, --metrics off, a "[metrics off]" row).
  bool metrics = false;
  // Calls under load: K, D and duration, and calls/s of each timed block.
  std::optional<LoadShape> load;
  std::vector<double> block_per_s;
  // Sessions under --concurrency: CPU time (minibench + the server child,
  // user + system) per timed iteration, in µs; unset: not measured.
  std::optional<double> cpu_us;
};

// Whether the row beat its floor by more than noise (floor_check.h): then
// the floor is not a floor. False for floors, rows without one, and the
// resumed TLS row (it does less than its floor by design).
bool beats_floor(const Row& row);

// What a row keeps across sessions, as a real client would; empty: nothing.
std::string caching(const Row& row);

Row floor_row(std::string name, std::string transport, const Samples& samples);
// `floor` null: no floor was measured, the row has no ratio.
Row compared_row(std::string name, std::string method, std::string transport,
                 const Samples& samples, const Row* floor);

// One target as --plot draws it beside its row: what the row is held to,
// the limit, the limit expressed on the row's own p50 / floor p50 scale,
// and whether it is met.
struct TargetCheck {
  std::string row;
  std::string against;   // the row's floor, or the other row it is held to
  bool rate = false;     // calls/s or sessions/s ≥ limit × the floor's; else p50 ≤ limit × against's
  double limit = 0;
  // p50 targets: limit × against's p50 / the row's floor's p50, i.e. where
  // the target falls on the row's ratio to its floor; unset: rate targets,
  // rows without a floor.
  std::optional<double> floor_limit;
  std::optional<bool> met;  // unset: not measured
};

class Report {
 public:
  void add(Row row) { rows_.push_back(std::move(row)); }
  // The row named `row` must have p50 ≤ limit × its floor's p50, or with
  // `reference`, ≤ limit × that row's p50.
  void add_target(std::string row, double limit, std::string reference = {});
  // Calls under load: the row named `row` must make ≥ limit × its floor's
  // calls/s (per_s). `label` heads its line ("calls c8 d16: calls/s
  // tcp/floor").
  void add_rate_target(std::string row, std::string label, double limit);
  // --metrics compare: row `on` beside `off`, its twin measured in the same
  // blocks with nothing counted; with `limit`, on p50 ≤ limit × off p50.
  void add_metrics_cost(std::string on, std::string off, std::optional<double> limit);

  const std::vector<Row>& rows() const noexcept { return rows_; }
  // Every target and rate target, in the order added.
  std::vector<TargetCheck> target_checks() const;
  // Written into the --json file's "run" object (n, warmup, concurrency, ...).
  void set_run_info(nlohmann::ordered_json info) { run_info_ = std::move(info); }
  const nlohmann::ordered_json& run_info() const noexcept { return run_info_; }

  void print_rows(std::FILE* out) const;
  // One line per target: ratio, limit, met / NOT met / not measured; then
  // one per row that counted KDC requests (0 per session after warm-up);
  // then a WARNING line per row that beats its floor (beats_floor()).
  void print_targets(std::FILE* out) const;
  void print_floor_warnings(std::FILE* out) const;
  // The metrics-cost table and one "metrics cost: <row> p50 on/off = …"
  // line per held row; nothing without add_metrics_cost().
  void print_metrics_cost(std::FILE* out) const;
  authrpc::Status write_json(const std::string& path) const;

 private:
  struct Target {
    std::string row;
    double limit;
    std::string reference;  // empty: the row's floor
  };
  // What a target compares: the row, the row or floor it is held to, and the
  // ratio of their p50s with per-block ratios; null if either is missing.
  struct Comparison {
    const Row* row;
    std::string against;
    double ratio;
    std::vector<double> block_ratios;
    // Rate targets: the floor's CPU per iteration over the row's (what the
    // rate ratio would be with the CPUs all theirs); unset: not measured.
    std::optional<double> cpu_ratio = std::nullopt;
  };
  std::optional<Comparison> compare(const Target& target) const;
  const Row* find(const std::string& name) const;

  struct RateTarget {
    std::string row, label;
    double limit;
  };
  // The row's per_s over its floor's, with the paired blocks' ratios; null
  // if either is missing.
  std::optional<Comparison> compare_rate(const RateTarget& target) const;
  // The calls-under-load table: per row calls, calls/s, p50/p99/p99.9 and
  // calls/s over the floor's; nothing without such rows.
  void print_load_rows(std::FILE* out) const;

  struct MetricsCost {
    std::string on, off;
    std::optional<double> limit;
  };

  std::vector<Row> rows_;
  std::vector<Target> targets_;
  std::vector<RateTarget> rate_targets_;
  std::vector<MetricsCost> metrics_costs_;
  nlohmann::ordered_json run_info_ = nlohmann::ordered_json::object();
};

// The summary table of `minibench sessions`, printed after the detail lines
// in the shape of HADOOP-6637's MiniRPCBenchmark table: one line per
// transport × TLS, one column per kind of security (No security | Kerberos |
// Delegation token), each cell the mean in ms and the p50 in µs of that row,
// and each secure cell's p50 ratio to the No security cell of its line. A
// second table gives the interop (Cyrus SASL) paths the same way, a third
// (when measured) the bearer access tokens (jwt, over TLS only) with a line
// of the cold JWT check per algorithm (jwt-verify/<alg>), and a closing note
// says what is cached across sessions and how many connections the server
// accepted per session. Called by run.cc.
//
// `warmup`: the warm-up sessions of each row (for the connection check).
void print_summary(std::FILE* out, const std::vector<Row>& rows, std::size_t warmup);

}  // namespace minibench
