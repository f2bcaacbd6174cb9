// The admin listener (components/admin/admin_server.h) over real loopback
// sockets: /metrics in the Prometheus text format (checked line by line and by
// Debian's promtool), /healthz, /readyz in both states, 404/405, HEAD, address
// parsing, a busy port and port 0; hostile peers: idle connections held or
// reopened while probes must still be answered, methods and paths that must not
// be served, Host headers that must be refused (DNS rebinding).
// tests/admin_request_test.cc has the decision table itself.
#include "authrpc/components/admin/admin_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/http_client.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::http_get;
using testing::http_request;
using testing::HttpRequest;
using namespace std::chrono_literals;

std::string Url(const AdminServer& admin, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(admin.port()) + path;
}

Result<std::unique_ptr<AdminServer>> StartAdmin(std::shared_ptr<MetricsRegistry> metrics,
                                                decltype(AdminOptions::readiness) readiness = {},
                                                std::vector<std::string> hosts = {},
                                                const std::string& listen = "127.0.0.1:0") {
  AdminOptions options;
  options.listen = listen;
  options.metrics = std::move(metrics);
  options.readiness = std::move(readiness);
  options.hosts = std::move(hosts);
  options.log = null_log_sink();
  return AdminServer::start(std::move(options));
}

// TCP connections to the admin port that send nothing, as a hostile peer's
// (or a port scanner's) do; closed when this goes away.
class IdlePeers {
 public:
  explicit IdlePeers(std::uint16_t port) : port_(port) {}
  ~IdlePeers() {
    for (const int fd : fds_) ::close(fd);
  }
  IdlePeers(const IdlePeers&) = delete;
  IdlePeers& operator=(const IdlePeers&) = delete;

  // Connects from `source` (a loopback address; the kernel picks the port).
  // -1 if it could not.
  int open_one(const char* source = "127.0.0.1") { return testing::ConnectLoopback(port_, source); }
  // `n` more, held until destruction; false if one failed.
  bool open(int n, const char* source = "127.0.0.1") {
    for (int i = 0; i < n; ++i) {
      const int fd = open_one(source);
      if (fd < 0) return false;
      fds_.push_back(fd);
    }
    return true;
  }

 private:
  const std::uint16_t port_;
  std::vector<int> fds_;
};

// GET /healthz as a liveness probe sends it, and how long the answer took.
struct Probe {
  Result<testing::HttpResponse> response;
  std::chrono::milliseconds took;
};
Probe ProbeHealthz(const AdminServer& admin) {
  const auto start = std::chrono::steady_clock::now();
  auto r = http_get(Url(admin, "/healthz"), 3s);
  return {std::move(r), std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)};
}

// A request a test builds field by field, as it would write one by hand:
// `method` and `target` as sent, any `headers`, Host made from the URL.
HttpRequest Request(const std::string& url, const std::string& method, const std::string& target = {},
                    std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpRequest request;
  request.url = url;
  request.method = method;
  request.target = target;
  request.headers = std::move(headers);
  return request;
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
    auto r = http_request(Request(Url(**admin, c.path), c.method));
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
  // A request line and headers must fit a connection's 16 KiB.
  auto huge = http_get(Url(**admin, "/" + std::string(20000, 'a')));
  ASSERT_TRUE(huge.ok()) << huge.status().to_string();
  EXPECT_GE(huge->status, 400);
  auto head = http_request(Request(Url(**admin, "/metrics"), "HEAD"));
  ASSERT_TRUE(head.ok()) << head.status().to_string();
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_NE(head->header("content-length"), "0");
  // Still serving after all that.
  auto r = http_get(Url(**admin, "/healthz"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

// Idle connections do not hold the listener: a liveness probe is answered
// within a second (a generous bound: it is answered in milliseconds) while
// 40 peers sit on connections they never send on, and stop() closes them.
TEST(AdminServerTest, ProbesAreAnsweredWhileFortyIdleConnectionsAreHeld) {
  auto admin = StartAdmin(std::make_shared<MetricsRegistry>());
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  IdlePeers idle((*admin)->port());
  ASSERT_TRUE(idle.open(40));
  std::this_thread::sleep_for(100ms);  // accepted by now
  for (int i = 0; i < 2; ++i) {
    const Probe probe = ProbeHealthz(**admin);
    ASSERT_TRUE(probe.response.ok()) << probe.response.status().to_string();
    EXPECT_EQ(probe.response->status, 200);
    EXPECT_LT(probe.took, 1s);
  }
  const auto stop_start = std::chrono::steady_clock::now();
  (*admin)->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_start, 2s);
}

// One address cannot take every connection: past its limit (64) its
// connections are closed, and a probe from another address is answered.
TEST(AdminServerTest, AnAddressOverItsConnectionLimitDoesNotKeepProbesOut) {
  auto admin = StartAdmin(std::make_shared<MetricsRegistry>());
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  IdlePeers idle((*admin)->port());
  ASSERT_TRUE(idle.open(80, "127.0.0.2"));
  std::this_thread::sleep_for(100ms);
  const Probe probe = ProbeHealthz(**admin);
  ASSERT_TRUE(probe.response.ok()) << probe.response.status().to_string();
  EXPECT_EQ(probe.response->status, 200);
  EXPECT_LT(probe.took, 1s);
}

// Peers that reopen idle connections without end do not hold the listener
// either: 4 connections are held and reopened as soon as the listener
// closes one, 4 more are closed and reopened every few milliseconds, and
// each of 4 probes meanwhile is answered within a second.
TEST(AdminServerTest, ProbesAreAnsweredWhileIdleConnectionsAreReopened) {
  auto admin = StartAdmin(std::make_shared<MetricsRegistry>());
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  const std::uint16_t port = (*admin)->port();
  std::atomic<int> reopened{0};
  // Stopped and joined when it goes away, also when an assertion returns.
  std::jthread churn([&](std::stop_token stop) {
    constexpr std::size_t kHeld = 4, kChurned = 4;
    IdlePeers peers(port);
    std::vector<pollfd> fds(kHeld + kChurned, pollfd{-1, POLLIN, 0});
    const auto reopen = [&](pollfd& slot) {
      if (slot.fd >= 0) ::close(slot.fd);
      slot.fd = peers.open_one();
      ++reopened;
    };
    for (auto& slot : fds) reopen(slot);
    for (std::size_t next = 0; !stop.stop_requested(); next = (next + 1) % kChurned) {
      ::poll(fds.data(), fds.size(), 5);
      for (auto& slot : fds) {
        char byte;
        if (slot.revents != 0 && ::recv(slot.fd, &byte, 1, MSG_DONTWAIT) <= 0) reopen(slot);
        slot.revents = 0;
      }
      reopen(fds[kHeld + next]);
    }
    for (const auto& slot : fds) {
      if (slot.fd >= 0) ::close(slot.fd);
    }
  });
  std::this_thread::sleep_for(200ms);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE("probe " + std::to_string(i));
    const Probe probe = ProbeHealthz(**admin);
    ASSERT_TRUE(probe.response.ok()) << probe.response.status().to_string();
    EXPECT_EQ(probe.response->status, 200);
    EXPECT_LT(probe.took, 1s);
    std::this_thread::sleep_for(100ms);
  }
  churn.request_stop();
  churn.join();
  EXPECT_GE(reopened.load(), 50);
}

// GET and HEAD are the only methods served; any other, WebDAV's and
// CONNECT's included, is 405 with Allow, whatever the path.
TEST(AdminServerTest, EveryOtherMethodIs405WithAllow) {
  auto admin = StartAdmin(std::make_shared<MetricsRegistry>());
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  const std::string url = Url(**admin, "/");
  struct Case {
    std::string method, target;
  };
  for (const Case& c :
       {Case{"CONNECT", "127.0.0.1:" + std::to_string((*admin)->port())}, Case{"CONNECT", "/metrics"},
        Case{"PROPFIND", "/metrics"}, Case{"LOCK", "/metrics"}, Case{"UNLOCK", "/metrics"},
        Case{"TRACE", "/healthz"}, Case{"MKCOL", "/x"}, Case{"get", "/metrics"}, Case{"BREW", "/nowhere"}}) {
    SCOPED_TRACE(c.method + " " + c.target);
    auto r = http_request(Request(url, c.method, c.target));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->status, 405);
    EXPECT_EQ(r->header("allow"), "GET, HEAD");
  }
  // A body the listener never reads does not change the answer.
  HttpRequest post_request = Request(Url(**admin, "/metrics"), "POST", {}, {{"Content-Type", "text/plain"}});
  post_request.body = "hello";
  auto post = http_request(post_request);
  ASSERT_TRUE(post.ok()) << post.status().to_string();
  EXPECT_EQ(post->status, 405);
}

// The path is compared as it was sent, never percent-decoded or normalized:
// only the three exact paths are served. A query string is ignored.
TEST(AdminServerTest, ThePathIsComparedAsSent) {
  auto admin = StartAdmin(std::make_shared<MetricsRegistry>());
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  for (const char* path : {"/metrics%00", "/metrics%2F", "/metrics%2f", "//metrics", "/metrics/../metrics",
                           "/./metrics", "/%6detrics", "/metrics/", "/Metrics", "/healthz%00.html",
                           "/readyz%20", "/metrics;x"}) {
    SCOPED_TRACE(path);
    auto r = http_get(Url(**admin, path));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->status, 404);
  }
  for (const char* path : {"/metrics?x", "/healthz?", "/readyz?a=%00"}) {
    SCOPED_TRACE(path);
    auto r = http_get(Url(**admin, path));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->status, 200);
  }
}

// DNS rebinding: a web page whose name resolves to the admin address may
// send requests there, but with its own name in Host. Only IP literals,
// localhost and the names configured in AdminOptions::hosts are answered
// (the port is ignored); any other Host is 421. Without Host (HTTP/1.0) a
// request is answered; HTTP/1.1 without Host, or with two, is 400.
TEST(AdminServerTest, AHostHeaderNamingAnotherHostIsRefused) {
  auto admin = StartAdmin(std::make_shared<MetricsRegistry>(), {}, {"metrics.example"});
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  const std::string port = std::to_string((*admin)->port());
  struct Case {
    std::string host;
    int status;
  };
  for (const Case& c : {Case{"evil.example", 421}, Case{"evil.example:" + port, 421},
                        Case{"127.0.0.1.evil.example:" + port, 421}, Case{"localhost.evil.example", 421},
                        Case{"metrics.example.evil.example", 421}, Case{"[::1", 421}, Case{"::1", 421},
                        Case{"127.0.0.1:" + port + ":1", 421}, Case{"127.1", 421}, Case{"", 421},
                        Case{"127.0.0.1:" + port, 200}, Case{"127.0.0.1", 200}, Case{"10.1.2.3:9464", 200},
                        Case{"localhost:" + port, 200}, Case{"LocalHost", 200}, Case{"[::1]:" + port, 200},
                        Case{"[::1]", 200}, Case{"metrics.example", 200}, Case{"Metrics.Example:" + port, 200}}) {
    for (const char* path : {"/healthz", "/metrics"}) {
      SCOPED_TRACE("Host: " + c.host + ", " + path);
      auto r = http_request(Request(Url(**admin, path), "GET", {}, {{"Host", c.host}}));
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(r->status, c.status);
      if (c.status != 200) {
        EXPECT_THAT(r->body, Not(HasSubstr("authrpc_")));
      }
    }
  }
  HttpRequest old_request = Request(Url(**admin, "/healthz"), "GET");
  old_request.http10 = true;
  old_request.send_host = false;
  auto old = http_request(old_request);
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(old->status, 200);
  EXPECT_EQ(old->body, "ok\n");
  HttpRequest no_host_request = Request(Url(**admin, "/healthz"), "GET");
  no_host_request.send_host = false;
  auto no_host = http_request(no_host_request);
  ASSERT_TRUE(no_host.ok()) << no_host.status().to_string();
  EXPECT_EQ(no_host->status, 400);
  HttpRequest two_request = Request(Url(**admin, "/healthz"), "GET", {}, {{"Host", "127.0.0.1"}});
  two_request.raw_header_lines = {"Host: evil.example"};
  auto two = http_request(two_request);
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  EXPECT_EQ(two->status, 400);
}

TEST(AdminServerTest, BadHostNamesAreConfigErrors) {
  for (const std::string host : {"", "evil/", "a b", "[::1]", "x:80", "host\n", "*.example", "a..b", ".a", "a."}) {
    SCOPED_TRACE("host '" + host + "'");
    AdminOptions options;
    options.listen = "127.0.0.1:0";
    options.metrics = std::make_shared<MetricsRegistry>();
    options.hosts = {"ok.example", host};
    auto admin = AdminServer::start(std::move(options));
    ASSERT_FALSE(admin.ok());
    EXPECT_EQ(admin.code(), Errc::kConfigError);
    EXPECT_THAT(admin.status().message, HasSubstr("admin hosts"));
  }
}

TEST(AdminServerTest, BadAddressesAreConfigErrors) {
  for (const std::string listen :
       {"", "127.0.0.1", ":9464", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:9464s",
        "127.0.0.1:1,127.0.0.1:2", "example.com:9464", "[::1:9464", "[::1]9464", "[nope]:1", "1.2.3:80"}) {
    SCOPED_TRACE("listen '" + listen + "'");
    auto admin = StartAdmin(std::make_shared<MetricsRegistry>(), {}, {}, listen);
    ASSERT_FALSE(admin.ok());
    EXPECT_EQ(admin.code(), Errc::kConfigError);
    EXPECT_THAT(admin.status().message, HasSubstr("admin listen"));
  }
  AdminOptions no_metrics;
  no_metrics.listen = "127.0.0.1:0";
  EXPECT_EQ(AdminServer::start(no_metrics).code(), Errc::kConfigError);
}

// IPv6 listens (libmicrohttpd has it), where the host has ::1.
TEST(AdminServerTest, AnIpv6AddressListens) {
  const int probe = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 loopback{};
  loopback.sin6_family = AF_INET6;
  loopback.sin6_addr = in6addr_loopback;
  const bool have_ipv6 = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&loopback), sizeof loopback) == 0;
  if (probe >= 0) ::close(probe);
  if (!have_ipv6) GTEST_SKIP() << "no ::1 on this host";
  AdminOptions v6;
  v6.listen = "[::1]:0";
  v6.metrics = std::make_shared<MetricsRegistry>();
  v6.log = null_log_sink();
  auto admin = AdminServer::start(v6);
  ASSERT_TRUE(admin.ok()) << admin.status().to_string();
  auto r = http_get("http://[::1]:" + std::to_string((*admin)->port()) + "/healthz");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
}

// A busy port is UNAVAILABLE, as the RPC listener's is: a start that can
// succeed later, not a mistake in the configuration.
TEST(AdminServerTest, ABusyPortIsUnavailableNamingTheAddressAndWhy) {
  const testing::SilentListener busy;
  ASSERT_NE(busy.port(), 0);
  const std::string where = "127.0.0.1:" + std::to_string(busy.port());

  auto admin = StartAdmin(std::make_shared<MetricsRegistry>(), {}, {}, where);
  ASSERT_FALSE(admin.ok());
  EXPECT_EQ(admin.code(), Errc::kUnavailable);
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
