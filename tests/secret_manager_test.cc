// Unit tests for security/secret_manager.h over a MemoryTokenStore and a
// ManualClock: issue/verify, lifetimes, renew and cancel permissions, typed
// failures, master-key rolling and retirement, the sweeper, reloading from a
// store, and concurrent verification during changes.
#include "authrpc/security/secret_manager.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/security/clock.h"
#include "authrpc/security/hmac_sha256.h"
#include "authrpc/security/memory_token_store.h"
#include "tests/testing/token_realm.h"

namespace authrpc::security {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
constexpr auto kDay = hours(24);

using testing::kTokenEpoch;

class SecretManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { open_manager(); }

  void open_manager() {
    SecretManagerOptions options;
    options.clock = clock_;
    auto m = SecretManager::open(store_, options);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    manager_ = std::move(*m);
  }

  Token issue(const std::string& owner = "alice", const std::string& renewer = "yarn",
              const std::string& real_user = "") {
    auto t = manager_->issue({owner, renewer, real_user, "tcp://db1:7000"});
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? *t : Token{};
  }

  MasterKeyInfo key_info(std::uint32_t id) {
    for (const auto& k : manager_->master_keys()) {
      if (k.id == id) return k;
    }
    return {};
  }
  bool has_key(std::uint32_t id) { return key_info(id).id == id; }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kTokenEpoch);
  std::shared_ptr<MemoryTokenStore> store_ = std::make_shared<MemoryTokenStore>();
  std::unique_ptr<SecretManager> manager_;
};

TEST_F(SecretManagerTest, DefaultsAreOneDayRollSevenDaysMaxOneDayRenew) {
  SecretManagerOptions defaults;
  EXPECT_EQ(defaults.key_roll_interval, kDay);
  EXPECT_EQ(defaults.max_lifetime, 7 * kDay);
  EXPECT_EQ(defaults.renew_interval, kDay);
  EXPECT_EQ(defaults.kind, "authrpc-delegation");
}

TEST_F(SecretManagerTest, IssueThenVerify) {
  Token token = issue("alice", "yarn", "oozie");
  EXPECT_EQ(token.kind, "authrpc-delegation");
  EXPECT_EQ(token.service, "tcp://db1:7000");
  EXPECT_EQ(token.password.size(), 32u);
  auto id = manager_->verify(token);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_EQ(id->owner, "alice");
  EXPECT_EQ(id->renewer, "yarn");
  EXPECT_EQ(id->real_user, "oozie");
  EXPECT_EQ(id->issue_date, kTokenEpoch);
  EXPECT_EQ(id->max_date, kTokenEpoch + 7 * kDay);
  EXPECT_EQ(id->sequence_number, 1u);
  EXPECT_EQ(id->master_key_id, 1u);

  // The password is HMAC-SHA256 over the identifier with the stored key.
  auto state = *store_->load();
  ASSERT_EQ(state.keys.size(), 1u);
  EXPECT_EQ(state.keys[0].secret.size(), 32u);
  EXPECT_TRUE(token_password(state.keys[0].secret, token.identifier).equals(token.password));
  ASSERT_EQ(state.tokens.size(), 1u);
  EXPECT_EQ(state.tokens[0].renew_date, kTokenEpoch + kDay);

  auto secret = manager_->retrieve_password(token.identifier);
  ASSERT_TRUE(secret.ok());
  EXPECT_TRUE(secret->password.equals(token.password));
  EXPECT_EQ(secret->identifier.owner, "alice");

  EXPECT_EQ(issue().decode_identifier()->sequence_number, 2u);
  EXPECT_EQ(manager_->token_count(), 2u);
}

TEST_F(SecretManagerTest, IssueRefusesBadRequests) {
  EXPECT_TRUE(manager_->issue({"", "yarn", "", "s"}).is(TokenErrc::kInvalidArgument));
  EXPECT_TRUE(manager_->issue({"alice", std::string(2000, 'r'), "", "s"}).is(TokenErrc::kInvalidArgument));
  EXPECT_TRUE(manager_->issue({"alice", "yarn", "", std::string(2000, 's')}).is(TokenErrc::kInvalidArgument));
  EXPECT_EQ(manager_->token_count(), 0u);
  // No sequence number was used up by the refusals.
  EXPECT_EQ(issue().decode_identifier()->sequence_number, 1u);
}

TEST_F(SecretManagerTest, OptionsAreChecked) {
  auto bad = [&](void (*change)(SecretManagerOptions&)) {
    SecretManagerOptions o;
    change(o);
    return SecretManager::open(store_, o).is(TokenErrc::kInvalidArgument);
  };
  EXPECT_TRUE(bad([](SecretManagerOptions& o) { o.kind.clear(); }));
  EXPECT_TRUE(bad([](SecretManagerOptions& o) { o.key_roll_interval = milliseconds(0); }));
  EXPECT_TRUE(bad([](SecretManagerOptions& o) { o.max_lifetime = milliseconds(-1); }));
  EXPECT_TRUE(bad([](SecretManagerOptions& o) { o.renew_interval = milliseconds(0); }));
  EXPECT_TRUE(SecretManager::open(nullptr).is(TokenErrc::kInvalidArgument));
}

TEST_F(SecretManagerTest, ValidUpToTheRenewDateInclusive) {
  Token token = issue();
  clock_->set(kTokenEpoch + kDay);
  EXPECT_TRUE(manager_->verify(token).ok());
  clock_->advance(milliseconds(1));
  auto r = manager_->verify(token);
  EXPECT_TRUE(r.is(TokenErrc::kExpired)) << r.status().to_string();
  EXPECT_TRUE(manager_->retrieve_password(token.identifier).is(TokenErrc::kExpired));
  EXPECT_TRUE(manager_->renew(token, "yarn").is(TokenErrc::kExpired));
  // An expired token that is still stored can be cancelled.
  EXPECT_TRUE(manager_->cancel(token, "alice").ok());
}

TEST_F(SecretManagerTest, RenewExtendsUpToTheMaxDate) {
  Token token = issue();
  const TokenTime max = kTokenEpoch + 7 * kDay;
  // Renewing every 20 hours: each renewal gives now + 1 day, capped at max.
  TokenTime now = kTokenEpoch;
  for (int i = 0; i < 20; ++i) {
    now += hours(20);
    clock_->set(now);
    if (now > max) {
      EXPECT_TRUE(manager_->renew(token, "yarn").is(TokenErrc::kExpired)) << i;
      EXPECT_TRUE(manager_->verify(token).is(TokenErrc::kExpired)) << i;
      continue;
    }
    auto renewed = manager_->renew(token, "yarn");
    ASSERT_TRUE(renewed.ok()) << i << ": " << renewed.status().to_string();
    EXPECT_EQ(*renewed, std::min(max, now + kDay)) << i;
    EXPECT_TRUE(manager_->verify(token).ok()) << i;
  }
  auto state = *store_->load();
  ASSERT_EQ(state.tokens.size(), 1u);
  EXPECT_EQ(state.tokens[0].renew_date, max);
}

struct PermissionCase {
  const char* name;
  std::string caller;
  bool may_renew;
  bool may_cancel;
};
void PrintTo(const PermissionCase& c, std::ostream* os) { *os << c.name; }

class PermissionTable : public SecretManagerTest,
                        public ::testing::WithParamInterface<PermissionCase> {};

// A token owned by alice, renewable by yarn, issued for her by oozie.
TEST_P(PermissionTable, RenewOnlyRenewerCancelOwnerOrRenewer) {
  const auto& c = GetParam();
  Token token = issue("alice", "yarn", "oozie");
  clock_->advance(hours(1));
  auto renewed = manager_->renew(token, c.caller);
  if (c.may_renew) {
    ASSERT_TRUE(renewed.ok()) << renewed.status().to_string();
    EXPECT_EQ(*renewed, kTokenEpoch + hours(1) + kDay);
  } else {
    EXPECT_TRUE(renewed.is(TokenErrc::kPermissionDenied)) << renewed.status().to_string();
    EXPECT_EQ(store_->load()->tokens[0].renew_date, kTokenEpoch + kDay) << "unchanged";
  }
  auto cancelled = manager_->cancel(token, c.caller);
  if (c.may_cancel) {
    ASSERT_TRUE(cancelled.ok()) << cancelled.to_string();
    EXPECT_TRUE(manager_->verify(token).is(TokenErrc::kCancelled));
  } else {
    EXPECT_TRUE(cancelled.is(TokenErrc::kPermissionDenied)) << cancelled.to_string();
    EXPECT_TRUE(manager_->verify(token).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Callers, PermissionTable,
    ::testing::Values(PermissionCase{"owner", "alice", false, true},
                      PermissionCase{"renewer", "yarn", true, true},
                      PermissionCase{"real_user", "oozie", false, false},
                      PermissionCase{"stranger", "mallory", false, false},
                      PermissionCase{"owner_with_realm", "alice@EXAMPLE.COM", false, false},
                      PermissionCase{"empty", "", false, false}),
    [](const auto& tp) { return std::string(tp.param.name); });

TEST_F(SecretManagerTest, WithoutRenewerNobodyRenewsAndOnlyTheOwnerCancels) {
  Token token = issue("alice", "");
  for (const char* caller : {"alice", "", "yarn"}) {
    EXPECT_TRUE(manager_->renew(token, caller).is(TokenErrc::kPermissionDenied)) << caller;
  }
  EXPECT_TRUE(manager_->cancel(token, "").is(TokenErrc::kPermissionDenied));
  EXPECT_TRUE(manager_->cancel(token, "alice").ok());
}

TEST_F(SecretManagerTest, CancelledIsTypedEverywhere) {
  Token token = issue();
  Token other = issue();
  ASSERT_TRUE(manager_->cancel(token, "alice").ok());
  EXPECT_TRUE(manager_->verify(token).is(TokenErrc::kCancelled));
  EXPECT_TRUE(manager_->retrieve_password(token.identifier).is(TokenErrc::kCancelled));
  EXPECT_TRUE(manager_->renew(token, "yarn").is(TokenErrc::kCancelled));
  EXPECT_TRUE(manager_->cancel(token, "alice").is(TokenErrc::kCancelled));
  EXPECT_TRUE(manager_->verify(other).ok());
  ASSERT_EQ(store_->load()->tokens.size(), 1u);
  // After a restart the cancellation is not remembered: the token is unknown.
  open_manager();
  EXPECT_TRUE(manager_->verify(token).is(TokenErrc::kUnknownToken));
  EXPECT_TRUE(manager_->verify(other).ok());
}

TEST_F(SecretManagerTest, FailuresAreTyped) {
  Token token = issue();
  auto state = *store_->load();
  const SecretBytes& key = state.keys[0].secret;
  auto id = *token.decode_identifier();

  // A correctly signed identifier that was never issued.
  TokenIdentifier never = id;
  never.sequence_number = 999;
  Token unissued = token;
  unissued.identifier = *never.encode();
  unissued.password = token_password(key, unissued.identifier);
  EXPECT_TRUE(manager_->verify(unissued).is(TokenErrc::kUnknownToken));
  EXPECT_TRUE(manager_->retrieve_password(unissued.identifier).is(TokenErrc::kUnknownToken));

  // The same, with the password of another token: forged.
  Token forged = unissued;
  forged.password = token.password;
  EXPECT_TRUE(manager_->verify(forged).is(TokenErrc::kForged));
  // An issued identifier with another owner but its real password: forged.
  TokenIdentifier other_owner = id;
  other_owner.owner = "mallory";
  Token swapped = token;
  swapped.identifier = *other_owner.encode();
  EXPECT_TRUE(manager_->verify(swapped).is(TokenErrc::kForged));
  EXPECT_TRUE(manager_->renew(swapped, "yarn").is(TokenErrc::kForged));
  EXPECT_TRUE(manager_->cancel(swapped, "mallory").is(TokenErrc::kForged));

  // A key this manager never had (another server's token).
  TokenIdentifier foreign = id;
  foreign.master_key_id = 77;
  Token other_server = token;
  other_server.identifier = *foreign.encode();
  EXPECT_TRUE(manager_->verify(other_server).is(TokenErrc::kUnknownKey));

  // Another kind of token.
  TokenIdentifier kind = id;
  kind.kind = "hdfs-delegation";
  Token wrong_kind = token;
  wrong_kind.identifier = *kind.encode();
  wrong_kind.password = token_password(key, wrong_kind.identifier);
  EXPECT_TRUE(manager_->verify(wrong_kind).is(TokenErrc::kUnknownToken));

  // Garbage identifiers.
  EXPECT_TRUE(manager_->verify("", token.password.span()).is(TokenErrc::kMalformed));
  EXPECT_TRUE(manager_->verify("\x05xyz", token.password.span()).is(TokenErrc::kUnsupportedVersion));
}

// retrieve() finds a token by its identifier's bytes without decoding them
// (the `token` mechanism's per-session lookup). Every identifier that is not
// byte-for-byte an issued, valid one must get the error the full check gives:
// one row per way an identifier can differ from the issued one.
TEST_F(SecretManagerTest, RetrieveRefusesEveryIdentifierButTheIssuedOne) {
  Token token = issue();
  const TokenIdentifier id = *token.decode_identifier();
  auto with = [&](auto change) {
    TokenIdentifier changed = id;
    change(changed);
    return *changed.encode();
  };
  struct Case {
    const char* name;
    std::string identifier;
    TokenErrc expect;
  };
  const Case cases[] = {
      {"another owner, same sequence number", with([](auto& i) { i.owner = "mallory"; }), TokenErrc::kForged},
      {"another real user", with([](auto& i) { i.real_user = "bob"; }), TokenErrc::kForged},
      {"a later max date", with([](auto& i) { i.max_date += kDay; }), TokenErrc::kForged},
      {"another kind", with([](auto& i) { i.kind = "hdfs-delegation"; }), TokenErrc::kUnknownToken},
      {"an unknown key", with([](auto& i) { i.master_key_id = 77; }), TokenErrc::kUnknownKey},
      {"never issued", with([](auto& i) { i.sequence_number = 999; }), TokenErrc::kUnknownToken},
      {"a byte short", token.identifier.substr(0, token.identifier.size() - 1), TokenErrc::kMalformed},
      {"a byte more", token.identifier + "x", TokenErrc::kMalformed},
      {"empty", "", TokenErrc::kMalformed},
      {"only the last 12 bytes", token.identifier.substr(token.identifier.size() - 12), TokenErrc::kUnsupportedVersion},
  };
  for (const auto& c : cases) {
    auto found = manager_->retrieve(c.identifier);
    EXPECT_TRUE(found.is(c.expect)) << c.name << ": " << found.status().to_string();
  }
  auto found = manager_->retrieve(token.identifier);
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_EQ((*found)->id, id);
  EXPECT_TRUE((*found)->password.equals(token.password));

  // Past its renew date the same bytes are refused as expired.
  clock_->advance(kDay + milliseconds(1));
  EXPECT_TRUE(manager_->retrieve(token.identifier).is(TokenErrc::kExpired));
}

// A session keeps the record it was given, unchanged, whatever the manager
// does meanwhile; renewing shares it, cancelling refuses it from then on.
TEST_F(SecretManagerTest, RetrieveSharesTheManagersRecord) {
  Token token = issue();
  auto first = manager_->retrieve(token.identifier);
  auto second = manager_->retrieve(token.identifier);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get()) << "retrieve() copied the token";
  std::array<std::uint8_t, kHmacSha256Bytes> mac{}, expected{};
  ASSERT_TRUE((*first)->password_key().mac({"message"}, &mac));
  ASSERT_TRUE(hmac_sha256(token.password.span(), {"message"}, &expected));
  EXPECT_EQ(mac, expected);

  ASSERT_TRUE(manager_->renew(token, "yarn").ok());
  auto renewed = manager_->retrieve(token.identifier);
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->get(), first->get());

  ASSERT_TRUE(manager_->cancel(token, "alice").ok());
  EXPECT_TRUE(manager_->retrieve(token.identifier).is(TokenErrc::kCancelled));
  EXPECT_TRUE((*first)->password.equals(token.password)) << "a held record must stay intact";
  ASSERT_TRUE((*first)->password_key().mac({"message"}, &mac));
  EXPECT_EQ(mac, expected);
}

TEST_F(SecretManagerTest, KeysRollOnTheInterval) {
  Token first = issue();
  EXPECT_EQ(first.decode_identifier()->master_key_id, 1u);
  clock_->set(kTokenEpoch + kDay - milliseconds(1));
  EXPECT_EQ(issue().decode_identifier()->master_key_id, 1u);
  clock_->set(kTokenEpoch + kDay);
  Token second = issue();
  EXPECT_EQ(second.decode_identifier()->master_key_id, 2u);
  EXPECT_TRUE(key_info(2).current);
  EXPECT_FALSE(key_info(1).current);
  EXPECT_TRUE(manager_->verify(second).ok());

  // The sweeper rolls too, without an issue.
  clock_->set(kTokenEpoch + 2 * kDay);
  auto swept = manager_->sweep();
  ASSERT_TRUE(swept.ok());
  EXPECT_TRUE(swept->key_rolled);
  EXPECT_TRUE(key_info(3).current);
  // And roll_master_key() on demand.
  ASSERT_TRUE(manager_->roll_master_key().ok());
  EXPECT_TRUE(key_info(4).current);
  // Keys come from the CSPRNG: all different.
  auto state = *store_->load();
  for (std::size_t i = 0; i < state.keys.size(); ++i) {
    for (std::size_t j = i + 1; j < state.keys.size(); ++j) {
      EXPECT_FALSE(state.keys[i].secret.equals(state.keys[j].secret));
    }
  }
}

// Key 1 signs at day 0 and at day 0.5; it retires at day 1 and is kept until
// the max date of its last token (day 7.5), then dropped.
TEST_F(SecretManagerTest, RetiredKeyKeptUntilItsLastTokensMaxDate) {
  Token early = issue();
  clock_->set(kTokenEpoch + hours(12));
  Token late = issue();
  const TokenTime last_max = kTokenEpoch + hours(12) + 7 * kDay;
  EXPECT_EQ(key_info(1).expires, kTokenEpoch + kDay + 7 * kDay) << "an upper bound while current";

  clock_->set(kTokenEpoch + kDay);
  ASSERT_TRUE(manager_->sweep().ok());
  ASSERT_TRUE(key_info(2).current);
  EXPECT_EQ(key_info(1).expires, last_max) << "exact once retired";
  EXPECT_EQ(store_->load()->keys[0].expires, last_max) << "and stored";

  // Keep `late` alive by renewing it, sweeping (and rolling) daily.
  for (TokenTime now = kTokenEpoch + kDay; now <= last_max; now += hours(20)) {
    clock_->set(now);
    ASSERT_TRUE(manager_->renew(late, "yarn").ok());
    ASSERT_TRUE(manager_->sweep().ok());
    ASSERT_TRUE(has_key(1)) << format_token_time(now);
    ASSERT_TRUE(manager_->verify(late).ok());
  }
  clock_->set(last_max);
  ASSERT_TRUE(manager_->sweep().ok());
  EXPECT_TRUE(has_key(1));
  EXPECT_TRUE(manager_->verify(late).ok()) << "valid through its max date";
  clock_->set(last_max + milliseconds(1));
  auto swept = manager_->sweep();
  ASSERT_TRUE(swept.ok());
  EXPECT_FALSE(has_key(1));
  EXPECT_GE(swept->keys_removed, 1u);
  auto final_state = *store_->load();
  for (const auto& k : final_state.keys) EXPECT_NE(k.id, 1u);
  EXPECT_TRUE(manager_->verify(late).is(TokenErrc::kExpired));
  EXPECT_TRUE(manager_->verify(early).is(TokenErrc::kExpired));
}

TEST_F(SecretManagerTest, RetiredKeyWithoutTokensGoesAtTheNextSweep) {
  ASSERT_TRUE(manager_->roll_master_key().ok());
  clock_->advance(hours(1));
  ASSERT_TRUE(manager_->roll_master_key().ok());
  EXPECT_EQ(key_info(1).expires, kTokenEpoch + hours(1));
  clock_->advance(milliseconds(1));
  auto swept = manager_->sweep();
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(swept->keys_removed, 1u);
  EXPECT_FALSE(has_key(1));
  EXPECT_TRUE(key_info(2).current);
}

TEST_F(SecretManagerTest, SweeperRemovesExpiredTokensOnly) {
  Token a = issue();
  Token b = issue();
  Token c = issue();
  ASSERT_TRUE(manager_->cancel(c, "alice").ok());
  clock_->set(kTokenEpoch + hours(20));
  ASSERT_TRUE(manager_->renew(b, "yarn").ok());  // b now lasts to day 1 + 20 h
  clock_->set(kTokenEpoch + kDay + milliseconds(1));
  auto swept = manager_->sweep();
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(swept->tokens_removed, 1u);
  EXPECT_EQ(manager_->token_count(), 1u);
  auto state = *store_->load();
  ASSERT_EQ(state.tokens.size(), 1u);
  EXPECT_EQ(state.tokens[0].sequence_number, b.decode_identifier()->sequence_number);
  EXPECT_TRUE(manager_->verify(a).is(TokenErrc::kExpired)) << "swept, told apart by its dates";
  EXPECT_TRUE(manager_->verify(b).ok());
  EXPECT_TRUE(manager_->verify(c).is(TokenErrc::kCancelled));
  // The cancellation is remembered until c's max date, then forgotten.
  clock_->set(kTokenEpoch + 7 * kDay + milliseconds(1));
  ASSERT_TRUE(manager_->sweep().ok());
  EXPECT_TRUE(manager_->verify(c).is(TokenErrc::kExpired));
  EXPECT_EQ(manager_->token_count(), 0u);
  EXPECT_TRUE(store_->load()->tokens.empty());
}

TEST_F(SecretManagerTest, ReopenedManagerSeesTheStoredState) {
  Token a = issue();
  Token b = issue();
  clock_->advance(hours(2));
  auto renewed = manager_->renew(a, "yarn");
  ASSERT_TRUE(renewed.ok());
  ASSERT_TRUE(manager_->cancel(b, "yarn").ok());
  ASSERT_TRUE(manager_->roll_master_key().ok());

  open_manager();
  EXPECT_TRUE(manager_->verify(a).ok());
  EXPECT_TRUE(manager_->verify(b).is(TokenErrc::kUnknownToken));
  ASSERT_EQ(manager_->master_keys().size(), 2u);
  EXPECT_TRUE(key_info(2).current);
  clock_->set(*renewed);
  EXPECT_TRUE(manager_->verify(a).ok());
  clock_->advance(milliseconds(1));
  EXPECT_TRUE(manager_->verify(a).is(TokenErrc::kExpired));
  clock_->set(kTokenEpoch + hours(3));
  Token c = issue();
  EXPECT_EQ(c.decode_identifier()->sequence_number, 3u) << "counters continue";
  EXPECT_EQ(c.decode_identifier()->master_key_id, 2u);
}

TEST_F(SecretManagerTest, ConcurrentVerifyDuringChanges) {
  std::vector<Token> stable;
  for (int i = 0; i < 16; ++i) stable.push_back(issue("user" + std::to_string(i)));
  std::atomic<bool> stop{false};
  std::atomic<long> verified{0};
  std::atomic<long> failures{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      std::size_t i = t;
      while (!stop.load()) {
        const Token& token = stable[i++ % stable.size()];
        if (!manager_->verify(token).ok()) failures.fetch_add(1);
        if (!manager_->retrieve_password(token.identifier).ok()) failures.fetch_add(1);
        verified.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 300; ++i) {
    Token t = issue("churn");
    ASSERT_TRUE(manager_->renew(t, "yarn").ok());
    ASSERT_TRUE(manager_->renew(stable[i % stable.size()], "yarn").ok());
    ASSERT_TRUE(manager_->cancel(t, "churn").ok());
    if (i % 50 == 0) {
      ASSERT_TRUE(manager_->roll_master_key().ok());
    }
    if (i % 20 == 0) {
      ASSERT_TRUE(manager_->sweep().ok());
    }
  }
  // Let the readers run for a moment after the last change too.
  while (verified.load() < 1000) std::this_thread::yield();
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(manager_->token_count(), stable.size());
}

}  // namespace
}  // namespace authrpc::security
