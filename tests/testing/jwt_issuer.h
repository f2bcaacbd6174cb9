// JWT test issuers' keys: signing keys made with OpenSSL (RSA, P-256,
// Ed25519, and an HMAC secret for the key-confusion cases), any header and
// payload signed as a compact JWS (so tests can make malformed or hostile
// tokens), and JWKS documents of the public keys. Library authrpc_testing:
// used by the tests (tests/testing/jwt_test_issuer.h adds a JWKS server) and by
// minibench's jwt rows.
#pragma once

#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

typedef struct evp_pkey_st EVP_PKEY;

namespace authrpc::testing {

class JwtTestKey {
 public:
  static JwtTestKey rsa(std::string kid, int bits = 2048);  // RS256
  static JwtTestKey ec_p256(std::string kid);               // ES256
  static JwtTestKey ed25519(std::string kid);               // EdDSA
  const std::string& kid() const { return kid_; }
  const std::string& alg() const { return alg_; }  // "RS256", "ES256", "EdDSA"
  // The public JWK: {"kty":..., "kid":..., "alg":..., "use":"sig", ...}.
  nlohmann::json public_jwk() const;
  // PEM of the public key (for the RS256 → HS256 confusion case: the
  // attacker HMACs with the public key's bytes).
  std::string public_pem() const;
  // base64url(header) "." base64url(payload) "." base64url(signature) with
  // this key; the header's "alg" and "kid" are added unless `header`
  // already has them (so a test can lie about either). ES256 signatures are
  // the JWS raw r||s form (RFC 7518 §3.4), not DER.
  std::string sign(const nlohmann::json& payload, nlohmann::json header = nlohmann::json::object()) const;
  // Same, from raw header and payload text (duplicate keys, bad JSON).
  std::string sign_raw(std::string_view header_json, std::string_view payload_json) const;
  EVP_PKEY* pkey() const { return key_.get(); }

 private:
  std::string kid_, alg_;
  std::shared_ptr<EVP_PKEY> key_;
};

// base64url(header).base64url(payload).base64url(HMAC-SHA256(secret, ...)):
// HS256 with `secret`, for alg-confusion and shared-key cases.
std::string sign_hs256(std::string_view secret, const nlohmann::json& payload,
                       nlohmann::json header = nlohmann::json::object());
// An unsigned token: {"alg":"none"}, an empty signature part.
std::string unsigned_token(const nlohmann::json& payload);

// {"keys": [public_jwk() of each]}.
std::string jwks_document(std::initializer_list<const JwtTestKey*> keys);

}  // namespace authrpc::testing
