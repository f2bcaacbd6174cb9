// Unit tests for the `token` mechanism
// (auth/mechanisms/token/token_mechanism.h): server and client sessions driven
// directly against a real SecretManager over a memory store with a controlled
// clock; the replay cache; the TokenErrc → Errc mapping. Negotiation over real
// sockets is in token_itest.cc.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/auth/mechanisms/token/token_replay_cache.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/credentials_file.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "authrpc/security/token_errors.h"
#include "authrpc/server/token_service.h"
#include "tests/testing/test_support.h"
#include "tests/testing/session_driver.h"
#include "tests/testing/token_realm.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using security::ManualClock;
using security::Token;
using security::TokenErrc;
using security::token_status;
using security::TokenUse;

constexpr std::string_view kService = testing::kTokenRealmService;

using testing::Await;

// The token realm (tests/testing/token_realm.h) and a `token` server half of it.
struct Realm : testing::TokenRealm {
  std::shared_ptr<TokenServerMechanism> server;

  explicit Realm(TokenServerOptions options = {})
      : server(std::make_shared<TokenServerMechanism>(secrets, options)) {}
};

// The three kinds of channel the mechanism tells apart.
ChannelInfo Unix() {
  ChannelInfo c;
  c.scheme = Endpoint::Scheme::kUnix;
  return c;
}
ChannelInfo Tls(char binding) {
  ChannelInfo c;
  c.scheme = Endpoint::Scheme::kTls;
  c.tls = true;
  c.channel_binding = std::string(32, binding);
  return c;
}
ChannelInfo PlainTcp(std::string peer = "192.0.2.1:40000") {
  ChannelInfo c;
  c.scheme = Endpoint::Scheme::kTcp;
  c.peer_address = std::move(peer);
  return c;
}

using Outcome = testing::DrivenSession;

// Runs one session, challenges included, between the client half `client`
// and the server half `server`.
Outcome Authenticate(TokenClientMechanism& client, ServerMechanism& server,
                     ChannelInfo client_channel, const ChannelInfo& server_channel) {
  client_channel.server_uri = std::string(kService);
  return testing::DriveSession(client, server, client_channel, server_channel);
}

// The same with a client of its own for `token` (no tickets from earlier
// sessions), the server half `server` (default: realm.server) and the
// client's clock (default: the realm's).
Outcome Authenticate(Realm& realm, const Token& token, ChannelInfo client_channel,
                     ChannelInfo server_channel, TokenServerMechanism* server = nullptr,
                     std::shared_ptr<const security::Clock> client_clock = nullptr) {
  TokenClientOptions co;
  co.token = token;
  co.clock = client_clock ? client_clock : realm.clock;
  TokenClientMechanism client(co);
  Outcome out = Authenticate(client, server ? *server : *realm.server, std::move(client_channel),
                             server_channel);
  EXPECT_FALSE(out.challenged_last) << "the server challenged after the client's last message";
  return out;
}

Outcome Authenticate(Realm& realm, const Token& token, ChannelInfo channel = Unix()) {
  return Authenticate(realm, token, channel, channel);
}

// Feeds recorded client messages to a fresh server session, as an attacker
// who captured them would.
ServerStep Replay(TokenServerMechanism& server, const ChannelInfo& channel,
                  const std::vector<std::string>& sent) {
  auto ss = server.start(channel);
  ServerStep step = ServerStep::failure({Errc::kInternal, "nothing sent"});
  for (const auto& message : sent) {
    step = Await(ss->step(message));
    if (step.kind != ServerStep::Kind::kChallenge) break;
  }
  return step;
}

TokenServerOptions AllowPlaintext() {
  TokenServerOptions o;
  o.allow_plaintext = true;
  return o;
}

// Plaintext tcp with session tickets (off by default).
TokenServerOptions TicketsOn() {
  TokenServerOptions o = AllowPlaintext();
  o.session_tickets = 1 << 16;
  return o;
}

// Every transport authenticates mutually, with the exchange it is meant to
// use: one message over TLS and unix://, a challenge over plaintext tcp://
// (opted in).
TEST(TokenMechanism, AuthenticatesMutuallyOnEachTransport) {
  struct Case {
    const char* name;
    ChannelInfo channel;
    std::size_t client_messages;
  };
  for (const Case& c : {Case{"unix", Unix(), 1}, Case{"tls", Tls('a'), 1},
                        Case{"plaintext tcp, opted in", PlainTcp(), 2}}) {
    SCOPED_TRACE(c.name);
    Realm realm(AllowPlaintext());
    const Token token = realm.Issue("alice@R", "oozie@R");
    auto out = Authenticate(realm, token, c.channel);
    ASSERT_EQ(out.server.kind, ServerStep::Kind::kSuccess) << out.server.error.to_string();
    EXPECT_TRUE(out.client.ok()) << out.client.to_string();
    EXPECT_EQ(out.sent.size(), c.client_messages);
    EXPECT_EQ(out.server.identity.user, "alice@R");
    EXPECT_EQ(out.server.identity.realm, "R");
    EXPECT_EQ(out.server.identity.real_user, std::optional<std::string>("oozie@R"));
  }
}

// Each row spoils one thing; the server must refuse with the typed error, on
// both exchanges.
TEST(TokenMechanism, RefusesBadTokensWithTypedErrors) {
  std::vector<testing::RefusedToken> cases = testing::RefusedTokens();
  cases.push_back({"unknown key",
                   [](testing::TokenRealm&) {
                     testing::TokenRealm other;
                     for (int i = 0; i < 3; ++i) EXPECT_TRUE(other.secrets->roll_master_key().ok());
                     return other.Issue();
                   },
                   Errc::kUnavailable, "UNKNOWN_KEY"});
  for (const ChannelInfo& channel : {Unix(), PlainTcp()}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(std::string(c.name) + (channel.scheme == Endpoint::Scheme::kUnix ? " (unix)" : " (tcp)"));
      Realm realm(AllowPlaintext());
      const Token token = c.make(realm);
      auto out = Authenticate(realm, token, channel);
      ASSERT_EQ(out.server.kind, ServerStep::Kind::kFailure);
      EXPECT_EQ(out.server.error.code, make_error_code(c.code)) << out.server.error.to_string();
      EXPECT_NE(out.server.error.message.find(c.text), std::string::npos) << out.server.error.message;
      // The server keeps serving: a good token still works.
      auto good = Authenticate(realm, realm.Issue("bob@R"), channel);
      EXPECT_EQ(good.server.kind, ServerStep::Kind::kSuccess) << good.server.error.to_string();
    }
  }
}

TEST(TokenMechanism, RefusesTokensForAnotherService) {
  TokenServerOptions o = AllowPlaintext();
  o.services = {"tcp://db1:7000"};
  for (const ChannelInfo& channel : {Unix(), PlainTcp()}) {
    Realm realm(o);
    auto out = Authenticate(realm, realm.Issue(), channel);  // service kService
    ASSERT_EQ(out.server.kind, ServerStep::Kind::kFailure);
    EXPECT_EQ(out.server.error.code, make_error_code(Errc::kAuthenticationFailed));
    EXPECT_NE(out.server.error.message.find("WRONG_SERVICE"), std::string::npos);
  }
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

// A credentials file that cannot be read is a client without credentials,
// as the CLI reports it: UNAUTHENTICATED (fetch a token), not UNAVAILABLE.
TEST(TokenMechanism, ClientWithAnUnreadableCredentialsFileIsUnauthenticated) {
  const std::string dir = testing::TempDir("token-file");
  TokenClientOptions co;
  co.token_file = dir + "/missing";
  TokenClientMechanism client(co);
  ChannelInfo info;
  info.server_uri = std::string(kService);
  ClientStep step = Await(client.start(info)->initial());
  ASSERT_EQ(step.kind, ClientStep::Kind::kFailure);
  EXPECT_EQ(step.error.code, make_error_code(Errc::kUnauthenticated)) << step.error.to_string();
  EXPECT_EQ(step.error.message, "token: cannot read credentials file " + dir +
                                    "/missing: No such file or directory (authrpc token fetch stores a token there)");
  std::filesystem::remove_all(dir);
}

// The client keeps the tokens of its credentials file prepared between
// sessions; a changed file (another token for the service, or none) is
// read again before the next session.
TEST(TokenMechanism, ClientReadsItsCredentialsFileAgainWhenItChanges) {
  Realm realm;
  const std::string dir = testing::TempDir("token-file");
  const std::string path = dir + "/tokens";
  auto write = [&](std::vector<Token> tokens) {
    security::CredentialsFile file;
    for (auto& t : tokens) file.add(std::move(t));
    ASSERT_TRUE(file.write(path).ok());
  };
  TokenClientOptions co;
  co.token_file = path;
  co.clock = realm.clock;
  TokenClientMechanism client(co);
  auto session_as = [&]() -> std::string {
    ChannelInfo channel = Unix();
    channel.server_uri = std::string(kService);
    ClientStep hello = Await(client.start(channel)->initial());
    if (hello.kind != ClientStep::Kind::kSend) return "client: " + hello.error.to_string();
    ServerStep step = Await(realm.server->start(Unix())->step(hello.message));
    if (step.kind != ServerStep::Kind::kSuccess) return "server: " + step.error.to_string();
    return step.identity.user;
  };
  write({realm.Issue("alice@R")});
  EXPECT_EQ(session_as(), "alice@R");
  EXPECT_EQ(session_as(), "alice@R");
  write({realm.Issue("bob@R")});
  EXPECT_EQ(session_as(), "bob@R");
  Token elsewhere = realm.Issue("carol@R");
  elsewhere.service = "tcp://elsewhere:1";
  write({elsewhere});
  EXPECT_NE(session_as().find("NOT_FOUND"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// unix://: the in-process replay cache refuses a second use.
TEST(TokenMechanism, RefusesReplayedHelloOnUnix) {
  Realm realm;
  const Token token = realm.Issue();
  auto first = Authenticate(realm, token, Unix());
  ASSERT_EQ(first.server.kind, ServerStep::Kind::kSuccess) << first.server.error.to_string();
  ServerStep again = Replay(*realm.server, Unix(), first.sent);
  ASSERT_EQ(again.kind, ServerStep::Kind::kFailure);
  EXPECT_EQ(again.error.code, make_error_code(Errc::kAuthenticationFailed));
  EXPECT_NE(again.error.message.find("REPLAY"), std::string::npos);
  // A fresh HELLO with the same token is fine.
  EXPECT_EQ(Authenticate(realm, token).server.kind, ServerStep::Kind::kSuccess);
}

// A HELLO captured on one server (or before a restart)
// must not authenticate on another server sharing the token store. Each row
// captures a session on server A and replays it to server B (a second
// mechanism over the same secrets: a fleet member, or A after a restart,
// whose replay cache is empty).
TEST(TokenMechanism, CapturedExchangeDoesNotAuthenticateOnAnotherServer) {
  struct Case {
    const char* name;
    ChannelInfo captured_on;
    ChannelInfo replayed_on;
    Errc code;
    const char* text;
  };
  const Case cases[] = {
      // The bound proof covers A's connection's exporter; B's differs.
      {"tls", Tls('a'), Tls('b'), Errc::kAuthenticationFailed, "FORGED"},
      // The response covers A's server nonce; B sends another.
      {"plaintext tcp, opted in", PlainTcp(), PlainTcp(), Errc::kAuthenticationFailed, "FORGED"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Realm realm(AllowPlaintext());
    auto fleet_b = std::make_shared<TokenServerMechanism>(realm.secrets, AllowPlaintext());
    auto captured = Authenticate(realm, realm.Issue(), c.captured_on, c.captured_on);
    ASSERT_EQ(captured.server.kind, ServerStep::Kind::kSuccess) << captured.server.error.to_string();
    ServerStep replayed = Replay(*fleet_b, c.replayed_on, captured.sent);
    ASSERT_EQ(replayed.kind, ServerStep::Kind::kFailure);
    EXPECT_EQ(replayed.error.code, make_error_code(c.code)) << replayed.error.to_string();
    EXPECT_NE(replayed.error.message.find(c.text), std::string::npos) << replayed.error.message;
    // And on A itself, on another connection.
    EXPECT_EQ(Replay(*realm.server, c.replayed_on, captured.sent).kind, ServerStep::Kind::kFailure);
  }
  // A version 1 HELLO over plaintext tcp (what an older client sends, and
  // what an observer records) is refused even by a server that opted in.
  Realm realm(AllowPlaintext());
  const std::string v1 = token_wire::make_hello(realm.Issue(), "", realm.clock->now()).encode();
  ServerStep step = Replay(*realm.server, PlainTcp(), {v1});
  ASSERT_EQ(step.kind, ServerStep::Kind::kFailure);
  EXPECT_EQ(step.error.code, make_error_code(Errc::kFailedPrecondition)) << step.error.to_string();
  EXPECT_NE(step.error.message.find("CHALLENGE_REQUIRED"), std::string::npos);
}

// Plaintext tcp:// without the opt-in: refused before anything is decoded,
// with advice the client can act on (not retryable as it is).
TEST(TokenMechanism, RefusesPlaintextTcpUnlessTheServerOptsIn) {
  Realm realm;
  auto out = Authenticate(realm, realm.Issue(), PlainTcp());
  ASSERT_EQ(out.server.kind, ServerStep::Kind::kFailure);
  EXPECT_EQ(out.server.error.code, make_error_code(Errc::kFailedPrecondition));
  EXPECT_EQ(retry_advice(out.server.error.code), RetryAdvice::kGiveUp);
  for (const char* hint : {"PLAINTEXT", "tls://", "allow_plaintext"}) {
    EXPECT_NE(out.server.error.message.find(hint), std::string::npos) << out.server.error.message;
  }
  // A TLS channel whose exporter is missing is not treated as bound.
  ChannelInfo unbound_tls = Tls('x');
  unbound_tls.channel_binding.clear();
  EXPECT_EQ(Authenticate(realm, realm.Issue(), unbound_tls).server.error.code,
            make_error_code(Errc::kFailedPrecondition));
}

// Bound proofs never enter the replay cache: nothing there for a flood to
// fill, and nothing to lose at a restart.
TEST(TokenMechanism, BoundProofsSkipTheReplayCache) {
  Realm realm;
  for (char b = 'a'; b < 'e'; ++b) {
    EXPECT_EQ(Authenticate(realm, realm.Issue(), Tls(b)).server.kind, ServerStep::Kind::kSuccess);
  }
  EXPECT_EQ(realm.server->replay_cache().size(), 0u);
  EXPECT_EQ(Authenticate(realm, realm.Issue(), Unix()).server.kind, ServerStep::Kind::kSuccess);
  EXPECT_EQ(realm.server->replay_cache().size(), 1u);
}

TEST(TokenMechanism, RefusesHelloOutsideTheClockWindow) {
  for (auto offset : {-6min, 6min}) {
    Realm realm;
    auto client_clock = std::make_shared<ManualClock>(realm.clock->now() + offset);
    auto out = Authenticate(realm, realm.Issue(), Unix(), Unix(), nullptr, client_clock);
    ASSERT_EQ(out.server.kind, ServerStep::Kind::kFailure);
    EXPECT_NE(out.server.error.message.find("CLOCK_SKEW"), std::string::npos) << out.server.error.message;
  }
}

// The skew must not be computed as `time − now` in int64, undefined for a
// client time of INT64_MIN (a sanitizer build's server exits). Any client
// time is a typed CLOCK_SKEW, whichever side of the epoch the server's
// clock is (time − now overflows for INT64_MIN when now > 0, for INT64_MAX
// when now < 0).
TEST(TokenMechanism, ExtremeClientTimesAreClockSkewWithoutOverflow) {
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t server_now : {std::int64_t{1'700'000'000'000}, std::int64_t{-1'700'000'000'000}}) {
    for (std::int64_t client_time : {kMin, kMin + 1, kMax, kMax - 1}) {
      SCOPED_TRACE(std::to_string(server_now) + " vs " + std::to_string(client_time));
      Realm realm;
      const Token token = realm.Issue();
      realm.clock->set(security::TokenTime(std::chrono::milliseconds(server_now)));
      token_wire::Hello hello;
      hello.identifier = token.identifier;
      hello.service = token.service;
      hello.time_ms = client_time;
      hello.proof = token_wire::client_proof(token.password, hello, "");
      ServerStep step = Replay(*realm.server, Unix(), {hello.encode()});
      ASSERT_EQ(step.kind, ServerStep::Kind::kFailure);
      EXPECT_EQ(step.error.code, make_error_code(Errc::kAuthenticationFailed));
      EXPECT_NE(step.error.message.find("CLOCK_SKEW"), std::string::npos) << step.error.message;
    }
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
  for (const Case& c : {Case{std::numeric_limits<std::int64_t>::min(), "ms behind"},
                        Case{std::numeric_limits<std::int64_t>::max(), "ms ahead of"},
                        Case{std::numeric_limits<std::int64_t>::min() + 1, "ms behind"}}) {
    Realm realm;
    auto hello = token_wire::make_hello(realm.Issue(), "", realm.clock->now());
    hello.time_ms = c.time_ms;
    ServerStep step = Await(realm.server->start(Unix())->step(hello.encode()));
    ASSERT_EQ(step.kind, ServerStep::Kind::kFailure) << c.time_ms;
    EXPECT_NE(step.error.message.find("CLOCK_SKEW"), std::string::npos) << step.error.message;
    EXPECT_NE(step.error.message.find(c.says), std::string::npos) << step.error.message;
  }
}

// The proofs, recomputed here from docs/PROTOCOL.md's formulas with
// OpenSSL's one-shot HMAC() over a transcript built field by field: what
// both halves send must not depend on how they compute it (they take the
// transcript from the messages' bytes and keep the password prepared).
std::string be16(std::size_t n) { return {static_cast<char>(n >> 8), static_cast<char>(n & 0xff)}; }
std::string str16(std::string_view s) { return be16(s.size()) + std::string(s); }
std::string Hmac(const Token& token, std::string_view label, const std::string& data) {
  unsigned char mac[32];
  unsigned int len = 0;
  const std::string message = std::string(label) + data;
  HMAC(EVP_sha256(), token.password.data(), static_cast<int>(token.password.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}
constexpr std::string_view kClientLabel{"authrpc token client\0", 21};
constexpr std::string_view kServerLabel{"authrpc token server\0", 21};

TEST(TokenMechanism, ProofsFollowTheProtocolFormula) {
  // Version 1, without and with a channel binding.
  for (const ChannelInfo& channel : {Unix(), Tls('x')}) {
    Realm realm;
    const Token token = realm.Issue();
    auto out = Authenticate(realm, token, channel);
    ASSERT_EQ(out.server.kind, ServerStep::Kind::kSuccess) << out.server.error.to_string();
    auto hello = token_wire::Hello::decode(out.sent.at(0));
    ASSERT_TRUE(hello.has_value());
    std::string t = "\x01" + str16(token.identifier) + str16(token.service) +
                    std::string(reinterpret_cast<const char*>(hello->nonce.data()), 16);
    for (int shift = 56; shift >= 0; shift -= 8) {
      t.push_back(static_cast<char>((static_cast<std::uint64_t>(hello->time_ms) >> shift) & 0xff));
    }
    t += str16(channel.channel_binding);
    const std::string client = Hmac(token, kClientLabel, t);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(hello->proof.data()), 32), client);
    EXPECT_EQ(out.server.message, "\x01" + Hmac(token, kServerLabel, t + client));
  }
  // Version 2.
  Realm realm(TicketsOn());
  const Token token = realm.Issue();
  TokenClientOptions co;
  co.token = token;
  co.clock = realm.clock;
  co.tickets = false;
  TokenClientMechanism client(co);
  ChannelInfo channel = PlainTcp();
  channel.server_uri = std::string(kService);
  auto cs = client.start(channel);
  auto ss = realm.server->start(PlainTcp());
  ClientStep hello = Await(cs->initial());
  ServerStep challenge = Await(ss->step(hello.message));
  ASSERT_EQ(challenge.kind, ServerStep::Kind::kChallenge) << challenge.error.to_string();
  ClientStep response = Await(cs->challenge(challenge.message));
  ServerStep done = Await(ss->step(response.message));
  ASSERT_EQ(done.kind, ServerStep::Kind::kSuccess) << done.error.to_string();
  auto h2 = token_wire::ChallengeHello::decode(hello.message);
  ASSERT_TRUE(h2.has_value());
  const std::string t2 = "\x02" + str16(token.identifier) + str16(token.service) +
                         std::string(reinterpret_cast<const char*>(h2->client_nonce.data()), 16) +
                         challenge.message.substr(1) + str16("");
  const std::string client_proof = Hmac(token, kClientLabel, t2);
  EXPECT_EQ(response.message, "\x02" + client_proof);
  EXPECT_EQ(done.message, "\x02" + Hmac(token, kServerLabel, t2 + client_proof));
  EXPECT_TRUE(Await(cs->complete(done.message)).ok());

  // Version 3, challenged (no ticket yet): T3 = the whole HELLO || server
  // nonce || str16(cb); AUTH_SUCCESS brings a ticket.
  co.tickets = true;
  TokenClientMechanism ticketed(co);
  cs = ticketed.start(channel);
  ss = realm.server->start(PlainTcp());
  hello = Await(cs->initial());
  EXPECT_EQ(hello.message, "\x03" + str16(token.identifier) + str16(token.service) +
                               hello.message.substr(hello.message.size() - 17, 16) + std::string(1, '\0'));
  challenge = Await(ss->step(hello.message));
  ASSERT_EQ(challenge.kind, ServerStep::Kind::kChallenge) << challenge.error.to_string();
  ASSERT_EQ(challenge.message.size(), 17u);
  EXPECT_EQ(challenge.message[0], '\x03');
  response = Await(cs->challenge(challenge.message));
  done = Await(ss->step(response.message));
  ASSERT_EQ(done.kind, ServerStep::Kind::kSuccess) << done.error.to_string();
  const std::string t3c = hello.message + challenge.message.substr(1) + str16("");
  const std::string proof3c = Hmac(token, kClientLabel, t3c);
  EXPECT_EQ(response.message, "\x03" + proof3c);
  const std::string lifetime("\x00\x01\xd4\xc0", 4);  // 120,000 ms
  ASSERT_EQ(done.message.size(), 1 + 32 + 4 + 1 + 32u);
  EXPECT_EQ(done.message.substr(0, 1 + 32 + 4 + 1),
            "\x03" + Hmac(token, kServerLabel, t3c + proof3c) + lifetime + "\x20");
  EXPECT_TRUE(Await(cs->complete(done.message)).ok());
  const std::string ticket = done.message.substr(1 + 32 + 4 + 1);

  // Version 3 with that ticket: T3 = the HELLO up to its proof || str16(cb).
  cs = ticketed.start(channel);
  ss = realm.server->start(PlainTcp());
  hello = Await(cs->initial());
  ASSERT_TRUE(hello.final);
  const std::string t3 = hello.message.substr(0, hello.message.size() - 32);
  EXPECT_EQ(t3.substr(t3.size() - 33), "\x20" + ticket);
  EXPECT_EQ(hello.message.substr(t3.size()), Hmac(token, kClientLabel, t3 + str16("")));
  done = Await(ss->step(hello.message));
  ASSERT_EQ(done.kind, ServerStep::Kind::kSuccess) << done.error.to_string();
  EXPECT_EQ(done.message.substr(0, 33),
            "\x03" + Hmac(token, kServerLabel, t3 + str16("") + hello.message.substr(t3.size())));
  EXPECT_TRUE(Await(cs->complete(done.message)).ok());
}

TEST(TokenMechanism, ProofsAreBoundToTheChannel) {
  Realm realm;
  EXPECT_EQ(Authenticate(realm, realm.Issue(), Tls('a'), Tls('a')).server.kind, ServerStep::Kind::kSuccess);
  auto out = Authenticate(realm, realm.Issue(), Tls('a'), Tls('b'));
  ASSERT_EQ(out.server.kind, ServerStep::Kind::kFailure);
  EXPECT_NE(out.server.error.message.find("FORGED"), std::string::npos);
}

TEST(TokenMechanism, ClientRefusesAServerThatCannotProveItKnowsThePassword) {
  Realm realm(AllowPlaintext());
  const Token token = realm.Issue();
  struct Case {
    const char* name;
    ChannelInfo info;
    bool tickets;
    std::uint8_t version;  // what the client speaks
  };
  for (Case c : {Case{"unix", Unix(), true, token_wire::kVersion},
                 Case{"tcp, version 2", PlainTcp(), false, token_wire::kChallengeVersion},
                 Case{"tcp, version 3", PlainTcp(), true, token_wire::kTicketVersion}}) {
    SCOPED_TRACE(c.name);
    TokenClientOptions co;
    co.token = token;
    co.clock = realm.clock;
    co.tickets = c.tickets;
    c.info.server_uri = std::string(kService);
    token_wire::TicketSuccess unproved;
    unproved.lifetime_ms = 1000;
    unproved.ticket = std::string(TokenTickets::kBytes, 't');
    for (std::uint8_t version :
         {token_wire::kVersion, token_wire::kChallengeVersion, token_wire::kTicketVersion}) {
      for (std::string final_token : {std::string(), std::string(33, static_cast<char>(version)),
                                      std::string(1, static_cast<char>(version)), unproved.encode()}) {
        auto session = TokenClientMechanism(co).start(c.info);
        (void)Await(session->initial());
        Status s = Await(session->complete(final_token));
        EXPECT_EQ(s.code, make_error_code(Errc::kAuthenticationFailed));
      }
    }
    // After a real challenge, a server proof for another challenge is refused.
    auto session = TokenClientMechanism(co).start(c.info);
    (void)Await(session->initial());
    if (c.version != token_wire::kVersion) {
      token_wire::Challenge challenge;
      challenge.server_nonce.fill(7);
      challenge.version = c.version;
      ClientStep response = Await(session->challenge(challenge.encode()));
      ASSERT_EQ(response.kind, ClientStep::Kind::kSend);
      EXPECT_TRUE(response.final);
      const std::string wrong = c.version == token_wire::kTicketVersion
                                    ? unproved.encode()
                                    : token_wire::encode_success({}, token_wire::kChallengeVersion);
      EXPECT_EQ(Await(session->complete(wrong)).code, make_error_code(Errc::kAuthenticationFailed));
    } else {
      // The one-message client takes no challenge.
      EXPECT_EQ(Await(session->challenge(token_wire::Challenge{}.encode())).error.code,
                make_error_code(Errc::kProtocolError));
    }
  }
}

TEST(TokenMechanism, ClientRefusesMalformedChallenges) {
  Realm realm;
  TokenClientOptions co;
  co.token = realm.Issue();
  co.clock = realm.clock;
  ChannelInfo info = PlainTcp();
  info.server_uri = std::string(kService);
  // Version 2 (a client without tickets) and version 3: a challenge of the
  // other version is malformed too.
  for (bool tickets : {false, true}) {
    SCOPED_TRACE(tickets ? "version 3" : "version 2");
    co.tickets = tickets;
    const std::uint8_t version = tickets ? token_wire::kTicketVersion : token_wire::kChallengeVersion;
    const std::string good = token_wire::Challenge{{}, version}.encode();
    const char other = static_cast<char>(tickets ? token_wire::kChallengeVersion : token_wire::kTicketVersion);
    for (std::string bad : {std::string(), good.substr(0, good.size() - 1), good + "x",
                            std::string(1, '\x01') + good.substr(1), std::string(1, other) + good.substr(1)}) {
      auto session = TokenClientMechanism(co).start(info);
      ASSERT_EQ(Await(session->initial()).kind, ClientStep::Kind::kSend);
      ClientStep step = Await(session->challenge(bad));
      ASSERT_EQ(step.kind, ClientStep::Kind::kFailure);
      EXPECT_EQ(step.error.code, make_error_code(Errc::kProtocolError));
    }
  }
}

TEST(TokenMechanism, RefusesMalformedMessages) {
  Realm realm(AllowPlaintext());
  const Token token = realm.Issue();
  const std::string v1 = token_wire::make_hello(token, "", realm.clock->now()).encode();
  token_wire::ChallengeHello h2{token.identifier, token.service, {}};
  const std::string v2 = h2.encode();
  struct Case {
    ChannelInfo channel;
    std::string good;
  };
  for (const Case& c : {Case{Unix(), v1}, Case{PlainTcp(), v2}, Case{Unix(), v2}}) {
    for (std::string bad : {std::string(), c.good.substr(0, c.good.size() - 1), c.good + "x",
                            std::string(1, '\x03') + c.good.substr(1), std::string(1, '\x00') + c.good.substr(1)}) {
      ServerStep step = Replay(*realm.server, c.channel, {bad});
      ASSERT_EQ(step.kind, ServerStep::Kind::kFailure);
      EXPECT_EQ(step.error.code, make_error_code(Errc::kAuthenticationFailed)) << step.error.to_string();
      EXPECT_NE(step.error.message.find("MALFORMED"), std::string::npos);
    }
  }
  // The second half: a malformed AUTH_RESPONSE after a real challenge.
  for (std::string bad : {std::string(), std::string(33, '\x01'), std::string(32, '\x02'),
                          std::string(34, '\x02')}) {
    auto ss = realm.server->start(PlainTcp());
    ASSERT_EQ(Await(ss->step(v2)).kind, ServerStep::Kind::kChallenge);
    ServerStep step = Await(ss->step(bad));
    ASSERT_EQ(step.kind, ServerStep::Kind::kFailure);
    EXPECT_EQ(step.error.code, make_error_code(Errc::kAuthenticationFailed));
  }
  ASSERT_TRUE(token_wire::Hello::decode(v1).has_value());
  EXPECT_EQ(token_wire::Hello::decode(v1)->encode(), v1);
  ASSERT_TRUE(token_wire::ChallengeHello::decode(v2).has_value());
  EXPECT_EQ(token_wire::ChallengeHello::decode(v2)->encode(), v2);
  EXPECT_FALSE(token_wire::Hello::decode(v2).has_value());
  EXPECT_FALSE(token_wire::ChallengeHello::decode(v1).has_value());
}

// One token stamping HELLOs ~now + 290 s must not fill the cache and raise
// a floor that locks every other token out: only the flooding token pays.
TEST(TokenMechanism, OneTokenFloodingTheReplayCacheLocksOutOnlyItself) {
  TokenServerOptions o;
  o.replay_cache_capacity = 256;
  o.replay_cache_per_token = 32;
  Realm realm(o);
  const Token flooder = realm.Issue("mallory@R");
  const Token honest = realm.Issue("alice@R");
  auto future = std::make_shared<ManualClock>(realm.clock->now() + 290s);
  for (int i = 0; i < 1000; ++i) {
    future->advance(1ms);
    auto out = Authenticate(realm, flooder, Unix(), Unix(), nullptr, future);
    ASSERT_NE(out.server.kind, ServerStep::Kind::kFailure) << i << ": " << out.server.error.to_string();
  }
  EXPECT_LE(realm.server->replay_cache().size(), 32u);
  // Everyone else is served.
  auto fresh = Authenticate(realm, honest);
  EXPECT_EQ(fresh.server.kind, ServerStep::Kind::kSuccess) << fresh.server.error.to_string();
  // The flooder's own HELLO stamped now is below its floor.
  auto own = Authenticate(realm, flooder);
  ASSERT_EQ(own.server.kind, ServerStep::Kind::kFailure);
  EXPECT_EQ(own.server.error.code, make_error_code(Errc::kUnavailable));
  EXPECT_NE(own.server.error.message.find("REPLAY_WINDOW"), std::string::npos);
}

TEST(TokenReplayCache, BoundedPerTokenWithARisingFloor) {
  TokenReplayCache cache(/*skew_ms=*/1000, /*capacity=*/100, /*per_token=*/3);
  using V = TokenReplayCache::Verdict;
  const std::int64_t now = 10'000;
  EXPECT_EQ(cache.check_and_insert(now, 9'500, 1, "a"), V::kFresh);
  EXPECT_EQ(cache.check_and_insert(now, 9'500, 1, "a"), V::kReplay);
  EXPECT_EQ(cache.check_and_insert(now, 9'600, 1, "b"), V::kFresh);
  EXPECT_EQ(cache.check_and_insert(now, 9'700, 1, "c"), V::kFresh);
  EXPECT_EQ(cache.check_and_insert(now, 9'800, 1, "d"), V::kFresh);  // evicts 9'500
  EXPECT_EQ(cache.size(1), 3u);
  EXPECT_EQ(cache.floor_ms(1), 9'500);
  EXPECT_EQ(cache.check_and_insert(now, 9'500, 1, "a"), V::kTooOld);  // would be a replay
  // Another token is not held to token 1's floor.
  EXPECT_EQ(cache.floor_ms(2), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(cache.check_and_insert(now, 9'400, 2, "z"), V::kFresh);
  // Entries older than now - skew go by themselves, and their tokens with them.
  EXPECT_EQ(cache.check_and_insert(now + 1'000, 10'900, 3, "e"), V::kFresh);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.floor_ms(1), std::numeric_limits<std::int64_t>::min());
}

// A table: tokens and how many HELLOs each sends (stamped from `start`, one
// ms apart); afterwards a fresh HELLO of `probe` stamped at `now` must get
// `expect`.
TEST(TokenReplayCache, FloodsChargeTheFlooder) {
  using V = TokenReplayCache::Verdict;
  struct Case {
    const char* name;
    std::size_t capacity, per_token;
    std::vector<std::pair<std::uint64_t, int>> floods;  // token, HELLOs stamped now + 290 s on
    std::uint64_t probe;
    V expect;
  };
  const std::vector<Case> cases = {
      {"one flooder, quota", 1000, 10, {{1, 5000}}, 2, V::kFresh},
      {"the flooder itself", 1000, 10, {{1, 5000}}, 1, V::kTooOld},
      {"one flooder, no quota to speak of", 100, 1000, {{1, 5000}}, 2, V::kFresh},
      {"many flooders fill the cache", 100, 10, {{1, 500}, {2, 500}, {3, 500}, {4, 500}, {5, 500},
                                                 {6, 500}, {7, 500}, {8, 500}, {9, 500}, {10, 500},
                                                 {11, 500}, {12, 500}}, 99, V::kFresh},
  };
  const std::int64_t now = 1'000'000;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TokenReplayCache cache(300'000, c.capacity, c.per_token);
    int n = 0;
    for (const auto& [token, hellos] : c.floods) {
      for (int i = 0; i < hellos; ++i) {
        const std::string proof = std::to_string(++n);
        (void)cache.check_and_insert(now, now + 290'000 + n, token, proof);
      }
    }
    EXPECT_LE(cache.size(), c.capacity);
    EXPECT_EQ(cache.check_and_insert(now, now, c.probe, "probe"), c.expect);
  }
}

// Distinct tokens with one entry each beyond capacity: their floors pile
// up, and past capacity the lowest becomes everyone's floor (memory stays
// bounded; an honest HELLO stamped now still passes).
TEST(TokenReplayCache, ManyTokensKeepMemoryBounded) {
  using V = TokenReplayCache::Verdict;
  TokenReplayCache cache(1000, 4, 4);
  const std::int64_t now = 10'000;
  for (std::uint64_t t = 1; t <= 20; ++t) {
    EXPECT_EQ(cache.check_and_insert(now, 9'000 + static_cast<std::int64_t>(t), t, std::to_string(t)), V::kFresh);
  }
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_GT(cache.floor_ms(), 9'000);
  EXPECT_LT(cache.floor_ms(), now);
  EXPECT_EQ(cache.check_and_insert(now, now, 99, "now"), V::kFresh);
}

// The cache reuses the nodes of entries that leave (expired or evicted) for
// the next ones. After many such turns, every HELLO of the clock window it
// accepted is still refused: as a replay if it is held, as too old if it
// was evicted.
TEST(TokenReplayCache, RecycledEntriesStillRefuseReplays) {
  using V = TokenReplayCache::Verdict;
  constexpr std::size_t kPerToken = 16;
  TokenReplayCache cache(/*skew_ms=*/100, /*capacity=*/40, kPerToken);
  std::int64_t now = 1'000;
  std::vector<std::tuple<std::int64_t, std::uint64_t, std::string>> accepted;
  for (int i = 0; i < 2000; ++i) {
    if (i % 7 == 0) ++now;  // entries expire as the clock moves
    const std::uint64_t token = static_cast<std::uint64_t>(i % 3);
    const std::string proof = "proof-" + std::to_string(i);
    ASSERT_EQ(cache.check_and_insert(now, now, token, proof), V::kFresh) << i;
    accepted.emplace_back(now, token, proof);
  }
  EXPECT_LE(cache.size(), 40u);
  std::size_t replays = 0;
  for (const auto& [time, token, proof] : accepted) {
    // Older HELLOs never reach the cache: the clock window refuses them.
    if (time < now - 100) continue;
    const V v = cache.check_and_insert(now, time, token, proof);
    EXPECT_NE(v, V::kFresh) << "accepted twice: " << proof;
    replays += v == V::kReplay;
  }
  EXPECT_EQ(replays, cache.size()) << "every entry held is a replay";
  EXPECT_EQ(cache.check_and_insert(now, now + 1, 0, "new"), V::kFresh);
}

TEST(TokenReplayCache, ExtremeTimesAreSafe) {
  using V = TokenReplayCache::Verdict;
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  TokenReplayCache cache(std::numeric_limits<std::int64_t>::max(), 2, 1);
  for (std::int64_t now : {kMin, kMax, std::int64_t{0}}) {
    for (std::int64_t t : {kMin + 1, kMax, std::int64_t{0}}) {
      const V v = cache.check_and_insert(now, t, 1, std::to_string(now) + std::to_string(t));
      EXPECT_TRUE(v == V::kFresh || v == V::kTooOld);
    }
  }
  EXPECT_LE(cache.size(), 2u);
}

// --- session tickets (version 3, plaintext tcp://) ---------------------------

// The issuer alone: each ticket once, only this issuer's, only for its
// token and the client address it was issued to, only before it expires,
// only while in the window; any bytes and settings safe.
TEST(TokenTickets, EachTicketOnceFromThisIssuerOnly) {
  constexpr std::int64_t kNow = 1'700'000'000'000;
  constexpr std::string_view kHost = "192.0.2.1";
  TokenTickets tickets(128, 60s);
  auto bytes = [](const TokenTickets::Ticket& t) {
    return std::string(reinterpret_cast<const char*>(t.data()), t.size());
  };
  auto ticket = tickets.issue(7, kHost, kNow);
  ASSERT_TRUE(ticket);
  std::uint64_t counter = 0;
  ASSERT_EQ(tickets.check(bytes(*ticket), 7, kHost, kNow, &counter), TokenTickets::Verdict::kValid);
  // Checking spends nothing; redeeming does, once.
  ASSERT_EQ(tickets.check(bytes(*ticket), 7, kHost, kNow, &counter), TokenTickets::Verdict::kValid);
  EXPECT_TRUE(tickets.redeem(counter));
  EXPECT_FALSE(tickets.redeem(counter));
  EXPECT_FALSE(tickets.redeem(counter + 1)) << "not issued yet";

  struct Case {
    const char* name;
    std::string ticket;
    std::uint64_t token;
    std::string_view host;
    std::int64_t now;
    TokenTickets::Verdict verdict;
  };
  TokenTickets other(128, 60s);  // another server of the fleet, or this one restarted
  const std::string fresh = bytes(*tickets.issue(7, kHost, kNow));
  std::vector<Case> cases = {
      {"fresh", fresh, 7, kHost, kNow, TokenTickets::Verdict::kValid},
      {"another issuer's", bytes(*other.issue(7, kHost, kNow)), 7, kHost, kNow,
       TokenTickets::Verdict::kForeign},
      {"another token's", fresh, 8, kHost, kNow, TokenTickets::Verdict::kForeign},
      {"from another address", fresh, 7, "192.0.2.2", kNow, TokenTickets::Verdict::kForeign},
      {"at its expiry", fresh, 7, kHost, kNow + 60'000, TokenTickets::Verdict::kExpired},
      {"empty", "", 7, kHost, kNow, TokenTickets::Verdict::kForeign},
      {"short", fresh.substr(1), 7, kHost, kNow, TokenTickets::Verdict::kForeign},
      {"long", fresh + "x", 7, kHost, kNow, TokenTickets::Verdict::kForeign},
  };
  for (std::size_t i = 0; i < fresh.size(); ++i) {  // counter, expiry, tag
    std::string tampered = fresh;
    tampered[i] = static_cast<char>(tampered[i] ^ 0x01);
    cases.push_back({"tampered", tampered, 7, kHost, kNow, TokenTickets::Verdict::kForeign});
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::uint64_t ignored = 0;
    EXPECT_EQ(tickets.check(c.ticket, c.token, c.host, c.now, &ignored), c.verdict);
  }

  // A ticket more than `window` issues old is refused like a spent one:
  // the window is all the memory there is.
  const std::string oldest = bytes(*tickets.issue(7, kHost, kNow));
  ASSERT_EQ(tickets.check(oldest, 7, kHost, kNow, &counter), TokenTickets::Verdict::kValid);
  for (std::size_t i = 0; i < tickets.window(); ++i) tickets.issue(7, kHost, kNow);
  EXPECT_FALSE(tickets.redeem(counter));
  // Disabled: none issued, none accepted.
  TokenTickets none(0, 60s);
  EXPECT_FALSE(none.enabled());
  EXPECT_FALSE(none.issue(7, kHost, kNow));
  EXPECT_EQ(none.check(fresh, 7, kHost, kNow, &counter), TokenTickets::Verdict::kForeign);
  // Out-of-range settings are clamped, never undefined behaviour.
  TokenTickets extreme(std::numeric_limits<std::size_t>::max(), std::chrono::milliseconds(-5));
  EXPECT_EQ(extreme.window(), TokenTickets::kMaxWindow);
  EXPECT_EQ(extreme.lifetime(), std::chrono::milliseconds(1));
  TokenTickets one(1, std::chrono::hours(24 * 365));
  EXPECT_EQ(one.window(), 64u);
  EXPECT_EQ(one.lifetime(), TokenTickets::kMaxLifetime);
  auto late = one.issue(7, kHost, std::numeric_limits<std::int64_t>::max() - 1);
  ASSERT_TRUE(late);
  EXPECT_EQ(one.check(bytes(*late), 7, kHost, std::numeric_limits<std::int64_t>::max() - 1, &counter),
            TokenTickets::Verdict::kValid);
}

// A client's sessions to one endpoint, each after the one before: the first
// is challenged and brings a ticket; with it the next is one message each
// way. Each row changes something between the two; a ticket the server
// cannot take is answered with the challenge, never a failure.
TEST(TokenMechanism, SessionTicketsSaveTheChallengeAndFallBackToIt) {
  struct Case {
    const char* name;
    std::function<void(Realm&, security::ManualClock& client_clock)> between;
    bool second_server = false;  // another server of the fleet (or a restart)
    std::size_t session_tickets = 1 << 16;
    std::size_t second_messages;  // what the client sends in the second session
    bool challenged_last;         // its ticket HELLO was challenged
    const char* first_peer = "192.0.2.1:40000";  // the client's address, as the server sees it
    const char* second_peer = "192.0.2.1:40000";
  };
  const auto lifetime = TokenServerOptions{}.session_ticket_lifetime;
  const Case cases[] = {
      {"a fresh ticket", {}, false, 1 << 16, 1, false},
      {"another server's ticket", {}, true, 1 << 16, 2, true},
      {"expired on the server's clock only",
       [&](Realm& realm, security::ManualClock&) { realm.clock->advance(lifetime); }, false,
       1 << 16, 2, true},
      {"expired on the client's clock: not sent",
       [&](Realm& realm, security::ManualClock& client) {
         realm.clock->advance(lifetime);
         client.advance(lifetime);
       },
       false, 1 << 16, 2, false},
      {"a server that issues none", {}, false, 0, 2, false},
      {"the same host, another port", {}, false, 1 << 16, 1, false, "192.0.2.1:40000",
       "192.0.2.1:41234"},
      {"another client address", {}, false, 1 << 16, 2, true, "192.0.2.1:40000", "192.0.2.7:40000"},
      {"IPv6", {}, false, 1 << 16, 1, false, "[2001:db8::1]:40000", "[2001:db8::1]:40001"},
      {"another IPv6 address", {}, false, 1 << 16, 2, true, "[2001:db8::1]:40000",
       "[2001:db8::2]:40000"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TokenServerOptions o = AllowPlaintext();
    o.session_tickets = c.session_tickets;
    Realm realm(o);
    auto fleet_b = std::make_shared<TokenServerMechanism>(realm.secrets, o);
    auto client_clock = std::make_shared<security::ManualClock>(realm.clock->now());
    TokenClientOptions co;
    co.token = realm.Issue();
    co.clock = client_clock;
    co.tickets = true;
    TokenClientMechanism client(co);

    auto first = Authenticate(client, *realm.server, PlainTcp(), PlainTcp(c.first_peer));
    ASSERT_EQ(first.server.kind, ServerStep::Kind::kSuccess) << first.server.error.to_string();
    ASSERT_TRUE(first.client.ok()) << first.client.to_string();
    ASSERT_EQ(first.sent.size(), 2u);
    EXPECT_EQ(first.sent[0][0], static_cast<char>(token_wire::kTicketVersion));
    auto success = token_wire::TicketSuccess::decode(first.server.message);
    ASSERT_TRUE(success);
    EXPECT_EQ(success->ticket.size(), c.session_tickets > 0 ? TokenTickets::kBytes : 0u);

    if (c.between) c.between(realm, *client_clock);
    auto second = Authenticate(client, c.second_server ? *fleet_b : *realm.server, PlainTcp(),
                               PlainTcp(c.second_peer));
    ASSERT_EQ(second.server.kind, ServerStep::Kind::kSuccess) << second.server.error.to_string();
    EXPECT_TRUE(second.client.ok()) << second.client.to_string();
    EXPECT_EQ(second.sent.size(), c.second_messages);
    EXPECT_EQ(second.challenged_last, c.challenged_last);
    EXPECT_EQ(second.server.identity.user, "alice@R");
    // Every success brings the next ticket: the third session is one
    // message each way (where the server issues tickets).
    auto third = Authenticate(client, c.second_server ? *fleet_b : *realm.server, PlainTcp(),
                              PlainTcp(c.second_peer));
    ASSERT_EQ(third.server.kind, ServerStep::Kind::kSuccess) << third.server.error.to_string();
    EXPECT_EQ(third.sent.size(), c.session_tickets > 0 ? 1u : 2u);
  }
}

// A client of the realm's token over plaintext tcp whose first session
// (challenged) has brought it a ticket.
std::unique_ptr<TokenClientMechanism> ClientWithATicket(Realm& realm) {
  TokenClientOptions co;
  co.token = realm.Issue();
  co.clock = realm.clock;
  co.tickets = true;
  auto client = std::make_unique<TokenClientMechanism>(co);
  auto first = Authenticate(*client, *realm.server, PlainTcp(), PlainTcp());
  EXPECT_EQ(first.server.kind, ServerStep::Kind::kSuccess) << first.server.error.to_string();
  return client;
}

// What a passive observer records of a ticket session, played again: to
// the same server (the ticket is spent), to another server (not its
// ticket), altered (not a ticket at all) — each is challenged, which the
// observer cannot answer; and a HELLO with a good ticket but a wrong proof
// is FORGED without spending the ticket.
TEST(TokenMechanism, RecordedTicketHellosDoNotAuthenticateAgain) {
  Realm realm(TicketsOn());
  auto fleet_b = std::make_shared<TokenServerMechanism>(realm.secrets, TicketsOn());
  auto owned = ClientWithATicket(realm);
  TokenClientMechanism& client = *owned;
  auto ticketed = Authenticate(client, *realm.server, PlainTcp(), PlainTcp());
  ASSERT_EQ(ticketed.server.kind, ServerStep::Kind::kSuccess) << ticketed.server.error.to_string();
  ASSERT_EQ(ticketed.sent.size(), 1u);
  const std::string hello = ticketed.sent[0];
  auto view = token_wire::TicketHelloView::decode(hello);
  ASSERT_TRUE(view);
  ASSERT_EQ(view->ticket.size(), TokenTickets::kBytes);
  std::string altered = hello;
  altered[view->ticket.data() - hello.data()] ^= 0x01;

  struct Case {
    const char* name;
    TokenServerMechanism* server;
    std::string hello;
  };
  for (const Case& c : {Case{"to the same server", realm.server.get(), hello},
                        Case{"to another server", fleet_b.get(), hello},
                        Case{"with its ticket altered", realm.server.get(), altered}}) {
    SCOPED_TRACE(c.name);
    ServerStep step = Replay(*c.server, PlainTcp(), {c.hello});
    EXPECT_EQ(step.kind, ServerStep::Kind::kChallenge) << step.error.to_string();
  }

  // A good ticket under a wrong proof: FORGED, and the ticket stays good.
  ChannelInfo info = PlainTcp();
  info.server_uri = std::string(kService);
  auto session = client.start(info);
  ClientStep step = Await(session->initial());
  ASSERT_EQ(step.kind, ClientStep::Kind::kSend);
  ASSERT_TRUE(step.final) << "a ticket HELLO is the client's last message";
  std::string forged = step.message;
  forged.back() ^= 0x01;
  ServerStep refused = Replay(*realm.server, PlainTcp(), {forged});
  ASSERT_EQ(refused.kind, ServerStep::Kind::kFailure);
  EXPECT_EQ(refused.error.code, make_error_code(Errc::kAuthenticationFailed));
  EXPECT_NE(refused.error.message.find("FORGED"), std::string::npos) << refused.error.message;
  ServerStep good = Replay(*realm.server, PlainTcp(), {step.message});
  ASSERT_EQ(good.kind, ServerStep::Kind::kSuccess) << good.error.to_string();
  EXPECT_TRUE(Await(session->complete(good.message)).ok());
}

// A ticket HELLO that never reached its issuer A (the client's next
// connection to the address went to B, which challenged it) is not spent
// at A: played there from another address it is challenged (the ticket is
// bound to the client's address as A saw it); from the client's own
// address A takes it — the limit docs/TOKENS.md states, which is why
// session tickets are off by default and never for servers behind a proxy
// that hides client addresses. The client sends no more tickets to that
// address once one was challenged.
TEST(TokenMechanism, ATicketHelloThatMissedItsIssuerIsBoundToTheClientAddress) {
  Realm realm(TicketsOn());
  TokenServerOptions no_tickets = AllowPlaintext();
  auto fleet_b = std::make_shared<TokenServerMechanism>(realm.secrets, no_tickets);
  auto client = ClientWithATicket(realm);
  // Two sessions at once: the client ends with two of A's tickets.
  ChannelInfo info = PlainTcp();
  info.server_uri = std::string(kService);
  auto with_ticket = client->start(info);
  auto without = client->start(info);
  ClientStep hello1 = Await(with_ticket->initial());
  ClientStep hello2 = Await(without->initial());
  ASSERT_TRUE(hello1.final);
  ASSERT_FALSE(hello2.final);
  ServerStep done1 = Await(realm.server->start(PlainTcp())->step(hello1.message));
  ASSERT_EQ(done1.kind, ServerStep::Kind::kSuccess) << done1.error.to_string();
  ASSERT_TRUE(Await(with_ticket->complete(done1.message)).ok());
  auto server2 = realm.server->start(PlainTcp());
  ServerStep challenge = Await(server2->step(hello2.message));
  ASSERT_EQ(challenge.kind, ServerStep::Kind::kChallenge);
  ServerStep done2 = Await(server2->step(Await(without->challenge(challenge.message)).message));
  ASSERT_EQ(done2.kind, ServerStep::Kind::kSuccess) << done2.error.to_string();
  ASSERT_TRUE(Await(without->complete(done2.message)).ok());

  // The next connection goes to B, which challenges A's ticket (and
  // issues none).
  auto missed = Authenticate(*client, *fleet_b, PlainTcp(), PlainTcp());
  ASSERT_EQ(missed.server.kind, ServerStep::Kind::kSuccess) << missed.server.error.to_string();
  ASSERT_TRUE(missed.challenged_last);
  const std::string hello = missed.sent[0];
  // Played to A by an observer elsewhere: challenged.
  EXPECT_EQ(Replay(*realm.server, PlainTcp("192.0.2.99:50000"), {hello}).kind,
            ServerStep::Kind::kChallenge);
  // The client dropped A's other ticket: its next HELLO carries none.
  auto next = Authenticate(*client, *realm.server, PlainTcp(), PlainTcp());
  ASSERT_EQ(next.server.kind, ServerStep::Kind::kSuccess) << next.server.error.to_string();
  EXPECT_EQ(next.sent.size(), 2u);
  EXPECT_FALSE(next.challenged_last);
  // The documented limit: from the client's own address, A takes it.
  EXPECT_EQ(Replay(*realm.server, PlainTcp(), {hello}).kind, ServerStep::Kind::kSuccess);
}

// A session that sent a ticket and did not end in a checked AUTH_SUCCESS
// (refused, broken: here, abandoned after its HELLO) may have left the
// ticket unspent at its issuer: the client sends none of the endpoint's
// other tickets after it. And a server that does not know the client's
// address takes and issues none.
TEST(TokenMechanism, AFailedTicketSessionDropsTheEndpointsTickets) {
  Realm realm(TicketsOn());
  auto client = ClientWithATicket(realm);
  ChannelInfo info = PlainTcp();
  info.server_uri = std::string(kService);
  {
    auto abandoned = client->start(info);
    ASSERT_TRUE(Await(abandoned->initial()).final) << "no ticket was sent";
  }
  auto next = Authenticate(*client, *realm.server, PlainTcp(), PlainTcp());
  ASSERT_EQ(next.server.kind, ServerStep::Kind::kSuccess) << next.server.error.to_string();
  EXPECT_EQ(next.sent.size(), 2u);
  EXPECT_FALSE(next.challenged_last);

  auto no_address = Authenticate(*client, *realm.server, PlainTcp(), PlainTcp(""));
  ASSERT_EQ(no_address.server.kind, ServerStep::Kind::kSuccess);
  EXPECT_TRUE(no_address.challenged_last) << "a ticket was taken without a client address";
  auto success = token_wire::TicketSuccess::decode(no_address.server.message);
  ASSERT_TRUE(success);
  EXPECT_TRUE(success->ticket.empty()) << "a ticket was issued without a client address";
}

// Old and new ends: a client without tickets speaks version 2, which every
// server with the challenge accepts (servers older than version 3 refuse
// its HELLO: docs/TOKENS.md "Session tickets"); its AUTH_SUCCESS is
// version 2's, and it keeps no ticket.
TEST(TokenMechanism, ClientWithoutTicketsSpeaksVersionTwo) {
  Realm realm(TicketsOn());
  TokenClientOptions co;
  co.token = realm.Issue();
  co.clock = realm.clock;
  EXPECT_FALSE(co.tickets) << "tickets are opt-in";
  TokenClientMechanism client(co);
  for (int session = 0; session < 2; ++session) {
    auto out = Authenticate(client, *realm.server, PlainTcp(), PlainTcp());
    ASSERT_EQ(out.server.kind, ServerStep::Kind::kSuccess) << out.server.error.to_string();
    EXPECT_TRUE(out.client.ok()) << out.client.to_string();
    ASSERT_EQ(out.sent.size(), 2u);
    EXPECT_EQ(out.sent[0][0], static_cast<char>(token_wire::kChallengeVersion));
    EXPECT_EQ(out.server.message.size(), 1 + token_wire::kProofBytes);
  }
  // The client option, as a config file sets it.
  auto registry = MechanismRegistry::with_builtins();
  EXPECT_TRUE(registry.make_client("token", {{"tickets", true}}).ok());
  EXPECT_FALSE(registry.make_client("token", {{"tickets", "no"}}).ok());
}

// Hostile version 3 messages: every truncation and extension of a good
// HELLO, response and AUTH_SUCCESS is refused by the decoders, and the
// server answers with MALFORMED, never a crash.
TEST(TokenMechanism, RefusesMalformedVersionThreeMessages) {
  Realm realm(TicketsOn());
  auto client = ClientWithATicket(realm);
  ChannelInfo info = PlainTcp();
  info.server_uri = std::string(kService);
  const std::string hello = Await(client->start(info)->initial()).message;
  ASSERT_TRUE(token_wire::TicketHelloView::decode(hello));
  for (std::size_t n = 0; n < hello.size(); ++n) {
    EXPECT_FALSE(token_wire::TicketHelloView::decode(hello.substr(0, n))) << n;
  }
  EXPECT_FALSE(token_wire::TicketHelloView::decode(hello + "x"));
  std::string long_ticket = hello;
  long_ticket[hello.size() - token_wire::kProofBytes - TokenTickets::kBytes - 1] =
      static_cast<char>(token_wire::kMaxTicketBytes + 1);
  EXPECT_FALSE(token_wire::TicketHelloView::decode(long_ticket));
  ServerStep step = Replay(*realm.server, PlainTcp(), {hello.substr(0, hello.size() - 1)});
  ASSERT_EQ(step.kind, ServerStep::Kind::kFailure);
  EXPECT_NE(step.error.message.find("MALFORMED"), std::string::npos) << step.error.message;

  token_wire::TicketSuccess s;
  s.lifetime_ms = 1000;
  s.ticket = std::string(TokenTickets::kBytes, 't');
  const std::string good = s.encode();
  ASSERT_TRUE(token_wire::TicketSuccess::decode(good));
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(token_wire::TicketSuccess::decode(good.substr(0, n))) << n;
  }
  EXPECT_FALSE(token_wire::TicketSuccess::decode(good + "x"));
}

// The server configuration's keys for the mechanism (docs/CONFIG.md, `tokens`).
TEST(TokenMechanism, ConfigKeys) {
  auto defaults = token_service_options_from_json({{"store", "memory"}});
  ASSERT_TRUE(defaults.ok()) << defaults.status().to_string();
  EXPECT_FALSE(defaults->mechanism.allow_plaintext);
  EXPECT_EQ(defaults->mechanism.replay_cache_per_token, 8192u);
  auto set = token_service_options_from_json(
      {{"store", "memory"}, {"allow_plaintext", true}, {"replay_cache_per_token", 64}});
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_TRUE(set->mechanism.allow_plaintext);
  EXPECT_EQ(set->mechanism.replay_cache_per_token, 64u);
  EXPECT_EQ(defaults->mechanism.session_tickets, 0u);
  EXPECT_EQ(defaults->mechanism.session_ticket_lifetime, std::chrono::minutes(2));
  auto tickets = token_service_options_from_json(
      {{"store", "memory"}, {"session_tickets", 0}, {"session_ticket_lifetime_ms", 5000}});
  ASSERT_TRUE(tickets.ok()) << tickets.status().to_string();
  EXPECT_EQ(tickets->mechanism.session_tickets, 0u);
  EXPECT_EQ(tickets->mechanism.session_ticket_lifetime, std::chrono::milliseconds(5000));
  for (const nlohmann::json& bad : {nlohmann::json{{"store", "memory"}, {"allow_plaintext", "yes"}},
                                    nlohmann::json{{"store", "memory"}, {"session_tickets", -1}},
                                    nlohmann::json{{"store", "memory"}, {"session_tickets", 1 << 25}},
                                    nlohmann::json{{"store", "memory"}, {"session_ticket_lifetime_ms", 10}},
                                    nlohmann::json{{"store", "memory"}, {"session_ticket_lifetime_ms", 3'600'001}},
                                    nlohmann::json{{"store", "memory"}, {"replay_cache_per_token", 0}},
                                    nlohmann::json{{"store", "memory"}, {"replay_cache_per_token", -1}}}) {
    auto r = token_service_options_from_json(bad);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.code(), make_error_code(Errc::kConfigError));
  }
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
    const Status s(c.in, "token 7 (owner alice)");
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
