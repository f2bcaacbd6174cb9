// JwtVerifier (components/jwt/jwt_verifier.h): every reason a token is refused,
// as a table (token made by the test issuer, tests/testing/jwt_test_issuer.h → expected
// code and message), then the verified-token cache.
#include "authrpc/components/jwt/jwt_verifier.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "authrpc/security/base64url.h"
#include "tests/testing/jwt_test_issuer.h"

namespace authrpc {
namespace {

using json = nlohmann::json;
using SysClock = std::chrono::system_clock;
using testing::JwtTestKey;

constexpr char kIssuer[] = "https://idp.example.com/realms/test";
constexpr char kAudience[] = "authrpc-test";
constexpr char kHmacSecret[] = "a shared secret of at least 32 bytes, configured";

struct Keys {
  JwtTestKey rsa = JwtTestKey::rsa("rsa-1");
  JwtTestKey ec = JwtTestKey::ec_p256("ec-1");
  JwtTestKey ed = JwtTestKey::ed25519("ed-1");
  JwtTestKey stranger = JwtTestKey::rsa("rsa-1");  // same kid, another key
  std::shared_ptr<const JwkSet> set;
  Keys() {
    auto parsed = JwkSet::parse(testing::jwks_document({&rsa, &ec, &ed}));
    EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
    set = std::make_shared<const JwkSet>(std::move(*parsed));
  }
};

const Keys& keys() {
  static const Keys* k = new Keys();
  return *k;
}

std::int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(SysClock::now().time_since_epoch())
      .count();
}

json good_claims() {
  return {{"iss", kIssuer},  {"aud", kAudience},     {"sub", "alice"},
          {"exp", now_s() + 600}, {"iat", now_s() - 5}, {"groups", {"staff", "idp-admins"}},
          {"email", "alice@example.com"}};
}

JwtPolicy base_policy() {
  JwtPolicy p;
  p.issuers = {kIssuer};
  p.audience = kAudience;
  p.groups_claim = "groups";
  return p;
}

// Changes one signature byte (not the last character, whose low bits are
// padding: changing those would make the part non-canonical base64url).
std::string tamper_signature(std::string token) {
  char& c = token[token.size() - 10];
  c = c == 'A' ? 'B' : 'A';
  return token;
}

struct Case {
  const char* name;
  std::function<std::string()> token;
  Errc expected;                 // kOk: accepted
  const char* message_has = "";  // part of the refusal's message
  std::function<void(JwtPolicy&)> policy = nullptr;
  JwtRefusal refusal = JwtRefusal::kOther;
};

json with(json j, const char* key, json value) {
  j[key] = std::move(value);
  return j;
}
json without(json j, const char* key) {
  j.erase(key);
  return j;
}

const Case kCases[] = {
    {"rs256_accepted", [] { return keys().rsa.sign(good_claims()); }, Errc::kOk},
    {"es256_accepted", [] { return keys().ec.sign(good_claims()); }, Errc::kOk},
    {"eddsa_accepted", [] { return keys().ed.sign(good_claims()); }, Errc::kOk},
    {"aud_array_accepted",
     [] { return keys().rsa.sign(with(good_claims(), "aud", {"other", kAudience})); }, Errc::kOk},
    // Dates past the clock's end (2262) stay dates: a far exp is valid, a
    // far nbf or iat is in the future.
    {"exp_after_2262_accepted",
     [] { return keys().rsa.sign(with(good_claims(), "exp", 10'000'000'000)); }, Errc::kOk},
    {"exp_in_2999_accepted",
     [] { return keys().rsa.sign(with(good_claims(), "exp", 32'472'144'000)); }, Errc::kOk},
    {"exp_after_3000_refused",
     [] { return keys().rsa.sign(with(good_claims(), "exp", 40'000'000'000)); },
     Errc::kAuthenticationFailed, "no valid expiry"},
    {"nbf_after_2262_refused",
     [] { return keys().rsa.sign(with(good_claims(), "nbf", 9'300'000'000)); },
     Errc::kAuthenticationFailed, "not valid before"},
    {"iat_in_2286_refused",
     [] { return keys().rsa.sign(with(good_claims(), "iat", 9'800'000'000)); },
     Errc::kAuthenticationFailed, "issued in the future"},
    {"iat_in_2999_refused",
     [] { return keys().rsa.sign(with(good_claims(), "iat", 32'472'144'000)); },
     Errc::kAuthenticationFailed, "issued in the future"},
    {"iat_in_2999_with_max_age_refused",
     [] { return keys().rsa.sign(with(good_claims(), "iat", 32'472'144'000)); },
     Errc::kAuthenticationFailed, "issued in the future",
     [](JwtPolicy& p) { p.max_age = std::chrono::seconds(30 * 86400); }},
    {"expired", [] { return keys().rsa.sign(with(good_claims(), "exp", now_s() - 120)); },
     Errc::kCredentialsExpired, "expired at"},
    {"expired_within_leeway",
     [] { return keys().rsa.sign(with(good_claims(), "exp", now_s() - 10)); }, Errc::kOk},
    {"not_yet_valid", [] { return keys().rsa.sign(with(good_claims(), "nbf", now_s() + 600)); },
     Errc::kAuthenticationFailed, "not valid before"},
    {"issued_in_the_future",
     [] { return keys().rsa.sign(with(good_claims(), "iat", now_s() + 600)); },
     Errc::kAuthenticationFailed, "issued in the future"},
    {"older_than_max_age",
     [] { return keys().rsa.sign(with(good_claims(), "iat", now_s() - 4000)); },
     Errc::kCredentialsExpired, "older than",
     [](JwtPolicy& p) { p.max_age = std::chrono::seconds(3600); }},
    {"max_age_needs_iat", [] { return keys().rsa.sign(without(good_claims(), "iat")); },
     Errc::kAuthenticationFailed, "no issue time",
     [](JwtPolicy& p) { p.max_age = std::chrono::seconds(3600); }},
    {"wrong_issuer", [] { return keys().rsa.sign(with(good_claims(), "iss", "https://evil")); },
     Errc::kAuthenticationFailed, "not trusted"},
    {"no_issuer", [] { return keys().rsa.sign(without(good_claims(), "iss")); },
     Errc::kAuthenticationFailed, "no issuer"},
    {"wrong_audience", [] { return keys().rsa.sign(with(good_claims(), "aud", "other")); },
     Errc::kAuthenticationFailed, "not for this service"},
    {"no_audience", [] { return keys().rsa.sign(without(good_claims(), "aud")); },
     Errc::kAuthenticationFailed, "not for this service"},
    {"no_exp", [] { return keys().rsa.sign(without(good_claims(), "exp")); },
     Errc::kAuthenticationFailed, "no valid expiry"},
    {"exp_is_a_string", [] { return keys().rsa.sign(with(good_claims(), "exp", "tomorrow")); },
     Errc::kAuthenticationFailed, "no valid expiry"},
    {"bad_signature", [] { return tamper_signature(keys().rsa.sign(good_claims())); },
     Errc::kAuthenticationFailed, "bad signature"},
    {"signed_by_another_key_same_kid", [] { return keys().stranger.sign(good_claims()); },
     Errc::kAuthenticationFailed, "bad signature"},
    {"bad_es256_signature", [] { return tamper_signature(keys().ec.sign(good_claims())); },
     Errc::kAuthenticationFailed, "bad signature"},
    {"bad_eddsa_signature", [] { return tamper_signature(keys().ed.sign(good_claims())); },
     Errc::kAuthenticationFailed, "bad signature"},
    {"alg_none", [] { return testing::unsigned_token(good_claims()); },
     Errc::kAuthenticationFailed, "alg none"},
    {"rs256_to_hs256_key_confusion",
     [] {
       return testing::sign_hs256(keys().rsa.public_pem(), good_claims(),
                                  {{"kid", keys().rsa.kid()}});
     },
     Errc::kAuthenticationFailed, "not accepted"},
    {"hs256_without_a_configured_key",
     [] { return testing::sign_hs256(kHmacSecret, good_claims()); },
     Errc::kAuthenticationFailed, "needs a shared key",
     [](JwtPolicy& p) { p.algorithms.push_back("HS256"); }},
    {"hs256_with_the_configured_key",
     [] { return testing::sign_hs256(kHmacSecret, good_claims()); }, Errc::kOk,
     "",
     [](JwtPolicy& p) {
       p.algorithms.push_back("HS256");
       p.hmac_key = security::SecretBytes(std::string_view(kHmacSecret));
     }},
    {"hs256_with_another_key",
     [] { return testing::sign_hs256("another secret of at least 32 bytes....", good_claims()); },
     Errc::kAuthenticationFailed, "bad signature",
     [](JwtPolicy& p) {
       p.algorithms.push_back("HS256");
       p.hmac_key = security::SecretBytes(std::string_view(kHmacSecret));
     }},
    {"algorithm_not_allowed", [] { return keys().ed.sign(good_claims()); },
     Errc::kAuthenticationFailed, "not accepted",
     [](JwtPolicy& p) { p.algorithms = {"RS256"}; }},
    {"unknown_kid",
     [] { return JwtTestKey::rsa("rsa-2").sign(good_claims()); }, Errc::kAuthenticationFailed,
     "no key 'rsa-2'", nullptr, JwtRefusal::kUnknownKey},
    {"no_kid_among_several",
     [] { return keys().rsa.sign_raw(R"({"alg":"RS256"})", good_claims().dump()); },
     Errc::kAuthenticationFailed, "names no key", nullptr, JwtRefusal::kUnknownKey},
    {"alg_does_not_fit_the_key",
     [] { return keys().ec.sign(good_claims(), {{"alg", "ES256"}, {"kid", "rsa-1"}}); },
     Errc::kAuthenticationFailed, "not for algorithm"},
    {"oversized", [] { return keys().rsa.sign(with(good_claims(), "pad", std::string(20000, 'x'))); },
     Errc::kAuthenticationFailed, "over the limit"},
    {"two_parts", [] { return std::string("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0"); },
     Errc::kAuthenticationFailed, "not a compact JWS"},
    {"four_parts", [] { return keys().rsa.sign(good_claims()) + ".x"; },
     Errc::kAuthenticationFailed, "not a compact JWS"},
    {"bad_base64_header", [] { return std::string("ey*J.eyJzdWIiOiJhIn0.c2ln"); },
     Errc::kAuthenticationFailed, "header is not base64url"},
    {"header_not_json",
     [] { return security::base64url_encode("{not json") + ".eyJzdWIiOiJhIn0.c2ln"; },
     Errc::kAuthenticationFailed, "header is not a JSON object"},
    {"payload_not_json",
     [] { return keys().rsa.sign_raw(R"({"alg":"RS256","kid":"rsa-1"})", "{\"iss\":"); },
     Errc::kAuthenticationFailed, "payload is not a JSON object"},
    {"duplicate_claim",
     [] {
       std::string claims = good_claims().dump();
       claims.insert(1, R"("sub":"root",)");
       return keys().rsa.sign_raw(R"({"alg":"RS256","kid":"rsa-1"})", claims);
     },
     Errc::kAuthenticationFailed, "payload has a member twice"},
    {"duplicate_header_member",
     [] {
       return keys().rsa.sign_raw(R"({"alg":"RS256","kid":"rsa-1","alg":"none"})",
                                  good_claims().dump());
     },
     Errc::kAuthenticationFailed, "header has a member twice"},
    {"crit_header", [] { return keys().rsa.sign(good_claims(), {{"crit", {"exp"}}}); },
     Errc::kAuthenticationFailed, "crit"},
    {"typ_not_an_access_token", [] { return keys().rsa.sign(good_claims(), {{"typ", "dpop+jwt"}}); },
     Errc::kAuthenticationFailed, "typ"},
    {"typ_at_jwt_accepted", [] { return keys().rsa.sign(good_claims(), {{"typ", "at+jwt"}}); },
     Errc::kOk},
    {"no_principal_claim", [] { return keys().rsa.sign(without(good_claims(), "sub")); },
     Errc::kAuthenticationFailed, "no usable principal claim"},
    {"principal_with_control_bytes",
     [] { return keys().rsa.sign(with(good_claims(), "sub", "alice\nforged log line")); },
     Errc::kAuthenticationFailed, "no usable principal claim"},
    {"principal_from_another_claim", [] { return keys().rsa.sign(good_claims()); }, Errc::kOk, "",
     [](JwtPolicy& p) { p.principal_claim = "email"; }},
    {"groups_not_strings", [] { return keys().rsa.sign(with(good_claims(), "groups", {1, 2})); },
     Errc::kAuthenticationFailed, "groups claim"},
    {"required_claim_missing", [] { return keys().rsa.sign(good_claims()); },
     Errc::kAuthenticationFailed, "required claim 'scope'",
     [](JwtPolicy& p) { p.required_claims = {"scope"}; }},
    {"deeply_nested_claims",
     [] {
       return keys().rsa.sign(with(good_claims(), "x", json::parse(R"({"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":{}}}}}}}}}})")));
     },
     Errc::kAuthenticationFailed, "nested too deeply"},
};

class JwtVerifierTableTest : public ::testing::TestWithParam<Case> {};

TEST_P(JwtVerifierTableTest, Decides) {
  const Case& c = GetParam();
  JwtPolicy policy = base_policy();
  if (c.policy) c.policy(policy);
  JwtVerifier verifier(std::move(policy));
  const std::string token = c.token();
  JwtRefusal refusal = JwtRefusal::kNone;
  auto r = verifier.verify(token, keys().set, SysClock::now(), &refusal);
  if (c.expected == Errc::kOk) {
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(refusal, JwtRefusal::kNone);
    EXPECT_EQ((*r)->issuer, kIssuer);
    return;
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), c.expected) << r.status().to_string();
  EXPECT_NE(r.status().message.find(c.message_has), std::string::npos) << r.status().message;
  EXPECT_EQ(refusal, c.refusal);
  // Never the token, nor its signature, in a message.
  const std::string signature = token.substr(token.rfind('.') + 1);
  EXPECT_EQ(r.status().message.find(token), std::string::npos);
  if (signature.size() > 8) {
    EXPECT_EQ(r.status().message.find(signature), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, JwtVerifierTableTest, ::testing::ValuesIn(kCases),
                         [](const auto& row) { return std::string(row.param.name); });

TEST(JwtVerifierTest, CarriesPrincipalGroupsExpiryAndCertificateBinding) {
  JwtPolicy policy = base_policy();
  policy.principal_claim = "email";
  JwtVerifier verifier(policy);
  json claims = good_claims();
  claims["cnf"] = {{"x5t#S256", "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"}};
  auto r = verifier.verify(keys().ec.sign(claims), keys().set, SysClock::now());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->principal, "alice@example.com");
  EXPECT_EQ((*r)->subject, "alice");
  EXPECT_EQ((*r)->groups, (std::vector<std::string>{"staff", "idp-admins"}));
  EXPECT_EQ(SysClock::to_time_t((*r)->expires), claims["exp"].get<std::int64_t>());
  EXPECT_EQ((*r)->certificate_thumbprint, "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2");
}

TEST(JwtVerifierTest, ASecondVerificationComesFromTheCache) {
  JwtVerifier verifier(base_policy());
  const std::string token = keys().rsa.sign(good_claims());
  auto first = verifier.verify(token, keys().set, SysClock::now());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(verifier.cached(), 1u);
  auto second = verifier.verify(token, keys().set, SysClock::now());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->get(), second->get());  // the same result object: no second check
  // A bad token is never cached.
  EXPECT_FALSE(verifier.verify(tamper_signature(token), keys().set, SysClock::now()).ok());
  EXPECT_EQ(verifier.cached(), 1u);
}

TEST(JwtVerifierTest, ACachedTokenStillExpires) {
  JwtVerifier verifier(base_policy());
  const std::string token = keys().rsa.sign(with(good_claims(), "exp", now_s() + 30));
  ASSERT_TRUE(verifier.verify(token, keys().set, SysClock::now()).ok());
  auto later = verifier.verify(token, keys().set, SysClock::now() + std::chrono::minutes(5));
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.code(), Errc::kCredentialsExpired);
}

TEST(JwtVerifierTest, NewKeysVerifyCachedTokensAgain) {
  JwtVerifier verifier(base_policy());
  const std::string token = keys().rsa.sign(good_claims());
  ASSERT_TRUE(verifier.verify(token, keys().set, SysClock::now()).ok());
  // The issuer dropped rsa-1: a token it signed is refused, cached or not.
  auto rotated = JwkSet::parse(testing::jwks_document({&keys().ec}));
  ASSERT_TRUE(rotated.ok());
  auto set = std::make_shared<const JwkSet>(std::move(*rotated));
  JwtRefusal refusal = JwtRefusal::kNone;
  auto r = verifier.verify(token, set, SysClock::now(), &refusal);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(refusal, JwtRefusal::kUnknownKey);
}

TEST(JwtVerifierTest, TheCacheIsBounded) {
  JwtPolicy policy = base_policy();
  policy.cache_entries = 4;
  JwtVerifier verifier(policy);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(verifier.verify(keys().ed.sign(with(good_claims(), "jti", i)), keys().set,
                                SysClock::now())
                    .ok());
    EXPECT_LE(verifier.cached(), 4u);
  }
}

}  // namespace
}  // namespace authrpc
