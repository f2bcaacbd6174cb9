// Fuzz target: the claim checks of the `jwt` mechanism's verifier
// (components/jwt/jwt_verifier.h) on any header and claims. jwt_fuzz reaches
// them only with its signed seeds, since a fuzzer cannot sign; here the input
// is the token's JSON, which the target signs with the verifier's shared HS256
// key, so every check after the signature runs on the fuzzer's bytes: dates
// (exp, nbf, iat, the maximum age), issuer, audience, the principal and groups
// claims, required claims, nesting. Input: the header JSON, a newline, the
// claims JSON; without a newline, the whole input is the claims under
// {"alg":"HS256"}.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "authrpc/components/jwt/jwt_keys.h"
#include "authrpc/components/jwt/jwt_verifier.h"
#include "authrpc/security/base64url.h"
#include "authrpc/security/hmac_sha256.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

std::string sign(std::string_view header, std::string_view claims) {
  using authrpc::security::base64url_encode;
  const std::string input = base64url_encode(header) + "." + base64url_encode(claims);
  std::array<std::uint8_t, authrpc::security::kHmacSha256Bytes> mac{};
  const std::string_view key = authrpc::fuzz::kJwtHmacKey;
  if (!authrpc::security::hmac_sha256({reinterpret_cast<const std::uint8_t*>(key.data()), key.size()},
                                      {input}, &mac)) {
    authrpc::fuzz::fail("hmac");
  }
  return input + "." + base64url_encode(std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace authrpc;
  using SysClock = std::chrono::system_clock;
  // HS256 needs no key set; one public key, which no input can sign for.
  static const std::shared_ptr<const JwkSet> keys = [] {
    auto parsed = JwkSet::parse(
        R"({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "ed",)"
        R"( "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]})");
    if (!parsed.ok()) fuzz::fail("the fixed JWKS does not parse");
    return std::make_shared<const JwkSet>(std::move(*parsed));
  }();
  static JwtVerifier* verifier = [] {
    JwtPolicy p;
    p.issuers = {"https://idp.fuzz"};
    p.audience = "fuzz";
    p.algorithms = {"HS256"};
    p.hmac_key = security::SecretBytes(fuzz::kJwtHmacKey);
    p.groups_claim = "groups";
    p.max_age = std::chrono::hours(24 * 30);
    p.leeway = std::chrono::seconds(3600);
    p.cache_entries = 4;
    return new JwtVerifier(std::move(p));
  }();

  const std::string_view input(reinterpret_cast<const char*>(bytes), size);
  const auto newline = input.find('\n');
  const std::string token = newline == std::string_view::npos
                                ? sign(R"({"alg":"HS256"})", input)
                                : sign(input.substr(0, newline), input.substr(newline + 1));
  // Now, and near the end of the system clock (2262), where date arithmetic
  // would overflow.
  for (const std::int64_t now_s : {std::int64_t{1'800'000'000}, std::int64_t{9'200'000'000}}) {
    const auto now = SysClock::time_point(std::chrono::seconds(now_s));
    auto verified = verifier->verify(token, keys, now);
    if (verified.ok()) {
      const VerifiedJwt& v = **verified;
      if (v.principal.empty() || v.issuer != "https://idp.fuzz") {
        fuzz::fail("an accepted token without a principal or with another issuer");
      }
      if (v.expires + std::chrono::hours(1) < now) fuzz::fail("an expired token was accepted");
    } else if (verified.status().message.find(token.substr(token.rfind('.') + 1)) != std::string::npos) {
      fuzz::fail("a refusal quotes the signature");
    }
  }
  if (verifier->cached() > 4) fuzz::fail("the verified-token cache above its bound");
  return 0;
}
