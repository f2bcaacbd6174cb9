// Tests for the token stores: the TokenStore contract on both MemoryTokenStore
// and FileTokenStore, and FileTokenStore's durability — reopen, torn tails
// (truncated at every byte of the last record), mid-file corruption,
// compaction and its interruptions, file modes, the directory lock — plus a
// crash test: a child process runs issue/renew/cancel through a file store,
// reports each acknowledged operation over a pipe and is SIGKILLed mid-burst;
// every acknowledged operation must be found after reopening.
#include "authrpc/security/file_token_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "authrpc/security/byte_codec.h"
#include "authrpc/security/clock.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "tests/testing/scoped_temp_dir.h"
#include "tests/testing/token_realm.h"

namespace authrpc::security {
namespace {

namespace fs = std::filesystem;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::kTokenEpoch;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

MasterKey make_key(std::uint32_t id, TokenTime created) {
  return {id, created, created + hours(24 * 8), SecretBytes::random(32)};
}

StoredToken make_token(std::uint64_t seq, TokenTime renew, std::string renewer = "yarn") {
  TokenIdentifier id;
  id.owner = "user" + std::to_string(seq);
  id.renewer = std::move(renewer);
  id.issue_date = kTokenEpoch;
  id.max_date = kTokenEpoch + hours(24 * 7);
  return testing::StoredTokenFor(seq, std::move(id), renew);
}

// Full equality of two store states, secrets included.
void expect_same_state(const TokenStoreState& a, const TokenStoreState& b) {
  EXPECT_EQ(a.last_sequence_number, b.last_sequence_number);
  EXPECT_EQ(a.last_master_key_id, b.last_master_key_id);
  ASSERT_EQ(a.keys.size(), b.keys.size());
  for (std::size_t i = 0; i < a.keys.size(); ++i) {
    EXPECT_EQ(a.keys[i].id, b.keys[i].id);
    EXPECT_EQ(a.keys[i].created, b.keys[i].created);
    EXPECT_EQ(a.keys[i].expires, b.keys[i].expires);
    EXPECT_TRUE(a.keys[i].secret.equals(b.keys[i].secret)) << "key " << a.keys[i].id;
  }
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  for (std::size_t i = 0; i < a.tokens.size(); ++i) {
    EXPECT_EQ(a.tokens[i].sequence_number, b.tokens[i].sequence_number);
    EXPECT_EQ(a.tokens[i].identifier, b.tokens[i].identifier);
    EXPECT_TRUE(a.tokens[i].password.equals(b.tokens[i].password));
    EXPECT_EQ(a.tokens[i].renew_date, b.tokens[i].renew_date);
  }
}

// ---------------------------------------------------------------------------
// The TokenStore contract, for every implementation.

struct StoreFactory {
  const char* name;
  std::unique_ptr<TokenStore> (*make)(const std::string& dir);
};
void PrintTo(const StoreFactory& f, std::ostream* os) { *os << f.name; }

class TokenStoreContract : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    store_ = GetParam().make(dir_.path() + "/store");
    ASSERT_NE(store_, nullptr);
  }
  testing::ScopedTempDir dir_{"store"};
  std::unique_ptr<TokenStore> store_;
};

TEST_P(TokenStoreContract, StartsEmpty) {
  auto state = store_->load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->last_sequence_number, 0u);
  EXPECT_EQ(state->last_master_key_id, 0u);
  EXPECT_TRUE(state->keys.empty());
  EXPECT_TRUE(state->tokens.empty());
}

TEST_P(TokenStoreContract, CountersIncreaseAndFollowStoredIds) {
  EXPECT_EQ(*store_->allocate_sequence_number(), 1u);
  EXPECT_EQ(*store_->allocate_sequence_number(), 2u);
  EXPECT_EQ(*store_->allocate_master_key_id(), 1u);
  ASSERT_TRUE(store_->add_token(make_token(10, kTokenEpoch)).ok());
  ASSERT_TRUE(store_->put_master_key(make_key(5, kTokenEpoch)).ok());
  EXPECT_EQ(*store_->allocate_sequence_number(), 11u);
  EXPECT_EQ(*store_->allocate_master_key_id(), 6u);
}

TEST_P(TokenStoreContract, KeysAndTokensChangeAsTold) {
  auto k1 = make_key(1, kTokenEpoch);
  auto k2 = make_key(2, kTokenEpoch + hours(24));
  ASSERT_TRUE(store_->put_master_key(k1).ok());
  ASSERT_TRUE(store_->put_master_key(k2).ok());
  k1.expires = kTokenEpoch + hours(100);
  ASSERT_TRUE(store_->put_master_key(k1).ok()) << "replace";
  ASSERT_TRUE(store_->add_token(make_token(1, kTokenEpoch + hours(24))).ok());
  ASSERT_TRUE(store_->add_token(make_token(2, kTokenEpoch + hours(24))).ok());
  ASSERT_TRUE(store_->add_token(make_token(3, kTokenEpoch + hours(24))).ok());
  EXPECT_TRUE(store_->add_token(make_token(2, kTokenEpoch)).is(TokenErrc::kInvalidArgument));
  ASSERT_TRUE(store_->update_token(2, kTokenEpoch + hours(48)).ok());
  EXPECT_TRUE(store_->update_token(9, kTokenEpoch).is(TokenErrc::kUnknownToken));
  const std::uint64_t gone[] = {1, 3, 99};
  ASSERT_TRUE(store_->remove_tokens(gone).ok());
  ASSERT_TRUE(store_->remove_tokens(gone).ok()) << "idempotent";
  ASSERT_TRUE(store_->remove_master_key(2).ok());
  ASSERT_TRUE(store_->remove_master_key(2).ok()) << "idempotent";

  auto state = *store_->load();
  ASSERT_EQ(state.keys.size(), 1u);
  EXPECT_EQ(state.keys[0].id, 1u);
  EXPECT_EQ(state.keys[0].expires, kTokenEpoch + hours(100));
  EXPECT_TRUE(state.keys[0].secret.equals(k1.secret));
  ASSERT_EQ(state.tokens.size(), 1u);
  EXPECT_EQ(state.tokens[0].sequence_number, 2u);
  EXPECT_EQ(state.tokens[0].renew_date, kTokenEpoch + hours(48));
  EXPECT_EQ(state.last_sequence_number, 3u);
  EXPECT_EQ(state.last_master_key_id, 2u);
}

INSTANTIATE_TEST_SUITE_P(
    Stores, TokenStoreContract,
    ::testing::Values(
        StoreFactory{"memory",
                     [](const std::string&) -> std::unique_ptr<TokenStore> {
                       return std::make_unique<MemoryTokenStore>();
                     }},
        StoreFactory{"file",
                     [](const std::string& dir) -> std::unique_ptr<TokenStore> {
                       auto s = FileTokenStore::open(dir);
                       return s.ok() ? std::move(*s) : nullptr;
                     }}),
    [](const auto& tp) { return std::string(tp.param.name); });

// ---------------------------------------------------------------------------
// FileTokenStore

class FileTokenStoreTest : public ::testing::Test {
 protected:
  std::string store_dir() const { return dir_.path() + "/tokens"; }

  std::unique_ptr<FileTokenStore> open(FileTokenStoreOptions options = {}) {
    auto s = FileTokenStore::open(store_dir(), options);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // A store with keys, live, renewed and removed tokens.
  void populate(FileTokenStore& store, int tokens = 20) {
    ASSERT_TRUE(store.put_master_key(make_key(*store.allocate_master_key_id(), kTokenEpoch)).ok());
    for (int i = 0; i < tokens; ++i) {
      auto seq = *store.allocate_sequence_number();
      ASSERT_TRUE(store.add_token(make_token(seq, kTokenEpoch + hours(24))).ok());
      if (i % 3 == 1) {
        ASSERT_TRUE(store.update_token(seq, kTokenEpoch + hours(30 + i)).ok());
      }
      if (i % 5 == 2) {
        const std::uint64_t gone[] = {seq};
        ASSERT_TRUE(store.remove_tokens(gone).ok());
      }
    }
    ASSERT_TRUE(store.put_master_key(make_key(*store.allocate_master_key_id(), kTokenEpoch + hours(24))).ok());
  }

  testing::ScopedTempDir dir_{"store"};
};

TEST_F(FileTokenStoreTest, ReopenKeepsEverything) {
  TokenStoreState before;
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    populate(*store);
    before = *store->load();
  }
  auto store = open();
  ASSERT_NE(store, nullptr);
  expect_same_state(*store->load(), before);
  EXPECT_EQ(store->recovery().dropped_tail_bytes, 0u);
  EXPECT_GT(store->recovery().journal_records, 20u);
  EXPECT_EQ(*store->allocate_sequence_number(), before.last_sequence_number + 1);
  EXPECT_EQ(*store->allocate_master_key_id(), before.last_master_key_id + 1);
}

TEST_F(FileTokenStoreTest, SecretManagerStateSurvivesAReopen) {
  auto clock = std::make_shared<ManualClock>(kTokenEpoch);
  SecretManagerOptions options;
  options.clock = clock;
  Token kept, renewed, cancelled;
  TokenTime renew_date;
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    auto manager = *SecretManager::open(std::shared_ptr<TokenStore>(std::move(store)), options);
    kept = *manager->issue({"alice", "yarn", "", "svc"});
    renewed = *manager->issue({"bob", "yarn", "", "svc"});
    cancelled = *manager->issue({"carol", "yarn", "", "svc"});
    clock->advance(hours(5));
    renew_date = *manager->renew(renewed, "yarn");
    ASSERT_TRUE(manager->cancel(cancelled, "carol").ok());
    ASSERT_TRUE(manager->roll_master_key().ok());
  }
  auto store = open();
  ASSERT_NE(store, nullptr);
  auto manager = *SecretManager::open(std::shared_ptr<TokenStore>(std::move(store)), options);
  EXPECT_TRUE(manager->verify(kept).ok());
  EXPECT_TRUE(manager->verify(renewed).ok());
  EXPECT_TRUE(manager->verify(cancelled).is(TokenErrc::kUnknownToken));
  EXPECT_EQ(manager->master_keys().size(), 2u);
  clock->set(kTokenEpoch + hours(24) + milliseconds(1));
  EXPECT_TRUE(manager->verify(kept).is(TokenErrc::kExpired));
  clock->set(renew_date);
  EXPECT_TRUE(manager->verify(renewed).ok());
  auto next = manager->issue({"dave", "", "", "svc"});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->decode_identifier()->sequence_number, 4u);
  // Key 2 (made at hour 5) is a day old at renew_date: it rolls first.
  EXPECT_EQ(next->decode_identifier()->master_key_id, 3u);
}

// Cut the journal at every byte offset inside its last record: open drops
// the torn record, keeps everything before it, and the store stays usable.
TEST_F(FileTokenStoreTest, TornTailIsDroppedAtEveryByteOffset) {
  std::size_t before_last = 0, after_last = 0;
  TokenStoreState state_before_last;
  std::string journal_file;
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    populate(*store, 6);
    state_before_last = *store->load();
    before_last = store->stats().journal_bytes;
    ASSERT_TRUE(store->add_token(make_token(*store->allocate_sequence_number(), kTokenEpoch)).ok());
    after_last = store->stats().journal_bytes;
    journal_file = store->journal_path();
  }
  const std::string full = read_all(journal_file);
  ASSERT_EQ(full.size(), after_last);
  ASSERT_GT(after_last - before_last, 100u) << "a token record with identifier and password";

  std::vector<std::string> tails;
  for (std::size_t cut = before_last; cut < after_last; ++cut) tails.push_back(full.substr(0, cut));
  // A tail of zeros (size extended, data never written) is torn too.
  tails.push_back(full.substr(0, before_last) + std::string(after_last - before_last, '\0'));
  tails.push_back(full.substr(0, before_last) + std::string(3, '\0'));
  for (const auto& bytes : tails) {
    SCOPED_TRACE("journal of " + std::to_string(bytes.size()) + " bytes");
    write_all(journal_file, bytes);
    {
      auto store = open();
      ASSERT_NE(store, nullptr);
      EXPECT_EQ(store->recovery().dropped_tail_bytes, bytes.size() - before_last);
      expect_same_state(*store->load(), state_before_last);
      EXPECT_EQ(fs::file_size(journal_file), before_last) << "cut back to the last intact record";
      // New appends follow the last intact record.
      ASSERT_TRUE(store->update_token(state_before_last.tokens[0].sequence_number, kTokenEpoch + hours(99)).ok());
    }
    auto again = open();
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(again->recovery().dropped_tail_bytes, 0u);
    EXPECT_EQ(again->load()->tokens[0].renew_date, kTokenEpoch + hours(99));
    again.reset();
    write_all(journal_file, full);
  }
}

// A damaged record followed by intact ones is corruption, never skipped:
// flip every byte of the first record, and a byte of each later record but
// the last.
TEST_F(FileTokenStoreTest, MidFileCorruptionIsAnError) {
  std::vector<std::size_t> ends;  // journal size after each record
  std::string journal_file;
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    ends.push_back(store->stats().journal_bytes);
    ASSERT_TRUE(store->put_master_key(make_key(1, kTokenEpoch)).ok());
    ends.push_back(store->stats().journal_bytes);
    for (std::uint64_t seq = 1; seq <= 5; ++seq) {
      ASSERT_TRUE(store->add_token(make_token(seq, kTokenEpoch)).ok());
      ends.push_back(store->stats().journal_bytes);
    }
    journal_file = store->journal_path();
  }
  const std::string full = read_all(journal_file);
  std::vector<std::size_t> offsets;
  for (std::size_t i = ends[0]; i < ends[1]; ++i) offsets.push_back(i);  // the whole key record
  for (std::size_t r = 1; r + 2 < ends.size(); ++r) {
    offsets.push_back(ends[r]);                              // length field
    offsets.push_back(ends[r] + 5);                          // header check
    offsets.push_back((ends[r] + ends[r + 1]) / 2);          // body
    offsets.push_back(ends[r + 1] - 1);                      // digest
  }
  for (std::size_t offset : offsets) {
    std::string bytes = full;
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x20);
    write_all(journal_file, bytes);
    auto s = FileTokenStore::open(store_dir());
    ASSERT_TRUE(s.is(TokenErrc::kStoreCorrupt)) << "offset " << offset << ": " << s.status().to_string();
    EXPECT_NE(s.status().message.find("followed by intact records"), std::string::npos) << s.status().message;
    EXPECT_EQ(read_all(journal_file), bytes) << "the journal is left as found";
  }
  // A damaged journal header is corruption too.
  std::string bad_header = full;
  bad_header[1] = 'X';
  write_all(journal_file, bad_header);
  EXPECT_TRUE(FileTokenStore::open(store_dir()).is(TokenErrc::kStoreCorrupt));
  // And a damaged last record cannot be told from a torn one: it is dropped.
  std::string bad_last = full;
  bad_last[ends[ends.size() - 2] + 20] ^= 1;
  write_all(journal_file, bad_last);
  auto store = open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->recovery().dropped_tail_bytes, ends.back() - ends[ends.size() - 2]);
  EXPECT_EQ(store->load()->tokens.size(), 4u);
}

// A store record framed as docs/TOKENS.md §5 says, with `salt` (empty: format
// version 1): what a client could put in a renewer string.
std::string sha256_prefix(std::string_view salt, std::string_view data, std::size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  std::string input = std::string(salt) + std::string(data);
  EXPECT_EQ(EVP_Digest(input.data(), input.size(), md, &len, EVP_sha256(), nullptr), 1);
  return std::string(reinterpret_cast<const char*>(md), n);
}

std::string framed_record(std::string_view salt, std::string_view body) {
  std::string out;
  ByteWriter w(&out);
  w.u32(static_cast<std::uint32_t>(body.size()));
  out += sha256_prefix(salt, out, 4);
  out += body;
  out += sha256_prefix(salt, out, 16);
  return out;
}

// A "remove key 7" record body.
std::string remove_key_body() {
  std::string body;
  ByteWriter w(&body);
  w.u8(3);
  w.u32(7);
  return body;
}

// The last token's renewer is itself a well-formed record (framed
// without a salt as in format version 1, and even with this journal's own
// salt, as if a client could read it). Cut anywhere inside that last
// record, the journal is a torn tail: truncated, never STORE_CORRUPT.
TEST_F(FileTokenStoreTest, TornTailWhoseRenewerIsAWellFormedRecord) {
  for (const bool own_salt : {false, true}) {
    SCOPED_TRACE(own_salt ? "record with the journal's salt" : "unsalted record");
    fs::remove_all(store_dir());
    std::size_t before_last = 0, after_last = 0;
    TokenStoreState state_before_last;
    std::string journal_file, planted;
    {
      auto store = open();
      ASSERT_NE(store, nullptr);
      // magic, version, generation and (version 2) the salt
      const std::string header = read_all(store->journal_path());
      const std::string salt = header.size() >= 32 ? header.substr(16, 16) : std::string();
      planted = framed_record(own_salt ? salt : std::string(), remove_key_body());
      populate(*store, 4);
      state_before_last = *store->load();
      before_last = store->stats().journal_bytes;
      ASSERT_TRUE(store->add_token(make_token(*store->allocate_sequence_number(), kTokenEpoch, planted)).ok());
      after_last = store->stats().journal_bytes;
      journal_file = store->journal_path();
    }
    const std::string full = read_all(journal_file);
    const std::size_t planted_at = full.find(planted, before_last);
    ASSERT_NE(planted_at, std::string::npos) << "the renewer is stored verbatim";
    for (std::size_t cut = before_last + 1; cut < after_last; ++cut) {
      SCOPED_TRACE("cut at " + std::to_string(cut) + " (planted record at " + std::to_string(planted_at) +
                   "–" + std::to_string(planted_at + planted.size()) + ")");
      write_all(journal_file, full.substr(0, cut));
      auto store = FileTokenStore::open(store_dir());
      ASSERT_TRUE(store.ok()) << store.status().to_string();
      EXPECT_EQ((*store)->recovery().dropped_tail_bytes, cut - before_last);
      expect_same_state(*(*store)->load(), state_before_last);
      EXPECT_EQ(fs::file_size(journal_file), before_last);
    }
  }
}

// A damaged record with intact ones after it is corruption; so is one
// followed only by a torn append (it was acknowledged: something was
// appended after it).
TEST_F(FileTokenStoreTest, DamagedMiddleRecordBeforeATornTailIsAnError) {
  std::vector<std::size_t> ends;
  std::string journal_file;
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    ends.push_back(store->stats().journal_bytes);
    for (std::uint64_t seq = 1; seq <= 3; ++seq) {
      ASSERT_TRUE(store->add_token(make_token(seq, kTokenEpoch)).ok());
      ends.push_back(store->stats().journal_bytes);
    }
    journal_file = store->journal_path();
  }
  const std::string full = read_all(journal_file);
  std::string bytes = full.substr(0, ends[3] - 10);  // the last record torn
  bytes[(ends[1] + ends[2]) / 2] ^= 0x20;           // the middle record's body damaged
  write_all(journal_file, bytes);
  auto s = FileTokenStore::open(store_dir());
  ASSERT_TRUE(s.is(TokenErrc::kStoreCorrupt)) << s.status().to_string();
  EXPECT_THAT(s.status().message, ::testing::HasSubstr("damaged record at offset " + std::to_string(ends[1])));
  EXPECT_EQ(read_all(journal_file), bytes) << "left as found";
}

// A journal in format version 1 (no salt) is read, then rewritten as 2.
TEST_F(FileTokenStoreTest, FormatVersion1IsReadAndMigrated) {
  ASSERT_EQ(::mkdir(store_dir().c_str(), 0700), 0);
  const MasterKey key = make_key(1, kTokenEpoch);
  const StoredToken token = make_token(5, kTokenEpoch + hours(3));
  std::string journal = "ATKJ";
  {
    ByteWriter w(&journal);
    w.u32(1);
    w.u64(0);
  }
  std::string key_body, token_body;
  {
    ByteWriter w(&key_body);
    w.u8(2);
    w.u32(key.id);
    w.i64(key.created.time_since_epoch().count());
    w.i64(key.expires.time_since_epoch().count());
    w.str16(key.secret.view());
    ByteWriter t(&token_body);
    t.u8(4);
    t.u64(token.sequence_number);
    t.i64(token.renew_date.time_since_epoch().count());
    t.str16(token.identifier);
    t.str16(token.password.view());
  }
  journal += framed_record("", key_body) + framed_record("", token_body);
  const std::size_t intact = journal.size();
  journal += framed_record("", remove_key_body()).substr(0, 9);  // a torn tail, too
  write_all(store_dir() + "/journal.0", journal);
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->recovery().format_version, 1u);
    EXPECT_TRUE(store->recovery().migrated);
    EXPECT_EQ(store->recovery().journal_records, 2u);
    EXPECT_EQ(store->recovery().dropped_tail_bytes, journal.size() - intact);
    auto state = *store->load();
    ASSERT_EQ(state.keys.size(), 1u);
    EXPECT_TRUE(state.keys[0].secret.equals(key.secret));
    ASSERT_EQ(state.tokens.size(), 1u);
    EXPECT_EQ(state.tokens[0].identifier, token.identifier);
    EXPECT_EQ(state.tokens[0].renew_date, token.renew_date);
    EXPECT_EQ(store->journal_path(), store_dir() + "/journal.1");
    ASSERT_TRUE(store->update_token(5, kTokenEpoch + hours(4)).ok());
  }
  EXPECT_FALSE(fs::exists(store_dir() + "/journal.0"));
  const std::string snapshot = read_all(store_dir() + "/snapshot");
  ASSERT_GE(snapshot.size(), 8u);
  EXPECT_EQ(snapshot.substr(4, 4), std::string("\0\0\0\2", 4)) << "format version 2";
  auto store = open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->recovery().format_version, 2u);
  EXPECT_FALSE(store->recovery().migrated);
  EXPECT_EQ(store->load()->tokens[0].renew_date, kTokenEpoch + hours(4));
}

TEST_F(FileTokenStoreTest, CompactionPreservesState) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  populate(*store);
  auto before = *store->load();
  const std::string old_journal = store->journal_path();
  ASSERT_TRUE(store->compact().ok());
  EXPECT_EQ(store->stats().generation, 1u);
  EXPECT_FALSE(fs::exists(old_journal));
  EXPECT_TRUE(fs::exists(store_dir() + "/snapshot"));
  EXPECT_EQ(store->journal_path(), store_dir() + "/journal.1");
  EXPECT_EQ(store->stats().journal_bytes, 32u) << "an empty journal: its header (with its salt) only";
  expect_same_state(*store->load(), before);

  // Changes after the snapshot go to the new journal; both are read back.
  ASSERT_TRUE(store->update_token(before.tokens[0].sequence_number, kTokenEpoch + hours(77)).ok());
  const std::uint64_t gone[] = {before.tokens[1].sequence_number};
  ASSERT_TRUE(store->remove_tokens(gone).ok());
  ASSERT_TRUE(store->compact().ok());
  ASSERT_TRUE(store->add_token(make_token(*store->allocate_sequence_number(), kTokenEpoch)).ok());
  auto after = *store->load();
  store.reset();

  store = open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->recovery().generation, 2u);
  EXPECT_GT(store->recovery().snapshot_records, 10u);
  EXPECT_EQ(store->recovery().journal_records, 1u);
  expect_same_state(*store->load(), after);
  // The counters are in the snapshot even when the highest token is gone.
  const std::uint64_t last[] = {after.last_sequence_number};
  ASSERT_TRUE(store->remove_tokens(last).ok());
  ASSERT_TRUE(store->compact().ok());
  store.reset();
  store = open();
  EXPECT_EQ(*store->allocate_sequence_number(), after.last_sequence_number + 1);
}

TEST_F(FileTokenStoreTest, CompactsOnItsOwnWhenTheJournalGrows) {
  FileTokenStoreOptions options;
  options.compact_after_bytes = 4096;
  auto store = open(options);
  ASSERT_NE(store, nullptr);
  populate(*store, 200);
  auto stats = store->stats();
  EXPECT_GE(stats.compactions, 2u);
  EXPECT_EQ(stats.compaction_failures, 0u);
  EXPECT_LT(stats.journal_bytes, std::max<std::size_t>(4096, stats.snapshot_bytes) + 1024);
  auto before = *store->load();
  store.reset();
  store = open(options);
  ASSERT_NE(store, nullptr);
  expect_same_state(*store->load(), before);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(store_dir())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 3u) << "LOCK, snapshot and one journal";
}

// A crash can interrupt compaction anywhere; each leftover is cleaned up.
TEST_F(FileTokenStoreTest, InterruptedCompactionLeavesAUsableStore) {
  TokenStoreState state;
  std::string current_journal;
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    populate(*store);
    ASSERT_TRUE(store->compact().ok());
    ASSERT_TRUE(store->update_token(1, kTokenEpoch + hours(50)).ok());
    state = *store->load();
    current_journal = store->journal_path();
  }
  ASSERT_EQ(current_journal, store_dir() + "/journal.1");
  struct Leftover {
    const char* name;
    std::string file;
    std::string bytes;
  };
  const std::vector<Leftover> leftovers = {
      {"temp snapshot, crash before rename", "snapshot.tmp", "partial snapshot"},
      {"next journal, crash before rename", "journal.2", read_all(current_journal).substr(0, 16)},
      {"old journal, crash before unlink", "journal.0", "old records"},
  };
  for (const auto& l : leftovers) {
    SCOPED_TRACE(l.name);
    write_all(store_dir() + "/" + l.file, l.bytes);
    auto store = open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->recovery().stale_files_removed, 1u);
    EXPECT_FALSE(fs::exists(store_dir() + "/" + l.file));
    expect_same_state(*store->load(), state);
  }
  // Missing files are corruption, not an empty store.
  fs::rename(current_journal, dir_.path() + "/saved");
  EXPECT_TRUE(FileTokenStore::open(store_dir()).is(TokenErrc::kStoreCorrupt));
  fs::rename(dir_.path() + "/saved", current_journal);
  fs::rename(store_dir() + "/snapshot", dir_.path() + "/saved");
  EXPECT_TRUE(FileTokenStore::open(store_dir()).is(TokenErrc::kStoreCorrupt)) << "journal.1 without snapshot";
  fs::rename(dir_.path() + "/saved", store_dir() + "/snapshot");
  EXPECT_NE(open(), nullptr);
}

TEST_F(FileTokenStoreTest, EveryDamagedSnapshotByteIsAnError) {
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    populate(*store, 3);
    ASSERT_TRUE(store->compact().ok());
  }
  const std::string path = store_dir() + "/snapshot";
  const std::string full = read_all(path);
  for (std::size_t i = 0; i < full.size(); ++i) {
    std::string bytes = full;
    bytes[i] = static_cast<char>(bytes[i] ^ 0x04);
    write_all(path, bytes);
    auto s = FileTokenStore::open(store_dir());
    ASSERT_FALSE(s.ok()) << "byte " << i;
    ASSERT_TRUE(s.is(TokenErrc::kStoreCorrupt) || s.is(TokenErrc::kUnsupportedVersion))
        << "byte " << i << ": " << s.status().to_string();
  }
  for (std::size_t cut : {std::size_t{0}, std::size_t{10}, full.size() / 2, full.size() - 1}) {
    write_all(path, full.substr(0, cut));
    EXPECT_TRUE(FileTokenStore::open(store_dir()).is(TokenErrc::kStoreCorrupt)) << "cut at " << cut;
  }
  write_all(path, full);
  EXPECT_NE(open(), nullptr);
}

TEST_F(FileTokenStoreTest, FilesArePrivateWhateverTheUmask) {
  mode_t old = ::umask(0);
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    populate(*store, 3);
    ASSERT_TRUE(store->compact().ok());
    ASSERT_TRUE(store->add_token(make_token(100, kTokenEpoch)).ok());
  }
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(store_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "directory";
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(store_dir())) {
    names.insert(e.path().filename().string());
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << e.path();
  }
  EXPECT_EQ(names, (std::set<std::string>{"LOCK", "snapshot", "journal.1"}));
}

// An existing directory and files with looser modes (made by hand, or by
// another program) are made private at open, and reported.
TEST_F(FileTokenStoreTest, ExistingLooseModesAreTightened) {
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    populate(*store, 2);
    ASSERT_TRUE(store->compact().ok());
  }
  ASSERT_EQ(::chmod(store_dir().c_str(), 0755), 0);
  ASSERT_EQ(::chmod((store_dir() + "/journal.1").c_str(), 0644), 0);
  ASSERT_EQ(::chmod((store_dir() + "/snapshot").c_str(), 0640), 0);
  auto store = open();
  ASSERT_NE(store, nullptr);
  struct stat st {};
  ASSERT_EQ(::stat(store_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const char* name : {"journal.1", "snapshot", "LOCK"}) {
    ASSERT_EQ(::stat((store_dir() + "/" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << name;
  }
  std::map<std::string, std::uint32_t> tightened(store->recovery().tightened.begin(),
                                                 store->recovery().tightened.end());
  EXPECT_EQ(tightened, (std::map<std::string, std::uint32_t>{
                           {"token store directory " + store_dir(), 0755},
                           {store_dir() + "/journal.1", 0644},
                           {store_dir() + "/snapshot", 0640}}));
}

// ... and refused, with a clear error, when this process does not own them.
TEST_F(FileTokenStoreTest, ForeignLooseDirectoryIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another user";
  ASSERT_EQ(::mkdir(store_dir().c_str(), 0755), 0);
  ASSERT_EQ(::chown(store_dir().c_str(), 65534, 65534), 0);
  auto s = FileTokenStore::open(store_dir());
  ASSERT_TRUE(s.is(TokenErrc::kIoError)) << (s.ok() ? std::string("opened") : s.status().to_string());
  EXPECT_THAT(s.status().message, ::testing::HasSubstr("has mode 0755 and belongs to uid 65534"));
  EXPECT_THAT(s.status().message, ::testing::HasSubstr("cannot be made private"));
  struct stat st {};
  ASSERT_EQ(::stat(store_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u) << "left as found";
  // Someone else's private directory is fine (root can use it).
  ASSERT_EQ(::chmod(store_dir().c_str(), 0700), 0);
  EXPECT_NE(open(), nullptr);
}

TEST_F(FileTokenStoreTest, SecondOpenIsRefused) {
  auto first = open();
  ASSERT_NE(first, nullptr);
  auto second = FileTokenStore::open(store_dir());
  EXPECT_TRUE(second.is(TokenErrc::kStoreLocked)) << second.status().to_string();

  // Another process is refused as well.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto s = FileTokenStore::open(store_dir());
    ::_exit(s.is(TokenErrc::kStoreLocked) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  first.reset();
  EXPECT_NE(open(), nullptr) << "the lock goes with the store";
}

TEST_F(FileTokenStoreTest, OpenReportsSystemErrors) {
  EXPECT_TRUE(FileTokenStore::open("").is(TokenErrc::kInvalidArgument));
  EXPECT_TRUE(FileTokenStore::open(dir_.path() + "/no/such/parent").is(TokenErrc::kIoError));
}

// ---------------------------------------------------------------------------
// Crash test

// What the child acknowledged, as the parent heard it.
struct Acked {
  std::map<std::uint64_t, std::string> issued;  // seq → token string
  std::map<std::uint64_t, std::int64_t> renewed;  // seq → latest acknowledged renew date
  std::set<std::uint64_t> cancelled;
  std::size_t ops = 0;
};

// Runs in the forked child: a burst of operations, each reported on `fd`
// after it returned OK. Never returns.
[[noreturn]] void crash_child(const std::string& dir, int fd, TokenTime start, unsigned seed) {
  auto fail = [](int code) { ::_exit(code); };
  FileTokenStoreOptions store_options;
  store_options.compact_after_bytes = 8192;  // compactions happen mid-burst too
  auto store = FileTokenStore::open(dir, store_options);
  if (!store.ok()) fail(10);
  auto clock = std::make_shared<ManualClock>(start);
  SecretManagerOptions options;
  options.clock = clock;
  auto manager = SecretManager::open(std::shared_ptr<TokenStore>(std::move(*store)), options);
  if (!manager.ok()) fail(11);
  std::vector<Token> live;
  auto report = [&](const std::string& line) {
    std::string_view rest(line);
    while (!rest.empty()) {
      ssize_t n = ::write(fd, rest.data(), rest.size());
      if (n <= 0) fail(12);
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
  };
  for (unsigned i = 0;; ++i) {
    clock->advance(seconds(1));
    unsigned r = (seed + i * 2654435761u) >> 7;
    if (live.size() < 3 || r % 3 == 0) {
      auto t = (*manager)->issue({"user" + std::to_string(i), "renewer", "", "svc"});
      if (!t.ok()) fail(13);
      report("I " + std::to_string(t->decode_identifier()->sequence_number) + " " + *t->to_string() + "\n");
      live.push_back(*t);
    } else if (r % 3 == 1) {
      const Token& t = live[r % live.size()];
      auto renewed = (*manager)->renew(t, "renewer");
      if (!renewed.ok()) fail(14);
      report("R " + std::to_string(t.decode_identifier()->sequence_number) + " " +
             std::to_string(renewed->time_since_epoch().count()) + "\n");
    } else {
      std::size_t k = r % live.size();
      // Said before: a kill between the cancel and its report leaves a token
      // durably cancelled that the parent never saw acknowledged.
      report("c " + std::to_string(live[k].decode_identifier()->sequence_number) + "\n");
      if (!(*manager)->cancel(live[k], "renewer").ok()) fail(15);
      report("C " + std::to_string(live[k].decode_identifier()->sequence_number) + "\n");
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
}

TEST(FileTokenStoreCrash, EveryAcknowledgedOperationSurvivesSigkill) {
  testing::ScopedTempDir dir("store");
  const std::string store_dir = dir.path() + "/tokens";
  Acked acked;
  TokenTime start = kTokenEpoch;
  // Several rounds on the same store: each child continues where the last
  // one was killed, so recovery runs on states left by earlier kills.
  const std::size_t kill_after[] = {40, 150, 90, 260};
  for (std::size_t round = 0; round < std::size(kill_after); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      crash_child(store_dir, fds[1], start, static_cast<unsigned>(round * 7919 + 1));
    }
    ::close(fds[1]);
    FILE* in = ::fdopen(fds[0], "r");
    ASSERT_NE(in, nullptr);
    std::size_t lines = 0;
    bool killed = false;
    std::optional<std::uint64_t> cancel_in_flight;  // said 'c', not yet 'C'
    char buf[4096];
    while (std::fgets(buf, sizeof buf, in) != nullptr) {
      std::istringstream line(buf);
      char op = 0;
      std::uint64_t seq = 0;
      line >> op >> seq;
      if (op == 'I') {
        std::string text;
        line >> text;
        acked.issued[seq] = text;
      } else if (op == 'R') {
        std::int64_t ms = 0;
        line >> ms;
        acked.renewed[seq] = ms;
      } else if (op == 'c') {
        cancel_in_flight = seq;
        continue;  // an intention, not an acknowledgement
      } else if (op == 'C') {
        acked.cancelled.insert(seq);
        cancel_in_flight.reset();
      } else {
        ADD_FAILURE() << "bad line from child: " << buf;
      }
      ++acked.ops;
      // Kill mid-burst; lines already in the pipe were acknowledged too.
      if (++lines == kill_after[round] && !killed) {
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    std::fclose(in);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "child ended on its own: " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    // The next child's clock starts after everything this one did.
    start += seconds(static_cast<std::int64_t>(acked.ops + 100));

    auto store = FileTokenStore::open(store_dir);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto state = (*store)->load();
    ASSERT_TRUE(state.ok());
    std::map<std::uint64_t, const StoredToken*> stored;
    for (const auto& t : state->tokens) stored[t.sequence_number] = &t;
    // The cancel in flight at the kill may or may not have reached the disk.
    if (cancel_in_flight && !stored.contains(*cancel_in_flight)) {
      acked.cancelled.insert(*cancel_in_flight);
    }
    for (const auto& [seq, text] : acked.issued) {
      if (acked.cancelled.contains(seq)) {
        EXPECT_FALSE(stored.contains(seq)) << "cancelled token " << seq << " is back";
        continue;
      }
      ASSERT_TRUE(stored.contains(seq)) << "acknowledged token " << seq << " lost";
      auto token = Token::from_string(text);
      ASSERT_TRUE(token.ok());
      EXPECT_EQ(stored[seq]->identifier, token->identifier);
      EXPECT_TRUE(stored[seq]->password.equals(token->password));
      if (auto r = acked.renewed.find(seq); r != acked.renewed.end()) {
        EXPECT_GE(stored[seq]->renew_date.time_since_epoch().count(), r->second)
            << "acknowledged renewal of " << seq << " lost";
      }
    }
    // And the secret manager accepts exactly the live ones.
    auto clock = std::make_shared<ManualClock>(start);
    SecretManagerOptions options;
    options.clock = clock;
    auto manager = SecretManager::open(std::shared_ptr<TokenStore>(std::move(*store)), options);
    ASSERT_TRUE(manager.ok()) << manager.status().to_string();
    for (const auto& [seq, text] : acked.issued) {
      auto r = (*manager)->verify(*Token::from_string(text));
      if (acked.cancelled.contains(seq)) {
        EXPECT_TRUE(r.is(TokenErrc::kUnknownToken)) << seq << ": " << r.status().to_string();
      } else {
        EXPECT_TRUE(r.ok()) << seq << ": " << r.status().to_string();
      }
    }
  }
  EXPECT_GE(acked.issued.size(), 100u);
  EXPECT_GE(acked.cancelled.size(), 10u);
  EXPECT_GE(acked.renewed.size(), 10u);
}

}  // namespace
}  // namespace authrpc::security
