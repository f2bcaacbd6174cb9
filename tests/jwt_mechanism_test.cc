// The `jwt` mechanism end to end (components/jwt/jwt.h): real servers and
// clients on loopback, real TLS, tokens signed by the test issuer
// (tests/testing/jwt_test_issuer.h) and keys from a JWKS file or served over HTTPS by
// JwksHttpsServer. Verification rules themselves are tabled in
// jwt_verifier_test; this is what the mechanism adds: transports, the message,
// key loading and rotation, an IdP that is down, identity, groups, session
// expiry, certificate-bound tokens, options.
#include "authrpc/components/jwt/jwt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/auth/authz/authz_policy.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/base/log.h"
#include "authrpc/security/base64url.h"
#include "tests/testing/jwt_test_issuer.h"
#include "tests/testing/test_server.h"

namespace authrpc {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::JwtTestKey;
using testing::TestTls;

constexpr char kIdpIssuer[] = "https://idp.test/realms/authrpc";
constexpr char kServiceAudience[] = "data-service";
constexpr char kHmacKey[] = "a shared key of at least 32 bytes, for HS256";

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json claims(const std::string& sub = "alice", std::int64_t ttl = 600) {
  return {{"iss", kIdpIssuer},       {"aud", kServiceAudience},  {"sub", sub},
          {"exp", unix_now() + ttl}, {"iat", unix_now()},    {"groups", {"idp-readers"}}};
}

// The identity a call sees, as JSON.
Service IdentityService() {
  Service s("data");
  s.add_blocking("who", [](CallContext& ctx, std::string_view) -> Result<std::string> {
    const Identity& id = ctx.identity();
    json j = {{"user", id.user}, {"mechanism", id.mechanism}, {"groups", id.groups},
              {"expires", id.expires.has_value()}};
    for (const auto& [k, v] : id.attributes) j["attributes"][k] = v;
    return j.dump();
  });
  return s;
}

class Dir {
 public:
  Dir() : path_(testing::TempDir("jwt")) {}
  ~Dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    const std::string tmp = p + ".tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, p);
    return p;
  }

 private:
  std::string path_;
};

struct Issuer {
  JwtTestKey rsa = JwtTestKey::rsa("k1");
  JwtTestKey ed = JwtTestKey::ed25519("k2");
};
const Issuer& issuer() {
  static const Issuer* i = new Issuer();
  return *i;
}

json server_options(const std::string& jwks_file) {
  return {{"issuer", kIdpIssuer}, {"audience", kServiceAudience}, {"jwks_file", jwks_file},
          {"groups_claim", "groups"}};
}

std::shared_ptr<ServerMechanism> Server(const json& options) {
  auto m = make_jwt_server(options);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

// The `jwt` server trusting issuer()'s RSA key (its JWKS written in `dir`).
std::shared_ptr<ServerMechanism> RsaServer(const Dir& dir) {
  return Server(server_options(dir.write("jwks.json", testing::jwks_document({&issuer().rsa}))));
}

// Starts `server` on TLS with RsaServer(dir) and IdentityService.
void StartIdentityServer(testing::TestServer& server, const Dir& dir) {
  server.tls().mechanism(RsaServer(dir)).service(IdentityService());
  ASSERT_TRUE(server.start().ok());
}

std::shared_ptr<ClientMechanism> Client(const json& options) {
  auto m = make_jwt_client(options);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

// --- transports × opt-ins ---------------------------------------------

struct TransportCase {
  const char* name;
  const char* endpoint;  // "tls:", "tcp:", "unix:"
  bool server_allows_unix;
  bool client_allows_unix;
  Errc expected;
  const char* message_has;
};

class JwtTransportTest : public ::testing::TestWithParam<TransportCase> {};

TEST_P(JwtTransportTest, BearerTokensOnlyWhereTheyCannotBeRead) {
  const TransportCase& c = GetParam();
  Dir dir;
  const std::string jwks = dir.write("jwks.json", testing::jwks_document({&issuer().rsa}));
  const std::string token = dir.write("token", issuer().rsa.sign(claims()));
  json so = server_options(jwks);
  so["allow_plaintext_unix"] = c.server_allows_unix;
  testing::TestServer server;
  server.endpoint(c.endpoint).mechanism(Server(so)).service(IdentityService());
  if (std::string_view(c.endpoint) == "tls:") server.tls();
  const Status started = server.start();
  if (std::string_view(c.endpoint) == "tcp:") {
    // A bearer-secret mechanism on a plaintext tcp:// endpoint is refused
    // at startup (and a client would not send the token there either).
    ASSERT_FALSE(started.ok());
    EXPECT_THAT(started.message, HasSubstr(c.message_has));
    return;
  }
  ASSERT_TRUE(started.ok()) << started.to_string();
  auto client = server.client()
                    .mechanism(Client({{"token_file", token},
                                       {"allow_plaintext_unix", c.client_allows_unix}}))
                    .connect();
  if (c.expected == Errc::kOk) {
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    auto who = (*client)->call("data", "who", "");
    ASSERT_TRUE(who.ok()) << who.status().to_string();
    const json j = json::parse(*who);
    EXPECT_EQ(j["user"], "alice");
    EXPECT_EQ(j["mechanism"], "jwt");
    return;
  }
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.code(), c.expected) << client.status().to_string();
  EXPECT_THAT(client.status().message, HasSubstr(c.message_has));
}

INSTANTIATE_TEST_SUITE_P(
    Table, JwtTransportTest,
    ::testing::Values(
        TransportCase{"tls", "tls:", false, false, Errc::kOk, ""},
        TransportCase{"plaintext_tcp_refused_at_startup", "tcp:", true, true,
                      Errc::kConfigError, "jwt"},
        TransportCase{"plaintext_unix_refused_by_default", "unix:", false, false,
                      Errc::kConfigError, "refusing to send a bearer token"},
        TransportCase{"plaintext_unix_needs_the_server_too", "unix:", false, true,
                      Errc::kFailedPrecondition, "bearer tokens are refused"},
        TransportCase{"plaintext_unix_when_both_opt_in", "unix:", true, true, Errc::kOk, ""}),
    [](const auto& row) { return std::string(row.param.name); });

// --- identity, groups, expiry -------------------------------------------

TEST(JwtMechanismTest, TheIdentityCarriesIssuerExpiryAndGroups) {
  Dir dir;
  testing::TestServer server;
  ASSERT_NO_FATAL_FAILURE(StartIdentityServer(server, dir));
  auto client =
      server.client().mechanism(Client({{"token_file", dir.write("t", issuer().rsa.sign(claims("bob")))}})).connect();
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  const json j = json::parse(*(*client)->call("data", "who", ""));
  EXPECT_EQ(j["user"], "bob");
  EXPECT_EQ(j["groups"], json({"idp-readers"}));
  EXPECT_EQ(j["expires"], true);
  EXPECT_EQ(j["attributes"]["jwt.issuer"], kIdpIssuer);
  EXPECT_EQ(j["attributes"]["jwt.subject"], "bob");
  EXPECT_THAT(j["attributes"]["jwt.expires"].get<std::string>(), HasSubstr("Z"));
}

TEST(JwtMechanismTest, AnIdpGroupCanBeAllowedAMethod) {
  Dir dir;
  auto policy = AuthzPolicy::from_json(json::parse(R"({
    "groups": {"source": "static"},
    "services": {"data": {"groups": ["idp-readers"]}}
  })"));
  ASSERT_TRUE(policy.ok());
  testing::TestServer server;
  server.tls()
      .mechanism(RsaServer(dir))
      .service(IdentityService())
      .options([a = Authorizer::from_policy(*policy)](ServerOptions& o) { o.authorizer = a; });
  ASSERT_TRUE(server.start().ok());
  json reader = claims("carol");
  json outsider = claims("dave");
  outsider["groups"] = {"contractors"};
  auto allowed = server.client().mechanism(Client({{"token_file", dir.write("a", issuer().rsa.sign(reader))}})).connect();
  ASSERT_TRUE(allowed.ok());
  EXPECT_TRUE((*allowed)->call("data", "who", "").ok());
  auto denied = server.client().mechanism(Client({{"token_file", dir.write("b", issuer().rsa.sign(outsider))}})).connect();
  ASSERT_TRUE(denied.ok());
  auto r = (*denied)->call("data", "who", "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::kPermissionDenied);
}

TEST(JwtMechanismTest, TheSessionEndsWithTheTokenUnlessConfigured) {
  for (const bool outlives : {false, true}) {
    SCOPED_TRACE(outlives ? "session_outlives_token" : "default");
    Dir dir;
    json so = server_options(dir.write("jwks.json", testing::jwks_document({&issuer().rsa})));
    so["leeway_s"] = 0;
    so["session_outlives_token"] = outlives;
    testing::TestServer server;
    server.tls().mechanism(Server(so)).service(IdentityService());
    ASSERT_TRUE(server.start().ok());
    auto client = server.client()
                      .mechanism(Client({{"token_file", dir.write("t", issuer().rsa.sign(claims("alice", 2)))},
                                         {"refresh_before_s", 0}}))
                      .connect();
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    ASSERT_TRUE((*client)->call("data", "who", "").ok());
    // The time under test: the token's life (exp is in whole seconds).
    std::this_thread::sleep_for(std::chrono::milliseconds(3100));
    auto later = (*client)->call("data", "who", "");
    if (outlives) {
      EXPECT_TRUE(later.ok()) << later.status().to_string();
    } else {
      ASSERT_FALSE(later.ok());
      EXPECT_EQ(later.code(), Errc::kCredentialsExpired) << later.status().to_string();
    }
  }
}

TEST(JwtMechanismTest, FailuresAreTypedAndNeverEchoTheToken) {
  Dir dir;
  testing::TestServer server;
  ASSERT_NO_FATAL_FAILURE(StartIdentityServer(server, dir));
  json wrong_audience = claims();
  wrong_audience["aud"] = "another-service";
  json expired = claims("alice", -3600);
  const struct {
    const char* name;
    std::string token;
    Errc expected;
    RetryAdvice advice;
    const char* says;
  } cases[] = {
      {"expired", issuer().rsa.sign(expired), Errc::kCredentialsExpired,
       RetryAdvice::kReauthenticate, "expired"},
      {"wrong_audience", issuer().rsa.sign(wrong_audience), Errc::kAuthenticationFailed,
       RetryAdvice::kGiveUp, "not for this service"},
      {"unknown_key", issuer().ed.sign(claims()), Errc::kAuthenticationFailed,
       RetryAdvice::kGiveUp, "no key 'k2'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    // The client checks exp too, before sending: write the token where the
    // client reads it and let the server be the judge of the others.
    auto client = server.client().mechanism(Client({{"token_file", dir.write(c.name, c.token)}})).connect();
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.code(), c.expected) << client.status().to_string();
    EXPECT_EQ(retry_advice(client.code()), c.advice);
    EXPECT_THAT(client.status().message, HasSubstr(c.says));
    EXPECT_THAT(client.status().message, Not(HasSubstr(c.token.substr(c.token.rfind('.') + 1))));
  }
  EXPECT_GE(server.stats().negotiation_failures, 2u);  // the client refuses the expired one itself
}

// --- keys over HTTPS: rotation, rate limit, an IdP that is down ----------

TEST(JwtMechanismTest, KeysFromAnHttpsJwksFollowARotationWithOneFetch) {
  const TestTls& tls = TestTls::shared();
  testing::JwksHttpsServer idp(tls, testing::jwks_document({&issuer().rsa}));
  Dir dir;
  json so = {{"issuer", kIdpIssuer}, {"audience", kServiceAudience}, {"jwks_url", idp.url()},
             {"jwks_ca_file", tls.ca_file()}, {"jwks_min_refetch_s", 1}};
  testing::TestServer server;
  server.tls().mechanism(Server(so)).service(IdentityService());
  ASSERT_TRUE(server.start().ok());
  EXPECT_EQ(idp.requests(), 1);  // loaded at start
  auto connect = [&](const JwtTestKey& key) {
    return server.client()
        .mechanism(Client({{"token_file", dir.write("t" + key.kid(), key.sign(claims()))}}))
        .connect();
  };
  ASSERT_TRUE(connect(issuer().rsa).ok());
  EXPECT_EQ(idp.requests(), 1);

  // The IdP rotates to k2: the first token signed with it makes the server
  // fetch the keys once, and it is accepted.
  idp.set_document(testing::jwks_document({&issuer().rsa, &issuer().ed}));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past min_refetch
  auto rotated = connect(issuer().ed);
  ASSERT_TRUE(rotated.ok()) << rotated.status().to_string();
  EXPECT_EQ(idp.requests(), 2);

  // An unknown kid again at once: refused without another fetch.
  const JwtTestKey unknown = JwtTestKey::ec_p256("k3");
  auto refused = connect(unknown);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message, HasSubstr("no key 'k3'"));
  EXPECT_EQ(idp.requests(), 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_FALSE(connect(unknown).ok());
  EXPECT_EQ(idp.requests(), 3);  // once more after min_refetch, then refused
}

TEST(JwtMechanismTest, CachedKeysKeepWorkingWhileTheIdpIsDown) {
  const TestTls& tls = TestTls::shared();
  testing::JwksHttpsServer idp(tls, testing::jwks_document({&issuer().rsa}));
  Dir dir;
  json so = {{"issuer", kIdpIssuer},        {"audience", kServiceAudience},
             {"jwks_url", idp.url()},    {"jwks_ca_file", tls.ca_file()},
             {"jwks_refresh_s", 1},      {"jwks_min_refetch_s", 1},
             {"jwks_timeout_ms", 2000}};
  testing::TestServer server;
  server.tls().mechanism(Server(so)).service(IdentityService());
  ASSERT_TRUE(server.start().ok());
  idp.stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // keys due for refresh
  for (int i = 0; i < 3; ++i) {
    auto c = server.client()
                 .mechanism(Client({{"token_file", dir.write("t", issuer().rsa.sign(claims()))}}))
                 .connect();
    EXPECT_TRUE(c.ok()) << c.status().to_string();
  }
}

TEST(JwtMechanismTest, WithNoKeysLoadedAuthenticationIsUnavailableUntilTheIdpAnswers) {
  const TestTls& tls = TestTls::shared();
  testing::JwksHttpsServer idp(tls, testing::jwks_document({&issuer().rsa}));
  idp.stop();
  Dir dir;
  json so = {{"issuer", kIdpIssuer},     {"audience", kServiceAudience},      {"jwks_url", idp.url()},
             {"jwks_ca_file", tls.ca_file()}, {"jwks_min_refetch_s", 1}, {"jwks_timeout_ms", 2000},
             {"algorithms", {"RS256", "HS256"}}, {"hmac_key_file", dir.write("hmac", kHmacKey)}};
  testing::TestServer server;
  const auto mechanism = Server(so);
  server.tls().mechanism(mechanism).service(IdentityService());
  ASSERT_TRUE(server.start().ok());  // the IdP may come up after the service
  // What the admin listener's /readyz reports meanwhile.
  const Status not_ready = mechanism->ready();
  EXPECT_TRUE(not_ready.is(Errc::kUnavailable)) << not_ready.to_string();
  EXPECT_THAT(not_ready.message, HasSubstr("no signing keys loaded from JWKS https://"));
  const std::string token = dir.write("t", issuer().rsa.sign(claims()));
  // Keys are missing only for a token that needs one from the JWKS
  // (JWT.md's check order): one that could never pass is refused for good,
  // and one signed with the configured HMAC key needs no JWKS at all.
  const struct {
    const char* name;
    std::string token_file;
    Errc expected;
    const char* says;
  } cases[] = {
      {"RS256, from the JWKS", token, Errc::kUnavailable, "no signing keys"},
      {"EdDSA, an algorithm this server does not accept",
       dir.write("ed", issuer().ed.sign(claims())), Errc::kAuthenticationFailed,
       "algorithm EdDSA is not accepted"},
      {"HS256 with the shared key", dir.write("hs", testing::sign_hs256(kHmacKey, claims())),
       Errc::kOk, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto down = server.client().mechanism(Client({{"token_file", c.token_file}})).connect();
    if (c.expected == Errc::kOk) {
      EXPECT_TRUE(down.ok()) << down.status().to_string();
      continue;
    }
    ASSERT_FALSE(down.ok());
    EXPECT_EQ(down.code(), c.expected) << down.status().to_string();
    EXPECT_THAT(down.status().message, HasSubstr(c.says));
  }
  EXPECT_EQ(retry_advice(Errc::kUnavailable), RetryAdvice::kRetry);

  idp.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past min_refetch
  auto up = server.client().mechanism(Client({{"token_file", token}})).connect();
  EXPECT_TRUE(up.ok()) << up.status().to_string();
  EXPECT_TRUE(mechanism->ready().ok()) << mechanism->ready().to_string();
}

// A token accepted within the leeway after its exp gives a session that
// lasts to exp + leeway, not one already over; the identity has no realm
// whatever its principal looks like.
TEST(JwtMechanismTest, TheIdentityExpiresWithTheLeewayAndHasNoRealm) {
  Dir dir;
  json so = server_options(dir.write("jwks.json", testing::jwks_document({&issuer().rsa})));
  so["leeway_s"] = 60;
  auto server = Server(so);
  ChannelInfo channel;
  channel.tls = true;
  channel.peer_address = "127.0.0.1";
  json late = claims("alice@EXAMPLE.COM", -10);  // expired 10 s ago
  const std::int64_t exp = late["exp"];
  auto step = testing::Await(
      server->start(channel)->step("n,,\x01" "auth=Bearer " + issuer().rsa.sign(late) + "\x01\x01"));
  ASSERT_EQ(step.kind, ServerStep::Kind::kSuccess) << step.error.to_string();
  ASSERT_TRUE(step.identity.expires.has_value());
  EXPECT_EQ(*step.identity.expires, std::chrono::system_clock::time_point(std::chrono::seconds(exp + 60)));
  EXPECT_GT(*step.identity.expires, std::chrono::system_clock::now());
  EXPECT_EQ(step.identity.principal, "alice@EXAMPLE.COM");
  EXPECT_EQ(step.identity.realm, "");
}

// --- certificate-bound tokens (RFC 8705) ---------------------------------

std::string thumbprint_of_pem(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return {};
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (cert == nullptr) return {};
  unsigned char* der = nullptr;
  const int n = i2d_X509(cert, &der);
  X509_free(cert);
  unsigned char digest[32];
  unsigned int len = 0;
  EVP_Digest(der, static_cast<std::size_t>(n), digest, &len, EVP_sha256(), nullptr);
  OPENSSL_free(der);
  return security::base64url_encode(std::string_view(reinterpret_cast<char*>(digest), len));
}

TEST(JwtMechanismTest, ACertificateBoundTokenNeedsItsCertificate) {
  const TestTls& tls = TestTls::shared();
  Dir dir;
  json bound = claims();
  bound["cnf"] = {{"x5t#S256", thumbprint_of_pem(tls.cert_file("client"))}};
  const std::string token = dir.write("t", issuer().rsa.sign(bound));
  testing::TestServer server;
  server.tls(tls.server(security::ClientCertificates::kOptional))
      .client_tls(tls.client())
      .mechanism(RsaServer(dir))
      .service(IdentityService());
  ASSERT_TRUE(server.start().ok());
  auto with_cert = server.client().tls(tls.client(true)).mechanism(Client({{"token_file", token}})).connect();
  EXPECT_TRUE(with_cert.ok()) << with_cert.status().to_string();
  auto without = server.client().mechanism(Client({{"token_file", token}})).connect();
  ASSERT_FALSE(without.ok());
  EXPECT_THAT(without.status().message, HasSubstr("bound to a client certificate"));
}

// --- the wire message ------------------------------------------------------

TEST(JwtMechanismTest, AHandWrittenOauthbearerMessageIsAccepted) {
  // What an RFC 7628 client sends, with an authzid equal to the principal
  // and an extension pair the server ignores.
  Dir dir;
  auto server = RsaServer(dir);
  ChannelInfo channel;
  channel.tls = true;
  channel.peer_address = "127.0.0.1";
  const std::string token = issuer().rsa.sign(claims());
  for (const auto& [message, ok] : std::vector<std::pair<std::string, bool>>{
           {"n,a=alice,\x01host=localhost\x01port=443\x01xtra=1\x01" "auth=Bearer " + token + "\x01\x01", true},
           {"y,,\x01" "auth=bearer  " + token + "\x01\x01", true},
           {"n,a=bob,\x01" "auth=Bearer " + token + "\x01\x01", false},  // authzid not the principal
           {"n,a=ALICE,\x01" "auth=Bearer " + token + "\x01\x01", false},  // compared byte for byte
           {"p=tls-exporter,,\x01" "auth=Bearer " + token + "\x01\x01", false},
           {"n,,\x01" "auth=Basic " + token + "\x01\x01", false},
           {"n,,\x01" "auth=Bearer " + token + "\x01", false},  // not terminated
           {"n,,\x01" "auth=Bearer " + token + "\x01" "auth=Bearer x\x01\x01", false},
           {token, false}}) {
    SCOPED_TRACE(escape_for_log(message.substr(0, 24)));
    auto step = testing::Await(server->start(channel)->step(message));
    EXPECT_EQ(step.kind == ServerStep::Kind::kSuccess, ok) << step.error.to_string();
    if (!ok) {
      EXPECT_THAT(step.error.message, Not(HasSubstr(token)));
    }
  }
}

// --- options ---------------------------------------------------------------

TEST(JwtOptionsTest, BadOptionsAreConfigErrorsNamingTheKey) {
  Dir dir;
  const std::string jwks = dir.write("jwks.json", testing::jwks_document({&issuer().rsa}));
  const std::string short_key = dir.write("short.key", "too short");
  const struct {
    json options;
    const char* says;
  } cases[] = {
      {{{"audience", "a"}, {"jwks_file", jwks}}, "'issuer' or 'issuers' is required"},
      {{{"issuer", "i"}, {"jwks_file", jwks}}, "'audience' is required"},
      {{{"issuer", "i"}, {"audience", "a"}}, "'jwks_file' or 'jwks_url' is required"},
      {{{"issuer", "i"}, {"audience", "a"}, {"jwks_url", "http://idp/jwks"}}, "https://"},
      {{{"issuer", "i"}, {"audience", "a"}, {"jwks_file", jwks}, {"jwks_url", "https://x/"}},
       "exclusive"},
      {{{"issuer", "i"}, {"audience", "a"}, {"jwks_file", dir.write("bad.json", "{}")}},
       "JWKS file"},
      {{{"issuer", "i"}, {"audience", "a"}, {"jwks_file", jwks}, {"algorithms", {"none"}}},
       "unknown algorithm 'none'"},
      {{{"issuer", "i"}, {"audience", "a"}, {"jwks_file", jwks}, {"algorithms", {"HS256"}}},
       "need 'hmac_key_file'"},
      {{{"issuer", "i"}, {"audience", "a"}, {"algorithms", {"HS256"}}, {"hmac_key_file", short_key}},
       "at least 32 bytes"},
      {{{"issuer", "i"}, {"audience", "a"}, {"jwks_file", jwks}, {"issuers", "i"}},
       "'issuers' must be an array"},
      {{{"issuer", "i"}, {"audience", "a"}, {"jwks_file", jwks}, {"jwks_fil", jwks}}, "jwks_fil"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.options.dump());
    auto m = make_jwt_server(c.options);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.code(), Errc::kConfigError) << m.status().to_string();
    EXPECT_THAT(m.status().message, HasSubstr(c.says));
  }
  for (const json& client : {json::object(), json{{"token_file", "a"}, {"token_env", "B"}}}) {
    auto m = make_jwt_client(client);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.code(), Errc::kConfigError);
    EXPECT_THAT(m.status().message, HasSubstr("exactly one of"));
  }
}

TEST(JwtOptionsTest, RegisteredWithItsTraitsAndFlags) {
  auto registry = MechanismRegistry::with_builtins();
  const auto* server = registry.server("jwt");
  const auto* client = registry.client("jwt");
  ASSERT_NE(server, nullptr);
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(server->traits.bearer_secret);
  EXPECT_TRUE(server->traits.proves_identity);
  EXPECT_FALSE(server->traits.delegation_token);
  std::vector<std::string> flags;
  for (const auto& f : client->flags) flags.push_back(f.flag);
  EXPECT_THAT(flags, ::testing::ElementsAre("--jwt-file", "--jwt-env", "--jwt-command"));
}

}  // namespace
}  // namespace authrpc
