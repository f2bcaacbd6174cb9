// ClientOptions::local_address (the source address of a tcp:// or tls://
// connection) and ClientOptions::keepalive (PING while idle), against a real
// Server over loopback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "authrpc/base/status.h"
#include "authrpc/client/client.h"
#include "tests/testing/test_server.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using testing::Describe;
using testing::TestServer;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using testing::Code;

// The peer address the server saw (sys.whoami's identity).
std::string PeerSeenByServer(Client& client) {
  auto reply = client.call_json("sys", "whoami", nlohmann::json::object());
  if (!reply.ok()) return "call failed: " + reply.status().to_string();
  return reply->value("peer", std::string("(no peer_address)"));
}

struct LocalAddressCase {
  const char* name;
  const char* server;  // endpoint
  const char* local;   // ClientOptions::local_address
  // Empty: connects, and the server sees the peer starting with this prefix.
  Errc error;
  const char* prefix_or_message;
};

class LocalAddressTest : public ::testing::TestWithParam<LocalAddressCase> {};

TEST_P(LocalAddressTest, ConnectsFromTheAddressOrFailsTyped) {
  const LocalAddressCase& c = GetParam();
  TestServer server;
  server.endpoint(c.server);
  ASSERT_TRUE(server.start().ok());
  auto client = server.client().simple().options([&](ClientOptions& o) {
    o.local_address = c.local;
  }).connect();
  if (c.error == Errc::kOk) {
    ASSERT_TRUE(client.ok()) << Describe(client);
    EXPECT_THAT(PeerSeenByServer(**client), StartsWith(c.prefix_or_message));
  } else {
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.code(), Code(c.error)) << Describe(client);
    EXPECT_THAT(client.status().message, HasSubstr(c.prefix_or_message));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LocalAddressTest,
    ::testing::Values(
        LocalAddressCase{"Default", "tcp:", "", Errc::kOk, "127.0.0.1:"},
        LocalAddressCase{"Loopback7", "tcp:", "127.0.0.7", Errc::kOk, "127.0.0.7:"},
        LocalAddressCase{"Loopback200", "tcp:", "127.0.0.200", Errc::kOk, "127.0.0.200:"},
        LocalAddressCase{"NotAnAddress", "tcp:", "localhost", Errc::kInvalidArgument,
                         "not an IP address"},
        // An address of no interface here: bind fails (EADDRNOTAVAIL).
        LocalAddressCase{"NotLocal", "tcp:", "192.0.2.1", Errc::kInvalidArgument,
                         "cannot connect from 192.0.2.1"},
        LocalAddressCase{"OtherFamily", "tcp:", "::1", Errc::kInvalidArgument,
                         "cannot connect from ::1"},
        LocalAddressCase{"UnixSocket", "unix:", "127.0.0.7", Errc::kInvalidArgument,
                         "tcp:// and tls:// only"}),
    [](const auto& info) { return std::string(info.param.name); });

// Many connections from several source addresses: each address has its own
// ports, so the same local port may appear once per address.
TEST(LocalAddress, ConnectionsSpreadOverAddressesAllSeeTheirOwn) {
  TestServer server;
  ASSERT_TRUE(server.start().ok());
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 12; ++i) {
    const std::string from = "127.0.0." + std::to_string(2 + i % 4);
    auto client = server.client().simple().options([&](ClientOptions& o) {
      o.local_address = from;
    }).connect();
    ASSERT_TRUE(client.ok()) << Describe(client);
    EXPECT_THAT(PeerSeenByServer(**client), StartsWith(from + ":"));
    clients.push_back(std::move(*client));
  }
  EXPECT_EQ(server.stats().connections_active, 12u);
}

struct KeepaliveCase {
  const char* name;
  std::chrono::milliseconds keepalive;
  bool stays_open;
};

class KeepaliveTest : public ::testing::TestWithParam<KeepaliveCase> {};

// The server closes connections idle for 300 ms; the client waits 1 s doing
// nothing. With a keepalive of 100 ms (< half the idle timeout) its PINGs
// keep the connection; without one (or one too long) the server closes it
// with IDLE_TIMEOUT.
TEST_P(KeepaliveTest, KeepsAnIdleConnectionPastTheServersIdleTimeout) {
  const KeepaliveCase& c = GetParam();
  TestServer server;
  server.options([](ServerOptions& o) { o.idle_timeout = 300ms; });
  ASSERT_TRUE(server.start().ok());
  auto client = server.client().simple().options([&](ClientOptions& o) {
    o.keepalive = c.keepalive;
  }).connect();
  ASSERT_TRUE(client.ok()) << Describe(client);
  std::this_thread::sleep_for(1s);
  if (c.stays_open) {
    EXPECT_TRUE((*client)->connection_status().ok()) << (*client)->connection_status().to_string();
    auto reply = (*client)->call("sys", "echo", "still here");
    ASSERT_TRUE(reply.ok()) << Describe(reply);
    EXPECT_EQ(*reply, "still here");
    EXPECT_EQ(server.stats().connections_active, 1u);
  } else {
    EXPECT_EQ((*client)->connection_status().code, Code(Errc::kIdleTimeout))
        << (*client)->connection_status().to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KeepaliveTest,
    ::testing::Values(KeepaliveCase{"Off", 0ms, false},
                      KeepaliveCase{"LongerThanTheIdleTimeout", 2000ms, false},
                      KeepaliveCase{"UnderHalfTheIdleTimeout", 100ms, true}),
    [](const auto& info) { return std::string(info.param.name); });

// Calls keep a connection busy: a keepalive adds no PING then, and the
// calls go on answering.
TEST(Keepalive, CallsAndKeepaliveShareTheConnection) {
  TestServer server;
  server.options([](ServerOptions& o) { o.idle_timeout = 300ms; });
  ASSERT_TRUE(server.start().ok());
  auto client = server.client().simple().options([](ClientOptions& o) {
    o.keepalive = 20ms;
  }).connect();
  ASSERT_TRUE(client.ok()) << Describe(client);
  for (int i = 0; i < 50; ++i) {
    auto reply = (*client)->call("sys", "echo", std::to_string(i));
    ASSERT_TRUE(reply.ok()) << Describe(reply);
    EXPECT_EQ(*reply, std::to_string(i));
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE((*client)->connection_status().ok());
}

}  // namespace
}  // namespace authrpc
