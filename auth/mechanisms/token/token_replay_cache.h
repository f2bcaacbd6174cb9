// TokenReplayCache: remembers the client proofs the `token` mechanism has
// accepted on its one-message path without a channel binding (unix://), so
// that a captured HELLO cannot be played again to this process. Owned by
// TokenServerMechanism; called from IO threads (thread-safe, one mutex, no
// I/O). Bound proofs (TLS) and the challenge exchange never need it
// (docs/TOKENS.md, "Replay").
//
// A HELLO carries the client's clock reading; the server accepts it only
// within ±skew of its own clock, so a proof needs remembering until its
// stamp is more than skew in the past. The cache is bounded, and the bounds
// are per token so that one token holder cannot crowd out the others:
//  - a token (its sequence number) holds at most `per_token` entries; past
//    that its own oldest entry is evicted and that stamp becomes the token's
//    floor: this token's HELLOs stamped at or before it are refused (they
//    might replay what was evicted). An honest client stamps "now", so its
//    floor stays in the past; a client flooding HELLOs stamped in the future
//    only raises its own floor.
//  - when the whole cache holds `capacity` entries, the oldest entry of the
//    token holding the most entries (of those, the one with the oldest
//    entry) is evicted the same way.
//  - tokens whose entries were all evicted keep only their floor; when more
//    than `capacity` such floors pile up (that many distinct tokens inside
//    one window), the lowest becomes a floor for every token.
// Tree nodes of entries that leave are kept (a few) for the next ones: a
// full cache takes one entry in and one out per HELLO, which would
// otherwise be four allocations and four frees (docs/PERFORMANCE.md, "CPU
// per session").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace authrpc {

class TokenReplayCache {
 public:
  enum class Verdict { kFresh, kReplay, kTooOld };

  TokenReplayCache(std::int64_t skew_ms, std::size_t capacity, std::size_t per_token);

  // Records (time_ms, proof) for `token` (a token's sequence number, unique
  // in a store) unless it is there already (kReplay) or time_ms is at or
  // below the token's floor or the global one (kTooOld). Entries stamped
  // before now_ms − skew are dropped on the way. Only the first 16 bytes of
  // proof are kept (it is an HMAC output: they are as unique as the whole).
  // Any int64 values are safe.
  Verdict check_and_insert(std::int64_t now_ms, std::int64_t time_ms, std::uint64_t token,
                           std::string_view proof);

  std::size_t size() const;                   // entries, all tokens
  std::size_t size(std::uint64_t token) const;  // entries of one token
  std::int64_t floor_ms() const;              // the floor for every token
  std::int64_t floor_ms(std::uint64_t token) const;  // max(its own, the global)

 private:
  using Proof = std::array<std::uint8_t, 16>;
  using Key = std::pair<std::int64_t, Proof>;  // ordered by time first
  struct TokenState {
    std::set<Key> entries;
    std::int64_t floor;
  };

  // Orders tokens by entries held, then by oldest entry, oldest last: the
  // last is the one to evict from when the cache is full.
  struct Weight {
    std::size_t entries;
    std::int64_t oldest;
    std::uint64_t token;
    bool operator<(const Weight& o) const {
      if (entries != o.entries) return entries < o.entries;
      if (oldest != o.oldest) return oldest > o.oldest;
      return token < o.token;
    }
  };

  using TimeNode = std::map<Key, std::uint64_t>::node_type;
  using EntryNode = std::set<Key>::node_type;
  static constexpr std::size_t kSpareNodes = 64;

  void expire(std::int64_t cutoff);
  // Removes one entry from by_time_ / a token's entries, keeping the node.
  void erase_time(std::map<Key, std::uint64_t>::iterator it);
  void erase_entry(TokenState& state, std::set<Key>::iterator it);
  // Evicts the token's oldest entry and raises its floor to that stamp.
  void evict_oldest(std::uint64_t token, TokenState& state);
  // Take a token out of by_weight_ before changing its entries, put it back after.
  void unweigh(std::uint64_t token, const TokenState& state);
  void weigh(std::uint64_t token, const TokenState& state);

  const std::int64_t skew_ms_;
  const std::size_t capacity_;
  const std::size_t per_token_;
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, TokenState> tokens_;
  std::map<Key, std::uint64_t> by_time_;                     // every entry → its token
  std::set<Weight> by_weight_;                               // tokens with entries
  std::set<std::pair<std::int64_t, std::uint64_t>> idle_;     // (floor, token): no entries left
  std::int64_t floor_ms_;
  // Nodes kept for reuse (at most kSpareNodes each); a token's weight node
  // between unweigh() and weigh().
  std::vector<TimeNode> spare_time_;
  std::vector<EntryNode> spare_entries_;
  std::set<Weight>::node_type spare_weight_;
};

}  // namespace authrpc
