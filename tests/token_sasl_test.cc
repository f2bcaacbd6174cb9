// The interop mechanisms token-digest (Cyrus DIGEST-MD5) and token-scram
// (Cyrus SCRAM-SHA-256) of components/kerberos/token_sasl.h: real Cyrus SASL
// plugins on both sides, passwords served by the in-process auxprop plugin from
// a real SecretManager (memory store, controlled clock). Sessions are driven
// directly, step by step; each table row spoils one thing and expects the typed
// error.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "authrpc/components/kerberos/sasl_library.h"
#include "authrpc/components/kerberos/scram_verifier_cache.h"
#include "authrpc/components/kerberos/token_sasl.h"
#include "authrpc/security/base64url.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "tests/testing/test_support.h"
#include "tests/testing/session_driver.h"
#include "tests/testing/token_realm.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using security::ManualClock;
using security::Token;

constexpr std::string_view kService = testing::kTokenRealmService;

using Realm = testing::TokenRealm;

// One session of `mechanism` with `token`, against `server` if given (to
// share its SCRAM verifier cache), else a new server mechanism.
testing::DrivenSession Authenticate(std::string_view mechanism, Realm& realm, const Token& token,
                                    TokenSaslServerMechanism* server = nullptr) {
  TokenClientOptions co;
  co.token = token;
  TokenSaslClientMechanism client(mechanism, co);
  TokenSaslServerMechanism fresh(mechanism, realm.secrets);
  ChannelInfo channel;
  channel.server_uri = std::string(kService);
  channel.peer_address = "127.0.0.1:1";
  return testing::DriveSession(client, server ? *server : fresh, channel, channel);
}

class TokenSaslTest : public ::testing::TestWithParam<std::string_view> {
 protected:
  void SetUp() override {
    const auto mechs = sasl::server_plugin_mechanisms();
    const std::string cyrus = GetParam() == kTokenScramMechanism ? "SCRAM-SHA-256" : "DIGEST-MD5";
    ASSERT_NE(std::find(mechs.begin(), mechs.end(), cyrus), mechs.end())
        << cyrus << " plugin missing: install libsasl2-modules (scripts/setup.sh)";
  }
};

TEST_P(TokenSaslTest, AuthenticatesWithAToken) {
  Realm realm;
  const Token token = realm.Issue("alice@R", "oozie@R");
  auto out = Authenticate(GetParam(), realm, token);
  ASSERT_EQ(out.server.kind, ServerStep::Kind::kSuccess) << out.server.error.to_string();
  EXPECT_TRUE(out.client.ok()) << out.client.to_string();
  EXPECT_EQ(out.server.identity.user, "alice@R");
  EXPECT_EQ(out.server.identity.realm, "R");
  EXPECT_EQ(out.server.identity.real_user, std::optional<std::string>("oozie@R"));
  // SASL_SUCCESS_DATA: the server's last message rides on AUTH_SUCCESS.
  EXPECT_EQ(out.sent.size(), 2u);
}

TEST_P(TokenSaslTest, UserAndPasswordAreBase64urlOfTheToken) {
  Realm realm;
  const Token token = realm.Issue();
  EXPECT_EQ(security::base64url_decode(token_sasl_user(token)), token.identifier);
  EXPECT_EQ(security::base64url_decode(token_sasl_password(token)),
            std::string(token.password.view()));
}

TEST_P(TokenSaslTest, RefusesBadTokensWithTypedErrors) {
  for (const auto& c : testing::RefusedTokens()) {
    SCOPED_TRACE(c.name);
    Realm realm;
    const Token token = c.make(realm);
    auto out = Authenticate(GetParam(), realm, token);
    ASSERT_EQ(out.server.kind, ServerStep::Kind::kFailure) << out.client.to_string();
    EXPECT_EQ(out.server.error.code, make_error_code(c.code)) << out.server.error.to_string();
    EXPECT_NE(out.server.error.message.find(c.text), std::string::npos) << out.server.error.message;
    EXPECT_EQ(out.server.error.message.find(token_sasl_password(token)), std::string::npos);
    // The server keeps serving: a good token still works.
    auto good = Authenticate(GetParam(), realm, realm.Issue("bob@R"));
    EXPECT_EQ(good.server.kind, ServerStep::Kind::kSuccess) << good.server.error.to_string();
  }
}

TEST_P(TokenSaslTest, WorksWithAndWithoutTheScramVerifierCache) {
  Realm realm;
  for (std::size_t capacity : {std::size_t{0}, std::size_t{4}}) {
    SCOPED_TRACE(capacity);
    TokenSaslServerOptions o;
    o.scram_verifier_cache = capacity;
    TokenSaslServerMechanism server(GetParam(), realm.secrets, o);
    const bool cached = GetParam() == kTokenScramMechanism && capacity > 0;
    EXPECT_EQ(server.scram_cache() != nullptr, cached);
    const Token token = realm.Issue();
    for (int i = 0; i < 3; ++i) {
      auto out = Authenticate(GetParam(), realm, token, &server);
      ASSERT_EQ(out.server.kind, ServerStep::Kind::kSuccess) << out.server.error.to_string();
      EXPECT_TRUE(out.client.ok()) << out.client.to_string();
    }
    if (!cached) continue;
    // PBKDF2 once for three sessions.
    EXPECT_EQ(server.scram_cache()->computed(), 1u);
    EXPECT_EQ(server.scram_cache()->size(), 1u);
    // A forged password against the cached verifier: still FORGED.
    Token forged = token;
    forged.password.data()[0] ^= 1;
    auto bad = Authenticate(GetParam(), realm, forged, &server);
    ASSERT_EQ(bad.server.kind, ServerStep::Kind::kFailure);
    EXPECT_EQ(bad.server.error.code, make_error_code(Errc::kAuthenticationFailed)) << bad.server.error.to_string();
    EXPECT_NE(bad.server.error.message.find("FORGED"), std::string::npos) << bad.server.error.message;
    // Cancelled: refused by the SecretManager (the cache is no validity
    // check), and its verifier dropped.
    ASSERT_TRUE(realm.secrets->cancel(token, "alice@R").ok());
    auto cancelled = Authenticate(GetParam(), realm, token, &server);
    ASSERT_EQ(cancelled.server.kind, ServerStep::Kind::kFailure);
    EXPECT_NE(cancelled.server.error.message.find("CANCELLED"), std::string::npos);
    EXPECT_EQ(server.scram_cache()->size(), 0u);
    // Bounded: the least recently used token's verifier goes.
    for (int i = 0; i < 6; ++i) {
      auto out = Authenticate(GetParam(), realm, realm.Issue(), &server);
      EXPECT_EQ(out.server.kind, ServerStep::Kind::kSuccess) << out.server.error.to_string();
    }
    EXPECT_EQ(server.scram_cache()->size(), 4u);
  }
}

TEST(ScramVerifierCacheTest, FormatReuseAndStaleEntries) {
  ScramVerifierCache cache(2);
  const std::string v = cache.verifier("id-1", "password-1");
  // SCRAM-SHA-256$<i>:<salt>$<StoredKey>:<ServerKey>, standard base64.
  ASSERT_TRUE(v.starts_with("SCRAM-SHA-256$4096:")) << v.substr(0, 20);
  const auto dollar = v.find('$', 19);
  ASSERT_NE(dollar, std::string::npos);
  const std::string keys = v.substr(dollar + 1);
  const auto colon = keys.find(':');
  ASSERT_NE(colon, std::string::npos);
  EXPECT_EQ(colon, 44u);                       // base64 of 32 bytes
  EXPECT_EQ(keys.size() - colon - 1, 44u);
  EXPECT_EQ(cache.verifier("id-1", "password-1"), v);
  EXPECT_EQ(cache.computed(), 1u);
  // Another password for the same id (another key): never the stale entry.
  const std::string w = cache.verifier("id-1", "password-2");
  EXPECT_NE(w, v);
  EXPECT_EQ(cache.computed(), 2u);
  EXPECT_EQ(cache.size(), 1u);
  // Fresh salt per verifier.
  EXPECT_NE(ScramVerifierCache::make_verifier("p"), ScramVerifierCache::make_verifier("p"));
  // LRU: id-1 was used last, so id-2 goes when id-3 comes.
  (void)cache.verifier("id-2", "p2");
  (void)cache.verifier("id-1", "password-2");
  (void)cache.verifier("id-3", "p3");
  EXPECT_EQ(cache.size(), 2u);
  const std::size_t before = cache.computed();
  (void)cache.verifier("id-1", "password-2");
  EXPECT_EQ(cache.computed(), before);
  (void)cache.verifier("id-2", "p2");
  EXPECT_EQ(cache.computed(), before + 1);
  cache.erase("id-2");
  EXPECT_EQ(cache.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, TokenSaslTest,
                         ::testing::Values(kTokenDigestMechanism, kTokenScramMechanism),
                         [](const auto& param_info) {
                           return param_info.param == kTokenDigestMechanism ? std::string("digest")
                                                                      : std::string("scram");
                         });

}  // namespace
}  // namespace authrpc
