#include "authrpc/components/kerberos/scram_verifier_cache.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "authrpc/security/secret_bytes.h"

namespace authrpc {
namespace {

constexpr std::size_t kHashSize = 32;  // SHA-256
constexpr std::size_t kSaltSize = 16;

std::string base64(const unsigned char* data, std::size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  const int len = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data,
                                  static_cast<int>(n));
  out.resize(len < 0 ? 0 : static_cast<std::size_t>(len));
  return out;
}

std::string sha256(std::string_view bytes) {
  std::string out(kHashSize, '\0');
  unsigned len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(out.data()), &len,
                 EVP_sha256(), nullptr) != 1 ||
      len != kHashSize) {
    return {};
  }
  return out;
}

}  // namespace

std::string ScramVerifierCache::make_verifier(std::string_view password, unsigned iterations) {
  unsigned char salt[kSaltSize];
  if (RAND_bytes(salt, sizeof salt) != 1) return {};
  unsigned char salted[kHashSize], client_key[kHashSize], stored_key[kHashSize],
      server_key[kHashSize];
  unsigned len = 0;
  std::string out;
  // SaltedPassword := Hi(password, salt, i); ClientKey := HMAC(SaltedPassword,
  // "Client Key"); StoredKey := H(ClientKey); ServerKey := HMAC(SaltedPassword,
  // "Server Key") — RFC 5802 section 3.
  if (PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), salt, sizeof salt,
                        static_cast<int>(iterations), EVP_sha256(), sizeof salted, salted) == 1 &&
      HMAC(EVP_sha256(), salted, sizeof salted, reinterpret_cast<const unsigned char*>("Client Key"),
           10, client_key, &len) != nullptr &&
      EVP_Digest(client_key, sizeof client_key, stored_key, &len, EVP_sha256(), nullptr) == 1 &&
      HMAC(EVP_sha256(), salted, sizeof salted, reinterpret_cast<const unsigned char*>("Server Key"),
           10, server_key, &len) != nullptr) {
    out = "SCRAM-SHA-256$" + std::to_string(iterations) + ":" + base64(salt, sizeof salt) + "$" +
          base64(stored_key, sizeof stored_key) + ":" + base64(server_key, sizeof server_key);
  }
  OPENSSL_cleanse(salted, sizeof salted);
  OPENSSL_cleanse(client_key, sizeof client_key);
  OPENSSL_cleanse(stored_key, sizeof stored_key);
  OPENSSL_cleanse(server_key, sizeof server_key);
  return out;
}

ScramVerifierCache::ScramVerifierCache(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

ScramVerifierCache::~ScramVerifierCache() {
  std::lock_guard lock(mu_);
  while (!lru_.empty()) evict_locked(std::prev(lru_.end()));
}

void ScramVerifierCache::evict_locked(std::list<Entry>::iterator it) {
  index_.erase(std::string_view(it->identifier));
  security::cleanse(it->verifier.data(), it->verifier.size());
  security::cleanse(it->password_digest.data(), it->password_digest.size());
  lru_.erase(it);
}

std::string ScramVerifierCache::verifier(std::string_view identifier, std::string_view password) {
  std::string digest = sha256(password);
  if (digest.empty()) return {};
  {
    std::lock_guard lock(mu_);
    if (auto found = index_.find(identifier); found != index_.end()) {
      auto it = found->second;
      if (CRYPTO_memcmp(it->password_digest.data(), digest.data(), kHashSize) == 0) {
        lru_.splice(lru_.begin(), lru_, it);
        security::cleanse(digest.data(), digest.size());
        return it->verifier;
      }
      evict_locked(it);  // made from another password: never serve it
    }
  }
  std::string made = make_verifier(password);
  if (made.empty()) {
    security::cleanse(digest.data(), digest.size());
    return {};
  }
  std::lock_guard lock(mu_);
  ++computed_;
  if (auto found = index_.find(identifier); found != index_.end()) evict_locked(found->second);
  while (lru_.size() >= capacity_) evict_locked(std::prev(lru_.end()));
  lru_.push_front(Entry{std::string(identifier), std::move(digest), made});
  index_.emplace(std::string_view(lru_.front().identifier), lru_.begin());
  return made;
}

void ScramVerifierCache::erase(std::string_view identifier) {
  std::lock_guard lock(mu_);
  if (auto found = index_.find(identifier); found != index_.end()) evict_locked(found->second);
}

std::size_t ScramVerifierCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

std::size_t ScramVerifierCache::computed() const {
  std::lock_guard lock(mu_);
  return computed_;
}

}  // namespace authrpc
