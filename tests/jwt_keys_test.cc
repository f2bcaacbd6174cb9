// JwkSet::parse (components/jwt/jwt_keys.h): the keys of each type it builds,
// each reason it skips a key for, each document it refuses, and hostile
// documents (deep nesting, huge strings) that must be refused without harm.
#include "authrpc/components/jwt/jwt_keys.h"

#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>

#include <functional>

#include "authrpc/security/base64url.h"
#include "tests/testing/jwt_test_issuer.h"
#include "tests/testing/test_support.h"

namespace authrpc {
namespace {

using nlohmann::json;
using testing::JwtTestKey;

// Keys made once: RSA generation takes a while.
struct SampleKeys {
  JwtTestKey rsa = JwtTestKey::rsa("rsa-1");
  JwtTestKey ec = JwtTestKey::ec_p256("ec-1");
  JwtTestKey ed = JwtTestKey::ed25519("ed-1");
  JwtTestKey small_rsa = JwtTestKey::rsa("rsa-small", 1024);
};
const SampleKeys& sample_keys() {
  static const SampleKeys k;
  return k;
}

std::string doc(std::vector<json> jwks) { return json{{"keys", jwks}}.dump(); }

TEST(JwkSet, ParsesAGoodKeyOfEachType) {
  struct Case {
    const char* name;
    json jwk;
    Jwk::Type type;
    const char* alg;
  };
  json no_alg = sample_keys().ec.public_jwk();
  no_alg.erase("alg");
  json no_use = sample_keys().ed.public_jwk();
  no_use.erase("use");
  json with_private = sample_keys().rsa.public_jwk();
  with_private["d"] = security::base64url_encode("not really a private exponent");
  json key_ops = sample_keys().rsa.public_jwk();
  key_ops.erase("use");
  key_ops["key_ops"] = {"verify"};
  json ed_alg = sample_keys().ed.public_jwk();
  ed_alg["alg"] = "Ed25519";  // the fully-specified name (RFC 9864)
  json ps256 = sample_keys().rsa.public_jwk();
  ps256["alg"] = "PS256";
  const Case cases[] = {
      {"RSA 2048", sample_keys().rsa.public_jwk(), Jwk::Type::kRsa, "RS256"},
      {"EC P-256", sample_keys().ec.public_jwk(), Jwk::Type::kEcP256, "ES256"},
      {"Ed25519", sample_keys().ed.public_jwk(), Jwk::Type::kEd25519, "EdDSA"},
      {"no alg", no_alg, Jwk::Type::kEcP256, ""},
      {"no use", no_use, Jwk::Type::kEd25519, "EdDSA"},
      {"private member ignored", with_private, Jwk::Type::kRsa, "RS256"},
      {"key_ops verify", key_ops, Jwk::Type::kRsa, "RS256"},
      {"alg Ed25519", ed_alg, Jwk::Type::kEd25519, "Ed25519"},
      {"alg PS256 on RSA", ps256, Jwk::Type::kRsa, "PS256"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto set = JwkSet::parse(doc({c.jwk}));
    ASSERT_TRUE(set.ok()) << testing::Describe(set);
    ASSERT_EQ(set->keys().size(), 1u);
    EXPECT_TRUE(set->skipped().empty());
    const Jwk& key = set->keys()[0];
    EXPECT_EQ(key.kid, c.jwk.value("kid", ""));
    EXPECT_EQ(key.alg, c.alg);
    EXPECT_EQ(key.type, c.type);
    ASSERT_NE(key.key, nullptr);
    // Public parts only: no private component was built, even when sent.
    BIGNUM* d = nullptr;
    EXPECT_EQ(EVP_PKEY_get_bn_param(key.key.get(), OSSL_PKEY_PARAM_RSA_D, &d), 0);
    BN_free(d);
    EXPECT_EQ(EVP_PKEY_get_bn_param(key.key.get(), OSSL_PKEY_PARAM_PRIV_KEY, &d), 0);
    BN_free(d);
  }
}

TEST(JwkSet, BuildsTheSameKeyAsTheIssuers) {
  for (const JwtTestKey* key : {&sample_keys().rsa, &sample_keys().ec, &sample_keys().ed}) {
    SCOPED_TRACE(key->kid());
    auto set = JwkSet::parse(testing::jwks_document({key}));
    ASSERT_TRUE(set.ok()) << testing::Describe(set);
    EXPECT_EQ(EVP_PKEY_eq(set->keys()[0].key.get(), key->pkey()), 1);
  }
}

// Each key the set skips, beside a good one, with the reason it gives.
TEST(JwkSet, SkipsKeysItCannotUseWithAReason) {
  auto with = [](json jwk, const std::function<void(json&)>& change) {
    change(jwk);
    return jwk;
  };
  const json rsa = sample_keys().rsa.public_jwk();
  const json ec = sample_keys().ec.public_jwk();
  const json ed = sample_keys().ed.public_jwk();
  std::string off_curve_y = *security::base64url_decode(ec["y"].get<std::string>());
  off_curve_y.back() ^= 0x01;
  struct Case {
    const char* name;
    json jwk;
    const char* reason;
  };
  const Case cases[] = {
      {"use enc", with(rsa, [](json& j) { j["use"] = "enc"; }), "key 1 (kid \"rsa-1\"): \"use\" is \"enc\", not \"sig\""},
      {"use not a string", with(rsa, [](json& j) { j["use"] = 1; }), "\"use\" is not a string"},
      {"key_ops without verify", with(rsa, [](json& j) { j.erase("use"); j["key_ops"] = {"encrypt"}; }),
       "\"key_ops\" does not include \"verify\""},
      {"oct", json{{"kty", "oct"}, {"kid", "h"}, {"k", "c2VjcmV0"}},
       "key 1 (kid \"h\"): symmetric (\"oct\") key: HMAC keys come only from configuration"},
      {"unknown kty", with(rsa, [](json& j) { j["kty"] = "DSA"; }), "\"kty\" \"DSA\" (only RSA, EC, OKP)"},
      {"no kty", with(rsa, [](json& j) { j.erase("kty"); }), "no \"kty\" string"},
      {"not an object", json(42), "key 1: not a JSON object"},
      {"kid not a string", with(rsa, [](json& j) { j["kid"] = 7; }), "key 1: \"kid\" is not a string"},
      {"RSA 1024", sample_keys().small_rsa.public_jwk(), "RSA modulus of 1024 bits, under 2048"},
      {"RSA no n", with(rsa, [](json& j) { j.erase("n"); }), "RSA key: no \"n\""},
      {"RSA e not a string", with(rsa, [](json& j) { j["e"] = 65537; }), "RSA key: \"e\" is not a string"},
      {"RSA padded n", with(rsa, [](json& j) { j["n"] = j["n"].get<std::string>() + "=="; }),
       "RSA key: \"n\" is not unpadded base64url"},
      {"RSA standard alphabet", with(rsa, [](json& j) { j["e"] = "AQ+B"; }),
       "RSA key: \"e\" is not unpadded base64url"},
      {"RSA even exponent", with(rsa, [](json& j) { j["e"] = "AQAA"; }), "RSA exponent is even, 1 or over 64 bits"},
      {"RSA exponent 1", with(rsa, [](json& j) { j["e"] = "AQ"; }), "RSA exponent is even, 1 or over 64 bits"},
      {"RSA empty e", with(rsa, [](json& j) { j["e"] = ""; }), "RSA key: \"e\" is empty"},
      {"EC P-384", with(ec, [](json& j) { j["crv"] = "P-384"; }), "EC curve \"P-384\" (only P-256)"},
      {"EC no crv", with(ec, [](json& j) { j.erase("crv"); }), "EC key without a \"crv\" string"},
      {"EC off the curve", with(ec, [&](json& j) { j["y"] = security::base64url_encode(off_curve_y); }),
       "EC point is not on P-256"},
      {"EC short x", with(ec, [](json& j) { j["x"] = security::base64url_encode(std::string(31, 'x')); }),
       "EC key: \"x\" and \"y\" must be 32 bytes each"},
      {"EC no y", with(ec, [](json& j) { j.erase("y"); }), "EC key: no \"y\""},
      {"OKP X25519", with(ed, [](json& j) { j["crv"] = "X25519"; }), "OKP curve \"X25519\" (only Ed25519)"},
      {"OKP short x", with(ed, [](json& j) { j["x"] = security::base64url_encode(std::string(31, 'x')); }),
       "OKP key: \"x\" must be 32 bytes"},
      {"alg of another type", with(rsa, [](json& j) { j["alg"] = "ES256"; }),
       "\"alg\" \"ES256\" is not a signature algorithm of a RSA key"},
      {"encryption alg", with(rsa, [](json& j) { j["alg"] = "RSA-OAEP"; }),
       "\"alg\" \"RSA-OAEP\" is not a signature algorithm of a RSA key"},
      {"none alg", with(ed, [](json& j) { j["alg"] = "none"; }),
       "\"alg\" \"none\" is not a signature algorithm of a OKP key"},
      {"alg not a string", with(ec, [](json& j) { j["alg"] = json::array(); }), "\"alg\" is not a string"},
      {"control bytes escaped", with(rsa, [](json& j) { j["kty"] = "\x1b[31m\n"; }),
       "\"kty\" \"\\x1b[31m\\n\" (only RSA, EC, OKP)"},
  };
  json good = sample_keys().ed.public_jwk();
  good["kid"] = "good";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto set = JwkSet::parse(doc({good, c.jwk}));
    ASSERT_TRUE(set.ok()) << testing::Describe(set);
    ASSERT_EQ(set->keys().size(), 1u);
    EXPECT_EQ(set->keys()[0].kid, "good");
    ASSERT_EQ(set->skipped().size(), 1u);
    EXPECT_NE(set->skipped()[0].find(c.reason), std::string::npos) << set->skipped()[0];
  }
}

TEST(JwkSet, RefusesDocumentsItCannotUse) {
  const json rsa = sample_keys().rsa.public_jwk();
  json other = sample_keys().ec.public_jwk();
  other["kid"] = "rsa-1";
  json use_enc = rsa;
  use_enc["use"] = "enc";
  std::vector<json> many(3, sample_keys().ed.public_jwk());
  for (std::size_t i = 0; i < many.size(); ++i) many[i]["kid"] = "k" + std::to_string(i);
  struct Case {
    const char* name;
    std::string text;
    std::size_t max_bytes;
    std::size_t max_keys;
    const char* message;
  };
  const Case cases[] = {
      {"not JSON", "{\"keys\": [", 1 << 20, 100, "JWKS document is not JSON"},
      {"empty", "", 1 << 20, 100, "JWKS document is not JSON"},
      {"an array", "[]", 1 << 20, 100, "JWKS document is not a JSON object"},
      {"no keys", "{\"key\": []}", 1 << 20, 100, "JWKS document has no \"keys\" array"},
      {"keys not an array", "{\"keys\": {}}", 1 << 20, 100, "JWKS document has no \"keys\" array"},
      {"no keys in the array", doc({}), 1 << 20, 100, "JWKS document has no usable signature key"},
      {"over max_bytes", doc({rsa}), 100, 100, "bytes, over the limit of 100"},
      {"over max_keys", doc(many), 1 << 20, 2, "JWKS document has 3 keys, over the limit of 2"},
      {"duplicate kid", doc({rsa, other}), 1 << 20, 100, "JWKS document has two keys with kid \"rsa-1\""},
      {"only unusable keys", doc({use_enc, json{{"kty", "oct"}}}), 1 << 20, 100,
       "JWKS document has no usable signature key: key 0 (kid \"rsa-1\"): \"use\" is \"enc\", not \"sig\"; "
       "key 1: symmetric (\"oct\") key: HMAC keys come only from configuration"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto set = JwkSet::parse(c.text, c.max_bytes, c.max_keys);
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.code(), Errc::kInvalidArgument);
    EXPECT_NE(set.status().message.find(c.message), std::string::npos) << set.status().message;
  }
}

// A signing key and an encryption key may share a kid (IdPs publish both):
// only usable keys must be told apart by it.
TEST(JwkSet, AKidSharedWithASkippedKeyIsNoDuplicate) {
  json enc = sample_keys().rsa.public_jwk();
  enc["use"] = "enc";
  auto set = JwkSet::parse(doc({sample_keys().rsa.public_jwk(), enc}));
  ASSERT_TRUE(set.ok()) << testing::Describe(set);
  EXPECT_EQ(set->keys().size(), 1u);
  EXPECT_EQ(set->skipped().size(), 1u);
}

TEST(JwkSet, FindsAKeyByKidOrTheSoleKey) {
  auto three = JwkSet::parse(testing::jwks_document({&sample_keys().rsa, &sample_keys().ec, &sample_keys().ed}));
  ASSERT_TRUE(three.ok()) << testing::Describe(three);
  ASSERT_NE(three->find("ec-1"), nullptr);
  EXPECT_EQ(three->find("ec-1")->type, Jwk::Type::kEcP256);
  EXPECT_EQ(three->find("ed-1")->type, Jwk::Type::kEd25519);
  EXPECT_EQ(three->find("nope"), nullptr);
  EXPECT_EQ(three->find(""), nullptr);  // which one? none.

  JwtTestKey unnamed = JwtTestKey::ed25519("");
  auto sole = JwkSet::parse(testing::jwks_document({&unnamed}));
  ASSERT_TRUE(sole.ok()) << testing::Describe(sole);
  ASSERT_NE(sole->find(""), nullptr);
  EXPECT_EQ(sole->find("")->kid, "");
  EXPECT_EQ(sole->find("rsa-1"), nullptr);  // a kid must match

  auto one = JwkSet::parse(testing::jwks_document({&sample_keys().ec}));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->find(""), one->find("ec-1"));
}

// What a hostile document can send; each is refused or skipped in bounded
// time and memory, and the messages stay short.
TEST(JwkSet, HostileDocumentsAreRefusedWithoutHarm) {
  const std::string deep_array = std::string(500000, '[') + std::string(500000, ']');
  const std::string deep_object = "{\"keys\":" + std::string(300000, '[') + std::string(300000, ']') + "}";
  const std::string unclosed = std::string(1 << 20, '[');
  for (const std::string* text : {&deep_array, &deep_object, &unclosed}) {
    auto set = JwkSet::parse(*text, 2 << 20);
    EXPECT_EQ(set.code(), Errc::kInvalidArgument);
  }

  json long_kid = sample_keys().rsa.public_jwk();
  long_kid["kid"] = std::string(100000, 'k');
  auto set = JwkSet::parse(doc({long_kid, long_kid}));
  EXPECT_EQ(set.code(), Errc::kInvalidArgument);
  EXPECT_LT(set.status().message.size(), 200u) << set.status().message;

  json huge_n = sample_keys().rsa.public_jwk();
  huge_n["n"] = security::base64url_encode(std::string(2048, '\xff'));  // 16384 bits
  auto huge = JwkSet::parse(doc({huge_n}));
  EXPECT_EQ(huge.code(), Errc::kInvalidArgument);
  EXPECT_NE(huge.status().message.find("RSA modulus of 16384 bits, over 8192"), std::string::npos)
      << huge.status().message;

  // Bytes that are not UTF-8 in a string: nlohmann refuses the document.
  EXPECT_EQ(JwkSet::parse("{\"keys\":[{\"kty\":\"\xff\"}]}").code(), Errc::kInvalidArgument);
}

}  // namespace
}  // namespace authrpc
