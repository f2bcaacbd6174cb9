#include "authrpc/auth/authz/group_cache.h"

namespace authrpc {

GroupCache::GroupCache(Lookup lookup, Clock::duration ttl, std::size_t capacity,
                       std::function<Clock::time_point()> now)
    : lookup_(std::move(lookup)), ttl_(ttl), capacity_(capacity == 0 ? 1 : capacity),
      now_(std::move(now)) {}

std::vector<std::string> GroupCache::groups(const std::string& user) {
  {
    std::lock_guard lock(mu_);
    const auto it = entries_.find(user);
    if (it != entries_.end() && now_() < it->second.expires) return it->second.groups;
  }
  std::vector<std::string> found = lookup_(user);
  std::lock_guard lock(mu_);
  ++lookups_;
  if (const auto it = entries_.find(user); it != entries_.end()) {
    ages_.erase(it->second.age);
    entries_.erase(it);
  }
  while (entries_.size() >= capacity_) {
    entries_.erase(ages_.front());
    ages_.pop_front();
  }
  ages_.push_back(user);
  entries_.emplace(user, Entry{found, now_() + ttl_, std::prev(ages_.end())});
  return found;
}

std::size_t GroupCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::size_t GroupCache::lookups() const {
  std::lock_guard lock(mu_);
  return lookups_;
}

}  // namespace authrpc
