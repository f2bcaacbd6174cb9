#include "tests/testing/jwt_issuer.h"

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <stdexcept>

#include "authrpc/security/base64url.h"

namespace authrpc::testing {
namespace {

using security::base64url_encode;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("jwt_test_issuer: ") + what + " failed");
}

std::shared_ptr<EVP_PKEY> own(EVP_PKEY* key, const char* what) {
  check(key != nullptr, what);
  return std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free);
}

std::string bn_param(EVP_PKEY* key, const char* name, int pad_to = 0) {
  BIGNUM* bn = nullptr;
  check(EVP_PKEY_get_bn_param(key, name, &bn) == 1, name);
  std::unique_ptr<BIGNUM, decltype(&BN_free)> owned(bn, BN_free);
  std::string out(pad_to > 0 ? pad_to : BN_num_bytes(bn), '\0');
  const int n = pad_to > 0 ? BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), pad_to)
                           : BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  check(n == static_cast<int>(out.size()), "BN_bn2bin");
  return out;
}

// The JWS signature of `input` with `key` (RFC 7518 §3.3, §3.4; RFC 8037).
std::string signature(EVP_PKEY* key, std::string_view input) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const int type = EVP_PKEY_get_base_id(key);
  check(ctx && EVP_DigestSignInit(ctx.get(), nullptr, type == EVP_PKEY_ED25519 ? nullptr : EVP_sha256(),
                                  nullptr, key) == 1,
        "EVP_DigestSignInit");
  const auto* data = reinterpret_cast<const unsigned char*>(input.data());
  std::size_t size = 0;
  check(EVP_DigestSign(ctx.get(), nullptr, &size, data, input.size()) == 1, "EVP_DigestSign");
  std::string sig(size, '\0');
  check(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &size, data, input.size()) == 1,
        "EVP_DigestSign");
  sig.resize(size);
  if (type != EVP_PKEY_EC) return sig;
  // ES256 in JWS is r || s, each 32 bytes, not the DER that OpenSSL makes.
  const auto* der = reinterpret_cast<const unsigned char*>(sig.data());
  std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> ecdsa(d2i_ECDSA_SIG(nullptr, &der, static_cast<long>(sig.size())),
                                                              ECDSA_SIG_free);
  check(ecdsa != nullptr, "d2i_ECDSA_SIG");
  std::string raw(64, '\0');
  auto* out = reinterpret_cast<unsigned char*>(raw.data());
  check(BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa.get()), out, 32) == 32 &&
            BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa.get()), out + 32, 32) == 32,
        "BN_bn2binpad");
  return raw;
}

std::string compact(std::string_view header_json, std::string_view payload_json) {
  return base64url_encode(header_json) + "." + base64url_encode(payload_json);
}

}  // namespace

JwtTestKey JwtTestKey::rsa(std::string kid, int bits) {
  JwtTestKey k;
  k.kid_ = std::move(kid);
  k.alg_ = "RS256";
  k.key_ = own(EVP_RSA_gen(static_cast<unsigned>(bits)), "EVP_RSA_gen");
  return k;
}

JwtTestKey JwtTestKey::ec_p256(std::string kid) {
  JwtTestKey k;
  k.kid_ = std::move(kid);
  k.alg_ = "ES256";
  k.key_ = own(EVP_EC_gen("P-256"), "EVP_EC_gen");
  return k;
}

JwtTestKey JwtTestKey::ed25519(std::string kid) {
  JwtTestKey k;
  k.kid_ = std::move(kid);
  k.alg_ = "EdDSA";
  k.key_ = own(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"), "EVP_PKEY_Q_keygen(ED25519)");
  return k;
}

nlohmann::json JwtTestKey::public_jwk() const {
  nlohmann::json jwk{{"alg", alg_}, {"use", "sig"}};
  if (!kid_.empty()) jwk["kid"] = kid_;
  EVP_PKEY* key = key_.get();
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_RSA:
      jwk["kty"] = "RSA";
      jwk["n"] = base64url_encode(bn_param(key, OSSL_PKEY_PARAM_RSA_N));
      jwk["e"] = base64url_encode(bn_param(key, OSSL_PKEY_PARAM_RSA_E));
      break;
    case EVP_PKEY_EC:
      jwk["kty"] = "EC";
      jwk["crv"] = "P-256";
      jwk["x"] = base64url_encode(bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, 32));
      jwk["y"] = base64url_encode(bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, 32));
      break;
    default: {
      std::string raw(32, '\0');
      std::size_t size = raw.size();
      check(EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(raw.data()), &size) == 1 &&
                size == 32,
            "EVP_PKEY_get_raw_public_key");
      jwk["kty"] = "OKP";
      jwk["crv"] = "Ed25519";
      jwk["x"] = base64url_encode(raw);
    }
  }
  return jwk;
}

std::string JwtTestKey::public_pem() const {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  check(bio && PEM_write_bio_PUBKEY(bio.get(), key_.get()) == 1, "PEM_write_bio_PUBKEY");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

std::string JwtTestKey::sign(const nlohmann::json& payload, nlohmann::json header) const {
  if (!header.contains("alg")) header["alg"] = alg_;
  if (!header.contains("kid") && !kid_.empty()) header["kid"] = kid_;
  return sign_raw(header.dump(), payload.dump());
}

std::string JwtTestKey::sign_raw(std::string_view header_json, std::string_view payload_json) const {
  const std::string input = compact(header_json, payload_json);
  return input + "." + base64url_encode(signature(key_.get(), input));
}

std::string sign_hs256(std::string_view secret, const nlohmann::json& payload, nlohmann::json header) {
  if (!header.contains("alg")) header["alg"] = "HS256";
  const std::string input = compact(header.dump(), payload.dump());
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  check(HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
             reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &size) != nullptr,
        "HMAC");
  return input + "." + base64url_encode(std::string_view(reinterpret_cast<const char*>(mac), size));
}

std::string unsigned_token(const nlohmann::json& payload) {
  return compact(R"({"alg":"none"})", payload.dump()) + ".";
}

std::string jwks_document(std::initializer_list<const JwtTestKey*> keys) {
  nlohmann::json doc{{"keys", nlohmann::json::array()}};
  for (const JwtTestKey* key : keys) doc["keys"].push_back(key->public_jwk());
  return doc.dump();
}

}  // namespace authrpc::testing
