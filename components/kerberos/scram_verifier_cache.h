// ScramVerifierCache: the SCRAM-SHA-256 server verifiers of delegation tokens
// (salt, iteration count, StoredKey, ServerKey; RFC 5802/7677), so that the
// `token-scram` server (components/kerberos/token_sasl.h) stretches a token's
// password with PBKDF2 once per token instead of once per session. Cyrus SCRAM
// reads such a verifier from the auxprop property `authPassword`
// ("SCRAM-SHA-256$<i>:<salt>$<StoredKey>:<ServerKey>", standard base64) and
// then skips its own PBKDF2. The client still does its PBKDF2 every session:
// that is the protocol.
//
// Keyed by the token identifier; each entry also holds a SHA-256 digest of
// the password it was made from, compared in constant time, so a stale entry
// (another key, a forged lookup) is recomputed, never served. Bounded: the
// least recently used entry goes when `capacity` is reached. Entries are not
// a validity check — the caller asks the SecretManager first every session
// (expired, cancelled, unknown tokens are refused there) and erase()s tokens
// it refused. Verifiers let a thief impersonate the server (not the client),
// so they are wiped when evicted and never logged. Thread-safe (one mutex;
// PBKDF2 runs outside it).
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace authrpc {

class ScramVerifierCache {
 public:
  static constexpr unsigned kIterations = 4096;  // Cyrus's default and RFC 7677's minimum

  explicit ScramVerifierCache(std::size_t capacity = 16384);
  ~ScramVerifierCache();
  ScramVerifierCache(const ScramVerifierCache&) = delete;
  ScramVerifierCache& operator=(const ScramVerifierCache&) = delete;

  // The `authPassword` value for the token `identifier` whose password (the
  // SASL secret, as the client sends it) is `password`; computed on a miss.
  // Empty if the CSPRNG or PBKDF2 failed.
  std::string verifier(std::string_view identifier, std::string_view password);
  void erase(std::string_view identifier);

  std::size_t size() const;
  std::size_t capacity() const noexcept { return capacity_; }
  // Verifiers computed (misses) since construction.
  std::size_t computed() const;

  // One verifier with a fresh random salt (what a miss computes).
  static std::string make_verifier(std::string_view password, unsigned iterations = kIterations);

 private:
  struct Entry {
    std::string identifier;
    std::string password_digest;  // SHA-256 of the password
    std::string verifier;
  };
  void evict_locked(std::list<Entry>::iterator it);

  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // keys point into lru_
  std::size_t computed_ = 0;
};

}  // namespace authrpc
