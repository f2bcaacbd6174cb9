// The JSON form of the metrics (server/metrics_json.h), what `authrpc stats`
// reads from it (tools/stats_summary.h: the summary and Prometheus'
// histogram_quantile), and the sys.stats RPC on a real server: admins only,
// refused (and audited) for anyone else and without a policy.
#include "authrpc/server/metrics_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/server/audit_log.h"
#include "authrpc/tools/stats_summary.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const nlohmann::json* Family(const nlohmann::json& j, std::string_view name) {
  for (const auto& f : j["metrics"]) {
    if (f["name"] == name) return &f;
  }
  return nullptr;
}

TEST(MetricsJsonTest, EveryFamilyAndSampleRoundTripsThroughText) {
  MetricsRegistry registry;
  registry.counter("authrpc_test_calls_total", "Calls.", {{"service", "sys"}, {"code", "ok"}}).inc(5);
  registry.gauge("authrpc_test_open", "Open.").set(-2);
  const double bounds[] = {0.001, 0.01};
  Histogram& h = registry.histogram("authrpc_test_seconds", "Time.", {{"mechanism", "simple"}}, bounds);
  h.observe_seconds(0.0005);
  h.observe_seconds(0.002);
  h.observe_seconds(7);
  const MetricsSnapshot snapshot = registry.snapshot();

  const nlohmann::json j = nlohmann::json::parse(metrics_json(snapshot).dump());
  ASSERT_EQ(j["metrics"].size(), snapshot.size());
  for (const auto& family : snapshot) {
    SCOPED_TRACE(family.name);
    const auto* f = Family(j, family.name);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ((*f)["help"], family.help);
    ASSERT_EQ((*f)["samples"].size(), family.samples.size());
    for (std::size_t i = 0; i < family.samples.size(); ++i) {
      const auto& sample = family.samples[i];
      const auto& s = (*f)["samples"][i];
      for (const auto& [name, value] : sample.labels) EXPECT_EQ(s["labels"][name], value);
      EXPECT_EQ(s["labels"].size(), sample.labels.size());
      if (family.type != MetricType::kHistogram) {
        EXPECT_DOUBLE_EQ(s["value"].get<double>(), sample.value);
      }
    }
  }
  EXPECT_EQ((*Family(j, "authrpc_test_calls_total"))["type"], "counter");
  EXPECT_EQ((*Family(j, "authrpc_test_open"))["type"], "gauge");
  const auto& hist = *Family(j, "authrpc_test_seconds");
  EXPECT_EQ(hist["type"], "histogram");
  const auto& sample = hist["samples"][0];
  EXPECT_EQ(sample["labels"]["mechanism"], "simple");
  EXPECT_EQ(sample["count"], 3);
  EXPECT_NEAR(sample["sum"].get<double>(), 7.0025, 1e-9);
  EXPECT_EQ(sample["buckets"], nlohmann::json::parse(R"([[0.001, 1], [0.01, 2], ["+Inf", 3]])"));
}

using cli::CumulativeBuckets;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Values as Prometheus' histogram_quantile() gives them for the same buckets.
TEST(HistogramQuantileTest, InterpolatesInsideTheBucketLikePrometheus) {
  const CumulativeBuckets b = {{0.001, 10}, {0.01, 30}, {0.1, 40}, {kInf, 40}};
  struct Case {
    double q;
    double want;
  } cases[] = {
      {0.5, 0.001 + (0.01 - 0.001) * (20.0 - 10) / 20},  // rank 20 in (0.001, 0.01]
      {0.25, 0.001},                                     // rank 10: the top of the first bucket
      {0.1, 0.0004},                                     // first bucket from 0
      {0.99, 0.01 + (0.1 - 0.01) * (39.6 - 30) / 10},
      {1.0, 0.1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.q);
    EXPECT_NEAR(cli::histogram_quantile(c.q, b), c.want, 1e-12);
  }
  // A rank in +Inf: the largest finite bound.
  EXPECT_DOUBLE_EQ(cli::histogram_quantile(0.99, {{0.001, 1}, {0.01, 2}, {kInf, 100}}), 0.01);
  EXPECT_TRUE(std::isnan(cli::histogram_quantile(0.5, {{0.001, 0}, {kInf, 0}})));
  EXPECT_TRUE(std::isnan(cli::histogram_quantile(0.5, {{kInf, 4}})));
  EXPECT_TRUE(std::isnan(cli::histogram_quantile(0.5, {})));
  EXPECT_EQ(cli::histogram_quantile(-1, b), -kInf);
  EXPECT_EQ(cli::histogram_quantile(2, b), kInf);
  EXPECT_EQ(cli::histogram_quantile(0, {{0.001, 0}, {0.01, 5}, {kInf, 5}}), 0.001);
}

TEST(StatsSummaryTest, SummarisesWhatTheServerCounted) {
  MetricsRegistry registry;
  registry.counter("authrpc_server_negotiations_total", "h", {{"mechanism", "simple"}, {"outcome", "ok"}}).inc(4);
  registry.counter("authrpc_server_negotiations_total", "h", {{"mechanism", "simple"}, {"outcome", "authentication_failed"}})
      .inc(1);
  registry.counter("authrpc_server_negotiations_total", "h", {{"mechanism", "kerberos"}, {"outcome", "ok"}});  // 0
  registry.histogram("authrpc_server_negotiation_duration_seconds", "h", {{"mechanism", "simple"}})
      .observe_seconds(0.00004);
  registry.counter("authrpc_server_calls_total", "h", {{"service", "sys"}, {"method", "whoami"}, {"code", "ok"}})
      .inc(7);
  registry.histogram("authrpc_server_call_processing_seconds", "h", {{"service", "sys"}, {"method", "whoami"}})
      .observe_seconds(0.002);
  registry.gauge("authrpc_server_connections_open", "h", {{"transport", "tcp"}}).set(2);
  registry.counter("authrpc_server_connections_accepted_total", "h", {{"transport", "tcp"}}).inc(9);
  registry.counter("authrpc_token_operations_total", "h", {{"operation", "get"}, {"outcome", "ok"}}).inc(3);

  auto summary = cli::stats_summary(nlohmann::json::parse(metrics_json(registry.snapshot()).dump()));
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const std::string& text = *summary;
  EXPECT_THAT(text, HasSubstr("authrpc " + std::string(authrpc_version()) + " (commit "));
  EXPECT_THAT(text, HasSubstr("connections: 2 open (tcp 2), 9 accepted, 0 refused"));
  // One session of 40 us, in the (25 us, 50 us] bucket: p99 interpolates to 49.75 us.
  EXPECT_THAT(text, HasSubstr("  simple  ok 4, authentication_failed 1  p50 "));
  EXPECT_THAT(text, HasSubstr("p99 50 us\n"));
  EXPECT_THAT(text, Not(HasSubstr("kerberos")));  // nothing counted
  // One call of 2 ms, in (1 ms, 2.5 ms]: p99 = 2.485 ms.
  EXPECT_THAT(text, HasSubstr("  sys.whoami  ok 7  p50 "));
  EXPECT_THAT(text, HasSubstr("p99 2.5 ms\n"));
  EXPECT_THAT(text, HasSubstr("token operations:\n  get  ok 3\n"));
  EXPECT_THAT(text, HasSubstr("process: "));
}

TEST(StatsSummaryTest, SomethingElseIsAProtocolError) {
  for (const char* bad : {"null", "[]", R"({"metrics": 3})", R"({"metrics": [{"name": "x"}]})",
                          R"({"metrics": [{"name": "x", "type": "histogram", "samples": [{"count": 1}]}]})",
                          R"({"metrics": [{"name": "x", "type": "histogram", "samples":
                              [{"count": 1, "buckets": [["+Inf"]]}]}]})",
                          R"({"metrics": [{"name": "x", "type": "counter", "samples": [{"labels": {"a": 1}}]}]})"}) {
    SCOPED_TRACE(bad);
    auto summary = cli::stats_summary(nlohmann::json::parse(bad));
    ASSERT_FALSE(summary.ok());
    EXPECT_EQ(summary.code(), Errc::kProtocolError);
  }
}

// sys.stats on a real server, with an ACL whose admin is carol.
class SysStatsTest : public ::testing::Test {
 protected:
  void Start(bool with_authorizer) {
    dir_ = testing::TempDir("sys-stats");
    ASSERT_FALSE(dir_.empty());
    std::shared_ptr<Authorizer> authorizer;
    if (with_authorizer) {
      auto policy = AuthzPolicy::from_json(nlohmann::json::parse(R"({"admins": {"users": ["carol"]}})"));
      ASSERT_TRUE(policy.ok()) << policy.status().to_string();
      authorizer = Authorizer::from_policy(*policy);
    }
    auto audit = AuditLog::open(dir_ + "/audit.jsonl");
    ASSERT_TRUE(audit.ok()) << audit.status().to_string();
    audit_ = *audit;
    server_.options([this, authorizer](ServerOptions& o) {
      o.metrics = registry_;
      o.authorizer = authorizer;
      o.audit_log = audit_;
    });
    ASSERT_OK(server_.start());
  }
  void TearDown() override {
    server_.stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  Result<std::string> StatsAs(const std::string& user) { return CallAs(user, "stats"); }
  Result<std::string> CallAs(const std::string& user, const std::string& method) {
    auto client = server_.client().simple(user).connect();
    if (!client.ok()) return client.status();
    return (*client)->call("sys", method, "");
  }
  std::string Audit() {
    audit_->flush();
    std::ifstream in(dir_ + "/audit.jsonl");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::shared_ptr<MetricsRegistry> registry_ = std::make_shared<MetricsRegistry>();
  std::shared_ptr<AuditLog> audit_;
  testing::TestServer server_;
  std::string dir_;
};

TEST_F(SysStatsTest, AnAdminGetsTheServersMetrics) {
  ASSERT_NO_FATAL_FAILURE(Start(true));
  registry_->counter("authrpc_test_marker_total", "A marker.").inc(41);
  auto stats = StatsAs("carol");
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  const auto j = nlohmann::json::parse(*stats, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << *stats;
  const auto* marker = Family(j, "authrpc_test_marker_total");
  ASSERT_NE(marker, nullptr) << *stats;
  EXPECT_EQ((*marker)["samples"][0]["value"], 41);
  ASSERT_NE(Family(j, "authrpc_uptime_seconds"), nullptr);
  EXPECT_TRUE(cli::stats_summary(j).ok());
}

TEST_F(SysStatsTest, AnyoneElseIsDeniedAndAudited) {
  ASSERT_NO_FATAL_FAILURE(Start(true));
  auto stats = StatsAs("alice");
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.code(), Errc::kPermissionDenied);
  EXPECT_THAT(stats.status().message, HasSubstr("not an authorization admin"));
  const std::string audit = Audit();
  EXPECT_THAT(audit, HasSubstr(R"("event":"authorization")"));
  EXPECT_THAT(audit, HasSubstr(R"("outcome":"denied")"));
  EXPECT_THAT(audit, HasSubstr(R"("method":"stats")"));
  EXPECT_THAT(audit, HasSubstr(R"("user":"alice")"));
}

// Both admin-only methods alike (PROTOCOL.md section 5): without a policy
// there are no admins, so everyone is denied, and audited.
TEST_F(SysStatsTest, WithoutAPolicyEveryoneIsDenied) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  for (const std::string method : {"stats", "reload_authz"}) {
    SCOPED_TRACE(method);
    auto result = CallAs("carol", method);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.code(), Errc::kPermissionDenied);
    const std::string why = "sys." + method + " needs an authorization policy with admins";
    EXPECT_EQ(result.status().message, why);
    EXPECT_THAT(Audit(), HasSubstr(R"("reason":")" + why + "\""));
  }
}

// Who may call is settled first: an admin then learns what the server
// cannot do (a policy not read from a file cannot be re-read), anyone else
// only that they may not ask.
TEST_F(SysStatsTest, ReloadingAPolicyNotFromAFileIsAFailedPreconditionForAnAdminOnly) {
  ASSERT_NO_FATAL_FAILURE(Start(true));
  auto admin = CallAs("carol", "reload_authz");
  ASSERT_FALSE(admin.ok());
  EXPECT_EQ(admin.code(), Errc::kFailedPrecondition) << admin.status().to_string();
  auto other = CallAs("alice", "reload_authz");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.code(), Errc::kPermissionDenied) << other.status().to_string();
}

TEST_F(SysStatsTest, WithMetricsOffItIsAFailedPrecondition) {
  registry_ = nullptr;
  ASSERT_NO_FATAL_FAILURE(Start(true));
  auto stats = StatsAs("carol");
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.code(), Errc::kFailedPrecondition);
}

}  // namespace
}  // namespace authrpc
