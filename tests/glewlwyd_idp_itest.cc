// A real OIDC issuer for the jwt mechanism's tests (tests/testing/glewlwyd_idp.h):
// glewlwyd starts on loopback with no manual step, hands out access tokens
// for a client-credentials grant, and serves the key that signed them over
// verified HTTPS. The claims checked here are those a resource server's
// verifier relies on (docs/TESTING.md lists them).
//
// glewlwyd must be installed (scripts/setup.sh; CI installs it): without it
// these tests fail, unless AUTHRPC_SKIP_GLEWLWYD=1 asks to skip them.
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <signal.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "authrpc/security/base64url.h"
#include "tests/testing/glewlwyd_idp.h"
#include "tests/testing/http_client.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"

namespace authrpc::testing {
namespace {

// In a test body or SetUp(): skips the test when glewlwyd is missing and
// AUTHRPC_SKIP_GLEWLWYD=1, fails it when glewlwyd is missing otherwise.
#define REQUIRE_GLEWLWYD()                                                                          \
  do {                                                                                              \
    if (GlewlwydIdp::installed()) break;                                                            \
    const char* skip = std::getenv("AUTHRPC_SKIP_GLEWLWYD");                                        \
    if (skip != nullptr && std::string(skip) == "1") GTEST_SKIP() << "glewlwyd is not installed";   \
    FAIL() << "glewlwyd is not installed: run `bash scripts/setup.sh` as root (it installs the "    \
              "Debian package glewlwyd; CI does), or set AUTHRPC_SKIP_GLEWLWYD=1 to skip these tests"; \
  } while (0)

struct Jws {
  nlohmann::json header;
  nlohmann::json claims;
  std::string signing_input;  // header.payload
  std::string signature;
};

// Splits and decodes a compact JWS; a failed expectation if it is not one.
std::optional<Jws> Decode(const std::string& token) {
  const std::size_t a = token.find('.');
  const std::size_t b = token.find('.', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos || token.find('.', b + 1) != std::string::npos) {
    ADD_FAILURE() << "not three dot-separated parts";
    return std::nullopt;
  }
  auto header = security::base64url_decode(std::string_view(token).substr(0, a));
  auto claims = security::base64url_decode(std::string_view(token).substr(a + 1, b - a - 1));
  auto signature = security::base64url_decode(std::string_view(token).substr(b + 1));
  if (!header || !claims || !signature) {
    ADD_FAILURE() << "a part is not base64url";
    return std::nullopt;
  }
  Jws out{nlohmann::json::parse(*header, nullptr, false), nlohmann::json::parse(*claims, nullptr, false),
          token.substr(0, b), *signature};
  if (!out.header.is_object() || !out.claims.is_object()) {
    ADD_FAILURE() << "header or claims are not JSON objects";
    return std::nullopt;
  }
  return out;
}

using PKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

PKey PublicKey(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return PKey(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
}

// RS256: RSASSA-PKCS1-v1_5 with SHA-256.
bool VerifyRs256(EVP_PKEY* key, const std::string& input, const std::string& signature) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  return EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                          reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
}

// An RSA key's parameter ("n", "e") as JWK base64url (big-endian, no leading zeros).
std::string JwkParam(EVP_PKEY* key, const char* name) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &bn) != 1) return {};
  std::string bytes(static_cast<std::size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(bytes.data()));
  BN_free(bn);
  return security::base64url_encode(bytes);
}

std::int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class GlewlwydIdpTest : public ::testing::Test {
 protected:
  // One IdP for the suite: ~0.3 s to start, and the cases only read from it.
  static void SetUpTestSuite() {
    if (!GlewlwydIdp::installed()) return;
    auto started = GlewlwydIdp::start(TestTls::shared());
    if (started.ok()) {
      idp_ = std::move(*started).release();
    } else {
      start_error_ = new std::string(started.status().to_string());
    }
  }
  static void TearDownTestSuite() {
    delete idp_;
    idp_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }
  void SetUp() override {
    REQUIRE_GLEWLWYD();
    ASSERT_NE(idp_, nullptr) << (start_error_ ? *start_error_ : "not started");
  }

  static GlewlwydIdp* idp_;
  static std::string* start_error_;
};
GlewlwydIdp* GlewlwydIdpTest::idp_ = nullptr;
std::string* GlewlwydIdpTest::start_error_ = nullptr;

TEST_F(GlewlwydIdpTest, ClientCredentialsTokenCarriesTheClaimsAVerifierChecks) {
  auto token = idp_->client_credentials_token(GlewlwydIdp::scope());
  ASSERT_TRUE(token.ok()) << Describe(token);
  auto jws = Decode(*token);
  ASSERT_TRUE(jws.has_value());

  EXPECT_EQ(jws->header.value("alg", ""), "RS256") << jws->header.dump();
  EXPECT_EQ(jws->header.value("typ", ""), "at+jwt") << jws->header.dump();
  EXPECT_FALSE(jws->header.value("kid", "").empty()) << jws->header.dump();

  const nlohmann::json& c = jws->claims;
  EXPECT_EQ(c.value("iss", ""), idp_->issuer()) << c.dump();
  EXPECT_EQ(c.value("aud", ""), GlewlwydIdp::audience()) << c.dump();
  EXPECT_EQ(c.value("sub", ""), GlewlwydIdp::client_id()) << c.dump();
  EXPECT_EQ(c.value("client_id", ""), GlewlwydIdp::client_id()) << c.dump();
  EXPECT_EQ(c.value("scope", ""), GlewlwydIdp::scope()) << c.dump();
  EXPECT_FALSE(c.value("jti", "").empty()) << c.dump();
  ASSERT_TRUE(c["iat"].is_number_integer() && c["exp"].is_number_integer() && c["nbf"].is_number_integer())
      << c.dump();
  const std::int64_t iat = c["iat"];
  EXPECT_LE(std::abs(iat - Now()), 60) << "iat " << iat << " far from now";
  EXPECT_EQ(c["nbf"].get<std::int64_t>(), iat);
  EXPECT_EQ(c["exp"].get<std::int64_t>() - iat, 3600);

  // Signed by the key the fixture configured, and only that content.
  PKey key = PublicKey(idp_->signing_public_key_pem());
  ASSERT_NE(key, nullptr);
  EXPECT_TRUE(VerifyRs256(key.get(), jws->signing_input, jws->signature));
  std::string tampered = jws->signing_input;
  tampered.back() = tampered.back() == 'A' ? 'B' : 'A';
  EXPECT_FALSE(VerifyRs256(key.get(), tampered, jws->signature));
}

TEST_F(GlewlwydIdpTest, JwksServesTheHeadersKidOverVerifiedHttps) {
  auto token = idp_->client_credentials_token(GlewlwydIdp::scope());
  ASSERT_TRUE(token.ok()) << Describe(token);
  auto jws = Decode(*token);
  ASSERT_TRUE(jws.has_value());
  const std::string kid = jws->header.value("kid", "");

  auto answer = http_get(idp_->jwks_url(), idp_->ca_file());
  ASSERT_TRUE(answer.ok()) << Describe(answer);
  ASSERT_EQ(answer->status, 200) << answer->body;
  const auto jwks = nlohmann::json::parse(answer->body, nullptr, false);
  ASSERT_TRUE(jwks.is_object() && jwks["keys"].is_array()) << answer->body;
  const nlohmann::json* match = nullptr;
  for (const auto& k : jwks["keys"]) {
    if (k.is_object() && k.value("kid", "") == kid) match = &k;
  }
  ASSERT_NE(match, nullptr) << "no key with kid " << kid << " in " << answer->body;
  EXPECT_EQ(match->value("kty", ""), "RSA");
  EXPECT_EQ(match->value("alg", ""), "RS256");
  EXPECT_FALSE(match->contains("d")) << "the JWKS must not publish the private exponent";
  PKey key = PublicKey(idp_->signing_public_key_pem());
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(match->value("n", ""), JwkParam(key.get(), OSSL_PKEY_PARAM_RSA_N));
  EXPECT_EQ(match->value("e", ""), JwkParam(key.get(), OSSL_PKEY_PARAM_RSA_E));
}

TEST_F(GlewlwydIdpTest, DiscoveryNamesTheIssuerJwksAndTokenEndpoint) {
  auto answer = http_get(idp_->issuer() + "/.well-known/openid-configuration", idp_->ca_file());
  ASSERT_TRUE(answer.ok()) << Describe(answer);
  ASSERT_EQ(answer->status, 200) << answer->body;
  const auto doc = nlohmann::json::parse(answer->body, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << answer->body;
  EXPECT_EQ(doc.value("issuer", ""), idp_->issuer());
  EXPECT_EQ(doc.value("jwks_uri", ""), idp_->jwks_url());
  EXPECT_EQ(doc.value("token_endpoint", ""), idp_->token_url());
}

// Its HTTPS is real: a client that trusts another CA refuses its certificate.
TEST_F(GlewlwydIdpTest, JwksOverHttpsIsRefusedByAClientTrustingAnotherCa) {
  const std::string dir = TempDir("glewlwyd-other-ca");
  TestCa other(dir, "other-ca");
  auto answer = http_get(idp_->jwks_url(), other.ca_file());
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), make_error_code(Errc::kAuthenticationFailed)) << Describe(answer);
}

TEST_F(GlewlwydIdpTest, TokenForTheOtherAudienceNamesIt) {
  auto token = idp_->client_credentials_token(GlewlwydIdp::scope(), GlewlwydIdp::other_audience());
  ASSERT_TRUE(token.ok()) << Describe(token);
  auto jws = Decode(*token);
  ASSERT_TRUE(jws.has_value());
  EXPECT_EQ(jws->claims.value("aud", ""), GlewlwydIdp::other_audience());
}

// What glewlwyd refuses, and the typed error the fixture gives for it.
struct Refusal {
  const char* name;
  std::string scope;
  std::string resource;  // "": audience()
  Errc expected;
  const char* error;  // glewlwyd's `error`, quoted in the message
};

TEST_F(GlewlwydIdpTest, RefusedTokenRequestsAreTypedErrors) {
  const std::vector<Refusal> cases = {
      {"unknown scope", "nosuchscope", "", Errc::kInvalidArgument, "scope_invalid"},
      {"resource the scope does not list", GlewlwydIdp::scope(), "https://elsewhere.test/", Errc::kInvalidArgument,
       "invalid_target"},
      {"resource not https", GlewlwydIdp::scope(), "http://rpc.authrpc.test/", Errc::kInvalidArgument,
       "invalid_target"},
  };
  for (const Refusal& r : cases) {
    SCOPED_TRACE(r.name);
    auto token = idp_->client_credentials_token(r.scope, r.resource);
    ASSERT_FALSE(token.ok());
    EXPECT_EQ(token.code(), make_error_code(r.expected)) << Describe(token);
    EXPECT_NE(token.status().message.find(r.error), std::string::npos) << Describe(token);
  }
}

// The fixture only knows the right secret; this request is built by hand.
TEST_F(GlewlwydIdpTest, WrongClientSecretGetsNoToken) {
  HttpRequest request;
  request.method = "POST";
  request.url = idp_->token_url();
  request.ca_file = idp_->ca_file();
  request.headers = {{"Content-Type", "application/x-www-form-urlencoded"},
                     {"Authorization", "Basic YXV0aHJwYy10ZXN0Ondyb25n"}};  // authrpc-test:wrong
  request.body = "grant_type=client_credentials&scope=" + form_urlencode(GlewlwydIdp::scope());
  auto answer = http_request(request);
  ASSERT_TRUE(answer.ok()) << Describe(answer);
  EXPECT_EQ(answer->status, 403) << answer->body;
  EXPECT_EQ(answer->body.find("access_token"), std::string::npos) << answer->body;
}

// The fixture's own contract: the destructor stops glewlwyd by PID and
// removes its directory; nothing is left listening.
TEST(GlewlwydIdpLifecycle, DestructorStopsTheProcessAndRemovesItsDir) {
  REQUIRE_GLEWLWYD();
  auto started = GlewlwydIdp::start(TestTls::shared());
  ASSERT_TRUE(started.ok()) << Describe(started);
  std::unique_ptr<GlewlwydIdp> idp = std::move(*started);
  const pid_t pid = idp->pid();
  const std::string dir = idp->dir();
  const std::string jwks = idp->jwks_url();
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(std::filesystem::exists(dir));

  idp.reset();
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH) << "glewlwyd (pid " << pid << ") still exists";
  EXPECT_FALSE(std::filesystem::exists(dir));
  auto answer = http_get(jwks, TestTls::shared().ca_file());
  EXPECT_TRUE(answer.is(make_error_code(Errc::kUnavailable))) << Describe(answer);
}

}  // namespace
}  // namespace authrpc::testing
