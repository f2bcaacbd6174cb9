// Unit tests for the `token` mechanism (auth/token_mechanism.h): server and
// client sessions driven directly against a real SecretManager over a memory
// store with a controlled clock; the replay cache; the TokenErrc → Errc
// mapping. Negotiation over real sockets is in token_itest.cc.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "auth/token_mechanism.h"
#include "auth/token_replay_cache.h"
#include "auth/token_status.h"
#include "security/clock.h"
#include "security/memory_token_store.h"
#include "security/secret_manager.h"
#include "tests/test_support.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using security::ManualClock;
using security::Token;
using security::TokenErrc;

constexpr std::string_view kService = "tcp://127.0.0.1:7000";

using testing::Await;

struct Realm {
  std::shared_ptr<ManualClock> clock =
      std::make_shared<ManualClock>(security::TokenTime(1'700'000'000'000ms));
  std::shared_ptr<security::SecretManager> secrets;
  std::shared_ptr<TokenServerMechanism> server;

  explicit Realm(TokenServerOptions options = {}) {
    security::SecretManagerOptions o;
    o.clock = clock;
    secrets = std::move(*security::SecretManager::open(
        std::make_shared<security::MemoryTokenStore>(), o));
    server = std::make_shared<TokenServerMechanism>(secrets, options);
  }
  Token Issue(std::string owner = "alice@R", std::string real_user = {}) {
    auto t = secrets->issue({std::move(owner), "yarn@R", std::move(real_user), std::string(kService)});
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return *t;
  }
};

struct Outcome {
  ServerStep server;
  Status client;  // complete() on the server's final token, if the server succeeded
};

Outcome Authenticate(Realm& realm, const Token& token, ChannelInfo client_channel = {},
                     ChannelInfo server_channel = {}) {
  client_channel.server_uri = std::string(kService);
  TokenClientOptions co;
  co.token = token;
  co.clock = realm.clock;
  TokenClientMechanism client(co);
  auto cs = client.start(client_channel);
  ClientStep first = Await(cs->initial());
  Outcome out;
  if (first.kind != ClientStep::Kind::kSend) {
    out.server = ServerStep::failure(first.error);
    return out;
  }
  EXPECT_TRUE(first.final);
  auto ss = realm.server->start(server_channel);
  out.server = Await(ss->step(first.token));
  if (out.server.kind == ServerStep::Kind::kSuccess) out.client = Await(cs->complete(out.server.token));
  return out;
}

TEST(TokenMechanism, AuthenticatesMutuallyInOneMessage) {
  Realm realm;
  const Token token = realm.Issue("alice@R", "oozie@R");
  auto out = Authenticate(realm, token);
  ASSERT_EQ(out.server.kind, ServerStep::Kind::kSuccess) << out.server.error.to_string();
  EXPECT_TRUE(out.client.ok()) << out.client.to_string();
  EXPECT_EQ(out.server.identity.user, "alice@R");
  EXPECT_EQ(out.server.identity.realm, "R");
  EXPECT_EQ(out.server.identity.mechanism, "token");
  EXPECT_EQ(out.server.identity.real_user, std::optional<std::string>("oozie@R"));
}

// Each row spoils one thing; the server must refuse with the typed error.
TEST(TokenMechanism, RefusesBadTokensWithTypedErrors) {
  struct Case {
    const char* name;
    std::function<Token(Realm&)> make;
    Errc code;
    const char* text;
  };
  const std::vector<Case> cases = {
      {"expired",
       [](Realm& r) {
         Token t = r.Issue();
         r.clock->advance(25h);
         return t;
       },
       Errc::kCredentialsExpired, "EXPIRED"},
      {"cancelled",
       [](Realm& r) {
         Token t = r.Issue();
         EXPECT_TRUE(r.secrets->cancel(t, "alice@R").ok());
         return t;
       },
       Errc::kCredentialsExpired, "CANCELLED"},
      {"forged password",
       [](Realm& r) {
         Token t = r.Issue();
         t.password.data()[0] ^= 1;
         return t;
       },
       Errc::kAuthenticationFailed, "FORGED"},
      {"unknown key",
       [](Realm& r) {
         Realm other;
         for (int i = 0; i < 3; ++i) EXPECT_TRUE(other.secrets->roll_master_key().ok());
         (void)r;
         return other.Issue();
       },
       Errc::kUnavailable, "UNKNOWN_KEY"},
      {"unknown token (another server, same key id)",
       [](Realm& r) {
         (void)r.Issue();
         Realm other;
         (void)other.Issue();
         return other.Issue();  // sequence 2, never issued here
       },
       Errc::kCredentialsExpired, "UNKNOWN_TOKEN"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Realm realm;
    const Token token = c.make(realm);
    auto out = Authenticate(realm, token);
    ASSERT_EQ(out.server.kind, ServerStep::Kind::kFailure);
    EXPECT_EQ(out.server.error.code, make_error_code(c.code)) << out.server.error.to_string();
    EXPECT_NE(out.server.error.message.find(c.text), std::string::npos) << out.server.error.message;
    // The server keeps serving: a good token still works.
    auto good = Authenticate(realm, realm.Issue("bob@R"));
    EXPECT_EQ(good.server.kind, ServerStep::Kind::kSuccess) << good.server.error.to_string();
  }
}

TEST(TokenMechanism, RefusesTokensForAnotherService) {
  TokenServerOptions o;
  o.services = {"tcp://db1:7000"};
  Realm realm(o);
  auto out = Authenticate(realm, realm.Issue());  // service kService
  ASSERT_EQ(out.server.kind, ServerStep::Kind::kFailure);
  EXPECT_EQ(out.server.error.code, make_error_code(Errc::kAuthenticationFailed));
  EXPECT_NE(out.server.error.message.find("WRONG_SERVICE"), std::string::npos);
}

TEST(TokenMechanism, ClientWithoutATokenForTheServiceRefusesLocally) {
  Realm realm;
  Token token = realm.Issue();
  token.service = "tcp://elsewhere:1";
  TokenClientOptions co;
  co.token = token;
  TokenClientMechanism client(co);
  ChannelInfo info;
  info.server_uri = std::string(kService);
  ClientStep step = Await(client.start(info)->initial());
  ASSERT_EQ(step.kind, ClientStep::Kind::kFailure);
  EXPECT_EQ(step.error.code, make_error_code(Errc::kUnauthenticated));
  EXPECT_EQ(retry_advice(step.error.code), RetryAdvice::kReauthenticate);
}

TEST(TokenMechanism, RefusesReplayedHello) {
  Realm realm;
  const Token token = realm.Issue();
  TokenClientOptions co;
  co.token = token;
  co.clock = realm.clock;
  TokenClientMechanism client(co);
  ChannelInfo info;
  info.server_uri = std::string(kService);
  ClientStep first = Await(client.start(info)->initial());
  ASSERT_EQ(first.kind, ClientStep::Kind::kSend);
  EXPECT_EQ(Await(realm.server->start({})->step(first.token)).kind, ServerStep::Kind::kSuccess);
  ServerStep again = Await(realm.server->start({})->step(first.token));
  ASSERT_EQ(again.kind, ServerStep::Kind::kFailure);
  EXPECT_NE(again.error.message.find("REPLAY"), std::string::npos);
  // A fresh HELLO with the same token is fine.
  EXPECT_EQ(Authenticate(realm, token).server.kind, ServerStep::Kind::kSuccess);
}

TEST(TokenMechanism, RefusesHelloOutsideTheClockWindow) {
  for (auto offset : {-6min, 6min}) {
    Realm realm;
    const Token token = realm.Issue();
    TokenClientOptions co;
    co.token = token;
    auto client_clock = std::make_shared<ManualClock>(realm.clock->now() + offset);
    co.clock = client_clock;
    ChannelInfo info;
    info.server_uri = std::string(kService);
    ClientStep first = Await(TokenClientMechanism(co).start(info)->initial());
    ServerStep step = Await(realm.server->start({})->step(first.token));
    ASSERT_EQ(step.kind, ServerStep::Kind::kFailure);
    EXPECT_NE(step.error.message.find("CLOCK_SKEW"), std::string::npos) << step.error.message;
  }
}

// The client's clock is any i64 on the wire: a difference from the server's
// that does not fit in an i64 is refused as skew, and said to be on the
// right side (found by tests/fuzz/token_fuzz: INT64_MIN - now overflowed).
TEST(TokenMechanism, RefusesHelloFromTheEndsOfTime) {
  struct Case {
    std::int64_t time_ms;
    const char* says;
  };
  for (const Case& c : {Case{std::numeric_limits<std::int64_t>::min(), "clock is -"},
                        Case{std::numeric_limits<std::int64_t>::max(), "clock is 9"},
                        Case{std::numeric_limits<std::int64_t>::min() + 1, "clock is -"}}) {
    Realm realm;
    auto hello = token_wire::make_hello(realm.Issue(), "", realm.clock->now());
    hello.time_ms = c.time_ms;
    ServerStep step = Await(realm.server->start({})->step(hello.encode()));
    ASSERT_EQ(step.kind, ServerStep::Kind::kFailure) << c.time_ms;
    EXPECT_NE(step.error.message.find("CLOCK_SKEW"), std::string::npos) << step.error.message;
    EXPECT_NE(step.error.message.find(c.says), std::string::npos) << step.error.message;
  }
}

TEST(TokenMechanism, ProofsAreBoundToTheChannel) {
  Realm realm;
  ChannelInfo a, b;
  a.channel_binding = std::string(32, 'a');
  b.channel_binding = std::string(32, 'b');
  EXPECT_EQ(Authenticate(realm, realm.Issue(), a, a).server.kind, ServerStep::Kind::kSuccess);
  auto out = Authenticate(realm, realm.Issue(), a, b);
  ASSERT_EQ(out.server.kind, ServerStep::Kind::kFailure);
  EXPECT_NE(out.server.error.message.find("FORGED"), std::string::npos);
}

TEST(TokenMechanism, ClientRefusesAServerThatCannotProveItKnowsThePassword) {
  Realm realm;
  const Token token = realm.Issue();
  TokenClientOptions co;
  co.token = token;
  co.clock = realm.clock;
  ChannelInfo info;
  info.server_uri = std::string(kService);
  for (std::string final_token : {std::string(), std::string(33, '\x01'), std::string(1, '\x01')}) {
    auto session = TokenClientMechanism(co).start(info);
    (void)Await(session->initial());
    Status s = Await(session->complete(final_token));
    EXPECT_EQ(s.code, make_error_code(Errc::kAuthenticationFailed));
  }
}

TEST(TokenMechanism, RefusesMalformedHellos) {
  Realm realm;
  auto hello = token_wire::make_hello(realm.Issue(), "", realm.clock->now());
  const std::string good = hello.encode();
  for (std::string bad : {std::string(), good.substr(0, good.size() - 1), good + "x",
                          std::string(1, '\x02') + good.substr(1)}) {
    ServerStep step = Await(realm.server->start({})->step(bad));
    ASSERT_EQ(step.kind, ServerStep::Kind::kFailure);
    EXPECT_EQ(step.error.code, make_error_code(Errc::kAuthenticationFailed));
  }
  ASSERT_TRUE(token_wire::Hello::decode(good).has_value());
  EXPECT_EQ(token_wire::Hello::decode(good)->encode(), good);
}

TEST(TokenReplayCache, BoundedWithARisingFloor) {
  TokenReplayCache cache(/*skew_ms=*/1000, /*capacity=*/3);
  using V = TokenReplayCache::Verdict;
  const std::int64_t now = 10'000;
  EXPECT_EQ(cache.check_and_insert(now, 9'500, "a"), V::kFresh);
  EXPECT_EQ(cache.check_and_insert(now, 9'500, "a"), V::kReplay);
  EXPECT_EQ(cache.check_and_insert(now, 9'600, "b"), V::kFresh);
  EXPECT_EQ(cache.check_and_insert(now, 9'700, "c"), V::kFresh);
  EXPECT_EQ(cache.check_and_insert(now, 9'800, "d"), V::kFresh);  // evicts 9'500
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.floor_ms(), 9'500);
  EXPECT_EQ(cache.check_and_insert(now, 9'500, "a"), V::kTooOld);  // would be a replay
  // Entries older than now - skew go by themselves.
  EXPECT_EQ(cache.check_and_insert(now + 1'000, 10'900, "e"), V::kFresh);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(TokenStatus, MapsEveryTokenErrorWithTheRightAdvice) {
  struct Case {
    TokenErrc in;
    Errc at_auth;
    Errc in_service;
    RetryAdvice auth_advice;
  };
  const Case cases[] = {
      {TokenErrc::kMalformed, Errc::kAuthenticationFailed, Errc::kInvalidArgument, RetryAdvice::kGiveUp},
      {TokenErrc::kForged, Errc::kAuthenticationFailed, Errc::kPermissionDenied, RetryAdvice::kGiveUp},
      {TokenErrc::kExpired, Errc::kCredentialsExpired, Errc::kFailedPrecondition, RetryAdvice::kReauthenticate},
      {TokenErrc::kCancelled, Errc::kCredentialsExpired, Errc::kFailedPrecondition, RetryAdvice::kReauthenticate},
      {TokenErrc::kUnknownToken, Errc::kCredentialsExpired, Errc::kFailedPrecondition, RetryAdvice::kReauthenticate},
      {TokenErrc::kUnknownKey, Errc::kUnavailable, Errc::kUnavailable, RetryAdvice::kRetry},
      {TokenErrc::kPermissionDenied, Errc::kAuthenticationFailed, Errc::kPermissionDenied, RetryAdvice::kGiveUp},
      {TokenErrc::kStoreCorrupt, Errc::kUnavailable, Errc::kDataLoss, RetryAdvice::kRetry},
      {TokenErrc::kIoError, Errc::kUnavailable, Errc::kUnavailable, RetryAdvice::kRetry},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(security::token_errc_name(c.in)));
    const security::TokenStatus s(c.in, "token 7 (owner alice)");
    const Status a = token_status(s, TokenUse::kAuthentication);
    EXPECT_EQ(a.code, make_error_code(c.at_auth));
    EXPECT_EQ(retry_advice(a.code), c.auth_advice);
    EXPECT_NE(a.message.find(security::token_errc_name(c.in)), std::string::npos) << a.message;
    EXPECT_EQ(token_status(s, TokenUse::kService).code, make_error_code(c.in_service));
  }
  EXPECT_TRUE(token_status({}, TokenUse::kService).ok());
}

}  // namespace
}  // namespace authrpc
