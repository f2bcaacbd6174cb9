// ZkTokenStore and SecretManagers sharing it, against a real ZooKeeper
// started by the test (tests/testing/mini_zk.h): the store contract, batch-reserved
// sequence numbers, digest ACLs, start-up with ZooKeeper unreachable, views
// kept in step by watches (also when a round of the watch's reads fails
// partway), exactly one key roll and one sweeper per interval, session
// expiry (with a record the rebuild cannot decode), and a ZooKeeper restart
// under load.
// Skipped (with the reason) only where ZooKeeper is not installed.
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "authrpc/components/zookeeper/zk_session.h"
#include "authrpc/components/zookeeper/zk_token_store.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/secret_manager.h"
#include "tests/testing/mini_zk.h"
#include "tests/testing/token_realm.h"

namespace authrpc::security {
namespace {

using namespace std::chrono_literals;
using authrpc::testing::MiniZk;

bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

class ZkTokenStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!MiniZk::available()) return;
    zk_ = std::make_unique<MiniZk>();
    setup_error_ = zk_->start();
  }
  static void TearDownTestSuite() { zk_.reset(); }

  void SetUp() override {
    if (!MiniZk::available()) GTEST_SKIP() << "ZooKeeper is not installed (scripts/setup.sh installs it)";
    ASSERT_EQ(setup_error_, "");
    root_ = "/authrpc-test/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  static ZkTokenStoreOptions Options(const MiniZk& zk, const std::string& root) {
    ZkTokenStoreOptions o;
    o.connect = zk.connect_string();
    o.root = root;
    o.digest = SecretBytes(std::string_view("authrpc:s3cret"));
    o.session_timeout = 4s;
    o.sequence_batch = 10;
    return o;
  }
  std::shared_ptr<ZkTokenStore> Open(const MiniZk* zk = nullptr) {
    auto store = ZkTokenStore::open(Options(zk ? *zk : *zk_, root_));
    EXPECT_TRUE(store.ok()) << store.status().to_string();
    return store.ok() ? std::shared_ptr<ZkTokenStore>(std::move(*store)) : nullptr;
  }
  std::unique_ptr<SecretManager> Manager(std::shared_ptr<ZkTokenStore> store,
                                         std::shared_ptr<const Clock> clock = nullptr) {
    SecretManagerOptions o;
    o.clock = std::move(clock);
    o.renew_interval = 1h;
    o.key_roll_interval = 24h;
    auto m = SecretManager::open(std::move(store), o);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? std::move(*m) : nullptr;
  }
  static std::shared_ptr<ManualClock> Clock() {
    return std::make_shared<ManualClock>(
        std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
  }

  static inline std::unique_ptr<MiniZk> zk_;
  static inline std::string setup_error_;
  std::string root_;
};

StoredToken MakeToken(std::uint64_t seq) {
  TokenIdentifier id;
  id.owner = "alice";
  return testing::StoredTokenFor(seq, std::move(id),
                                 testing::kTokenEpoch + std::chrono::milliseconds(seq));
}

TEST_F(ZkTokenStoreTest, RecordsRoundTripAndDamagedOnesAreRefused) {
  const StoredToken token = MakeToken(42);
  auto back = ZkTokenStore::decode_token(ZkTokenStore::encode_token(token));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->sequence_number, 42u);
  EXPECT_EQ(back->identifier, token.identifier);
  EXPECT_TRUE(back->password.equals(token.password));
  EXPECT_EQ(back->renew_date, token.renew_date);
  MasterKey key{7, TokenTime(1000ms), TokenTime(2000ms), SecretBytes::random(32)};
  auto key_back = ZkTokenStore::decode_key(ZkTokenStore::encode_key(key));
  ASSERT_TRUE(key_back.ok());
  EXPECT_EQ(key_back->id, 7u);
  EXPECT_TRUE(key_back->secret.equals(key.secret));
  const std::string good = ZkTokenStore::encode_token(token);
  struct Case {
    const char* name;
    std::string data;
    TokenErrc code;
  };
  const std::vector<Case> cases = {
      {"empty", "", TokenErrc::kMalformed},
      {"truncated", good.substr(0, good.size() - 1), TokenErrc::kMalformed},
      {"trailing", good + "x", TokenErrc::kMalformed},
      {"version", "\x02" + good.substr(1), TokenErrc::kUnsupportedVersion},
  };
  for (const auto& c : cases) {
    EXPECT_TRUE(ZkTokenStore::decode_token(c.data).is(c.code)) << c.name;
  }
}

TEST_F(ZkTokenStoreTest, StoreContractAcrossTwoStores) {
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a && b);
  // Sequence numbers: increasing per store, unique across stores, one
  // round trip per batch of 10.
  std::set<std::uint64_t> seen;
  std::uint64_t last_a = 0;
  for (int i = 0; i < 35; ++i) {
    auto x = a->allocate_sequence_number();
    auto y = b->allocate_sequence_number();
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_GT(*x, last_a);
    last_a = *x;
    EXPECT_TRUE(seen.insert(*x).second);
    EXPECT_TRUE(seen.insert(*y).second);
  }
  EXPECT_EQ(a->stats().sequence_reservations, 4u);
  auto k1 = a->allocate_master_key_id();
  auto k2 = b->allocate_master_key_id();
  ASSERT_TRUE(k1.ok() && k2.ok());
  EXPECT_NE(*k1, *k2);

  MasterKey key{*k1, TokenTime(1000ms), TokenTime(5000ms), SecretBytes::random(32)};
  ASSERT_TRUE(a->put_master_key(key).ok());
  key.expires = TokenTime(3000ms);
  ASSERT_TRUE(a->put_master_key(key).ok());  // replaces
  const StoredToken t = MakeToken(*seen.begin());
  ASSERT_TRUE(a->add_token(t).ok());
  EXPECT_TRUE(b->add_token(t).is(TokenErrc::kInvalidArgument));
  ASSERT_TRUE(b->update_token(t.sequence_number, TokenTime(9000ms)).ok());
  EXPECT_TRUE(b->update_token(999999, TokenTime(9000ms)).is(TokenErrc::kUnknownToken));

  auto state = b->load();
  ASSERT_TRUE(state.ok()) << state.status().to_string();
  ASSERT_EQ(state->keys.size(), 1u);
  EXPECT_EQ(state->keys[0].expires, TokenTime(3000ms));
  EXPECT_TRUE(state->keys[0].secret.equals(key.secret));
  ASSERT_EQ(state->tokens.size(), 1u);
  EXPECT_EQ(state->tokens[0].renew_date, TokenTime(9000ms));
  EXPECT_TRUE(state->tokens[0].password.equals(t.password));
  EXPECT_GE(state->last_sequence_number, *seen.rbegin());
  EXPECT_GE(state->last_master_key_id, std::max(*k1, *k2));

  const std::uint64_t seqs[] = {t.sequence_number, 424242};
  ASSERT_TRUE(b->remove_tokens(seqs).ok());
  ASSERT_TRUE(b->remove_tokens(seqs).ok());  // idempotent
  ASSERT_TRUE(a->remove_master_key(key.id).ok());
  state = a->load();
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->tokens.empty());
  EXPECT_TRUE(state->keys.empty());
}

TEST_F(ZkTokenStoreTest, DigestAclKeepsOtherSessionsFromKeysAndPasswords) {
  auto store = Open();
  ASSERT_TRUE(store);
  auto manager = Manager(store);
  ASSERT_TRUE(manager && manager->issue({"alice", "", "", "svc"}).ok());
  struct Case {
    const char* name;
    const char* digest;
  };
  for (const Case& c : {Case{"no credential", ""}, Case{"wrong password", "authrpc:guess"},
                        Case{"other user", "mallory:s3cret"}}) {
    SCOPED_TRACE(c.name);
    ZkSessionOptions o;
    o.connect = zk_->connect_string();
    o.digest = SecretBytes(std::string_view(c.digest));
    auto session = ZkSession::connect(o, nullptr);
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    std::vector<std::string> names;
    EXPECT_EQ((*session)->children(root_ + "/keys", false, &names), ZNOAUTH);
    EXPECT_EQ((*session)->children(root_ + "/tokens", false, &names), ZNOAUTH);
    EXPECT_EQ((*session)->get(root_ + "/tokens/00000000000000000001", false).rc, ZNOAUTH);
    EXPECT_EQ((*session)->set(root_ + "/current-key", "99", -1), ZNOAUTH);
  }
}

TEST_F(ZkTokenStoreTest, UnreachableAtStartFailsClearlyOrAfterBoundedRetry) {
  struct Case {
    std::chrono::milliseconds start_timeout;
    std::chrono::milliseconds at_least;
    const char* text;
  };
  const int dead_port = testing::FreeLoopbackPort();
  for (const Case& c : {Case{0ms, 0ms, "answered within"}, Case{1200ms, 1200ms, "gave up after"}}) {
    ZkTokenStoreOptions o = Options(*zk_, root_);
    o.connect = "127.0.0.1:" + std::to_string(dead_port);
    o.connect_timeout = 300ms;
    o.start_timeout = c.start_timeout;
    const auto t0 = std::chrono::steady_clock::now();
    auto store = ZkTokenStore::open(o);
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(store.ok());
    EXPECT_TRUE(store.status().is(TokenErrc::kStoreUnavailable)) << store.status().to_string();
    EXPECT_NE(store.status().message.find(c.text), std::string::npos) << store.status().to_string();
    EXPECT_NE(store.status().message.find(o.connect), std::string::npos);
    EXPECT_GE(took, c.at_least);
    EXPECT_LT(took, c.at_least + 3s);
  }
  ZkTokenStoreOptions bad = Options(*zk_, "relative/root");
  EXPECT_TRUE(ZkTokenStore::open(bad).status().is(TokenErrc::kInvalidArgument));
}

TEST_F(ZkTokenStoreTest, ViewsFollowIssueRenewAndCancelOnOtherServers) {
  auto clock = Clock();
  auto sa = Open(), sb = Open(), sc = Open();
  ASSERT_TRUE(sa && sb && sc);
  auto a = Manager(sa, clock), b = Manager(sb, clock), c = Manager(sc, clock);
  ASSERT_TRUE(a && b && c);
  auto token = a->issue({"alice", "yarn", "", "svc"});
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  // B verifies at once: from its view if the watch was quicker, else by
  // sync + read. Then the watch brings it into B's and C's views.
  EXPECT_TRUE(b->verify(*token).ok());
  EXPECT_TRUE(Eventually([&] { return b->token_count() == 1 && c->token_count() == 1; }));
  const auto fetches = sb->stats().fetches;
  EXPECT_TRUE(b->verify(*token).ok());
  EXPECT_EQ(sb->stats().fetches, fetches);  // served from the view

  // Renewed on B; A's view learns the new renew date.
  clock->advance(50min);
  auto renewed = b->renew(*token, "yarn");
  ASSERT_TRUE(renewed.ok()) << renewed.status().to_string();
  clock->advance(20min);  // past the first renew date
  EXPECT_TRUE(Eventually([&] { return a->verify(*token).ok(); }));
  EXPECT_TRUE(c->verify(*token).ok());

  // Cancelled on C: refused everywhere. C knows why; A and B see the node
  // go, and if it went before they read B's renewal, their view says the
  // token was past its renew date: EXPIRED is then as right as CANCELLED.
  ASSERT_TRUE(c->cancel(*token, "alice").ok());
  EXPECT_TRUE(c->verify(*token).is(TokenErrc::kCancelled));
  for (auto* m : {a.get(), b.get()}) {
    EXPECT_TRUE(Eventually([&] {
      auto v = m->verify(*token);
      return v.is(TokenErrc::kCancelled) || v.is(TokenErrc::kExpired);
    })) << m->verify(*token).status().to_string();
  }
  // A forgery never costs a round trip: the password is checked first.
  Token forged = *token;
  forged.password.data()[0] ^= 1;
  const auto before = sa->stats().fetches;
  EXPECT_TRUE(a->verify(forged).is(TokenErrc::kForged));
  EXPECT_EQ(sa->stats().fetches, before);
}

TEST_F(ZkTokenStoreTest, ExactlyOneServerRollsTheKeyAndOneSweepsPerInterval) {
  auto clock = Clock();
  std::vector<std::shared_ptr<ZkTokenStore>> stores;
  std::vector<std::unique_ptr<SecretManager>> managers;
  for (int i = 0; i < 3; ++i) {
    stores.push_back(Open());
    ASSERT_TRUE(stores.back());
    managers.push_back(Manager(stores.back(), clock));
    ASSERT_TRUE(managers.back());
  }
  ASSERT_TRUE(managers[0]->issue({"alice", "", "", "svc"}).ok());  // the first key
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    clock->advance(25h);  // the roll is due everywhere
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (auto& m : managers) {
      threads.emplace_back([&, mp = m.get()] { ok += mp->sweep().ok() ? 1 : 0; });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok, 3);
    auto state = stores[0]->load();
    ASSERT_TRUE(state.ok());
    // One new key per round, whoever won.
    EXPECT_EQ(state->keys.size(), static_cast<std::size_t>(round + 2));
    const std::uint32_t current = state->keys.back().id;
    for (auto& m : managers) {
      EXPECT_TRUE(Eventually([&] {
        for (const auto& k : m->master_keys()) {
          if (k.current) return k.id == current;
        }
        return false;
      }));
    }
    // The sweep claim: exactly one of three wins at one instant.
    clock->advance(2min);
    int claimed = 0;
    for (auto& s : stores) claimed += *s->claim_sweep(clock->now()) ? 1 : 0;
    EXPECT_EQ(claimed, 1);
  }
}

// A raw C-client handle authenticated as the stores are, for records the
// stores themselves never write (here: a node they may list but not read).
struct RawZk {
  explicit RawZk(const std::string& connect) {
    zh = zookeeper_init(connect.c_str(), nullptr, 10000, nullptr, nullptr, 0);
    for (int i = 0; zh != nullptr && i < 500 && zoo_state(zh) != ZOO_CONNECTED_STATE; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    // Requests after it are served after it, on one connection.
    const char cred[] = "authrpc:s3cret";
    if (connected()) zoo_add_auth(zh, "digest", cred, sizeof cred - 1, nullptr, nullptr);
  }
  ~RawZk() {
    if (zh != nullptr) zookeeper_close(zh);
  }
  bool connected() const { return zh != nullptr && zoo_state(zh) == ZOO_CONNECTED_STATE; }
  zhandle_t* zh = nullptr;
};

// After an expiry the store reads everything again. A record it cannot
// decode is left out of the view there as in a watch round; were it refused,
// the rebuild would fail on it every time and the view stay stale.
TEST_F(ZkTokenStoreTest, SessionExpiryRebuildsTheViewFromZooKeeper) {
  auto sa = Open(), sb = Open();
  ASSERT_TRUE(sa && sb);
  auto a = Manager(sa), b = Manager(sb);
  ASSERT_TRUE(a && b);
  auto kept = b->issue({"alice", "", "", "svc"});
  auto cancelled = b->issue({"alice", "", "", "svc"});
  ASSERT_TRUE(kept.ok() && cancelled.ok());
  RawZk raw(zk_->connect_string());
  ASSERT_TRUE(raw.connected());
  const std::string damaged = root_ + "/tokens/00000000009999999999";
  ASSERT_EQ(zoo_create(raw.zh, damaged.c_str(), "not a token", 11, &ZOO_CREATOR_ALL_ACL, ZOO_PERSISTENT,
                       nullptr, 0),
            ZOK);
  ASSERT_TRUE(Eventually([&] { return a->token_count() == 2; }));
  ASSERT_TRUE(sa->expire_session_for_testing().ok());
  // While A is cut off, B issues and cancels.
  auto fresh = b->issue({"bob", "", "", "svc"});
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(b->cancel(*cancelled, "alice").ok());
  ASSERT_TRUE(Eventually([&] { return sa->stats().sessions == 2 && sa->fresh(); }))
      << "sessions " << sa->stats().sessions << ", fresh " << sa->fresh();
  EXPECT_TRUE(Eventually([&] { return a->token_count() == 2; }));
  EXPECT_TRUE(a->verify(*kept).ok());
  EXPECT_TRUE(a->verify(*fresh).ok());
  EXPECT_TRUE(a->verify(*cancelled).is(TokenErrc::kCancelled)) << a->verify(*cancelled).status().to_string();
  EXPECT_TRUE(a->issue({"carol", "", "", "svc"}).ok());
  // load() still names the damaged record: somebody should know.
  EXPECT_TRUE(sa->load().status().is(TokenErrc::kStoreCorrupt));
}

// A watch round reads new token nodes, and the keys when they changed. When
// one read fails (here: a node the stores may list but not read), nothing of
// that round may be kept as seen but not delivered, or a token issued
// meanwhile is listed by every retry yet never enters the view. And a view
// whose rounds keep failing is stale: verification says so.
TEST_F(ZkTokenStoreTest, ViewKeepsATokenFoundInARoundWhoseOtherReadFailed) {
  for (const char* dir : {"/tokens/00000000009999999999", "/keys/9999999999"}) {
    SCOPED_TRACE(dir);
    root_ += "x";  // a fresh layout per case
    auto sa = Open();
    ZkTokenStoreOptions ob = Options(*zk_, root_);
    ob.stale_after = 300ms;
    auto opened = ZkTokenStore::open(ob);
    ASSERT_TRUE(sa && opened.ok()) << opened.status().to_string();
    std::shared_ptr<ZkTokenStore> sb(std::move(*opened));
    auto a = Manager(sa), b = Manager(sb);
    ASSERT_TRUE(a && b);
    RawZk raw(zk_->connect_string());
    ASSERT_TRUE(raw.connected());
    // Listed by the watch, but ADMIN is all the stores' user may do with it.
    const std::string unreadable = root_ + dir;
    ACL admin_only_acl{ZOO_PERM_ADMIN, {const_cast<char*>("auth"), const_cast<char*>("")}};
    ACL_vector admin_only{1, &admin_only_acl};
    ASSERT_EQ(zoo_create(raw.zh, unreadable.c_str(), "x", 1, &admin_only, ZOO_PERSISTENT, nullptr, 0), ZOK);
    ASSERT_TRUE(Eventually([&] { return sb->stats().retries > 0; })) << "b's watch failed a read";
    auto token = a->issue({"alice", "", "", "svc"});
    ASSERT_TRUE(token.ok()) << token.status().to_string();
    // The second failed round from here started after the first had failed,
    // so after the token was in ZooKeeper: it listed the token too.
    const auto retries = sb->stats().retries;
    ASSERT_TRUE(Eventually([&] { return sb->stats().retries >= retries + 2; })) << "b's watch retried";
    EXPECT_EQ(b->token_count(), 0u);  // nothing is delivered while a read fails
    // Failing for longer than stale_after, b's view may lack any change (a
    // cancellation as well as this token): b no longer verifies from it.
    EXPECT_TRUE(Eventually([&] { return !sb->fresh(); }));
    EXPECT_TRUE(b->verify(*token).is(TokenErrc::kStoreUnavailable)) << b->verify(*token).status().to_string();
    // Readable again: b's next round delivers the token. The node's own
    // bytes are neither a token nor a key, and stay out of the view.
    ASSERT_EQ(zoo_set_acl(raw.zh, unreadable.c_str(), -1, &ZOO_CREATOR_ALL_ACL), ZOK);
    EXPECT_TRUE(Eventually([&] { return b->token_count() == 1; })) << b->token_count();
    EXPECT_TRUE(Eventually([&] { return sb->fresh(); }));  // once the round has returned
    EXPECT_TRUE(b->verify(*token).ok());
  }
}

TEST_F(ZkTokenStoreTest, ZooKeeperRestartUnderLoad) {
  MiniZk zk;  // its own: this test kills it
  ASSERT_EQ(zk.start(), "");
  auto sa = Open(&zk), sb = Open(&zk);
  ASSERT_TRUE(sa && sb);
  auto a = Manager(sa), b = Manager(sb);
  ASSERT_TRUE(a && b);
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<Token> acknowledged;
  std::vector<std::string> failures;
  std::thread load([&] {
    while (!stop) {
      auto t = a->issue({"alice", "", "", "svc"});
      std::lock_guard lock(mu);
      if (t.ok()) {
        acknowledged.push_back(*t);
      } else {
        failures.push_back(t.status().to_string());
        std::this_thread::sleep_for(20ms);
      }
    }
  });
  // The load is running (ZooKeeper goes down under it, not before it).
  EXPECT_TRUE(Eventually([&] {
    std::lock_guard lock(mu);
    return !acknowledged.empty();
  }));
  zk.stop();
  std::this_thread::sleep_for(500ms);  // the outage under test: the load meets a dead ZooKeeper
  ASSERT_EQ(zk.start(), "");
  std::size_t after_restart = 0;
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard lock(mu);
    after_restart = acknowledged.size();
    return !failures.empty();
  }));
  const auto restarted = std::chrono::steady_clock::now();
  EXPECT_TRUE(Eventually([&] {
    std::lock_guard lock(mu);
    return acknowledged.size() > after_restart + 20;
  })) << "issuing resumed after the restart";
  std::printf("issuing resumed %lld ms after the restart\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - restarted)
                                         .count()));
  stop = true;
  load.join();
  for (const auto& f : failures) {
    EXPECT_NE(f.find("STORE_UNAVAILABLE"), std::string::npos) << f;
  }
  // An issue whose reply the restart cut off may have been committed: it is
  // in ZooKeeper, whole, though nobody got it.
  const bool settled = Eventually([&] {
    return sb->fresh() && b->token_count() >= acknowledged.size() &&
           b->token_count() <= acknowledged.size() + failures.size();
  });
  if (!settled) {
    // Seen once (ASan build, CI, 30 of 31): tell a token ZooKeeper lost from
    // a view that missed one, by reading ZooKeeper afresh.
    const auto in_zk = sb->load();
    ADD_FAILURE() << b->token_count() << " of " << acknowledged.size() << " acknowledged ("
                  << failures.size() << " failed) in b's view, fresh: " << sb->fresh()
                  << "; ZooKeeper holds "
                  << (in_zk.ok() ? std::to_string(in_zk->tokens.size()) + " tokens"
                                 : in_zk.status().to_string());
  }
  for (std::size_t i = 0; i < acknowledged.size(); ++i) {
    EXPECT_TRUE(b->verify(acknowledged[i]).ok()) << "acknowledged token " << i;
  }
  // Usually the session survives the restart; on a loaded machine it may
  // expire first, and then the store rebuilt its view: both are fine here.
  EXPECT_LE(sa->stats().sessions, 2u);
}

}  // namespace
}  // namespace authrpc::security
