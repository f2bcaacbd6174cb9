// JwtVerifier: decides whether a JWS-signed JWT access token (RFC 7519,
// RFC 9068) is one this service accepts — its signature against the
// issuer's keys, then its claims against the service's policy — and what
// identity it carries. Keeps the tokens it has verified (a bounded cache
// keyed by SHA-256 of the token, each until its exp) so that a client
// reconnecting with the same token costs a hash and a lookup, not a
// signature check. Owned by the `jwt` server mechanism (components/jwt/jwt.h),
// shared by every IO thread: verify() is thread-safe. docs/JWT.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "authrpc/base/result.h"
#include "authrpc/components/jwt/jwt_keys.h"
#include "authrpc/security/secret_bytes.h"

namespace authrpc {

// What the service accepts (the `jwt` server options, docs/CONFIG.md).
struct JwtPolicy {
  std::vector<std::string> issuers;  // `iss` must be one of them (required)
  std::string audience;              // `aud` (a string or an array) must name it (required)
  // Signature algorithms accepted. `none` never is; HS256/384/512 only with
  // hmac_key set (a shared secret configured explicitly, never a JWKS key).
  std::vector<std::string> algorithms = {"RS256", "ES256", "EdDSA"};
  security::SecretBytes hmac_key;
  std::chrono::seconds leeway{60};  // allowed clock skew for exp, nbf, iat
  // When set, tokens must carry `iat` and be younger than this.
  std::optional<std::chrono::seconds> max_age;
  std::vector<std::string> required_claims;  // must be present (any value)
  std::string principal_claim = "sub";       // a string claim naming the client
  std::string groups_claim;                  // "": none; else a string or an array of strings
  std::size_t max_token_bytes = 16 * 1024;
  std::size_t cache_entries = 10000;  // 0: no cache
};

// What a verified token says.
struct VerifiedJwt {
  std::string principal;  // the principal claim's value
  std::string issuer;
  std::string subject;  // `sub`, if any
  std::vector<std::string> groups;
  std::chrono::system_clock::time_point expires;
  std::string expires_utc;  // "2026-12-01T22:00:00Z", made once per verification
  std::optional<std::chrono::system_clock::time_point> not_before;  // nbf
  std::optional<std::chrono::system_clock::time_point> issued_at;   // iat
  // RFC 8705 certificate binding: `cnf`.`x5t#S256` (base64url SHA-256 of
  // the client certificate's DER), empty when the token is not bound.
  std::string certificate_thumbprint;
};

// Why a token is refused, beyond its Errc (the mechanism reacts to these).
enum class JwtRefusal {
  kNone,
  kUnknownKey,  // no key with the token's kid: the key set may be out of date
  kOther,
};

class JwtVerifier {
 public:
  explicit JwtVerifier(JwtPolicy policy);
  ~JwtVerifier();

  // Verifies `token` with `keys` at `now`. Errors (messages name the reason,
  // never the token): CREDENTIALS_EXPIRED for a token past its exp (or
  // max_age) — re-acquire one; AUTHENTICATION_FAILED for everything else
  // (malformed, bad signature, algorithm refused, unknown key, wrong issuer
  // or audience, not yet valid, missing claims). `refusal` tells an unknown
  // key apart. A token verified before is answered from the cache (its
  // times checked again) until the key set changes (`keys` is a different
  // object) or it expires.
  Result<std::shared_ptr<const VerifiedJwt>> verify(std::string_view token,
                                                     const std::shared_ptr<const JwkSet>& keys,
                                                     std::chrono::system_clock::time_point now,
                                                     JwtRefusal* refusal = nullptr);

  // The signature and claim checks without the cache (what a cold session
  // costs; minibench measures it).
  Result<VerifiedJwt> verify_uncached(std::string_view token, const JwkSet& keys,
                                      std::chrono::system_clock::time_point now,
                                      JwtRefusal* refusal = nullptr) const;

  const JwtPolicy& policy() const noexcept { return policy_; }
  std::size_t cached() const;

 private:
  Status check_times(const VerifiedJwt& v, std::chrono::system_clock::time_point now) const;

  JwtPolicy policy_;
  mutable std::mutex mu_;
  const JwkSet* cached_for_ = nullptr;  // the key set the cache's entries were verified with
  std::shared_ptr<const JwkSet> cached_keys_;  // keeps cached_for_ alive
  std::unordered_map<std::string, std::shared_ptr<const VerifiedJwt>> cache_;  // SHA-256 → result
};

}  // namespace authrpc
