// GroupCache: the groups of users from a slow source — the OS through NSS
// (getgrouplist: /etc/group parsed each time with "files", a network round
// trip with LDAP or sssd) — kept for a TTL, so that a connection does not pay
// a lookup on the IO thread every time (what that costs: docs/AUTHZ.md,
// "Cost", and docs/PERFORMANCE.md, "Measured costs behind the code").
//
// Unknown users are cached too (as empty). Bounded: at capacity the entry
// looked up longest ago goes. Owned by an AuthzPolicy, so a reload starts
// with an empty cache. Thread-safe: one mutex; the lookup itself runs outside
// it (two connections of a user not cached may both look it up).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace authrpc {

class GroupCache {
 public:
  using Clock = std::chrono::steady_clock;
  using Lookup = std::function<std::vector<std::string>(const std::string& user)>;

  // `now` is for tests (a controlled clock).
  GroupCache(Lookup lookup, Clock::duration ttl, std::size_t capacity,
             std::function<Clock::time_point()> now = &Clock::now);

  std::vector<std::string> groups(const std::string& user);

  std::size_t size() const;
  std::size_t lookups() const;  // calls of `lookup` so far (misses and expiries)

 private:
  struct Entry {
    std::vector<std::string> groups;
    Clock::time_point expires;
    std::list<std::string>::iterator age;  // position in ages_
  };

  const Lookup lookup_;
  const Clock::duration ttl_;
  const std::size_t capacity_;
  const std::function<Clock::time_point()> now_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> ages_;  // users, looked up longest ago first
  std::size_t lookups_ = 0;
};

}  // namespace authrpc
