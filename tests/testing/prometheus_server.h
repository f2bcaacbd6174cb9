// PrometheusServer: Debian's real Prometheus server (/usr/bin/prometheus,
// 2.42) run as a child process on loopback, scraping one target, for tests
// that check what an operator's Prometheus would see (library
// authrpc_test_support; used by tests/prometheus_itest.cc).
//
// start() writes a scrape config (global scrape_interval and scrape_timeout
// 1 s, one static target, job "authrpc") into a temp dir, starts Prometheus
// with --web.listen-address=127.0.0.1:0 and reads the port it bound from its
// "Listening on" log line (no port race), its TSDB in the same dir. Prometheus
// scrapes for the first time ~6 s after it starts (its discovery manager
// throttles updates to one per 5 s; 2.42 has no flag for that), so a test
// polls with wait_for() and never sleeps a guessed while.
//
// The destructor stops it by PID: POST /-/quit (--web.enable-lifecycle,
// ~0.1 s), then SIGTERM after 3 s, then SIGKILL after 5 s more, and removes
// the dir. Its log is log_file(), named in every error. The const methods
// may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"
#include "authrpc/base/status.h"

namespace authrpc::testing {

// One element of a query's answer: an instant-vector sample (its labels,
// __name__ included when the expression keeps it) or, for a scalar answer,
// a sample without labels.
struct PromSample {
  std::map<std::string, std::string> labels;
  double value = 0;
};
using PromVector = std::vector<PromSample>;

struct PrometheusOptions {
  // host:port of the one target, scraped at /metrics.
  std::string target;
  std::string job = "authrpc";
  std::chrono::seconds scrape_interval{1};
};

class PrometheusServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/prometheus";
  static constexpr const char* kPromtool = "/usr/bin/promtool";

  // True if prometheus and promtool are installed (scripts/setup.sh installs
  // the package `prometheus`).
  static bool installed();

  // A running Prometheus scraping `options.target`. Errors:
  // kFailedPrecondition (not installed), kUnavailable (it exited or did not
  // log its port within 20 s; the message quotes its log).
  static Result<std::unique_ptr<PrometheusServer>> start(const PrometheusOptions& options);

  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  // The value of `promql` now (GET /api/v1/query): a vector's samples, or one
  // label-less sample for a scalar. Errors: kInvalidArgument (Prometheus
  // refused the expression; its error is in the message), kUnavailable (not
  // reachable), kProtocolError (an answer that is not the API's JSON).
  Result<PromVector> query(std::string_view promql) const;

  // Polls query(promql) every 200 ms until it is a single sample equal to
  // `expected` (OK), or `timeout` passes (kDeadlineExceeded, naming the last
  // answer). A scrape may predate the last traffic, hence the polling.
  Status wait_for(std::string_view promql, double expected,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
  // The same for a vector: until every sample's `by` label maps to the
  // expected value and no other value of `by` appears.
  Status wait_for(std::string_view promql, std::string_view by, const std::map<std::string, double>& expected,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

  // Stops Prometheus (POST /-/quit, then SIGTERM, then SIGKILL) and waits for
  // it; idempotent. The destructor calls it.
  Status stop();

  std::uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  std::string log_file() const { return dir_ + "/prometheus.log"; }

 private:
  PrometheusServer() = default;

  std::string dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

// The answer of `promtool check metrics` for a Prometheus text exposition
// (fed on stdin): OK for exit status 0; kInvalidArgument with promtool's
// output for a lint problem (exit 3) or a parse error (exit 1).
Status PromtoolCheckMetrics(const std::string& exposition);

// The answer of `promtool check rules` for a rules file's text: OK for exit
// status 0, else kInvalidArgument with promtool's output.
Status PromtoolCheckRules(const std::string& rules_yaml);

// "a=1, b=2" for a failure message.
std::string DescribeSamples(const PromVector& samples);

}  // namespace authrpc::testing
