// Fuzz target: what the `jwt` server does with a client's HELLO before any
// key is involved, and with a JWKS document (components/jwt/oauthbearer.h,
// components/jwt/jwt_verifier.h, components/jwt/jwt_keys.h). The message
// arrives from an unauthenticated peer, the JWKS from the network. The input is
// an OAUTHBEARER message: its token is verified against a fixed key set and a
// shared HS256 key (the fuzzer cannot know a key, so nothing it makes may pass
// unless it is a seed signed with that key), and the whole input is also parsed
// as a JWKS document.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "authrpc/components/jwt/jwt_keys.h"
#include "authrpc/components/jwt/jwt_verifier.h"
#include "authrpc/components/jwt/oauthbearer.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

// An Ed25519 public key (RFC 8037 §A.2's example) and an RSA one are enough
// to reach every key-type branch.
constexpr std::string_view kJwks = R"({"keys": [
  {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
  {"kty": "EC", "crv": "P-256", "kid": "ec", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
   "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace authrpc;
  static const std::shared_ptr<const JwkSet> keys = [] {
    auto parsed = JwkSet::parse(kJwks);
    if (!parsed.ok() || parsed->keys().size() != 2) fuzz::fail("the fixed JWKS does not parse");
    return std::make_shared<const JwkSet>(std::move(*parsed));
  }();
  static JwtVerifier* verifier = [] {
    JwtPolicy p;
    p.issuers = {"https://idp.fuzz"};
    p.audience = "fuzz";
    p.algorithms = {"RS256", "PS256", "ES256", "EdDSA", "HS256"};
    p.hmac_key = security::SecretBytes(fuzz::kJwtHmacKey);
    p.groups_claim = "groups";
    p.max_age = std::chrono::hours(24 * 365 * 100);
    p.required_claims = {"sub"};
    p.cache_entries = 4;  // small: eviction runs too
    return new JwtVerifier(std::move(p));
  }();

  const std::string_view input(reinterpret_cast<const char*>(bytes), size);
  auto message = parse_oauthbearer(input, 32 * 1024);
  if (message.ok()) {
    const std::string_view token = message->token;
    if (token.data() < input.data() || token.data() + token.size() > input.data() + input.size()) {
      fuzz::fail("parse_oauthbearer returned a token outside the message");
    }
    // Far from any exp: a seed's token is valid, the rest are refused.
    const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
    auto verified = verifier->verify(token, keys, now);
    if (verified.ok()) {
      if ((*verified)->principal.empty() || (*verified)->issuer != "https://idp.fuzz") {
        fuzz::fail("an accepted token without a principal or with another issuer");
      }
    } else if (verified.status().message.find(std::string(token)) != std::string::npos &&
               token.size() > 16) {
      fuzz::fail("a refusal quotes the token");
    }
    if (verifier->cached() > 4) fuzz::fail("the verified-token cache above its bound");
  }
  auto jwks = JwkSet::parse(input);
  if (jwks.ok() && jwks->keys().empty()) fuzz::fail("a JWKS parsed with no key");
  return 0;
}
