// GroupCache (auth/authz/group_cache.h): TTL, the bound, unknown users, and the
// AuthzPolicy keys that configure it (groups.cache_ttl_ms, groups.cache_size).
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <map>

#include "authrpc/auth/authz/authz_policy.h"
#include "authrpc/auth/authz/group_cache.h"

namespace authrpc {
namespace {

using namespace std::chrono_literals;
using Clock = GroupCache::Clock;

struct Fixture {
  Clock::time_point now = Clock::time_point(1h);
  std::map<std::string, std::vector<std::string>> db = {{"alice", {"staff"}}, {"bob", {"staff", "ops"}}};
  int calls = 0;
  GroupCache cache{[this](const std::string& user) {
                     ++calls;
                     const auto it = db.find(user);
                     return it == db.end() ? std::vector<std::string>() : it->second;
                   },
                   10s, 2, [this] { return now; }};
};

TEST(GroupCacheTest, ServesFromCacheUntilTheTtlEnds) {
  Fixture f;
  EXPECT_EQ(f.cache.groups("alice"), std::vector<std::string>{"staff"});
  f.db["alice"] = {"staff", "admins"};  // changed at the source
  f.now += 9s;
  EXPECT_EQ(f.cache.groups("alice"), std::vector<std::string>{"staff"});
  EXPECT_EQ(f.calls, 1);
  f.now += 1s;  // expired: looked up again
  EXPECT_EQ(f.cache.groups("alice"), (std::vector<std::string>{"staff", "admins"}));
  EXPECT_EQ(f.calls, 2);
  EXPECT_EQ(f.cache.lookups(), 2u);
}

TEST(GroupCacheTest, CachesUnknownUsersAndStaysBounded) {
  Fixture f;
  EXPECT_TRUE(f.cache.groups("nobody-here").empty());
  EXPECT_TRUE(f.cache.groups("nobody-here").empty());
  EXPECT_EQ(f.calls, 1);
  (void)f.cache.groups("alice");
  (void)f.cache.groups("bob");  // capacity 2: the oldest (nobody-here) goes
  EXPECT_EQ(f.cache.size(), 2u);
  (void)f.cache.groups("alice");
  (void)f.cache.groups("bob");
  EXPECT_EQ(f.calls, 3);
  (void)f.cache.groups("nobody-here");
  EXPECT_EQ(f.calls, 4);
  EXPECT_EQ(f.cache.size(), 2u);
}

TEST(GroupCacheTest, PolicyKeys) {
  struct Case {
    const char* groups;
    bool ok;
  };
  for (const Case& c : {Case{R"({"source": "os"})", true},
                        Case{R"({"source": "os", "cache_ttl_ms": 0})", true},
                        Case{R"({"source": "os", "cache_ttl_ms": 60000, "cache_size": 100})", true},
                        Case{R"({"source": "os", "cache_ttl_ms": -1})", false},
                        Case{R"({"source": "os", "cache_ttl_ms": "5m"})", false},
                        Case{R"({"source": "os", "cache_size": 1.5})", false},
                        Case{R"({"source": "os", "cache": 1})", false}}) {
    SCOPED_TRACE(c.groups);
    auto policy = AuthzPolicy::from_json(nlohmann::json{{"groups", nlohmann::json::parse(c.groups)}});
    EXPECT_EQ(policy.ok(), c.ok) << (policy.ok() ? std::string("OK") : policy.status().to_string());
  }
  // The cached and the uncached policy agree on a real OS user.
  passwd* me = ::getpwuid(::getuid());
  ASSERT_NE(me, nullptr);
  auto cached = AuthzPolicy::from_json(R"({"groups": {"source": "os"}})"_json);
  auto uncached = AuthzPolicy::from_json(R"({"groups": {"source": "os", "cache_ttl_ms": 0}})"_json);
  ASSERT_TRUE(cached.ok() && uncached.ok());
  const auto expected = (*uncached)->groups_of(me->pw_name);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ((*cached)->groups_of(me->pw_name), expected);
  EXPECT_EQ((*cached)->groups_of(me->pw_name), expected);
}

}  // namespace
}  // namespace authrpc
