// TokenStore: where a secret manager keeps what must outlive the process —
// master keys, issued tokens and their renew dates, the sequence-number and
// key-id counters. The secret manager is the only caller; it loads the whole
// state once (load) and then reports each change, keeping its own in-memory
// view for verification, so a store is never read on the verify path.
//
// Contract for implementations (MemoryTokenStore, FileTokenStore, and a
// ZooKeeper store shared by several servers later):
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
#include <span>
#include <string>
#include <vector>

#include "security/secret_bytes.h"
#include "security/token.h"
#include "security/token_errors.h"

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

class TokenStore {
 public:
  virtual ~TokenStore() = default;

  // The whole state, as of the last successful mutation.
  virtual TokenResult<TokenStoreState> load() = 0;

  virtual TokenResult<std::uint64_t> allocate_sequence_number() = 0;
  virtual TokenResult<std::uint32_t> allocate_master_key_id() = 0;

  // Adds a key or replaces the key with the same id (a retired key gets its
  // final expiry this way).
  virtual TokenStatus put_master_key(const MasterKey& key) = 0;
  virtual TokenStatus remove_master_key(std::uint32_t id) = 0;

  // kInvalidArgument if a token with that sequence number is stored already.
  virtual TokenStatus add_token(const StoredToken& token) = 0;
  // kUnknownToken if no such token is stored.
  virtual TokenStatus update_token(std::uint64_t sequence_number, TokenTime renew_date) = 0;
  // Cancellations and sweeps. If the call fails, part of the batch may have
  // been removed; repeating it completes it.
  virtual TokenStatus remove_tokens(std::span<const std::uint64_t> sequence_numbers) = 0;
};

}  // namespace authrpc::security
