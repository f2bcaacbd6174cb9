#include "authrpc/components/jwt/jwt_verifier.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rsa.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

#include "authrpc/base/log.h"
#include "authrpc/components/jwt/jwt_compact.h"
#include "authrpc/security/base64url.h"

namespace authrpc {
namespace {

using json = nlohmann::json;
using SysClock = std::chrono::system_clock;

constexpr std::size_t kMaxGroups = 256;
constexpr std::size_t kMaxNameBytes = 255;

Status refused(std::string why) {
  return Status(Errc::kAuthenticationFailed, "jwt: " + std::move(why));
}

// A claim or header value quoted in a message: escaped and cut short (it
// comes from the token, which may be hostile).
std::string quote(std::string_view text) { return "'" + peer_text(text) + "'"; }

// A NumericDate (jwt_numeric_date) as a time. The system clock counts
// nanoseconds in 64 bits, which end in April 2262, so a later date reads as
// kLatestDate: an `exp` there never comes, an `nbf` or `iat` there is in the
// future. kLatestDate leaves room for the leeway and the maximum age (at most
// an hour and 30 days, jwt.cc) to be added without overflow.
constexpr double kLatestDate = 9'200'000'000.0;  // 2261-07-14
std::optional<SysClock::time_point> numeric_date(const json& v) {
  const auto secs = jwt_numeric_date(v);
  if (!secs) return std::nullopt;
  return SysClock::time_point(std::chrono::duration_cast<SysClock::duration>(
      std::chrono::duration<double>(std::min(*secs, kLatestDate))));
}

// The header or the payload; AUTHENTICATION_FAILED saying what is wrong.
std::optional<json> decode_object(std::string_view part, const char* what, Status* error) {
  auto decoded = decode_jwt_object(part, what);
  if (!decoded.ok()) {
    *error = refused(decoded.status().message);
    return std::nullopt;
  }
  return std::move(*decoded);
}

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameBytes) return false;
  return std::none_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

struct Algorithm {
  std::string_view name;
  enum class Kind { kRsa, kRsaPss, kEcdsa, kEdDsa, kHmac } kind;
  const char* digest;  // null for EdDSA
};

constexpr Algorithm kAlgorithms[] = {
    {"RS256", Algorithm::Kind::kRsa, "SHA256"},    {"RS384", Algorithm::Kind::kRsa, "SHA384"},
    {"RS512", Algorithm::Kind::kRsa, "SHA512"},    {"PS256", Algorithm::Kind::kRsaPss, "SHA256"},
    {"PS384", Algorithm::Kind::kRsaPss, "SHA384"}, {"PS512", Algorithm::Kind::kRsaPss, "SHA512"},
    {"ES256", Algorithm::Kind::kEcdsa, "SHA256"},  {"EdDSA", Algorithm::Kind::kEdDsa, nullptr},
    {"HS256", Algorithm::Kind::kHmac, "SHA256"},   {"HS384", Algorithm::Kind::kHmac, "SHA384"},
    {"HS512", Algorithm::Kind::kHmac, "SHA512"},
};

const Algorithm* find_algorithm(std::string_view name) {
  for (const auto& a : kAlgorithms) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

bool key_fits(const Algorithm& alg, Jwk::Type type) {
  switch (alg.kind) {
    case Algorithm::Kind::kRsa:
    case Algorithm::Kind::kRsaPss:
      return type == Jwk::Type::kRsa;
    case Algorithm::Kind::kEcdsa:
      return type == Jwk::Type::kEcP256;
    case Algorithm::Kind::kEdDsa:
      return type == Jwk::Type::kEd25519;
    case Algorithm::Kind::kHmac:
      return false;
  }
  return false;
}

// JWS ES256 signatures are r||s, 32 bytes each (RFC 7518 §3.4); OpenSSL
// verifies DER.
std::optional<std::string> ecdsa_der(std::string_view raw) {
  if (raw.size() != 64) return std::nullopt;
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (sig == nullptr) return std::nullopt;
  BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()) + 32, 32, nullptr);
  if (r == nullptr || s == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return std::nullopt;
  }
  unsigned char* der = nullptr;
  const int n = i2d_ECDSA_SIG(sig, &der);
  ECDSA_SIG_free(sig);
  if (n <= 0) return std::nullopt;
  std::string out(reinterpret_cast<char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  return out;
}

bool verify_signature(const Algorithm& alg, EVP_PKEY* key, std::string_view signed_part,
                      std::string_view signature) {
  std::string der;
  if (alg.kind == Algorithm::Kind::kEcdsa) {
    auto converted = ecdsa_der(signature);
    if (!converted) return false;
    der = std::move(*converted);
    signature = der;
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_PKEY_CTX* pctx = nullptr;
  if (!ctx || EVP_DigestVerifyInit_ex(ctx.get(), &pctx, alg.digest, nullptr, nullptr, key,
                                      nullptr) != 1) {
    return false;
  }
  if (alg.kind == Algorithm::Kind::kRsaPss) {
    if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
        EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1) {
      return false;
    }
  }
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(),
                          reinterpret_cast<const unsigned char*>(signed_part.data()),
                          signed_part.size()) == 1;
}

bool verify_hmac(const Algorithm& alg, const security::SecretBytes& key,
                 std::string_view signed_part, std::string_view signature) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  const EVP_MD* md = EVP_get_digestbyname(alg.digest);
  if (md == nullptr || key.empty() ||
      HMAC(md, key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size(), mac,
           &n) == nullptr) {
    return false;
  }
  return signature.size() == n && CRYPTO_memcmp(mac, signature.data(), n) == 0;
}

std::string sha256(std::string_view bytes) {
  unsigned char digest[32];
  unsigned int n = 0;
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &n, md, nullptr) != 1) return {};
  return std::string(reinterpret_cast<char*>(digest), n);
}

// The header's parts the signature check acts on.
struct JwsHeader {
  const Algorithm* alg = nullptr;
  std::string kid;
};

// The header: alg, kid, and nothing we would have to understand.
Status check_header(const json& header, const JwtPolicy& policy, JwsHeader* out) {
  const auto alg_it = header.find("alg");
  if (alg_it == header.end() || !alg_it->is_string()) return refused("header has no alg");
  const std::string alg_name = alg_it->get<std::string>();
  if (alg_name == "none" || alg_name == "None" || alg_name == "NONE") {
    return refused("unsigned tokens (alg none) are never accepted");
  }
  out->alg = find_algorithm(alg_name);
  if (out->alg == nullptr) return refused("unknown algorithm " + quote(alg_name));
  if (std::find(policy.algorithms.begin(), policy.algorithms.end(), alg_name) ==
      policy.algorithms.end()) {
    return refused("algorithm " + alg_name + " is not accepted by this service");
  }
  if (header.contains("crit")) return refused("header has critical extensions (crit)");
  if (const auto k = header.find("kid"); k != header.end()) {
    if (!k->is_string()) return refused("header's kid is not a string");
    out->kid = k->get<std::string>();
  }
  if (const auto t = header.find("typ"); t != header.end()) {
    std::string typ = t->is_string() ? t->get<std::string>() : std::string();
    std::transform(typ.begin(), typ.end(), typ.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    // names: JOSE "typ" header values (RFC 7519 §5.1, RFC 9068 §2.1)
    if (typ != "jwt" && typ != "at+jwt" && typ != "application/at+jwt") {
      return refused("header's typ " + quote(t->is_string() ? t->get<std::string>() : t->dump()) +
                     " is not an access token's");
    }
  }
  return Status();
}

// The signature, before any claim is believed: by the shared key for HMAC,
// else by the issuer's key the header names (`why` says when there is none).
Status check_signature(const JwsHeader& header, const JwtPolicy& policy, const JwkSet& keys,
                       const JwtCompactParts& parts, JwtRefusal& why) {
  const Algorithm& alg = *header.alg;
  auto signature = security::base64url_decode(parts.signature);
  if (!signature) return refused("signature is not base64url");
  const std::string_view signed_part = parts.signing_input;
  if (alg.kind == Algorithm::Kind::kHmac) {
    if (policy.hmac_key.empty()) {
      return refused("algorithm " + std::string(alg.name) + " needs a shared key, and none is configured");
    }
    if (!verify_hmac(alg, policy.hmac_key, signed_part, *signature)) return refused("bad signature");
    return Status();
  }
  const std::string& kid = header.kid;
  const Jwk* key = keys.find(kid);
  if (key == nullptr) {
    why = JwtRefusal::kUnknownKey;
    return refused(kid.empty() ? std::string("token names no key (kid) and the issuer has several")
                               : "no key " + quote(kid) + " among the issuer's keys");
  }
  if (!key_fits(alg, key->type) || (!key->alg.empty() && key->alg != alg.name)) {
    return refused("key " + quote(kid) + " is not for algorithm " + std::string(alg.name));
  }
  if (!verify_signature(alg, key->key.get(), signed_part, *signature)) return refused("bad signature");
  return Status();
}

// `iss`, one of the trusted issuers, and `aud`, naming this service.
Status check_issuer_and_audience(const json& claims, const JwtPolicy& policy, VerifiedJwt* v) {
  const auto iss = claims.find("iss");
  if (iss == claims.end() || !iss->is_string()) return refused("token has no issuer (iss)");
  v->issuer = iss->get<std::string>();
  if (std::find(policy.issuers.begin(), policy.issuers.end(), v->issuer) == policy.issuers.end()) {
    return refused("issuer " + quote(v->issuer) + " is not trusted by this service");
  }
  const auto aud = claims.find("aud");
  bool audience_ok = false;
  if (aud != claims.end()) {
    if (aud->is_string()) {
      audience_ok = aud->get<std::string>() == policy.audience;
    } else if (aud->is_array()) {
      for (const auto& a : *aud) {
        if (a.is_string() && a.get<std::string>() == policy.audience) audience_ok = true;
      }
    }
  }
  if (!audience_ok) {
    return refused("token is not for this service (its aud does not name " +
                   quote(policy.audience) + ")");
  }
  return Status();
}

// `exp` (required), `nbf` and `iat` as dates; `iat` required with a maximum
// age. Whether they hold now is JwtVerifier::check_times().
Status read_dates(const json& claims, const JwtPolicy& policy, VerifiedJwt* v) {
  const auto exp = claims.find("exp");
  auto expires = exp == claims.end() ? std::nullopt : numeric_date(*exp);
  if (!expires) return refused("token has no valid expiry (exp)");
  v->expires = *expires;
  v->expires_utc = jwt_utc(v->expires);
  if (const auto nbf = claims.find("nbf"); nbf != claims.end()) {
    v->not_before = numeric_date(*nbf);
    if (!v->not_before) return refused("token's nbf is not a date");
  }
  if (const auto iat = claims.find("iat"); iat != claims.end()) {
    v->issued_at = numeric_date(*iat);
    if (!v->issued_at) return refused("token's iat is not a date");
  }
  if (policy.max_age && !v->issued_at) {
    return refused("token has no issue time (iat), which this service requires");
  }
  return Status();
}

// Who the token names: `sub`, the principal claim and the groups claim.
Status read_identity(const json& claims, const JwtPolicy& policy, VerifiedJwt* v) {
  if (const auto sub = claims.find("sub"); sub != claims.end() && sub->is_string()) {
    v->subject = sub->get<std::string>();
  }
  const auto principal = claims.find(policy.principal_claim);
  if (principal == claims.end() || !principal->is_string() ||
      !valid_name(principal->get_ref<const std::string&>())) {
    return refused("token has no usable principal claim " + quote(policy.principal_claim) +
                   " (a string of 1-255 bytes without control characters)");
  }
  v->principal = principal->get<std::string>();
  if (policy.groups_claim.empty()) return Status();
  const auto groups = claims.find(policy.groups_claim);
  if (groups == claims.end()) return Status();
  auto add = [v](const json& g) {
    if (!g.is_string() || !valid_name(g.get_ref<const std::string&>())) return false;
    v->groups.push_back(g.get<std::string>());
    return true;
  };
  bool ok = true;
  if (groups->is_array()) {
    if (groups->size() > kMaxGroups) ok = false;
    for (const auto& g : *groups) ok = ok && add(g);
  } else {
    ok = add(*groups);
  }
  if (!ok) {
    return refused("groups claim " + quote(policy.groups_claim) + " is not a list of at most " +
                   std::to_string(kMaxGroups) + " group names");
  }
  return Status();
}

// `cnf`: the certificate the token is bound to (RFC 8705), if any.
Status read_confirmation(const json& claims, VerifiedJwt* v) {
  const auto cnf = claims.find("cnf");
  if (cnf == claims.end()) return Status();
  if (!cnf->is_object()) return refused("token's cnf is not an object");
  if (const auto x5t = cnf->find("x5t#S256"); x5t != cnf->end()) {
    if (!x5t->is_string() || x5t->get_ref<const std::string&>().empty()) {
      return refused("token's cnf.x5t#S256 is not a thumbprint");
    }
    v->certificate_thumbprint = x5t->get<std::string>();
  }
  return Status();
}

// The claims, in this order: issuer and audience, dates, the required
// claims, identity, confirmation.
Status read_claims(const json& claims, const JwtPolicy& policy, VerifiedJwt* v) {
  if (Status s = check_issuer_and_audience(claims, policy, v); !s.ok()) return s;
  if (Status s = read_dates(claims, policy, v); !s.ok()) return s;
  for (const std::string& name : policy.required_claims) {
    if (!claims.contains(name)) return refused("token lacks the required claim " + quote(name));
  }
  if (Status s = read_identity(claims, policy, v); !s.ok()) return s;
  return read_confirmation(claims, v);
}

}  // namespace

JwtVerifier::JwtVerifier(JwtPolicy policy) : policy_(std::move(policy)) {}
JwtVerifier::~JwtVerifier() = default;

std::size_t JwtVerifier::cached() const {
  std::lock_guard lock(mu_);
  return cache_.size();
}

Status JwtVerifier::check_times(const VerifiedJwt& v, SysClock::time_point now) const {
  if (now > v.expires + policy_.leeway) {
    return Status(Errc::kCredentialsExpired,
                  "jwt: token expired at " + jwt_utc(v.expires) + ": acquire a new one");
  }
  if (v.not_before && now + policy_.leeway < *v.not_before) {
    return refused("token not valid before " + jwt_utc(*v.not_before) +
                   " (the client's or the issuer's clock may be wrong)");
  }
  if (v.issued_at && now + policy_.leeway < *v.issued_at) {
    return refused("token issued in the future (" + jwt_utc(*v.issued_at) + ")");
  }
  if (policy_.max_age && v.issued_at && now > *v.issued_at + *policy_.max_age + policy_.leeway) {
    return Status(Errc::kCredentialsExpired,
                  "jwt: token issued at " + jwt_utc(*v.issued_at) + " is older than the " +
                      std::to_string(policy_.max_age->count()) + " s this service accepts: " +
                      "acquire a new one");
  }
  return Status();
}

Result<VerifiedJwt> JwtVerifier::verify_uncached(std::string_view token, const JwkSet& keys,
                                                 SysClock::time_point now,
                                                 JwtRefusal* refusal) const {
  JwtRefusal ignored;
  JwtRefusal& why = refusal != nullptr ? *refusal : ignored;
  why = JwtRefusal::kOther;
  if (token.size() > policy_.max_token_bytes) {
    return refused("token of " + std::to_string(token.size()) + " bytes is over the limit of " +
                   std::to_string(policy_.max_token_bytes));
  }
  const auto parts = split_compact_jws(token);
  if (!parts.ok()) return refused(parts.status().message);
  Status error;
  auto header = decode_object(parts->header, "header", &error);
  if (!header) return error;
  JwsHeader jws;
  if (Status s = check_header(*header, policy_, &jws); !s.ok()) return s;
  if (Status s = check_signature(jws, policy_, keys, *parts, why); !s.ok()) return s;
  auto claims = decode_object(parts->payload, "payload", &error);
  if (!claims) return error;
  VerifiedJwt v;
  if (Status s = read_claims(*claims, policy_, &v); !s.ok()) return s;
  if (Status s = check_times(v, now); !s.ok()) return s;
  why = JwtRefusal::kNone;
  return v;
}

Result<std::shared_ptr<const VerifiedJwt>> JwtVerifier::verify(
    std::string_view token, const std::shared_ptr<const JwkSet>& keys, SysClock::time_point now,
    JwtRefusal* refusal) {
  if (refusal != nullptr) *refusal = JwtRefusal::kOther;
  if (!keys) return Status(Errc::kInternal, "jwt: no key set");
  const bool caching = policy_.cache_entries > 0 && token.size() <= policy_.max_token_bytes;
  std::string digest;
  if (caching) {
    digest = sha256(token);
    std::lock_guard lock(mu_);
    if (cached_for_ == keys.get()) {
      if (const auto it = cache_.find(digest); it != cache_.end()) {
        std::shared_ptr<const VerifiedJwt> hit = it->second;
        if (Status s = check_times(*hit, now); !s.ok()) {
          cache_.erase(it);
          return s;
        }
        if (refusal != nullptr) *refusal = JwtRefusal::kNone;
        return hit;
      }
    }
  }
  auto verified = verify_uncached(token, *keys, now, refusal);
  if (!verified.ok()) return verified.status();
  auto shared = std::make_shared<const VerifiedJwt>(std::move(*verified));
  if (caching && !digest.empty()) {
    std::lock_guard lock(mu_);
    if (cached_for_ != keys.get()) {
      // New keys (a rotation): what older keys verified is verified again.
      cache_.clear();
      cached_for_ = keys.get();
      cached_keys_ = keys;
    }
    if (cache_.size() >= policy_.cache_entries) {
      // Full: drop the expired ones; if none were, start over (bounded
      // memory matters more than the hit rate of a flood of new tokens).
      std::erase_if(cache_, [now, this](const auto& e) { return now > e.second->expires + policy_.leeway; });
      if (cache_.size() >= policy_.cache_entries) cache_.clear();
    }
    cache_.emplace(std::move(digest), shared);
  }
  return shared;
}

}  // namespace authrpc
