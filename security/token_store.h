// TokenStore: where a secret manager keeps what must outlive the process —
// master keys, issued tokens and their renew dates, the sequence-number and
// key-id counters. The secret manager is the only caller; it loads the whole
// state once (load) and then reports each change, keeping its own in-memory
// view for verification, so a store is never read on the verify path.
//
// Contract for implementations (MemoryTokenStore, FileTokenStore, and
// ZkTokenStore, shared by several servers):
//  - A mutating call that returns OK is durable: it survives a crash of this
//    process (and, for a durable store, of the machine). Calls are synchronous
//    and may block on fsync or the network; never call them on an IO thread.
//  - Calls may come from any thread; implementations serialise them.
//  - Counters: allocate_* returns a value greater than every value it returned
//    before and every id found in a stored key or token. After a restart a
//    value that was allocated but never used in a stored record may be handed
//    out again; since such a value never reached a client, that is harmless.
//  - Removing what is not there is not an error (removals are idempotent).
//  - Key material and passwords in records are secrets: implementations never
//    put them in error text and wipe their own copies when done.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "authrpc/security/secret_bytes.h"
#include "authrpc/security/token.h"
#include "authrpc/security/token_errors.h"

namespace authrpc::security {

// A master key that token passwords are made with.
struct MasterKey {
  std::uint32_t id = 0;
  TokenTime created{};  // rolled (replaced by a new key) at created + roll interval
  TokenTime expires{};  // dropped after this: no token made with it is valid longer
  SecretBytes secret;
};

// An issued token, as a store keeps it.
struct StoredToken {
  std::uint64_t sequence_number = 0;  // the identifier's, repeated as the record's key
  std::string identifier;             // TokenIdentifier::encode() bytes
  SecretBytes password;               // token_password(key, identifier)
  TokenTime renew_date{};             // valid up to and including this time
};

// Everything a store holds.
struct TokenStoreState {
  std::uint64_t last_sequence_number = 0;  // highest allocated or stored
  std::uint32_t last_master_key_id = 0;    // highest allocated or stored
  std::vector<MasterKey> keys;             // by id, ascending
  std::vector<StoredToken> tokens;         // by sequence number, ascending
};

// What a shared store read from its backend: changes made by other servers
// (or a whole state, after the store lost track and rebuilt its view).
struct TokenStoreChanges {
  std::optional<TokenStoreState> reset;  // replaces everything held so far
  std::vector<MasterKey> keys_put;
  bool all_keys = false;  // keys_put lists every stored key: drop the others
  std::vector<std::uint32_t> keys_removed;
  std::vector<StoredToken> tokens_put;
  std::vector<std::uint64_t> tokens_removed;
};

// Implemented by whoever keeps a view of a shared store (the SecretManager).
class TokenStoreObserver {
 public:
  virtual ~TokenStoreObserver() = default;
  // Runs `read` while none of the observer's own store calls is in flight,
  // then applies what it returned (nothing if it failed). Reading inside the
  // observer's exclusion means a change read from the backend is never
  // overtaken by an older one the observer is about to publish.
  virtual void apply(const std::function<Result<TokenStoreChanges>()>& read) = 0;
};

class TokenStore {
 public:
  virtual ~TokenStore() = default;

  // The whole state, as of the last successful mutation.
  virtual Result<TokenStoreState> load() = 0;

  virtual Result<std::uint64_t> allocate_sequence_number() = 0;
  virtual Result<std::uint32_t> allocate_master_key_id() = 0;

  // Adds a key or replaces the key with the same id (a retired key gets its
  // final expiry this way).
  virtual Status put_master_key(const MasterKey& key) = 0;
  virtual Status remove_master_key(std::uint32_t id) = 0;

  // kInvalidArgument if a token with that sequence number is stored already.
  virtual Status add_token(const StoredToken& token) = 0;
  // kUnknownToken if no such token is stored.
  virtual Status update_token(std::uint64_t sequence_number, TokenTime renew_date) = 0;
  // Cancellations and sweeps. If the call fails, part of the batch may have
  // been removed; repeating it completes it.
  virtual Status remove_tokens(std::span<const std::uint64_t> sequence_numbers) = 0;

  // For stores shared by several servers (ZkTokenStore); a store that only
  // this process writes keeps the defaults below.

  // True if other processes change the store too.
  virtual bool shared() const noexcept { return false; }
  // Makes `key` the current master key, unless another server rolled since
  // the key with id `replaces` became current. Returns the current key after
  // the call: `key`, or the other server's key (then `key` was not stored).
  virtual Result<MasterKey> roll_master_key(std::uint32_t replaces, const MasterKey& key) {
    (void)replaces;
    if (auto s = put_master_key(key); !s.ok()) return s;
    return key;
  }
  // True if this caller should sweep now; a shared store lets one server
  // per sweep interval win, so that a fleet does not stampede.
  virtual Result<bool> claim_sweep(TokenTime now) {
    (void)now;
    return true;
  }
  // After a local miss: brings the backend up to date (sync) and reads one
  // token or key. nullopt if it is not stored.
  virtual Result<std::optional<StoredToken>> fetch_token(std::uint64_t sequence_number) {
    (void)sequence_number;
    return std::optional<StoredToken>();
  }
  virtual Result<std::optional<MasterKey>> fetch_master_key(std::uint32_t id) {
    (void)id;
    return std::optional<MasterKey>();
  }
  // False while the view fed to the observer may be stale (a shared store
  // cut off from its backend, or unable to read its changes, for longer
  // than it allows): verification then fails with kStoreUnavailable
  // instead of trusting the view.
  virtual bool fresh() const noexcept { return true; }
  // Starts (or, with nullptr, stops) reporting other servers' changes.
  // Setting one may wait for a change being read with no observer (so that
  // the observer's load() comes after it); setting nullptr waits until no
  // apply() is running.
  virtual void set_observer(TokenStoreObserver* observer) { (void)observer; }
};

}  // namespace authrpc::security
