// JwkSet: the signature-verification keys of a JWKS document (RFC 7517) as
// OpenSSL keys, parsed once when the document is loaded so that a token's
// check costs one signature verification and no key parsing. Read by the
// `jwt` mechanism's key source (components/jwt/jwt_key_source.h); immutable
// once made, so one set is shared by every IO thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace authrpc {

// One usable key. `alg` is the JWK's "alg" when it names one ("" when
// absent): a token's header alg must then equal it.
struct Jwk {
  enum class Type { kRsa, kEcP256, kEd25519 };
  std::string kid;  // "" when the JWK has none
  std::string alg;
  Type type = Type::kRsa;
  std::shared_ptr<EVP_PKEY> key;  // public key only
};

class JwkSet {
 public:
  JwkSet() = default;
  // Parses a JWKS document ({"keys": [...]}). Keys it cannot use are skipped,
  // each with a one-line reason in skipped() (private key members present
  // are ignored, never kept): "use" other than "sig", "key_ops" without
  // "verify", "kty" other than RSA / EC / OKP, EC curves other than P-256
  // (and points not on it), OKP curves other than Ed25519, RSA moduli under
  // 2048 or over 8192 bits, symmetric ("oct") keys (HMAC keys come only from
  // explicit configuration), an "alg" that is no signature algorithm of the
  // key's type, and members that are missing, of the wrong JSON type or not
  // unpadded base64url. INVALID_ARGUMENT for a document that is not JSON,
  // has no "keys" array, is larger than `max_bytes`, has more than
  // `max_keys` keys, two usable keys with the same kid (a skipped key may
  // share a signing key's kid), or no usable key (the message quotes the
  // first reasons). Peer strings in reasons and messages are escaped and cut
  // to 64 bytes.
  static Result<JwkSet> parse(std::string_view json, std::size_t max_bytes = 1 << 20,
                              std::size_t max_keys = 100);

  // The key named `kid`; with an empty `kid`, the only key if there is
  // exactly one. Null when there is none.
  const Jwk* find(std::string_view kid) const;
  const std::vector<Jwk>& keys() const noexcept { return keys_; }
  const std::vector<std::string>& skipped() const noexcept { return skipped_; }

 private:
  std::vector<Jwk> keys_;
  std::vector<std::string> skipped_;
};

}  // namespace authrpc
