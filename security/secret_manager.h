// SecretManager: issues, renews, cancels and verifies delegation tokens, and
// owns the master keys their passwords are made with (after Hadoop's
// AbstractDelegationTokenSecretManager and Kafka's KIP-48).
//
// Lifetimes (docs/TOKENS.md has the timeline):
//  - A master key (32 bytes from RAND_priv_bytes) signs new tokens for
//    key_roll_interval, then a new key replaces it. The retired key is kept,
//    for its tokens, until the last of them reaches its max date, then the
//    sweeper drops it.
//  - A token is valid until its renew date: issue date + renew_interval at
//    first, then, at each renewal by its renewer, min(max date, now +
//    renew_interval). max date = issue date + max_lifetime.
//  - Cancelling (owner or renewer) removes it at once. The sweeper removes
//    tokens past their renew date.
//
// Threads: verify() and retrieve_password() read an in-memory view under a
// shared lock — no store I/O, no allocation beyond decoding the identifier —
// and may be called from IO threads concurrently. issue(), renew(),
// cancel(), sweep() and roll_master_key() are serialised among themselves
// and block on the store (fsync for the file store): call them from a
// blocking thread. They never block verify() during store I/O: each change
// is made durable first, then published to the view.
//
// Times come from options.clock. Error text names tokens by their
// describe() fields (sequence number, owner, ...), never a key or password.
//
// With a store shared by several servers (TokenStore::shared(), e.g.
// ZkTokenStore), the store also reports other servers' changes into the view
// (TokenStoreObserver); key rolls go through the store's version-checked
// roll_master_key (exactly one server wins, the others adopt its key); only
// the server that wins claim_sweep() removes expired tokens and keys; and a
// miss in the view (unknown token or key, or expired here but maybe renewed
// elsewhere) makes verify() sync and read the store once before refusing —
// a blocking round trip, rate-limited, and only for tokens whose password
// matched a known key or whose key is not known yet. While the store says
// its view is stale, verification fails with kStoreUnavailable.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>  // std::shared_lock
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "authrpc/security/clock.h"
#include "authrpc/security/hmac_sha256.h"
#include "authrpc/security/rw_lock.h"
#include "authrpc/security/token.h"
#include "authrpc/security/token_errors.h"
#include "authrpc/security/token_store.h"

namespace authrpc::security {

struct SecretManagerOptions {
  std::string kind = "authrpc-delegation";
  std::chrono::milliseconds key_roll_interval = std::chrono::hours(24);
  std::chrono::milliseconds max_lifetime = std::chrono::hours(24 * 7);
  std::chrono::milliseconds renew_interval = std::chrono::hours(24);
  std::shared_ptr<const Clock> clock;  // null: SystemClock
};

// Who a token is for. The caller (the token service) fills owner and
// real_user from the authenticated connection, never from the request.
struct TokenRequest {
  std::string owner;
  std::string renewer;    // empty: nobody may renew it
  std::string real_user;  // empty unless issued on the owner's behalf
  std::string service;    // where the token is to be used
};

// A valid token's identifier and password (what SASL DIGEST-MD5 and SCRAM
// servers need to check a client's proof).
struct TokenSecret {
  TokenIdentifier identifier;
  SecretBytes password;
};

// A token as the manager holds it: immutable, and shared by reference count
// with the sessions checking a proof with it (renewing the token keeps it;
// cancelling or sweeping drops only the manager's reference). The `token`
// mechanism takes it from SecretManager::retrieve() per session instead of
// copying the identifier and the password.
class IssuedToken {
 public:
  IssuedToken(TokenIdentifier decoded, std::string bytes, SecretBytes secret);

  const TokenIdentifier id;
  const std::string identifier;  // the signed bytes that `id` was decoded from
  const SecretBytes password;
  // The password prepared for HMAC-SHA256, on first use (thread-safe): a
  // `token` session's two proofs then cost no keying.
  const HmacSha256Key& password_key() const;

 private:
  mutable std::once_flag prepared_;
  mutable HmacSha256Key password_key_;
};

// A master key without its secret, for introspection.
struct MasterKeyInfo {
  std::uint32_t id = 0;
  TokenTime created{};
  TokenTime expires{};
  bool current = false;
};

struct SweepResult {
  std::size_t tokens_removed = 0;
  std::size_t keys_removed = 0;
  bool key_rolled = false;
};

class SecretManager final : private TokenStoreObserver {
 public:
  // Loads the store's state. kInvalidArgument for bad options,
  // kStoreCorrupt if a stored token does not decode, store errors as they come.
  static Result<std::unique_ptr<SecretManager>> open(std::shared_ptr<TokenStore> store,
                                                          SecretManagerOptions options = {});
  ~SecretManager() override;
  SecretManager(const SecretManager&) = delete;
  SecretManager& operator=(const SecretManager&) = delete;

  // Rolls the master key first if it is due (or there is none yet).
  Result<Token> issue(const TokenRequest& request);
  // Only the renewer; returns the new renew date. kExpired past the renew
  // date (or max date), kPermissionDenied for anyone but the renewer.
  Result<TokenTime> renew(const Token& token, std::string_view caller);
  // The owner or the renewer. An expired token that is still stored may be
  // cancelled too.
  Status cancel(const Token& token, std::string_view caller);

  // Known, not expired, not cancelled, password right (constant-time
  // comparison). Returns the identifier: who the token speaks for.
  Result<TokenIdentifier> verify(std::string_view identifier,
                                      std::span<const std::uint8_t> password) const;
  Result<TokenIdentifier> verify(const Token& token) const {
    return verify(token.identifier, token.password.span());
  }
  // The same checks, short of the password, which it returns.
  Result<TokenSecret> retrieve_password(std::string_view identifier) const;
  // The same, without a copy: the manager's own record of the token. An
  // identifier byte-for-byte equal to a valid token's is looked up without
  // decoding it (the `token` mechanism's path, once per session).
  Result<std::shared_ptr<const IssuedToken>> retrieve(std::string_view identifier) const;

  // Removes expired tokens and retired keys past their expiry, and rolls the
  // master key if due. The server calls it periodically (e.g. every minute).
  Result<SweepResult> sweep();
  // Replaces the current master key now.
  Status roll_master_key();

  std::vector<MasterKeyInfo> master_keys() const;
  // The store's TokenStore::fresh(): false while its view may be stale.
  bool store_fresh() const noexcept { return store_->fresh(); }
  std::size_t token_count() const;
  const SecretManagerOptions& options() const noexcept { return options_; }

 private:
  struct Entry {
    std::shared_ptr<const IssuedToken> token;  // never null
    TokenTime renew_date{};
  };
  static Entry make_entry(TokenIdentifier id, std::string identifier, SecretBytes password,
                          TokenTime renew_date);
  enum class Use { kVerify, kRenew, kCancel };

  SecretManager(std::shared_ptr<TokenStore> store, SecretManagerOptions options);
  Status load();
  // TokenStoreObserver: another server's changes, from a shared store.
  void apply(const std::function<Result<TokenStoreChanges>()>& read) override;
  // Shared stores: whether a refusal by the view is worth asking the store
  // about, and what the store holds for the token (nullopt: nothing).
  bool worth_fetching(const Status& refusal, std::string_view identifier, TokenTime now) const;
  Result<std::optional<Entry>> fetch(std::string_view identifier) const;
  // verify() (password given) and retrieve() (none): the token after the
  // checks, from the view or, when worth_fetching(), from the store.
  Result<std::shared_ptr<const IssuedToken>> find(std::string_view identifier,
                                                  const std::span<const std::uint8_t>* password) const;
  // check(), then, for a shared store, a fetch into the view; write_mu_ held.
  Result<const Entry*> check_or_fetch_locked(std::string_view identifier,
                                                  const std::span<const std::uint8_t>* password,
                                                  TokenTime now, Use use);
  // Moves a token from the view to removed_; view_mu_ held for writing.
  void forget_locked(std::uint64_t seq, TokenTime now);
  // The stored entry for identifier after the checks for `use`; the view
  // must be read-locked (or write_mu_ held).
  Result<const Entry*> check(std::string_view identifier,
                                  const std::span<const std::uint8_t>* password, TokenTime now,
                                  Use use) const;
  Status check_entry(const Entry& entry, std::string_view identifier,
                          const std::span<const std::uint8_t>* password, TokenTime now, Use use) const;
  Status roll_locked(TokenTime now);
  bool roll_due(TokenTime now) const;

  const SecretManagerOptions options_;
  const std::shared_ptr<TokenStore> store_;
  const bool shared_;

  // Fetches after a miss, per second (shared stores).
  static constexpr int kMaxFetchesPerSecond = 200;
  mutable std::mutex fetch_mu_;
  mutable std::int64_t fetch_window_ms_ = 0;
  mutable int fetches_in_window_ = 0;

  std::mutex write_mu_;                // serialises mutations and store I/O
  mutable RwLock view_mu_;             // guards the view below; writers first
  std::map<std::uint32_t, MasterKey> keys_;
  std::uint32_t current_key_ = 0;  // 0: none yet
  std::unordered_map<std::uint64_t, Entry> tokens_;
  // Tokens cancelled or swept, until their max date: so that verify can say
  // CANCELLED or EXPIRED instead of UNKNOWN_TOKEN. Not stored: after a
  // restart such a token is reported as unknown.
  struct Removed {
    TokenErrc why = TokenErrc::kCancelled;  // or kExpired
    TokenTime max_date{};
  };
  std::unordered_map<std::uint64_t, Removed> removed_;
  // Shared stores: tokens this server changed, and whether it rolled the
  // key, since apply() began its read (write_mu_).
  std::unordered_set<std::uint64_t> touched_;
  bool key_rolled_ = false;
};

}  // namespace authrpc::security
