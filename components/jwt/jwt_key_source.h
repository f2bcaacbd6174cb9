// JwtKeySource: where the `jwt` mechanism's verification keys come from — a
// JWKS file or an https:// URL — and when they are loaded again: every
// `refresh` (the next authentication after that finds them due and reloads
// them in the background, keeping the old keys meanwhile), and at once, at
// most every `min_refetch`, when a token names a key the set does not have
// (an issuer that rotated its keys). A failed load keeps the keys it had;
// with none at all, authentication is UNAVAILABLE with the load's error.
// Owned by the server mechanism (components/jwt/jwt.h); thread-safe: sessions
// on every IO thread read current() and call load() from the host's blocking
// executor.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "authrpc/base/result.h"
#include "authrpc/components/jwt/jwt_https.h"
#include "authrpc/components/jwt/jwt_keys.h"

namespace authrpc {

struct JwtKeySourceOptions {
  std::string file;  // a JWKS file, or
  std::string url;   // an https:// URL serving one
  HttpsGetOptions https;
  std::chrono::seconds refresh{300};
  std::chrono::seconds min_refetch{10};
};

class JwtKeySource {
 public:
  using Clock = std::chrono::steady_clock;
  explicit JwtKeySource(JwtKeySourceOptions options);

  // The keys now; null before any load succeeded.
  std::shared_ptr<const JwkSet> current() const;
  // The error of the last failed load ("" after a success).
  std::string last_error() const;
  // The keys are older than `refresh` (or none were ever loaded) and no load
  // is running: the caller should start one. Claims the load (returns true
  // once until it finishes).
  bool claim_scheduled_load(Clock::time_point now);
  // A token named a key the set lacks: true (claiming a load) unless a load
  // ran within min_refetch.
  bool claim_refetch(Clock::time_point now);
  // Loads the document (blocking: file read or HTTPS GET) and, if it parses,
  // makes it current. Releases the claim.
  Status load();
  // Gives up a claim without loading (a background load that never ran).
  void release_claim();
  // How many loads succeeded / failed so far.
  std::size_t loads() const noexcept { return loads_.load(); }
  std::size_t failures() const noexcept { return failures_.load(); }
  const JwtKeySourceOptions& options() const noexcept { return options_; }
  // "file F" or "URL U", for messages.
  std::string describe() const;

 private:
  const JwtKeySourceOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<const JwkSet> keys_;
  std::string document_;  // keys_ parsed from it
  std::string last_error_;
  Clock::time_point last_attempt_{};  // of a load, successful or not
  Clock::time_point loaded_at_{};
  bool loading_ = false;
  std::atomic<std::size_t> loads_{0}, failures_{0};
};

}  // namespace authrpc
