// TimedTokenStore (security/timed_token_store.h) over the real memory and
// file stores: every call reaches the wrapped store with its arguments and
// comes back with its result or its error, and is observed once in
// authrpc_token_store_operation_seconds{store, operation}; a SecretManager
// over the wrapper issues, verifies, renews and cancels as over the store.
#include "authrpc/security/timed_token_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "authrpc/security/file_token_store.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "tests/testing/test_support.h"
#include "tests/testing/token_realm.h"

namespace authrpc::security {
namespace {

using std::chrono::milliseconds;

using testing::kTokenEpoch;

struct StoreCase {
  const char* kind;
  // Opens a fresh store of this kind in `dir` (unused by memory).
  std::function<std::shared_ptr<TokenStore>(const std::string& dir)> open;
};

void PrintTo(const StoreCase& c, std::ostream* os) { *os << c.kind; }

const StoreCase kStores[] = {
    {"memory", [](const std::string&) -> std::shared_ptr<TokenStore> {
       return std::make_shared<MemoryTokenStore>();
     }},
    {"file", [](const std::string& dir) -> std::shared_ptr<TokenStore> {
       auto store = FileTokenStore::open(dir);
       EXPECT_TRUE(store.ok()) << store.status().to_string();
       return store.ok() ? std::shared_ptr<TokenStore>(std::move(*store)) : nullptr;
     }},
};

// The observation count of each operation of `kind`'s histogram.
std::map<std::string, std::uint64_t> Counts(const MetricsRegistry& metrics, const std::string& kind,
                                            double* sum_seconds = nullptr) {
  std::map<std::string, std::uint64_t> counts;
  for (const auto& family : metrics.snapshot()) {
    if (family.name != kTokenStoreOperationSeconds) continue;
    EXPECT_EQ(family.type, MetricType::kHistogram);
    for (const auto& s : family.samples) {
      EXPECT_EQ(s.labels.size(), 2u);
      if (s.labels.size() != 2 || s.labels[0].second != kind) continue;
      EXPECT_EQ(s.labels[0].first, "store");
      EXPECT_EQ(s.labels[1].first, "operation");
      counts[s.labels[1].second] = s.histogram.count;
      if (sum_seconds != nullptr) *sum_seconds += s.histogram.sum_seconds;
    }
  }
  return counts;
}

StoredToken MakeToken(std::uint64_t seq) {
  StoredToken t;
  t.sequence_number = seq;
  t.identifier = "identifier-" + std::to_string(seq);
  t.password = SecretBytes(std::string(32, static_cast<char>('a' + seq % 26)));
  t.renew_date = kTokenEpoch + std::chrono::hours(1);
  return t;
}

class TimedTokenStoreTest : public ::testing::TestWithParam<StoreCase> {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir("timed-store");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_P(TimedTokenStoreTest, ForwardsEveryCallAndTimesIt) {
  const auto& c = GetParam();
  MetricsRegistry metrics;
  auto inner = c.open(dir_);
  ASSERT_NE(inner, nullptr);
  TimedTokenStore store(inner, c.kind, metrics);

  // Every operation's child exists, at zero, before any call.
  auto counts = Counts(metrics, c.kind);
  ASSERT_EQ(counts.size(), TimedTokenStore::kOperations);
  for (const auto& [op, n] : counts) EXPECT_EQ(n, 0u) << op;

  auto seq1 = store.allocate_sequence_number();
  auto seq2 = store.allocate_sequence_number();
  ASSERT_TRUE(seq1.ok() && seq2.ok());
  EXPECT_GT(*seq2, *seq1);
  auto key_id = store.allocate_master_key_id();
  ASSERT_TRUE(key_id.ok());
  MasterKey key;
  key.id = *key_id;
  key.created = kTokenEpoch;
  key.expires = kTokenEpoch + std::chrono::hours(48);
  key.secret = SecretBytes(std::string(32, 'k'));
  ASSERT_OK(store.put_master_key(key));
  ASSERT_OK(store.add_token(MakeToken(*seq1)));
  ASSERT_OK(store.add_token(MakeToken(*seq2)));
  // Errors come back as the store made them, and are timed too.
  EXPECT_TRUE(store.add_token(MakeToken(*seq1)).is(make_error_code(TokenErrc::kInvalidArgument)));
  EXPECT_TRUE(store.update_token(*seq2 + 100, kTokenEpoch).is(make_error_code(TokenErrc::kUnknownToken)));
  ASSERT_OK(store.update_token(*seq1, kTokenEpoch + std::chrono::hours(2)));
  const std::uint64_t removed[] = {*seq2};
  ASSERT_OK(store.remove_tokens(removed));

  // What load() returns through the wrapper is the wrapped store's state.
  auto state = store.load();
  ASSERT_TRUE(state.ok()) << state.status().to_string();
  ASSERT_EQ(state->tokens.size(), 1u);
  EXPECT_EQ(state->tokens[0].sequence_number, *seq1);
  EXPECT_EQ(state->tokens[0].renew_date, kTokenEpoch + std::chrono::hours(2));
  ASSERT_EQ(state->keys.size(), 1u);
  EXPECT_EQ(state->keys[0].id, *key_id);
  EXPECT_GE(state->last_sequence_number, *seq2);

  MasterKey next = key;
  next.id = *key_id + 1;
  auto rolled = store.roll_master_key(*key_id, next);
  ASSERT_TRUE(rolled.ok());
  EXPECT_EQ(rolled->id, next.id);
  ASSERT_OK(store.remove_master_key(*key_id));
  auto claimed = store.claim_sweep(kTokenEpoch);
  ASSERT_TRUE(claimed.ok());
  EXPECT_TRUE(*claimed);  // a store only this process writes always lets it sweep
  auto fetched = store.fetch_token(*seq1);
  ASSERT_TRUE(fetched.ok());
  EXPECT_FALSE(fetched->has_value());  // local stores have nothing beyond load()
  auto fetched_key = store.fetch_master_key(next.id);
  ASSERT_TRUE(fetched_key.ok());
  EXPECT_EQ(store.shared(), inner->shared());
  EXPECT_EQ(store.fresh(), inner->fresh());
  store.set_observer(nullptr);

  // The wrapped store saw the same: reading it directly agrees.
  auto direct = inner->load();
  ASSERT_TRUE(direct.ok());
  ASSERT_EQ(direct->keys.size(), 1u);
  EXPECT_EQ(direct->keys[0].id, next.id);

  double sum = 0;
  counts = Counts(metrics, c.kind, &sum);
  const std::map<std::string, std::uint64_t> expected = {
      {"load", 1},
      {"allocate_sequence_number", 2},
      {"allocate_master_key_id", 1},
      {"put_master_key", 1},
      {"remove_master_key", 1},
      {"add_token", 3},
      {"update_token", 2},
      {"remove_tokens", 1},
      {"roll_master_key", 1},
      {"claim_sweep", 1},
      {"fetch_token", 1},
      {"fetch_master_key", 1},
  };
  EXPECT_EQ(counts, expected);
  EXPECT_GT(sum, 0.0);
}

// The wrapper as TokenService uses it: under a SecretManager.
TEST_P(TimedTokenStoreTest, ASecretManagerWorksThroughIt) {
  const auto& c = GetParam();
  MetricsRegistry metrics;
  auto inner = c.open(dir_);
  ASSERT_NE(inner, nullptr);
  auto secrets = SecretManager::open(std::make_shared<TimedTokenStore>(inner, c.kind, metrics));
  ASSERT_TRUE(secrets.ok()) << secrets.status().to_string();
  auto token = (*secrets)->issue({"alice", "yarn", "", "svc"});
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  EXPECT_TRUE((*secrets)->verify(*token).ok());
  EXPECT_TRUE((*secrets)->renew(*token, "yarn").ok());
  ASSERT_OK((*secrets)->cancel(*token, "alice"));
  EXPECT_FALSE((*secrets)->verify(*token).ok());
  const auto counts = Counts(metrics, c.kind);
  EXPECT_EQ(counts.at("load"), 1u);
  EXPECT_EQ(counts.at("add_token"), 1u);
  EXPECT_EQ(counts.at("update_token"), 1u);
  EXPECT_EQ(counts.at("remove_tokens"), 1u);
  EXPECT_GE(counts.at("put_master_key") + counts.at("roll_master_key"), 1u);
}

INSTANTIATE_TEST_SUITE_P(Stores, TimedTokenStoreTest, ::testing::ValuesIn(kStores),
                         [](const auto& p) { return std::string(p.param.kind); });

}  // namespace
}  // namespace authrpc::security
