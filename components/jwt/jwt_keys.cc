#include "authrpc/components/jwt/jwt_keys.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <optional>

#include "authrpc/base/log.h"
#include "authrpc/security/base64url.h"

namespace authrpc {
namespace {

using Json = nlohmann::json;

// Bounds on what a key may cost to verify with: a larger RSA modulus makes
// each check slower (quadratically) for nothing a real IdP publishes.
constexpr int kMinRsaBits = 2048;
constexpr int kMaxRsaBits = 8192;
// How many skip reasons the "no usable key" error quotes.
constexpr std::size_t kQuotedReasons = 3;

struct PkeyFree {
  void operator()(EVP_PKEY* p) const noexcept { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const noexcept { EVP_PKEY_CTX_free(p); }
};
struct ParamBldFree {
  void operator()(OSSL_PARAM_BLD* p) const noexcept { OSSL_PARAM_BLD_free(p); }
};
struct ParamFree {
  void operator()(OSSL_PARAM* p) const noexcept { OSSL_PARAM_free(p); }
};
struct BnFree {
  void operator()(BIGNUM* p) const noexcept { BN_free(p); }
};
using UniquePkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using UniqueBn = std::unique_ptr<BIGNUM, BnFree>;

// A key built, or why not.
struct Built {
  UniquePkey key;
  std::string reason;
};

Built skip(std::string reason) { return {nullptr, std::move(reason)}; }

// A string from the document, quoted for a message: escaped, and cut short
// so that a hostile document cannot make an error message megabytes long.
std::string quote_for_message(std::string_view text) { return "\"" + peer_text(text) + "\""; }

// A base64url member, decoded; the reason in `*reason` when it is missing,
// not a string or not unpadded base64url.
std::optional<std::string> member_bytes(const Json& jwk, const char* name, std::string* reason) {
  auto it = jwk.find(name);
  if (it == jwk.end()) {
    *reason = std::string("no \"") + name + "\"";
    return std::nullopt;
  }
  if (!it->is_string()) {
    *reason = std::string("\"") + name + "\" is not a string";
    return std::nullopt;
  }
  auto bytes = security::base64url_decode(it->get_ref<const std::string&>());
  if (!bytes) {
    *reason = std::string("\"") + name + "\" is not unpadded base64url";
    return std::nullopt;
  }
  if (bytes->empty()) {
    *reason = std::string("\"") + name + "\" is empty";
    return std::nullopt;
  }
  return bytes;
}

// EVP_PKEY_fromdata() for a public key of `type` ("RSA", "EC") from
// `params`, then, if `check`, OpenSSL's public-key check (for EC: the point
// is on the curve and of the group's order). RSA keys skip it: OpenSSL's
// runs Miller-Rabin on the modulus (milliseconds per key) and refuses
// exponents under 65537; rsa_key() checks what matters for verifying.
UniquePkey from_data(const char* type, const OSSL_PARAM* params, bool check) {
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) <= 0 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, const_cast<OSSL_PARAM*>(params)) <= 0) {
    return nullptr;
  }
  UniquePkey key(raw);
  if (!check) return key;
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> check_ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
  if (!check_ctx || EVP_PKEY_public_check(check_ctx.get()) != 1) return nullptr;
  return key;
}

UniqueBn to_bn(const std::string& bytes) {
  return UniqueBn(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                            static_cast<int>(bytes.size()), nullptr));
}

Built rsa_key(const Json& jwk) {
  std::string reason;
  auto n = member_bytes(jwk, "n", &reason);
  if (!n) return skip("RSA key: " + reason);
  auto e = member_bytes(jwk, "e", &reason);
  if (!e) return skip("RSA key: " + reason);
  // Leading zero octets do not count (RFC 7518 §6.3.1.1 forbids them, but
  // they change nothing about the key).
  UniqueBn bn_n = to_bn(*n);
  UniqueBn bn_e = to_bn(*e);
  if (!bn_n || !bn_e) return skip("RSA key: cannot read \"n\" or \"e\"");
  const int bits = BN_num_bits(bn_n.get());
  if (bits < kMinRsaBits) {
    return skip("RSA modulus of " + std::to_string(bits) + " bits, under " + std::to_string(kMinRsaBits));
  }
  if (bits > kMaxRsaBits) {
    return skip("RSA modulus of " + std::to_string(bits) + " bits, over " + std::to_string(kMaxRsaBits));
  }
  if (!BN_is_odd(bn_n.get())) return skip("RSA modulus is even");
  // An even or unit exponent is no RSA key; a huge one only costs time.
  if (!BN_is_odd(bn_e.get()) || BN_is_one(bn_e.get()) || BN_num_bits(bn_e.get()) > 64) {
    return skip("RSA exponent is even, 1 or over 64 bits");
  }
  std::unique_ptr<OSSL_PARAM_BLD, ParamBldFree> bld(OSSL_PARAM_BLD_new());
  if (!bld || !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) ||
      !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get())) {
    return skip("RSA key: out of memory");
  }
  std::unique_ptr<OSSL_PARAM, ParamFree> params(OSSL_PARAM_BLD_to_param(bld.get()));
  if (!params) return skip("RSA key: out of memory");
  UniquePkey key = from_data("RSA", params.get(), /*check=*/false);
  if (!key) return skip("RSA key refused by OpenSSL");
  return {std::move(key), {}};
}

Built ec_key(const Json& jwk) {
  auto crv = jwk.find("crv");
  if (crv == jwk.end() || !crv->is_string()) return skip("EC key without a \"crv\" string");
  if (*crv != "P-256") return skip("EC curve " + quote_for_message(crv->get_ref<const std::string&>()) + " (only P-256)");
  std::string reason;
  auto x = member_bytes(jwk, "x", &reason);
  if (!x) return skip("EC key: " + reason);
  auto y = member_bytes(jwk, "y", &reason);
  if (!y) return skip("EC key: " + reason);
  // RFC 7518 §6.2.1.2: each coordinate is the full 32 octets.
  if (x->size() != 32 || y->size() != 32) return skip("EC key: \"x\" and \"y\" must be 32 bytes each");
  std::string point = "\x04" + *x + *y;
  std::unique_ptr<OSSL_PARAM_BLD, ParamBldFree> bld(OSSL_PARAM_BLD_new());
  if (!bld ||
      !OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) ||
      !OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size())) {
    return skip("EC key: out of memory");
  }
  std::unique_ptr<OSSL_PARAM, ParamFree> params(OSSL_PARAM_BLD_to_param(bld.get()));
  if (!params) return skip("EC key: out of memory");
  UniquePkey key = from_data("EC", params.get(), /*check=*/true);
  if (!key) return skip("EC point is not on P-256");
  return {std::move(key), {}};
}

Built okp_key(const Json& jwk) {
  auto crv = jwk.find("crv");
  if (crv == jwk.end() || !crv->is_string()) return skip("OKP key without a \"crv\" string");
  if (*crv != "Ed25519") {
    return skip("OKP curve " + quote_for_message(crv->get_ref<const std::string&>()) + " (only Ed25519)");
  }
  std::string reason;
  auto x = member_bytes(jwk, "x", &reason);
  if (!x) return skip("OKP key: " + reason);
  if (x->size() != 32) return skip("OKP key: \"x\" must be 32 bytes");
  UniquePkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                             reinterpret_cast<const unsigned char*>(x->data()), x->size()));
  if (!key) return skip("Ed25519 key refused by OpenSSL");
  return {std::move(key), {}};
}

// The JWS algorithms each key type can verify (RFC 7518 §3.1, RFC 8037 §3.1);
// a JWK whose "alg" is none of these is for something else (encryption).
bool alg_fits(Jwk::Type type, std::string_view alg) {
  static constexpr std::array<std::string_view, 6> kRsa{"RS256", "RS384", "RS512",
                                                        "PS256", "PS384", "PS512"};
  switch (type) {
    case Jwk::Type::kRsa: return std::find(kRsa.begin(), kRsa.end(), alg) != kRsa.end();
    case Jwk::Type::kEcP256: return alg == "ES256";
    case Jwk::Type::kEd25519: return alg == "EdDSA" || alg == "Ed25519";
  }
  return false;
}

// The usable key `jwk` describes, or the reason it is skipped in `*reason`.
std::optional<Jwk> read_jwk(const Json& jwk, std::string* reason) {
  if (!jwk.is_object()) {
    *reason = "not a JSON object";
    return std::nullopt;
  }
  Jwk out;
  if (auto kid = jwk.find("kid"); kid != jwk.end()) {
    if (!kid->is_string()) {
      *reason = "\"kid\" is not a string";
      return std::nullopt;
    }
    out.kid = kid->get<std::string>();
  }
  if (auto use = jwk.find("use"); use != jwk.end() && *use != "sig") {
    *reason = use->is_string() ? "\"use\" is " + quote_for_message(use->get_ref<const std::string&>()) + ", not \"sig\""
                               : "\"use\" is not a string";
    return std::nullopt;
  }
  if (auto ops = jwk.find("key_ops"); ops != jwk.end()) {
    if (!ops->is_array() || std::find(ops->begin(), ops->end(), Json("verify")) == ops->end()) {
      *reason = "\"key_ops\" does not include \"verify\"";
      return std::nullopt;
    }
  }
  auto kty = jwk.find("kty");
  if (kty == jwk.end() || !kty->is_string()) {
    *reason = "no \"kty\" string";
    return std::nullopt;
  }
  const std::string& type = kty->get_ref<const std::string&>();
  Built built;
  if (type == "RSA") {
    out.type = Jwk::Type::kRsa;
    built = rsa_key(jwk);
  } else if (type == "EC") {
    out.type = Jwk::Type::kEcP256;
    built = ec_key(jwk);
  } else if (type == "OKP") {
    out.type = Jwk::Type::kEd25519;
    built = okp_key(jwk);
  } else if (type == "oct") {
    *reason = "symmetric (\"oct\") key: HMAC keys come only from configuration";
    return std::nullopt;
  } else {
    *reason = "\"kty\" " + quote_for_message(type) + " (only RSA, EC, OKP)";
    return std::nullopt;
  }
  if (!built.key) {
    *reason = std::move(built.reason);
    return std::nullopt;
  }
  if (auto alg = jwk.find("alg"); alg != jwk.end()) {
    if (!alg->is_string()) {
      *reason = "\"alg\" is not a string";
      return std::nullopt;
    }
    const std::string& name = alg->get_ref<const std::string&>();
    if (!alg_fits(out.type, name)) {
      *reason = "\"alg\" " + quote_for_message(name) + " is not a signature algorithm of a " + type + " key";
      return std::nullopt;
    }
    out.alg = name;
  }
  out.key = std::shared_ptr<EVP_PKEY>(built.key.release(), PkeyFree());
  return out;
}

std::string describe_key(std::size_t index, const Json& jwk) {
  std::string who = "key " + std::to_string(index);
  if (jwk.is_object()) {
    if (auto kid = jwk.find("kid"); kid != jwk.end() && kid->is_string()) {
      who += " (kid " + quote_for_message(kid->get_ref<const std::string&>()) + ")";
    }
  }
  return who;
}

}  // namespace

Result<JwkSet> JwkSet::parse(std::string_view json, std::size_t max_bytes, std::size_t max_keys) {
  if (json.size() > max_bytes) {
    return Result<JwkSet>(Errc::kInvalidArgument, "JWKS document of " + std::to_string(json.size()) +
                                                      " bytes, over the limit of " + std::to_string(max_bytes));
  }
  // nlohmann's parser and destructor are iterative, so nesting depth costs
  // heap, not stack; the size bound above bounds it.
  Json doc = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Result<JwkSet>(Errc::kInvalidArgument, "JWKS document is not JSON");
  if (!doc.is_object()) return Result<JwkSet>(Errc::kInvalidArgument, "JWKS document is not a JSON object");
  auto keys = doc.find("keys");
  if (keys == doc.end() || !keys->is_array()) {
    return Result<JwkSet>(Errc::kInvalidArgument, "JWKS document has no \"keys\" array");
  }
  if (keys->size() > max_keys) {
    return Result<JwkSet>(Errc::kInvalidArgument, "JWKS document has " + std::to_string(keys->size()) +
                                                      " keys, over the limit of " + std::to_string(max_keys));
  }
  JwkSet set;
  for (std::size_t i = 0; i < keys->size(); ++i) {
    const Json& jwk = (*keys)[i];
    std::string reason;
    auto key = read_jwk(jwk, &reason);
    if (!key) {
      set.skipped_.push_back(describe_key(i, jwk) + ": " + reason);
      continue;
    }
    // Only usable keys must have distinct kids: an IdP may publish an
    // encryption key under its signing key's kid.
    if (!key->kid.empty() && set.find(key->kid) != nullptr) {
      return Result<JwkSet>(Errc::kInvalidArgument,
                            "JWKS document has two keys with kid " + quote_for_message(key->kid));
    }
    set.keys_.push_back(std::move(*key));
  }
  if (set.keys_.empty()) {
    std::string message = "JWKS document has no usable signature key";
    for (std::size_t i = 0; i < set.skipped_.size() && i < kQuotedReasons; ++i) {
      message += (i == 0 ? ": " : "; ") + set.skipped_[i];
    }
    if (set.skipped_.size() > kQuotedReasons) {
      message += "; and " + std::to_string(set.skipped_.size() - kQuotedReasons) + " more";
    }
    return Result<JwkSet>(Errc::kInvalidArgument, std::move(message));
  }
  return set;
}

const Jwk* JwkSet::find(std::string_view kid) const {
  if (kid.empty()) return keys_.size() == 1 ? &keys_.front() : nullptr;
  for (const Jwk& key : keys_) {
    if (key.kid == kid) return &key;
  }
  return nullptr;
}

}  // namespace authrpc
