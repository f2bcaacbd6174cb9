// Unit tests for the `token` mechanism (auth/token_mechanism.h): server and
// client sessions driven directly against a real SecretManager over a memory
// store with a controlled clock; the replay cache; the TokenErrc → Errc
// mapping. Negotiation over real sockets is in token_itest.cc.
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

#include "authrpc/auth/token_mechanism.h"
#include "authrpc/auth/token_replay_cache.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/credentials_file.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "authrpc/security/token_errors.h"
#include "authrpc/server/token_service.h"
#include "tests/test_support.h"
#include "tests/token_realm.h"

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

// The token realm (tests/token_realm.h) and a `token` server half of it.
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
ChannelInfo PlainTcp() {
  ChannelInfo c;
  c.scheme = Endpoint::Scheme::kTcp;
  return c;
}

struct Outcome {
  ServerStep server;
  Status client;                     // complete() on the server's final message, if it succeeded
  std::vector<std::string> sent;     // what the client sent, in order (for replays)
};

// Runs one session, challenges included, with the server half `server`
// (default: realm.server) and the client's clock (default: the realm's).
Outcome Authenticate(Realm& realm, const Token& token, ChannelInfo client_channel,
                     ChannelInfo server_channel, TokenServerMechanism* server = nullptr,
                     std::shared_ptr<const security::Clock> client_clock = nullptr) {
  client_channel.server_uri = std::string(kService);
  TokenClientOptions co;
  co.token = token;
  co.clock = client_clock ? client_clock : realm.clock;
  TokenClientMechanism client(co);
  auto cs = client.start(client_channel);
  auto ss = (server ? server : realm.server.get())->start(server_channel);
  Outcome out;
  ClientStep step = Await(cs->initial());
  for (;;) {
    if (step.kind != ClientStep::Kind::kSend) {
      out.server = ServerStep::failure(step.error);
      return out;
    }
    out.sent.push_back(step.message);
    out.server = Await(ss->step(step.message));
    if (out.server.kind != ServerStep::Kind::kChallenge) break;
    EXPECT_FALSE(step.final) << "the server challenged after the client's last message";
    step = Await(cs->challenge(out.server.message));
  }
  if (out.server.kind == ServerStep::Kind::kSuccess) {
    EXPECT_TRUE(step.final) << "the server succeeded before the client's last message";
    out.client = Await(cs->complete(out.server.message));
  }
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

// Issue 19, defect 1: a HELLO captured on one server (or before a restart)
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
  // A version 1 HELLO over plaintext tcp (what a client before the fix sent,
  // and what an observer records) is refused even by a server that opted in.
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

// Issue 19, defect 7: the skew was `time − now` in int64, undefined for a
// client time of INT64_MIN (the sanitizer build's server exited). Any
// client time is a typed CLOCK_SKEW, whichever side of the epoch the server's
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
  Realm realm(AllowPlaintext());
  const Token token = realm.Issue();
  TokenClientOptions co;
  co.token = token;
  co.clock = realm.clock;
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
  TokenClientOptions co;
  co.token = token;
  co.clock = realm.clock;
  for (ChannelInfo info : {Unix(), PlainTcp()}) {
    info.server_uri = std::string(kService);
    for (std::uint8_t version : {token_wire::kVersion, token_wire::kChallengeVersion}) {
      for (std::string final_token : {std::string(), std::string(33, static_cast<char>(version)),
                                      std::string(1, static_cast<char>(version))}) {
        auto session = TokenClientMechanism(co).start(info);
        (void)Await(session->initial());
        Status s = Await(session->complete(final_token));
        EXPECT_EQ(s.code, make_error_code(Errc::kAuthenticationFailed));
      }
    }
    // After a real challenge, a server proof for another challenge is refused.
    auto session = TokenClientMechanism(co).start(info);
    (void)Await(session->initial());
    if (info.scheme == Endpoint::Scheme::kTcp) {
      token_wire::Challenge c;
      c.server_nonce.fill(7);
      ClientStep response = Await(session->challenge(c.encode()));
      ASSERT_EQ(response.kind, ClientStep::Kind::kSend);
      EXPECT_TRUE(response.final);
      EXPECT_EQ(Await(session->complete(token_wire::encode_success({}, token_wire::kChallengeVersion))).code,
                make_error_code(Errc::kAuthenticationFailed));
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
  const std::string good = token_wire::Challenge{}.encode();
  for (std::string bad : {std::string(), good.substr(0, good.size() - 1), good + "x",
                          std::string(1, '\x01') + good.substr(1)}) {
    auto session = TokenClientMechanism(co).start(info);
    ASSERT_EQ(Await(session->initial()).kind, ClientStep::Kind::kSend);
    ClientStep step = Await(session->challenge(bad));
    ASSERT_EQ(step.kind, ClientStep::Kind::kFailure);
    EXPECT_EQ(step.error.code, make_error_code(Errc::kProtocolError));
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

// Issue 19, defect 2: one token stamping HELLOs ~now + 290 s used to fill
// the cache and raise a floor that locked every other token out. Now only
// the flooding token pays.
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
  for (const nlohmann::json& bad : {nlohmann::json{{"store", "memory"}, {"allow_plaintext", "yes"}},
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
