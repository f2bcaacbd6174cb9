#include "authrpc/auth/token_replay_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace authrpc {

namespace {

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

// now − skew, saturating: the clock is whatever the caller says.
std::int64_t minus(std::int64_t now, std::int64_t skew) {
  return now < kMin + skew ? kMin : now - skew;
}

}  // namespace

TokenReplayCache::TokenReplayCache(std::int64_t skew_ms, std::size_t capacity, std::size_t per_token)
    : skew_ms_(std::max<std::int64_t>(skew_ms, 0)), capacity_(std::max<std::size_t>(capacity, 1)),
      per_token_(std::max<std::size_t>(per_token, 1)), floor_ms_(kMin) {}

TokenReplayCache::Verdict TokenReplayCache::check_and_insert(std::int64_t now_ms,
                                                             std::int64_t time_ms,
                                                             std::uint64_t token,
                                                             std::string_view proof) {
  Key key{time_ms, {}};
  std::memcpy(key.second.data(), proof.data(), std::min(proof.size(), key.second.size()));
  std::lock_guard lock(mu_);
  expire(minus(now_ms, skew_ms_));
  if (time_ms <= floor_ms_) return Verdict::kTooOld;
  auto it = tokens_.try_emplace(token, TokenState{{}, kMin}).first;
  TokenState& state = it->second;
  Verdict refused = Verdict::kFresh;
  if (time_ms <= state.floor) {
    refused = Verdict::kTooOld;
  } else if (!by_time_.emplace(key, token).second) {
    refused = Verdict::kReplay;
  }
  if (refused != Verdict::kFresh) {
    // A token never evicted from holds nothing but its entries.
    if (state.entries.empty() && state.floor == kMin) tokens_.erase(it);
    return refused;
  }
  if (state.entries.empty()) idle_.erase({state.floor, token});
  unweigh(token, state);
  state.entries.insert(key);
  weigh(token, state);
  if (state.entries.size() > per_token_) {
    evict_oldest(token, state);
  } else if (by_time_.size() > capacity_) {
    // The heaviest token pays: never one that holds fewer entries than another.
    const std::uint64_t heaviest = by_weight_.rbegin()->token;
    evict_oldest(heaviest, tokens_.at(heaviest));
  }
  return by_time_.contains(key) ? Verdict::kFresh : Verdict::kTooOld;
}

void TokenReplayCache::expire(std::int64_t cutoff) {
  while (!by_time_.empty() && by_time_.begin()->first.first < cutoff) {
    const auto [key, token] = *by_time_.begin();
    by_time_.erase(by_time_.begin());
    TokenState& state = tokens_.at(token);
    unweigh(token, state);
    state.entries.erase(key);
    weigh(token, state);
    // Its remaining entries are all above its floor, so an empty token's
    // floor is below the cutoff too: nothing left to remember.
    if (state.entries.empty()) tokens_.erase(token);
  }
  while (!idle_.empty() && idle_.begin()->first < cutoff) {
    tokens_.erase(idle_.begin()->second);
    idle_.erase(idle_.begin());
  }
}

void TokenReplayCache::evict_oldest(std::uint64_t token, TokenState& state) {
  unweigh(token, state);
  state.floor = std::max(state.floor, state.entries.begin()->first);
  // Everything else of this token stamped at the floor is refused from now
  // on anyway.
  while (!state.entries.empty() && state.entries.begin()->first <= state.floor) {
    by_time_.erase(*state.entries.begin());
    state.entries.erase(state.entries.begin());
  }
  weigh(token, state);
  if (!state.entries.empty()) return;
  idle_.emplace(state.floor, token);
  if (idle_.size() > capacity_) {
    const auto [floor, oldest] = *idle_.begin();
    floor_ms_ = std::max(floor_ms_, floor);
    tokens_.erase(oldest);
    idle_.erase(idle_.begin());
  }
}

void TokenReplayCache::unweigh(std::uint64_t token, const TokenState& state) {
  if (!state.entries.empty()) by_weight_.erase({state.entries.size(), state.entries.begin()->first, token});
}

void TokenReplayCache::weigh(std::uint64_t token, const TokenState& state) {
  if (!state.entries.empty()) by_weight_.insert({state.entries.size(), state.entries.begin()->first, token});
}

std::size_t TokenReplayCache::size() const {
  std::lock_guard lock(mu_);
  return by_time_.size();
}

std::size_t TokenReplayCache::size(std::uint64_t token) const {
  std::lock_guard lock(mu_);
  auto it = tokens_.find(token);
  return it == tokens_.end() ? 0 : it->second.entries.size();
}

std::int64_t TokenReplayCache::floor_ms() const {
  std::lock_guard lock(mu_);
  return floor_ms_;
}

std::int64_t TokenReplayCache::floor_ms(std::uint64_t token) const {
  std::lock_guard lock(mu_);
  auto it = tokens_.find(token);
  return it == tokens_.end() ? floor_ms_ : std::max(floor_ms_, it->second.floor);
}

}  // namespace authrpc
