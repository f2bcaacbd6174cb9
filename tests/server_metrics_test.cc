// What a server and its clients count (docs/OPERATIONS.md): sessions by
// mechanism and outcome, refusals, calls by method and code with queue and
// processing time, connections by transport and close reason, bytes, TLS
// handshakes; the client's side; metrics off; the log lines that go with a
// refused negotiation. Real server, real clients on loopback, each test with
// its own registry so that the figures are exact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "authrpc/base/metrics.h"
#include "tests/testing/negotiation_table.h"
#include "tests/testing/test_server.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::Eventually;

// The negotiation table's mechanisms (tests/testing/negotiation_table.h): simple,
// plain-test (and its :wrong password), reject-test.
testing::SessionLog& Sessions() {
  static testing::SessionLog log;
  return log;
}
std::shared_ptr<ServerMechanism> MakeServerMechanism(const std::string& spec) {
  return testing::ServerMechanismFor(spec, &Sessions());
}
std::shared_ptr<ClientMechanism> MakeClientMechanism(const std::string& spec) {
  return testing::ClientMechanismFor(spec, &Sessions());
}

// Log lines a server wrote, for the tests of its refusal lines.
class Lines {
 public:
  LogSink sink() {
    return [this](LogLevel level, std::string_view m) {
      std::lock_guard lock(mu_);
      lines_.push_back({level, std::string(m)});
    };
  }
  std::vector<std::pair<LogLevel, std::string>> lines() const {
    std::lock_guard lock(mu_);
    return lines_;
  }
  std::optional<std::pair<LogLevel, std::string>> find(const std::string& needle) const {
    std::optional<std::pair<LogLevel, std::string>> found;
    Eventually([&] {
      for (const auto& l : lines()) {
        if (l.second.find(needle) != std::string::npos) {
          found = l;
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<LogLevel, std::string>> lines_;
};

Service TestService() {
  Service s("t");
  s.add("ok", [](CallContext&, std::string_view r) -> Result<std::string> { return std::string(r); });
  s.add("deny", [](CallContext&, std::string_view) -> Result<std::string> {
    return Status(Errc::kPermissionDenied, "no");
  });
  s.add_blocking("slow", [](CallContext&, std::string_view) -> Result<std::string> {
    std::this_thread::sleep_for(20ms);
    return std::string("done");
  });
  // Inline, on the IO thread: its processing time is on the CycleClock.
  s.add("pause", [](CallContext&, std::string_view) -> Result<std::string> {
    std::this_thread::sleep_for(10ms);
    return std::string("done");
  });
  return s;
}

class ServerMetricsTest : public ::testing::Test {
 protected:
  void Start(std::function<void(testing::TestServer&)> more = {}) {
    server_.mechanism(MakeServerMechanism("simple"))
        .mechanism(MakeServerMechanism("plain-test"))
        .service(TestService())
        .log(lines_.sink())
        .options([this](ServerOptions& o) { o.metrics = registry_; });
    if (more) more(server_);
    ASSERT_TRUE(server_.start().ok());
  }
  Result<std::unique_ptr<Client>> Connect(const std::string& spec) {
    return server_.client()
        .mechanism(MakeClientMechanism(spec))
        .options([this](ClientOptions& o) { o.metrics = client_registry_; })
        .connect();
  }
  double Value(std::string_view name, const MetricLabels& labels = {}) const {
    return registry_->value(name, labels);
  }
  // The histogram `name` under `labels`, if the server has one.
  std::optional<Histogram::Data> HistogramOf(std::string_view name, const MetricLabels& labels) const {
    for (const auto& f : registry_->snapshot()) {
      if (f.name != name) continue;
      for (const auto& s : f.samples) {
        if (s.labels == labels) return s.histogram;
      }
    }
    return std::nullopt;
  }
  // Waits for a counter the server updates after the client has returned.
  void ExpectEventually(std::string_view name, const MetricLabels& labels, double want) {
    EXPECT_TRUE(Eventually([&] { return Value(name, labels) == want; }))
        << name << " = " << Value(name, labels) << ", want " << want;
  }

  std::shared_ptr<MetricsRegistry> registry_ = std::make_shared<MetricsRegistry>();
  std::shared_ptr<MetricsRegistry> client_registry_ = std::make_shared<MetricsRegistry>();
  Lines lines_;
  testing::TestServer server_;
};

TEST_F(ServerMetricsTest, SessionsAreCountedByMechanismAndOutcome) {
  Start();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Connect("simple").ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(Connect("plain-test").ok());
  EXPECT_EQ(Connect("plain-test:wrong").code(), Errc::kAuthenticationFailed);
  // Nothing in common: the server answers MECHANISMS, the client gives up.
  EXPECT_EQ(Connect("reject-test").code(), Errc::kMechanismUnavailable);

  const char* n = "authrpc_server_negotiations_total";
  ExpectEventually(n, {{"mechanism", "none"}, {"outcome", "mechanism_unavailable"}}, 1);
  EXPECT_EQ(Value(n, {{"mechanism", "simple"}, {"outcome", "ok"}}), 3);
  EXPECT_EQ(Value(n, {{"mechanism", "plain-test"}, {"outcome", "ok"}}), 2);
  EXPECT_EQ(Value(n, {{"mechanism", "plain-test"}, {"outcome", "authentication_failed"}}), 1);
  // Durations of the successful ones only.
  EXPECT_EQ(Value("authrpc_server_negotiation_duration_seconds", {{"mechanism", "simple"}}), 3);
  EXPECT_EQ(Value("authrpc_server_negotiation_duration_seconds", {{"mechanism", "plain-test"}}), 2);
  ExpectEventually("authrpc_server_connections_accepted_total", {{"transport", "tcp"}}, 7);
  ExpectEventually("authrpc_server_connections_open", {{"transport", "tcp"}}, 0);
  ExpectEventually("authrpc_server_connections_closed_total",
                   {{"transport", "tcp"}, {"reason", "negotiation_failed"}}, 2);
  ExpectEventually("authrpc_server_connections_closed_total",
                   {{"transport", "tcp"}, {"reason", "peer_closed"}}, 5);
  EXPECT_GT(Value("authrpc_server_received_bytes_total", {{"transport", "tcp"}}), 0);
  EXPECT_GT(Value("authrpc_server_sent_bytes_total", {{"transport", "tcp"}}), 0);

  // The client's side, in its own registry.
  const auto client = [&](std::string_view name, const MetricLabels& labels) {
    return client_registry_->value(name, labels);
  };
  EXPECT_EQ(client("authrpc_client_connections_total", {{"transport", "tcp"}, {"outcome", "ok"}}), 5);
  EXPECT_EQ(client("authrpc_client_connections_total",
                   {{"transport", "tcp"}, {"outcome", "authentication_failed"}}),
            1);
  EXPECT_EQ(client("authrpc_client_connections_total",
                   {{"transport", "tcp"}, {"outcome", "mechanism_unavailable"}}),
            1);
  EXPECT_EQ(client("authrpc_client_negotiation_duration_seconds", {{"mechanism", "simple"}}), 3);
  EXPECT_EQ(client("authrpc_client_connections_open", {{"transport", "tcp"}}), 0);
}

// A refused negotiation is logged at info with its code,
// the mechanism and the peer.
TEST_F(ServerMetricsTest, RefusedNegotiationsAreLoggedAtInfoWithCodeMechanismAndPeer) {
  Start();
  EXPECT_EQ(Connect("plain-test:wrong").code(), Errc::kAuthenticationFailed);
  EXPECT_EQ(Connect("reject-test").code(), Errc::kMechanismUnavailable);
  const auto wrong = lines_.find("(mechanism plain-test) failed: AUTHENTICATION_FAILED");
  ASSERT_TRUE(wrong.has_value()) << ::testing::PrintToString(lines_.lines());
  EXPECT_EQ(wrong->first, LogLevel::kInfo);
  EXPECT_THAT(wrong->second, HasSubstr("negotiation with 127.0.0.1:"));
  const auto none = lines_.find("(mechanism none) failed: MECHANISM_UNAVAILABLE");
  ASSERT_TRUE(none.has_value()) << ::testing::PrintToString(lines_.lines());
  EXPECT_EQ(none->first, LogLevel::kInfo);
  EXPECT_THAT(none->second, HasSubstr("the client gave up"));
  // A plain-function sink passes debug: the per-connection line is there.
  ASSERT_TRUE(Connect("simple").ok());
  const auto debug = lines_.find("authenticated: user bob, mechanism simple, transport tcp");
  ASSERT_TRUE(debug.has_value()) << ::testing::PrintToString(lines_.lines());
  EXPECT_EQ(debug->first, LogLevel::kDebug);
}

// At info the per-connection debug line is neither written nor built.
TEST_F(ServerMetricsTest, NoDebugLineAtInfo) {
  LogSink sink = lines_.sink();
  sink.set_level(LogLevel::kInfo);
  Start([&](testing::TestServer& s) { s.log(sink); });
  ASSERT_TRUE(Connect("simple").ok());
  EXPECT_EQ(Connect("plain-test:wrong").code(), Errc::kAuthenticationFailed);
  ASSERT_TRUE(lines_.find("AUTHENTICATION_FAILED").has_value());
  for (const auto& [level, line] : lines_.lines()) {
    EXPECT_NE(level, LogLevel::kDebug) << line;
  }
}

TEST_F(ServerMetricsTest, CallsAreCountedByMethodAndCodeWithQueueAndProcessingTime) {
  Start();
  auto client = Connect("simple");
  ASSERT_TRUE(client.ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*client)->call("t", "ok", "x").ok());
  EXPECT_EQ((*client)->call("t", "deny", "").code(), Errc::kPermissionDenied);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*client)->call("t", "slow", "").ok());
  EXPECT_EQ((*client)->call("t", "absent", "").code(), Errc::kNotFound);
  EXPECT_EQ((*client)->call("nosuch", "ok", "").code(), Errc::kNotFound);

  const char* n = "authrpc_server_calls_total";
  EXPECT_EQ(Value(n, {{"service", "t"}, {"method", "ok"}, {"code", "ok"}}), 4);
  EXPECT_EQ(Value(n, {{"service", "t"}, {"method", "deny"}, {"code", "permission_denied"}}), 1);
  EXPECT_EQ(Value(n, {{"service", "t"}, {"method", "slow"}, {"code", "ok"}}), 2);
  // Never the client's names: unknown methods share one row.
  EXPECT_EQ(Value(n, {{"service", "unknown"}, {"method", "unknown"}, {"code", "not_found"}}), 2);
  const MetricLabels ok{{"service", "t"}, {"method", "ok"}};
  const MetricLabels slow{{"service", "t"}, {"method", "slow"}};
  EXPECT_EQ(Value("authrpc_server_call_processing_seconds", ok), 4);
  EXPECT_EQ(Value("authrpc_server_call_processing_seconds", slow), 2);
  EXPECT_EQ(Value("authrpc_server_call_queue_seconds", slow), 2);  // blocking calls only
  EXPECT_EQ(Value("authrpc_server_call_queue_seconds", ok), 0);
  EXPECT_EQ(Value("authrpc_server_calls_in_flight"), 0);
  EXPECT_EQ(Value("authrpc_server_blocking_queue_length"), 0);
  // The slow method's processing histogram saw ≥ 20 ms twice.
  if (const auto h = HistogramOf("authrpc_server_call_processing_seconds", slow)) {
    EXPECT_GE(h->sum_seconds, 0.040);
    EXPECT_EQ(h->count, 2u);
  }
  // Inline calls' processing times: each at least its handler's pause, and
  // together at most the time the client waited for all of them (ticks
  // taken for nanoseconds, or a wrong rate, would fall outside). Three at
  // once: those that wait in the socket behind the first are read in one
  // batch, where each call's start is the previous one's end; timed from
  // the batch's read instead, they would add up to more than the wait.
  const MetricLabels pause{{"service", "t"}, {"method", "pause"}};
  const auto before = std::chrono::steady_clock::now();
  std::vector<std::future<Result<std::string>>> paused;
  for (int i = 0; i < 3; ++i) paused.push_back((*client)->call_future("t", "pause", ""));
  for (auto& f : paused) ASSERT_TRUE(f.get().ok());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  const auto paused_histogram = HistogramOf("authrpc_server_call_processing_seconds", pause);
  EXPECT_TRUE(paused_histogram.has_value());
  if (paused_histogram) {
    EXPECT_EQ(paused_histogram->count, 3u);
    EXPECT_GE(paused_histogram->sum_seconds, 0.030);
    EXPECT_LE(paused_histogram->sum_seconds, waited);
  }
  EXPECT_EQ(client_registry_->value("authrpc_client_calls_total", {{"code", "ok"}}), 9);
  EXPECT_EQ(client_registry_->value("authrpc_client_calls_total", {{"code", "not_found"}}), 2);
  EXPECT_EQ(client_registry_->value("authrpc_client_call_duration_seconds"), 12);
  EXPECT_EQ(client_registry_->value("authrpc_client_connections_open", {{"transport", "tcp"}}), 1);
}

TEST_F(ServerMetricsTest, TlsHandshakesAndTransportsAreCounted) {
  Start([](testing::TestServer& s) { s.tls(); });
  ASSERT_TRUE(Connect("simple").ok());
  ExpectEventually("authrpc_server_tls_handshakes_total", {{"outcome", "ok"}, {"resumed", "no"}},
                   1);
  ExpectEventually("authrpc_server_connections_accepted_total", {{"transport", "tls"}}, 1);
  EXPECT_EQ(Value("authrpc_server_connections_accepted_total", {{"transport", "tcp"}}), 0);
}

TEST_F(ServerMetricsTest, UnauthenticatedConnectionsAreAGauge) {
  Start();
  EXPECT_EQ(Value("authrpc_server_connections_unauthenticated"), 0);
  // A raw socket that never speaks: negotiating until it closes.
  asio::io_context io;
  asio::ip::tcp::socket raw(io);
  raw.connect({asio::ip::make_address(server_.endpoint().host), server_.endpoint().port});
  EXPECT_TRUE(Eventually([&] { return Value("authrpc_server_connections_unauthenticated") == 1; }));
  raw.close();
  EXPECT_TRUE(Eventually([&] { return Value("authrpc_server_connections_unauthenticated") == 0; }));
  // Gone before its preamble: a close, not a negotiation.
  ExpectEventually("authrpc_server_connections_closed_total",
                   {{"transport", "tcp"}, {"reason", "peer_closed"}}, 1);
  EXPECT_EQ(Value("authrpc_server_negotiations_total",
                  {{"mechanism", "none"}, {"outcome", "connection_closed"}}),
            0);
}

// ServerOptions::metrics null: the server works and counts nothing.
TEST_F(ServerMetricsTest, MetricsOffCountsNothing) {
  Start([](testing::TestServer& s) { s.options([](ServerOptions& o) { o.metrics = nullptr; }); });
  ASSERT_TRUE(Connect("simple").ok());
  EXPECT_EQ(Value("authrpc_server_connections_accepted_total", {{"transport", "tcp"}}), 0);
  EXPECT_FALSE(server_.server().metrics());
}

// The process registry is the default: a server and clients built with
// default options count there.
TEST(ServerMetricsDefaultTest, DefaultIsTheProcessRegistry) {
  EXPECT_EQ(ServerOptions{}.metrics, default_metrics_registry());
  EXPECT_EQ(ClientOptions{}.metrics, default_metrics_registry());
}

}  // namespace
}  // namespace authrpc

// tests/testing/negotiation_table.cc declares the table; this binary only borrows
// its mechanisms.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(NegotiationTable);
