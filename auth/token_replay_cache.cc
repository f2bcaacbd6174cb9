#include "auth/token_replay_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace authrpc {

TokenReplayCache::TokenReplayCache(std::int64_t skew_ms, std::size_t capacity)
    : skew_ms_(skew_ms), capacity_(std::max<std::size_t>(capacity, 1)),
      floor_ms_(std::numeric_limits<std::int64_t>::min()) {}

TokenReplayCache::Verdict TokenReplayCache::check_and_insert(std::int64_t now_ms,
                                                             std::int64_t time_ms,
                                                             std::string_view proof) {
  Key key{time_ms, {}};
  std::memcpy(key.second.data(), proof.data(), std::min(proof.size(), key.second.size()));
  std::lock_guard lock(mu_);
  // Drop what can no longer be accepted anyway (stamped before now − skew).
  while (!entries_.empty() && entries_.begin()->first < now_ms - skew_ms_) {
    entries_.erase(entries_.begin());
  }
  if (time_ms <= floor_ms_) return Verdict::kTooOld;
  if (!entries_.insert(key).second) return Verdict::kReplay;
  if (entries_.size() > capacity_) {
    auto oldest = entries_.begin();
    floor_ms_ = std::max(floor_ms_, oldest->first);
    entries_.erase(oldest);
    // Everything else stamped at the new floor is refused from now on anyway.
    while (!entries_.empty() && entries_.begin()->first <= floor_ms_) {
      entries_.erase(entries_.begin());
    }
    if (time_ms <= floor_ms_) return Verdict::kTooOld;
  }
  return Verdict::kFresh;
}

std::size_t TokenReplayCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::int64_t TokenReplayCache::floor_ms() const {
  std::lock_guard lock(mu_);
  return floor_ms_;
}

}  // namespace authrpc
