// The JWT test issuer (tests/testing/jwt_test_issuer.h): its signatures verify with
// plain OpenSSL against the keys JwkSet builds from its JWKs, its compact
// tokens have the shape a test asked for, and its JWKS server serves, 404s
// other paths, counts, fails on demand, stops and starts on the same port.
#include "tests/testing/jwt_test_issuer.h"

#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "authrpc/components/jwt/jwt_https.h"
#include "authrpc/components/jwt/jwt_keys.h"
#include "authrpc/security/base64url.h"
#include "tests/testing/test_support.h"
#include "tests/testing/test_tls.h"

namespace authrpc::testing {
namespace {

using nlohmann::json;

struct Token {
  std::string header, payload, signature, signing_input;
};

Token split(const std::string& token) {
  const std::size_t a = token.find('.');
  const std::size_t b = token.find('.', a + 1);
  EXPECT_NE(b, std::string::npos) << token;
  Token t;
  t.signing_input = token.substr(0, b);
  t.header = security::base64url_decode(token.substr(0, a)).value_or("?");
  t.payload = security::base64url_decode(token.substr(a + 1, b - a - 1)).value_or("?");
  t.signature = security::base64url_decode(token.substr(b + 1)).value_or("?");
  return t;
}

// A JWS signature check with OpenSSL alone (RFC 7518 §3.3/§3.4, RFC 8037).
bool verifies(EVP_PKEY* key, Jwk::Type type, const Token& t) {
  std::string sig = t.signature;
  if (type == Jwk::Type::kEcP256) {
    if (sig.size() != 64) return false;
    ECDSA_SIG* ecdsa = ECDSA_SIG_new();
    const auto* raw = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG_set0(ecdsa, BN_bin2bn(raw, 32, nullptr), BN_bin2bn(raw + 32, 32, nullptr));
    unsigned char* der = nullptr;
    const int n = i2d_ECDSA_SIG(ecdsa, &der);
    sig.assign(reinterpret_cast<char*>(der), static_cast<std::size_t>(n));
    OPENSSL_free(der);
    ECDSA_SIG_free(ecdsa);
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok =
      EVP_DigestVerifyInit(ctx, nullptr, type == Jwk::Type::kEd25519 ? nullptr : EVP_sha256(), nullptr, key) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                       reinterpret_cast<const unsigned char*>(t.signing_input.data()), t.signing_input.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

TEST(JwtTestIssuer, SignaturesVerifyAgainstTheJwkSetKey) {
  const JwtTestKey keys[] = {JwtTestKey::rsa("r"), JwtTestKey::ec_p256("e"), JwtTestKey::ed25519("d")};
  const json payload{{"sub", "alice"}, {"exp", 2000000000}};
  for (const JwtTestKey& key : keys) {
    SCOPED_TRACE(key.alg());
    auto set = JwkSet::parse(jwks_document({&key}));
    ASSERT_TRUE(set.ok()) << Describe(set);
    const Jwk* jwk = set->find(key.kid());
    ASSERT_NE(jwk, nullptr);
    EXPECT_EQ(jwk->alg, key.alg());

    const Token t = split(key.sign(payload));
    EXPECT_EQ(json::parse(t.header), (json{{"alg", key.alg()}, {"kid", key.kid()}}));
    EXPECT_EQ(json::parse(t.payload), payload);
    EXPECT_TRUE(verifies(jwk->key.get(), jwk->type, t));
    if (jwk->type == Jwk::Type::kEcP256) {
      EXPECT_EQ(t.signature.size(), 64u);  // r || s, not DER
    }

    // A changed signing input does not verify: the check above means something.
    Token tampered = t;
    tampered.signing_input.back() ^= 0x01;
    EXPECT_FALSE(verifies(jwk->key.get(), jwk->type, tampered));

    // A header that lies keeps its lie; raw text is signed as given.
    const Token lie = split(key.sign(payload, {{"alg", "HS256"}, {"kid", "other"}}));
    EXPECT_EQ(json::parse(lie.header), (json{{"alg", "HS256"}, {"kid", "other"}}));
    EXPECT_TRUE(verifies(jwk->key.get(), jwk->type, lie));
    const Token raw = split(key.sign_raw(R"({"alg":"x","alg":"y"})", "not json"));
    EXPECT_EQ(raw.header, R"({"alg":"x","alg":"y"})");
    EXPECT_EQ(raw.payload, "not json");
    EXPECT_TRUE(verifies(jwk->key.get(), jwk->type, raw));
  }
}

TEST(JwtTestIssuer, PublicPemIsTheKey) {
  const JwtTestKey key = JwtTestKey::rsa("r");
  const std::string pem = key.public_pem();
  EXPECT_EQ(pem.rfind("-----BEGIN PUBLIC KEY-----\n", 0), 0u) << pem;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* read = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(EVP_PKEY_eq(read, key.pkey()), 1);
  EVP_PKEY_free(read);
}

TEST(JwtTestIssuer, Hs256AndUnsignedTokens) {
  const json payload{{"sub", "bob"}};
  const Token t = split(sign_hs256("secret", payload));
  EXPECT_EQ(json::parse(t.header), (json{{"alg", "HS256"}}));
  unsigned char mac[32];
  unsigned size = 0;
  HMAC(EVP_sha256(), "secret", 6, reinterpret_cast<const unsigned char*>(t.signing_input.data()),
       t.signing_input.size(), mac, &size);
  EXPECT_EQ(t.signature, std::string(reinterpret_cast<char*>(mac), size));

  const std::string none = unsigned_token(payload);
  ASSERT_EQ(none.back(), '.');
  const Token u = split(none);
  EXPECT_EQ(json::parse(u.header), (json{{"alg", "none"}}));
  EXPECT_EQ(json::parse(u.payload), payload);
  EXPECT_EQ(u.signature, "");
}

TEST(JwksHttpsServer, ServesCountsFailsStopsAndStarts) {
  const JwtTestKey key = JwtTestKey::ed25519("k1");
  const std::string document = jwks_document({&key});
  JwksHttpsServer server(TestTls::shared(), document);
  HttpsGetOptions options;
  options.ca_file = TestTls::shared().ca_file();
  options.timeout = std::chrono::seconds(5);
  const std::string url = server.url();
  ASSERT_EQ(url.rfind("https://localhost:", 0), 0u) << url;
  ASSERT_EQ(url.substr(url.size() - 5), "/jwks");

  auto body = https_get(url, options);
  ASSERT_TRUE(body.ok()) << Describe(body);
  EXPECT_EQ(*body, document);
  EXPECT_EQ(server.requests(), 1);

  // Other paths: 404, not counted.
  auto other = https_get(url + "x", options);
  EXPECT_EQ(other.code(), Errc::kUnavailable);
  EXPECT_NE(other.status().message.find("\"HTTP/1.1 404 Not Found\""), std::string::npos) << Describe(other);
  EXPECT_EQ(server.requests(), 1);

  server.set_status(503);
  auto failing = https_get(url, options);
  EXPECT_NE(failing.status().message.find("\"HTTP/1.1 503 Service Unavailable\""), std::string::npos)
      << Describe(failing);
  EXPECT_EQ(server.requests(), 2);
  server.set_status(0);

  const JwtTestKey rotated = JwtTestKey::ec_p256("k2");
  server.set_document(jwks_document({&rotated}));
  body = https_get(url, options);
  ASSERT_TRUE(body.ok()) << Describe(body);
  EXPECT_EQ(*body, jwks_document({&rotated}));

  server.stop();
  auto down = https_get(url, options);
  EXPECT_EQ(down.code(), Errc::kUnavailable);
  EXPECT_NE(down.status().message.find("cannot connect to"), std::string::npos) << Describe(down);
  server.stop();  // twice is harmless

  server.start();
  EXPECT_EQ(server.url(), url);
  body = https_get(url, options);
  ASSERT_TRUE(body.ok()) << Describe(body);
  EXPECT_EQ(server.requests(), 4);
}

}  // namespace
}  // namespace authrpc::testing
