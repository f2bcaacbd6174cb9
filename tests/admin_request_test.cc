// What the admin listener answers (components/admin/admin_request.h), as a
// table: method, target as sent and Host fields → the page or the refusal; and
// the configured host names' check. tests/admin_server_test.cc sends the same
// kinds of request over a socket.
#include "authrpc/components/admin/admin_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace authrpc {
namespace {

using ::testing::HasSubstr;

struct DecisionCase {
  const char* name;
  std::string_view method;
  std::string_view target;
  std::vector<std::string_view> host_fields;
  AdminAnswer answer;
};

class AdminRequestTest : public ::testing::TestWithParam<DecisionCase> {};

TEST_P(AdminRequestTest, Decides) {
  const DecisionCase& c = GetParam();
  const std::vector<std::string> names = {"metrics.example", "node-1.cluster.local"};
  EXPECT_EQ(decide_admin_request({c.method, c.target, c.host_fields}, names), c.answer);
}

using A = AdminAnswer;
INSTANTIATE_TEST_SUITE_P(
    Table, AdminRequestTest,
    ::testing::Values(
        DecisionCase{"metrics", "GET", "/metrics", {"127.0.0.1:9464"}, A::kMetrics},
        DecisionCase{"healthz", "GET", "/healthz", {"127.0.0.1:9464"}, A::kHealthz},
        DecisionCase{"readyz", "GET", "/readyz", {"127.0.0.1:9464"}, A::kReadyz},
        DecisionCase{"head", "HEAD", "/metrics", {"127.0.0.1:9464"}, A::kMetrics},
        DecisionCase{"no_host", "GET", "/healthz", {}, A::kHealthz},
        DecisionCase{"query_ignored", "GET", "/metrics?x", {}, A::kMetrics},
        DecisionCase{"empty_query", "GET", "/readyz?", {}, A::kReadyz},
        // The path as sent, never decoded or normalized.
        DecisionCase{"encoded_nul", "GET", "/metrics%00", {}, A::kNotFound},
        DecisionCase{"encoded_slash", "GET", "/metrics%2F", {}, A::kNotFound},
        DecisionCase{"encoded_letter", "GET", "/%6detrics", {}, A::kNotFound},
        DecisionCase{"double_slash", "GET", "//metrics", {}, A::kNotFound},
        DecisionCase{"dot_dot", "GET", "/metrics/../metrics", {}, A::kNotFound},
        DecisionCase{"dot", "GET", "/./metrics", {}, A::kNotFound},
        DecisionCase{"trailing_slash", "GET", "/metrics/", {}, A::kNotFound},
        DecisionCase{"case", "GET", "/Metrics", {}, A::kNotFound},
        DecisionCase{"fragment", "GET", "/metrics#x", {}, A::kNotFound},
        DecisionCase{"absolute_form", "GET", "http://127.0.0.1:9464/metrics", {}, A::kNotFound},
        DecisionCase{"nul_byte", "GET", std::string_view("/metrics\0x", 10), {}, A::kNotFound},
        DecisionCase{"root", "GET", "/", {}, A::kNotFound},
        DecisionCase{"empty", "GET", "", {}, A::kNotFound},
        // Methods: GET and HEAD, exactly.
        DecisionCase{"post", "POST", "/metrics", {}, A::kMethodNotAllowed},
        DecisionCase{"connect", "CONNECT", "127.0.0.1:9464", {}, A::kMethodNotAllowed},
        DecisionCase{"propfind", "PROPFIND", "/metrics", {}, A::kMethodNotAllowed},
        DecisionCase{"lock", "LOCK", "/metrics", {}, A::kMethodNotAllowed},
        DecisionCase{"unlock", "UNLOCK", "/metrics", {}, A::kMethodNotAllowed},
        DecisionCase{"trace", "TRACE", "/healthz", {}, A::kMethodNotAllowed},
        DecisionCase{"options_star", "OPTIONS", "*", {}, A::kMethodNotAllowed},
        DecisionCase{"lower_case_get", "get", "/metrics", {}, A::kMethodNotAllowed},
        DecisionCase{"method_before_path", "DELETE", "/nowhere", {}, A::kMethodNotAllowed},
        // Host before anything else.
        DecisionCase{"rebound_name", "GET", "/metrics", {"evil.example"}, A::kMisdirected},
        DecisionCase{"rebound_name_port", "GET", "/metrics", {"evil.example:9464"}, A::kMisdirected},
        DecisionCase{"rebound_post", "POST", "/metrics", {"evil.example"}, A::kMisdirected},
        DecisionCase{"rebound_404", "GET", "/nowhere", {"evil.example"}, A::kMisdirected},
        DecisionCase{"host_in_whitespace", "GET", "/metrics", {" \t127.0.0.1:9464 \t"}, A::kMetrics},
        DecisionCase{"name_in_whitespace", "GET", "/metrics", {"  evil.example "}, A::kMisdirected},
        DecisionCase{"blank_host", "GET", "/metrics", {" "}, A::kMisdirected},
        DecisionCase{"two_hosts", "GET", "/metrics", {"127.0.0.1", "127.0.0.1"}, A::kBadRequest},
        DecisionCase{"two_hosts_first_bad", "GET", "/metrics", {"evil.example", "127.0.0.1"}, A::kBadRequest}),
    [](const auto& tp) { return std::string(tp.param.name); });

TEST(AdminHostTest, IpLiteralsLocalhostAndTheConfiguredNamesAreAllowed) {
  const std::vector<std::string> names = {"metrics.example", "node-1.cluster.local"};
  for (const char* host : {"127.0.0.1", "127.0.0.1:9464", "10.1.2.3:1", "0.0.0.0", "255.255.255.255:65535",
                           "127.0.0.1:", "[::1]", "[::1]:9464", "[fe80::1]:80", "[::ffff:127.0.0.1]",
                           "localhost", "localhost:9464", "LOCALHOST", "LocalHost:1", "metrics.example",
                           "Metrics.Example:9464", "node-1.cluster.local", "NODE-1.CLUSTER.LOCAL:80"}) {
    EXPECT_TRUE(admin_host_allowed(host, names)) << host;
  }
}

TEST(AdminHostTest, AnyOtherHostIsRefused) {
  const std::vector<std::string> names = {"metrics.example"};
  for (const std::string& host : std::vector<std::string>{
           "", ":9464", "evil.example", "evil.example:9464", "127.0.0.1.evil.example", "localhost.evil.example",
        "metrics.example.evil.example", "evil-metrics.example", "localhost.", "metrics.example.", "127.1",
        "127.0.0.1.", "0x7f.0.0.1", "2130706433", "::1", "[::1", "[::1]x", "[::1]:x", "[evil.example]",
        "[::1%25lo]", "127.0.0.1:80:80", "127.0.0.1:x", "127.0.0.1:1234567", "127.0.0.1 ", " 127.0.0.1",
        "localhost@evil.example", "evil.example#127.0.0.1", std::string("127.0.0.1\0evil", 14),
        std::string("localhost\0", 10)}) {
    EXPECT_FALSE(admin_host_allowed(host, names)) << "'" << host << "'";
  }
  EXPECT_FALSE(admin_host_allowed("metrics.example", {}));
}

TEST(AdminHostTest, ConfiguredNamesAreDnsNamesKeptInLowerCase) {
  const std::vector<std::string> good = {"Metrics.Example", "node-1", "a.b-c.d9"};
  auto names = admin_host_names(good);
  ASSERT_TRUE(names.ok()) << names.status().to_string();
  EXPECT_EQ(*names, (std::vector<std::string>{"metrics.example", "node-1", "a.b-c.d9"}));
  for (const std::string& bad : std::vector<std::string>{"", "evil/", "a b", "[::1]", "x:80", "host\n", "*.example", "a..b", ".a", "a.",
                                "a_b", std::string(254, 'a'), std::string("a\0b", 3)}) {
    auto refused = admin_host_names(std::vector<std::string>{"ok.example", bad});
    ASSERT_FALSE(refused.ok()) << "'" << bad << "'";
    EXPECT_EQ(refused.code(), Errc::kConfigError);
    EXPECT_THAT(refused.status().message, HasSubstr("admin hosts"));
  }
}

}  // namespace
}  // namespace authrpc
