// TokenReplayCache: remembers the client proofs the `token` mechanism has
// accepted, so that a captured HELLO cannot be played again. Owned by
// TokenServerMechanism; called from IO threads (thread-safe, one mutex, no
// I/O).
//
// A HELLO carries the client's clock reading; the server accepts it only
// within ±skew of its own clock, so a proof needs remembering for 2 × skew at
// most. The cache is bounded: when it is full, the entry with the oldest
// timestamp is evicted and that timestamp becomes a floor — any HELLO stamped
// at or before it is refused (it might be a replay of what was evicted). In
// normal operation the floor stays below now − skew and never matters; under
// a flood it tightens the window instead of growing memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string_view>
#include <utility>

namespace authrpc {

class TokenReplayCache {
 public:
  enum class Verdict { kFresh, kReplay, kTooOld };

  TokenReplayCache(std::int64_t skew_ms, std::size_t capacity);

  // Records (time_ms, proof) unless it is there already (kReplay) or
  // time_ms is at or below the floor (kTooOld). Entries older than
  // now_ms − skew are dropped on the way. Only the first 16 bytes of proof
  // are kept (it is an HMAC output: they are as unique as the whole).
  Verdict check_and_insert(std::int64_t now_ms, std::int64_t time_ms, std::string_view proof);

  std::size_t size() const;
  std::int64_t floor_ms() const;

 private:
  using Key = std::pair<std::int64_t, std::array<std::uint8_t, 16>>;
  const std::int64_t skew_ms_;
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::set<Key> entries_;  // ordered by time: the oldest is begin()
  std::int64_t floor_ms_;
};

}  // namespace authrpc
