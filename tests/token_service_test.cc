// The token service's request handling without a KDC (server/service.h,
// server/token_service.h): who may call a token.* method is decided before
// its body is parsed, and bodies are parsed within size and depth limits.
// A real Server on loopback with the memory store; `simple` connections are
// refused (the default issue_mechanisms) or, for the limit cases, allowed by
// naming "simple" in issue_mechanisms. The RSS case is the attacker's: 8 MiB
// of "[[[[" to token.cancel from a `simple` connection (~520 MB resident
// before).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "authrpc/auth/simple.h"
#include "authrpc/client/client.h"
#include "authrpc/server/server.h"
#include "authrpc/server/service.h"
#include "authrpc/security/clock.h"
#include "authrpc/server/token_service.h"
#include "tests/test_server.h"
#include "tests/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::Describe;

// Resident set size of this process (the server runs in it).
std::size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// AddressSanitizer's quarantine keeps freed blocks (the 8 MiB buffers)
// resident, so resident memory says nothing about parsing there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kResidentMemoryIsMeaningful = false;
#else
constexpr bool kResidentMemoryIsMeaningful = true;
#endif

std::string Nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

struct Running {
  std::unique_ptr<TokenService> tokens;
  testing::TestServer server;  // stopped before the token service goes
  Endpoint endpoint;
};

std::unique_ptr<Running> Start(std::vector<std::string> issue_mechanisms) {
  auto r = std::make_unique<Running>();
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  t.issue_mechanisms = std::move(issue_mechanisms);
  t.mechanism.allow_plaintext = true;  // token callers over this tcp:// server (the challenge exchange)
  t.log = null_log_sink();
  auto tokens = TokenService::open(std::move(t));
  EXPECT_TRUE(tokens.ok()) << Describe(tokens);
  if (!tokens.ok()) return nullptr;
  r->tokens = std::move(*tokens);
  r->server.mechanisms({std::make_shared<SimpleServerMechanism>(), r->tokens->mechanism()})
      .service(r->tokens->service())
      .blocking_threads(1);
  const Status started = r->server.start();
  EXPECT_TRUE(started.ok()) << started.to_string();
  if (!started.ok()) return nullptr;
  r->endpoint = r->server.endpoint();
  return r;
}

TEST(ParseJsonRequest, Limits) {
  const JsonLimits limits{1000, 4};
  struct Case {
    std::string text;
    bool ok;
    const char* error;
  };
  const Case cases[] = {
      {R"({"token": "x"})", true, ""},
      {Nested(4), true, ""},
      {Nested(5), false, "nests deeper than this method's limit of 4"},
      {R"({"a": {"b": {"c": {"d": 1}}}})", true, ""},
      {R"({"a": {"b": {"c": {"d": [1]}}}})", false, "nests deeper"},
      {std::string(1001, ' '), false, "1001 bytes is over this method's limit of 1000"},
      {std::string(999, ' ') + "1", true, ""},
      {"{\"token\": ", false, "not valid JSON"},
      {"{} {}", false, "not valid JSON"},
      {"", false, "not valid JSON"},
      // Depth is checked before validity: an over-deep prefix is refused
      // without reading on.
      {Nested(5).substr(0, 5) + "garbage", false, "nests deeper"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 40));
    auto r = parse_json_request(c.text, limits);
    EXPECT_EQ(r.ok(), c.ok) << Describe(r);
    if (!c.ok) {
      EXPECT_EQ(r.code(), make_error_code(Errc::kInvalidArgument));
      EXPECT_THAT(r.status().message, HasSubstr(c.error));
    }
  }
}

// Defect 5: refused before parsing, and memory does not grow.
TEST(TokenServiceRequests, SimpleCallersAreRefusedBeforeTheBodyIsParsed) {
  auto running = Start({"kerberos", "kerberos-sasl"});
  ASSERT_NE(running, nullptr);
  auto client = testing::ConnectWith(running->endpoint, std::make_shared<SimpleClientMechanism>("alice"),
                                     30s);
  ASSERT_TRUE(client.ok()) << Describe(client);
  const std::string hostile = Nested(4u << 20);  // 8 MiB
  // Each call moves 8 MiB through the client's and the server's frame
  // buffers and a copy for the blocking pool: tens of MiB that glibc may
  // keep. Parsing it was ~65 bytes per input byte (~520 MiB).
  const std::size_t before = ResidentBytes();
  for (const char* method : {"cancel", "get", "renew", "cancel", "cancel", "cancel"}) {
    SCOPED_TRACE(method);
    auto r = (*client)->call("token", method, hostile);
    EXPECT_EQ(r.code(), make_error_code(Errc::kPermissionDenied)) << Describe(r);
    EXPECT_THAT(r.status().message, HasSubstr("needs a connection authenticated by Kerberos"));
    EXPECT_THAT(r.status().message, HasSubstr("'simple'"));
  }
  const std::size_t after = ResidentBytes();
  RecordProperty("rss_before_kib", static_cast<int>(before >> 10));
  RecordProperty("rss_after_kib", static_cast<int>(after >> 10));
  std::printf("RSS around six 8 MiB nested bodies: %zu KiB before, %zu KiB after\n", before >> 10,
              after >> 10);
  if (kResidentMemoryIsMeaningful) {
    EXPECT_LT(after, before + (128u << 20)) << "resident memory grew by " << ((after - before) >> 20) << " MiB";
  }
  // The connection and the server are fine.
  auto who = (*client)->call_json("sys", "whoami", nlohmann::json::object());
  EXPECT_TRUE(who.ok()) << Describe(who);
}

// A caller who may use the methods still gets typed errors for bodies over
// the limits, and the server keeps serving.
TEST(TokenServiceRequests, BodiesOverTheLimitsAreInvalidArgument) {
  auto running = Start({"simple"});
  ASSERT_NE(running, nullptr);
  auto client = testing::ConnectWith(running->endpoint, std::make_shared<SimpleClientMechanism>("alice"),
                                     30s);
  ASSERT_TRUE(client.ok()) << Describe(client);
  struct Case {
    const char* method;
    std::string body;
    const char* error;
  };
  const Case cases[] = {
      {"cancel", Nested(4u << 20), "over this method's limit"},
      {"get", Nested(4u << 20), "over this method's limit"},
      {"renew", Nested(100), "nests deeper than this method's limit of 4"},
      {"get", R"({"renewer": [[[[["yarn"]]]]]})", "nests deeper"},
      {"cancel", "{\"token\": ", "not valid JSON"},
  };
  const std::size_t before = ResidentBytes();
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.method) + " " + c.body.substr(0, 30));
    auto r = (*client)->call("token", c.method, c.body);
    EXPECT_EQ(r.code(), make_error_code(Errc::kInvalidArgument)) << Describe(r);
    EXPECT_THAT(r.status().message, HasSubstr(c.error));
  }
  if (kResidentMemoryIsMeaningful) {
    EXPECT_LT(ResidentBytes(), before + (64u << 20));
  }
  auto got = (*client)->call_json("token", "get", {{"renewer", "yarn"}, {"service", "svc"}});
  ASSERT_TRUE(got.ok()) << Describe(got);
  EXPECT_EQ((*got)["owner"], "alice");
}

// token.cancel is open to token-authenticated callers too (an owner
// cancelling the token it holds), never to `simple` ones.
TEST(TokenServiceRequests, CancelNeedsKerberosOrATokenCaller) {
  auto running = Start({"simple"});
  ASSERT_NE(running, nullptr);
  std::string token_text;
  {
    auto alice = testing::ConnectWith(running->endpoint, std::make_shared<SimpleClientMechanism>("alice"));
    ASSERT_TRUE(alice.ok()) << Describe(alice);
    auto got = (*alice)->call_json("token", "get", {{"renewer", "yarn"}, {"service", "svc"}});
    ASSERT_TRUE(got.ok()) << Describe(got);
    token_text = (*got)["token"].get<std::string>();
  }
  auto token = security::Token::from_string(token_text);
  ASSERT_TRUE(token.ok());
  TokenClientOptions to;
  to.token = *token;
  to.service = "svc";
  auto by_token = testing::ConnectWith(running->endpoint, std::make_shared<TokenClientMechanism>(to));
  ASSERT_TRUE(by_token.ok()) << Describe(by_token);
  auto cancelled = (*by_token)->call_json("token", "cancel", {{"token", token_text}});
  EXPECT_TRUE(cancelled.ok()) << Describe(cancelled);
}

// TokenService::ready(), what the admin listener's /readyz asks: ready with
// no key yet (the first token.get makes one) and with a fresh one; not ready
// once the key is overdue for its roll by more than two sweeps (a sweeper
// that keeps failing), ready again after a roll.
TEST(TokenServiceReady, AKeyOverdueForItsRollIsNotReady) {
  auto clock = std::make_shared<security::ManualClock>(security::TokenTime(std::chrono::hours(24 * 365 * 50)));
  TokenServiceOptions t;
  t.store = TokenServiceOptions::Store::kMemory;
  t.secrets.clock = clock;
  t.secrets.key_roll_interval = 1h;
  t.sweep_interval = 24h;  // the test sweeps by hand
  t.log = null_log_sink();
  auto tokens = TokenService::open(std::move(t));
  ASSERT_TRUE(tokens.ok()) << Describe(tokens);
  EXPECT_TRUE((*tokens)->ready().ok()) << (*tokens)->ready().to_string();
  ASSERT_TRUE((*tokens)->secrets().issue({"alice", "yarn", "", "svc"}).ok());
  EXPECT_TRUE((*tokens)->ready().ok());

  clock->advance(1h + 2 * 24h - 1ms);
  EXPECT_TRUE((*tokens)->ready().ok()) << "two sweeps late is still in time";
  clock->advance(1ms);
  const Status late = (*tokens)->ready();
  EXPECT_EQ(late.code, Errc::kUnavailable);
  EXPECT_THAT(late.message, HasSubstr("overdue for its roll"));

  ASSERT_TRUE((*tokens)->secrets().sweep().ok());
  EXPECT_TRUE((*tokens)->ready().ok()) << (*tokens)->ready().to_string();
}

}  // namespace
}  // namespace authrpc
