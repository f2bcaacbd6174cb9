// Unit tests for rpc/endpoint.h: URI parsing (good and bad) and to_string();
// and the spellings of rpc/security_requirement.h, which configs and
// endpoints' options use.
#include "authrpc/rpc/endpoint.h"
#include "authrpc/rpc/security_requirement.h"

#include <gtest/gtest.h>
#include <sys/un.h>

#include <ostream>
#include <string>

namespace authrpc {
namespace {

using Scheme = Endpoint::Scheme;

struct GoodCase {
  const char* name;
  std::string uri;
  Scheme scheme;
  std::string host;
  std::uint16_t port;
  std::string path;
  std::string canonical;  // to_string()
};

void PrintTo(const GoodCase& c, std::ostream* os) { *os << c.name; }

class EndpointParseGoodTest : public ::testing::TestWithParam<GoodCase> {};

TEST_P(EndpointParseGoodTest, Parses) {
  const auto& c = GetParam();
  auto ep = Endpoint::parse(c.uri);
  ASSERT_TRUE(ep.ok()) << c.uri << ": " << ep.status().to_string();
  EXPECT_EQ(ep->scheme, c.scheme);
  EXPECT_EQ(ep->host, c.host);
  EXPECT_EQ(ep->port, c.port);
  EXPECT_EQ(ep->path, c.path);
  EXPECT_EQ(ep->scheme_name(), c.scheme == Scheme::kTcp   ? "tcp"
                               : c.scheme == Scheme::kTls ? "tls"
                                                          : "unix");
  EXPECT_EQ(ep->to_string(), c.canonical);
}

TEST_P(EndpointParseGoodTest, ToStringRoundTrips) {
  const auto& c = GetParam();
  auto ep = Endpoint::parse(c.uri);
  ASSERT_TRUE(ep.ok());
  auto again = Endpoint::parse(ep->to_string());
  ASSERT_TRUE(again.ok()) << ep->to_string() << ": " << again.status().to_string();
  EXPECT_EQ(again->scheme, ep->scheme);
  EXPECT_EQ(again->host, ep->host);
  EXPECT_EQ(again->port, ep->port);
  EXPECT_EQ(again->path, ep->path);
  EXPECT_EQ(again->to_string(), ep->to_string());
}

const std::string kLongestUnixPath = "/" + std::string(sizeof(sockaddr_un{}.sun_path) - 2, 'p');

INSTANTIATE_TEST_SUITE_P(
    Table, EndpointParseGoodTest,
    ::testing::Values(
        GoodCase{"tcp_ipv4", "tcp://127.0.0.1:7000", Scheme::kTcp, "127.0.0.1", 7000, "",
                 "tcp://127.0.0.1:7000"},
        GoodCase{"tcp_ipv6_bracketed", "tcp://[::1]:7000", Scheme::kTcp, "::1", 7000, "",
                 "tcp://[::1]:7000"},
        GoodCase{"tcp_ipv6_full", "tcp://[2001:db8::10]:443", Scheme::kTcp, "2001:db8::10", 443,
                 "", "tcp://[2001:db8::10]:443"},
        GoodCase{"tcp_name_port_0", "tcp://localhost:0", Scheme::kTcp, "localhost", 0, "",
                 "tcp://localhost:0"},
        GoodCase{"tcp_port_max", "tcp://example.com:65535", Scheme::kTcp, "example.com", 65535,
                 "", "tcp://example.com:65535"},
        GoodCase{"tcp_trailing_slash", "tcp://127.0.0.1:80/", Scheme::kTcp, "127.0.0.1", 80, "",
                 "tcp://127.0.0.1:80"},
        GoodCase{"tls_name", "tls://localhost:7443", Scheme::kTls, "localhost", 7443, "",
                 "tls://localhost:7443"},
        GoodCase{"tls_ipv6", "tls://[::1]:7443", Scheme::kTls, "::1", 7443, "", "tls://[::1]:7443"},
        GoodCase{"unix_path", "unix:/tmp/x.sock", Scheme::kUnix, "", 0, "/tmp/x.sock",
                 "unix:/tmp/x.sock"},
        GoodCase{"unix_url_form", "unix:///tmp/x.sock", Scheme::kUnix, "", 0, "/tmp/x.sock",
                 "unix:/tmp/x.sock"},
        GoodCase{"unix_relative", "unix:run/app.sock", Scheme::kUnix, "", 0, "run/app.sock",
                 "unix:run/app.sock"},
        GoodCase{"unix_abstract", "unix:@name", Scheme::kUnix, "", 0, "@name", "unix:@name"},
        GoodCase{"unix_longest_path", "unix:" + kLongestUnixPath, Scheme::kUnix, "", 0,
                 kLongestUnixPath, "unix:" + kLongestUnixPath}),
    [](const auto& tp) { return std::string(tp.param.name); });

struct BadCase {
  const char* name;
  std::string uri;
  const char* why;  // a fragment the message must contain
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class EndpointParseBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(EndpointParseBadTest, IsRefused) {
  const auto& c = GetParam();
  auto ep = Endpoint::parse(c.uri);
  ASSERT_FALSE(ep.ok()) << c.uri << " parsed as " << ep->to_string();
  EXPECT_EQ(ep.code(), Errc::kInvalidArgument);
  // The message quotes the URI and says what is wrong with it.
  EXPECT_NE(ep.status().message.find("'" + c.uri + "'"), std::string::npos)
      << ep.status().message;
  EXPECT_NE(ep.status().message.find(c.why), std::string::npos) << ep.status().message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, EndpointParseBadTest,
    ::testing::Values(
        BadCase{"empty", "", "scheme"},
        BadCase{"no_scheme", "127.0.0.1:7000", "scheme"},
        BadCase{"http_scheme", "http://127.0.0.1:80", "scheme"},
        BadCase{"uppercase_scheme", "TCP://127.0.0.1:80", "scheme"},
        BadCase{"tcp_single_slash", "tcp:/127.0.0.1:80", "scheme"},
        BadCase{"missing_port", "tcp://127.0.0.1", "missing port"},
        BadCase{"missing_port_ipv6", "tcp://[::1]", "missing port"},
        BadCase{"ipv6_junk_after_bracket", "tcp://[::1]7000", "missing port"},
        BadCase{"empty_port", "tcp://127.0.0.1:", "port"},
        BadCase{"port_70000", "tcp://127.0.0.1:70000", "port"},
        BadCase{"port_65536", "tcp://127.0.0.1:65536", "port"},
        BadCase{"port_negative", "tcp://127.0.0.1:-1", "port"},
        BadCase{"port_plus", "tcp://127.0.0.1:+80", "port"},
        BadCase{"port_trailing_junk", "tcp://127.0.0.1:80x", "port"},
        BadCase{"port_huge", "tcp://127.0.0.1:99999999999999999999", "port"},
        BadCase{"missing_host", "tcp://:80", "missing host"},
        BadCase{"empty_brackets", "tcp://[]:80", "missing host"},
        BadCase{"unterminated_bracket", "tcp://[::1:80", "unterminated"},
        // An IPv6 literal without brackets and without a port must not be
        // split at its last colon into host ":" and port 1. (Bug: see report.)
        BadCase{"ipv6_unbracketed_no_port", "tcp://::1", ""},
        BadCase{"unix_empty", "unix:", "empty"},
        BadCase{"unix_empty_url_form", "unix://", "empty"},
        BadCase{"unix_too_long", "unix:/" + std::string(sizeof(sockaddr_un{}.sun_path) - 1, 'p'),
                "too long"},
        BadCase{"unix_abstract_too_long",
                "unix:@" + std::string(sizeof(sockaddr_un{}.sun_path), 'a'), "too long"}),
    [](const auto& tp) { return std::string(tp.param.name); });

TEST(EndpointTest, ToStringOfHandBuiltEndpoints) {
  Endpoint tcp;
  tcp.host = "10.0.0.1";
  tcp.port = 9;
  EXPECT_EQ(tcp.to_string(), "tcp://10.0.0.1:9");
  Endpoint v6;
  v6.host = "fe80::1";
  v6.port = 1;
  EXPECT_EQ(v6.to_string(), "tcp://[fe80::1]:1");
  Endpoint unix_ep;
  unix_ep.scheme = Scheme::kUnix;
  unix_ep.path = "@abstract";
  EXPECT_EQ(unix_ep.to_string(), "unix:@abstract");
  EXPECT_EQ(unix_ep.scheme_name(), "unix");
}

TEST(EndpointTest, UnixPathStartingWithTwoSlashesRoundTrips) {
  // "//srv/app.sock" is a valid absolute path (POSIX allows a leading "//").
  // It can be written as "unix:////srv/app.sock"; to_string() must produce a
  // URI that parses back to the same path rather than to "srv/app.sock".
  auto ep = Endpoint::parse("unix:////srv/app.sock");
  ASSERT_TRUE(ep.ok()) << ep.status().to_string();
  EXPECT_EQ(ep->path, "//srv/app.sock");
  auto again = Endpoint::parse(ep->to_string());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->path, ep->path) << "to_string() gave " << ep->to_string();
}

TEST(EndpointTest, DefaultIsTcp) {
  Endpoint ep;
  EXPECT_EQ(ep.scheme, Scheme::kTcp);
  EXPECT_EQ(ep.port, 0);
  EXPECT_EQ(ep.scheme_name(), "tcp");
}

// Each level reads back from its own name; a value no row names is
// "unknown", never another level's name.
TEST(SecurityRequirementTest, NamesReadBackAndAnUnnamedValueIsUnknown) {
  for (const auto r : {SecurityRequirement::kDisabled, SecurityRequirement::kOptional,
                       SecurityRequirement::kRequired}) {
    SecurityRequirement parsed{};
    ASSERT_TRUE(parse_security_requirement(to_string(r), &parsed)) << to_string(r);
    EXPECT_EQ(parsed, r);
  }
  EXPECT_EQ(to_string(SecurityRequirement::kOptional), "optional");
  EXPECT_EQ(to_string(static_cast<SecurityRequirement>(99)), "unknown");
  SecurityRequirement untouched = SecurityRequirement::kRequired;
  EXPECT_FALSE(parse_security_requirement("unknown", &untouched));
  EXPECT_EQ(untouched, SecurityRequirement::kRequired);
}

}  // namespace
}  // namespace authrpc
