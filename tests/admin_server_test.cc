// The admin listener (server/admin_server.h) over real loopback sockets:
// /metrics in the Prometheus text format (checked line by line and by
// Debian's promtool), /healthz, /readyz in both states, 404/405, HEAD,
// address parsing, a busy port and port 0.
#include "authrpc/server/admin_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "tests/http_get.h"
#include "tests/test_server.h"
#include "tests/test_support.h"

namespace authrpc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::http_get;
using testing::http_request;

std::string Url(const AdminServer& admin, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(admin.port()) + path;
}

Result<std::unique_ptr<AdminServer>> StartAdmin(std::shared_ptr<MetricsRegistry> metrics,
                                                decltype(AdminOptions::readiness) readiness = {}) {
  AdminOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics = std::move(metrics);
  options.readiness = std::move(readiness);
  options.log = null_log_sink();
  return AdminServer::start(std::move(options));
}

TEST(AdminServerTest, MetricsServesCountersGaugesAndCumulativeHistogramBuckets) {
  auto registry = std::make_shared<MetricsRegistry>();
  registry->counter("authrpc_test_calls_total", "Calls.", {{"code", "ok"}}).inc(3);
  registry->counter("authrpc_test_calls_total", "Calls.", {{"code", "permission_denied"}}).inc();
  registry->gauge("authrpc_test_open", "Open now.").set(7);
  const double bounds[] = {0.001, 0.01, 0.1};
  Histogram& h = registry->histogram("authrpc_test_duration_seconds", "Durations.", {{"method", "m"}}, bounds);
  h.observe_seconds(0.0005);
  h.observe_seconds(0.005);
  h.observe_seconds(0.007);
  h.observe_seconds(3);
  // A label value with every character the format escapes.
  registry->counter("authrpc_test_odd_total", "Odd \\ help\nline.", {{"name", "a\"b\\c\nd"}}).inc();

  auto admin = StartAdmin(registry);
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  auto r = http_get(Url(**admin, "/metrics"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r->header("content-length"), std::to_string(r->body.size()));
  const std::string& text = r->body;
  for (const std::string line : {
           "# TYPE authrpc_test_calls_total counter\n",
           "authrpc_test_calls_total{code=\"ok\"} 3\n",
           "authrpc_test_calls_total{code=\"permission_denied\"} 1\n",
           "# TYPE authrpc_test_open gauge\n",
           "authrpc_test_open 7\n",
           "# TYPE authrpc_test_duration_seconds histogram\n",
           "authrpc_test_duration_seconds_bucket{method=\"m\",le=\"0.001\"} 1\n",
           "authrpc_test_duration_seconds_bucket{method=\"m\",le=\"0.01\"} 3\n",
           "authrpc_test_duration_seconds_bucket{method=\"m\",le=\"0.1\"} 3\n",
           "authrpc_test_duration_seconds_bucket{method=\"m\",le=\"+Inf\"} 4\n",
           "authrpc_test_duration_seconds_count{method=\"m\"} 4\n",
           "authrpc_test_duration_seconds_sum{method=\"m\"} 3.0125\n",
           "# HELP authrpc_test_odd_total Odd \\\\ help\\nline.\n",
           "authrpc_test_odd_total{name=\"a\\\"b\\\\c\\nd\"} 1\n",
           "# TYPE process_open_fds gauge\n",
       }) {
    EXPECT_THAT(text, HasSubstr(line));
  }
  // What prometheus_text() gives is what /metrics serves.
  EXPECT_THAT(prometheus_text(registry->snapshot()), HasSubstr("authrpc_test_calls_total{code=\"ok\"} 3\n"));
}

// promtool (Debian's prometheus package) lints the exposition of a registry
// that a real server counted into, plus a histogram of each kind of label.
TEST(AdminServerTest, PromtoolAcceptsTheExpositionOfARealServer) {
  if (::access("/usr/bin/promtool", X_OK) != 0) GTEST_SKIP() << "/usr/bin/promtool is absent (apt install prometheus)";
  auto registry = std::make_shared<MetricsRegistry>();
  testing::TestServer server;
  server.options([registry](ServerOptions& o) { o.metrics = registry; });
  ASSERT_OK(server.start());
  for (const char* user : {"alice", "bob"}) {
    auto client = server.client().simple(user).connect();
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    EXPECT_TRUE((*client)->call("sys", "whoami", "").ok());
    EXPECT_FALSE((*client)->call("sys", "nope", "").ok());
  }
  registry->histogram("authrpc_test_call_seconds", "Test call time.", {{"service", "sys"}, {"method", "whoami"}})
      .observe_seconds(0.00003);
  auto admin = StartAdmin(registry);
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  auto r = http_get(Url(**admin, "/metrics"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->status, 200);

  const std::string dir = testing::TempDir("admin-promtool");
  ASSERT_FALSE(dir.empty());
  const std::string file = dir + "/metrics.prom";
  std::ofstream(file) << r->body;
  const std::string out = dir + "/promtool.out";
  const int status = std::system(("/usr/bin/promtool check metrics < " + file + " > " + out + " 2>&1").c_str());
  std::ifstream in(out);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "promtool: " << said << "\n--- exposition\n" << r->body;
}

TEST(AdminServerTest, HealthzIsOkAndReadyzFollowsTheServer) {
  auto registry = std::make_shared<MetricsRegistry>();
  testing::TestServer server;
  server.options([registry](ServerOptions& o) { o.metrics = registry; });
  ASSERT_OK(server.start());
  auto admin = StartAdmin(registry, {{"server", server_serving_check(server.server())}});
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();

  auto health = http_get(Url(**admin, "/healthz"));
  ASSERT_TRUE(health.ok()) << health.status().to_string();
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  auto ready = http_get(Url(**admin, "/readyz"));
  ASSERT_TRUE(ready.ok()) << ready.status().to_string();
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(ready->body, "ready\n");

  server.server().stop();
  ready = http_get(Url(**admin, "/readyz"));
  ASSERT_TRUE(ready.ok()) << ready.status().to_string();
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->body, "server: not serving (not started, or stopping)\n");
  // Live while the process answers, even when not ready.
  health = http_get(Url(**admin, "/healthz"));
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
  (*admin)->stop();  // before the server it checks is destroyed
}

TEST(AdminServerTest, ReadyzListsEveryFailingCheckOnALineWithItsReasonEscaped) {
  std::atomic<bool> store_fresh{true};
  auto admin = StartAdmin(std::make_shared<MetricsRegistry>(),
                          {{"always", [] { return Status(); }},
                           {"store", [&store_fresh] {
                              return store_fresh ? Status()
                                                 : Status(Errc::kUnavailable, "cut off\nfrom \x1b[31mzk");
                            }},
                           {"keys", [] { return Status(Errc::kUnavailable, "no keys loaded"); }},
                           {"throws", []() -> Status { throw std::runtime_error("boom"); }}});
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  auto ready = http_get(Url(**admin, "/readyz"));
  ASSERT_TRUE(ready.ok()) << ready.status().to_string();
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->body, "keys: no keys loaded\nthrows: the check threw: boom\n");
  store_fresh = false;
  ready = http_get(Url(**admin, "/readyz"));
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->body,
            "store: cut off\\nfrom \\x1b[31mzk\nkeys: no keys loaded\nthrows: the check threw: boom\n");
}

TEST(AdminServerTest, OtherPathsAre404OtherMethods405AndHeadHasNoBody) {
  auto admin = StartAdmin(std::make_shared<MetricsRegistry>());
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  struct Case {
    const char* method;
    const char* path;
    int status;
  };
  for (const Case c : {Case{"GET", "/", 404}, Case{"GET", "/metrics/x", 404}, Case{"GET", "/metricsx", 404},
                       Case{"GET", "/metrics?name[]=x", 200},
                       Case{"POST", "/metrics", 405}, Case{"PUT", "/healthz", 405},
                       Case{"DELETE", "/readyz", 405}, Case{"OPTIONS", "/metrics", 405},
                       Case{"PATCH", "/metrics", 405}, Case{"HEAD", "/healthz", 200}}) {
    SCOPED_TRACE(std::string(c.method) + " " + c.path);
    auto r = http_request(c.method, Url(**admin, c.path));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->status, c.status);
    if (c.status == 405) {
      EXPECT_EQ(r->header("allow"), "GET, HEAD");
    }
  }
  // No files are served, whatever the path says.
  auto escape = http_get(Url(**admin, "/../../etc/passwd"));
  ASSERT_TRUE(escape.ok()) << escape.status().to_string();
  EXPECT_NE(escape->status, 200);
  EXPECT_THAT(escape->body, Not(HasSubstr("root:")));
  // civetweb bounds a request (16 KiB of request line and headers).
  auto huge = http_get(Url(**admin, "/" + std::string(20000, 'a')));
  ASSERT_TRUE(huge.ok()) << huge.status().to_string();
  EXPECT_GE(huge->status, 400);
  auto head = http_request("HEAD", Url(**admin, "/metrics"));
  ASSERT_TRUE(head.ok()) << head.status().to_string();
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_NE(head->header("content-length"), "0");
  // Still serving after all that.
  auto r = http_get(Url(**admin, "/healthz"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST(AdminServerTest, BadAddressesAreConfigErrors) {
  for (const std::string listen :
       {"", "127.0.0.1", ":9464", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:9464s",
        "127.0.0.1:1,127.0.0.1:2", "example.com:9464", "[::1:9464", "[::1]9464", "[nope]:1", "1.2.3:80"}) {
    SCOPED_TRACE("listen '" + listen + "'");
    AdminOptions options;
    options.listen = listen;
    options.metrics = std::make_shared<MetricsRegistry>();
    auto admin = AdminServer::start(std::move(options));
    ASSERT_FALSE(admin.ok());
    EXPECT_EQ(admin.code(), Errc::kConfigError);
    EXPECT_THAT(admin.status().message, HasSubstr("admin listen"));
  }
  AdminOptions no_metrics;
  no_metrics.listen = "127.0.0.1:0";
  EXPECT_EQ(AdminServer::start(no_metrics).code(), Errc::kConfigError);
  // IPv6 works where civetweb has it, and is refused by name where not.
  AdminOptions v6;
  v6.listen = "[::1]:0";
  v6.metrics = std::make_shared<MetricsRegistry>();
  auto admin = AdminServer::start(v6);
  if (admin.ok()) {
    auto r = http_get("http://[::1]:" + std::to_string((*admin)->port()) + "/healthz");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->status, 200);
  } else {
    EXPECT_EQ(admin.code(), Errc::kConfigError);
    EXPECT_THAT(admin.status().message, HasSubstr("without IPv6"));
  }
}

TEST(AdminServerTest, ABusyPortIsAConfigErrorNamingTheAddressAndWhy) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string where = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  AdminOptions options;
  options.listen = where;
  options.metrics = std::make_shared<MetricsRegistry>();
  auto admin = AdminServer::start(std::move(options));
  ::close(fd);
  ASSERT_FALSE(admin.ok());
  EXPECT_EQ(admin.code(), Errc::kConfigError);
  EXPECT_THAT(admin.status().message, HasSubstr(where));
  EXPECT_THAT(admin.status().message, HasSubstr("in use"));
}

TEST(AdminServerTest, PortZeroPicksAFreePortAndStopIsIdempotent) {
  auto admin = StartAdmin(std::make_shared<MetricsRegistry>());
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  EXPECT_NE((*admin)->port(), 0);
  auto r = http_get(Url(**admin, "/healthz"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  const std::string url = Url(**admin, "/healthz");
  (*admin)->stop();
  (*admin)->stop();
  auto after = http_get(url);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.code(), Errc::kUnavailable);
}

}  // namespace
}  // namespace authrpc
