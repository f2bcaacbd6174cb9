#include "authrpc/auth/mechanisms/token/token_replay_cache.h"

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
  } else if (spare_time_.empty()) {
    if (!by_time_.emplace(key, token).second) refused = Verdict::kReplay;
  } else {
    TimeNode node = std::move(spare_time_.back());
    spare_time_.pop_back();
    node.key() = key;
    node.mapped() = token;
    auto inserted = by_time_.insert(std::move(node));
    if (!inserted.inserted) {
      spare_time_.push_back(std::move(inserted.node));
      refused = Verdict::kReplay;
    }
  }
  if (refused != Verdict::kFresh) {
    // A token never evicted from holds nothing but its entries.
    if (state.entries.empty() && state.floor == kMin) tokens_.erase(it);
    return refused;
  }
  if (state.entries.empty()) idle_.erase({state.floor, token});
  unweigh(token, state);
  if (spare_entries_.empty()) {
    state.entries.insert(key);
  } else {
    EntryNode node = std::move(spare_entries_.back());
    spare_entries_.pop_back();
    node.value() = key;
    state.entries.insert(std::move(node));  // new: by_time_ took it
  }
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
    erase_time(by_time_.begin());
    TokenState& state = tokens_.at(token);
    unweigh(token, state);
    if (auto entry = state.entries.find(key); entry != state.entries.end()) erase_entry(state, entry);
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
    if (auto at = by_time_.find(*state.entries.begin()); at != by_time_.end()) erase_time(at);
    erase_entry(state, state.entries.begin());
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

void TokenReplayCache::erase_time(std::map<Key, std::uint64_t>::iterator it) {
  if (spare_time_.size() < kSpareNodes) {
    spare_time_.push_back(by_time_.extract(it));
  } else {
    by_time_.erase(it);
  }
}

void TokenReplayCache::erase_entry(TokenState& state, std::set<Key>::iterator it) {
  if (spare_entries_.size() < kSpareNodes) {
    spare_entries_.push_back(state.entries.extract(it));
  } else {
    state.entries.erase(it);
  }
}

void TokenReplayCache::unweigh(std::uint64_t token, const TokenState& state) {
  if (!state.entries.empty()) {
    spare_weight_ = by_weight_.extract({state.entries.size(), state.entries.begin()->first, token});
  }
}

void TokenReplayCache::weigh(std::uint64_t token, const TokenState& state) {
  if (state.entries.empty()) return;
  const Weight weight{state.entries.size(), state.entries.begin()->first, token};
  if (spare_weight_.empty()) {
    by_weight_.insert(weight);
  } else {
    spare_weight_.value() = weight;
    by_weight_.insert(std::move(spare_weight_));
  }
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
