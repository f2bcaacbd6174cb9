#include "authrpc/components/zookeeper/zk_token_store.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>

#include "authrpc/base/stop_thread.h"
#include "authrpc/security/byte_codec.h"

namespace authrpc::security {
namespace {

constexpr std::uint8_t kRecordVersion = 1;
constexpr std::size_t kMaxRecordField = 1 << 16;
constexpr int kMaxVersionRetries = 64;

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A ZooKeeper result code as a Status; `what` names the operation and
// node (never a record's contents).
Status zk_status(int rc, const std::string& what) {
  std::string message = "ZooKeeper " + what + ": " + zk_error_text(rc);
  if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
      rc == ZINVALIDSTATE || rc == ZSESSIONMOVED) {
    return Status(TokenErrc::kStoreUnavailable, std::move(message));
  }
  if (rc == ZNOAUTH || rc == ZAUTHFAILED) return Status(TokenErrc::kPermissionDenied, std::move(message));
  return Status(TokenErrc::kIoError, std::move(message));
}

bool parse_u64(std::string_view text, std::uint64_t* out) {
  if (text.empty()) {
    *out = 0;
    return true;
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string padded(std::uint64_t v, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llu", width, static_cast<unsigned long long>(v));
  return buf;
}

// Node data that held a secret.
void wipe(std::string& s) {
  cleanse(s.data(), s.size());
  s.clear();
}

// The record in a node's `data`, read by `decode` (ZkTokenStore::decode_token
// or decode_key), the data wiped; kStoreCorrupt, naming `path`, if it does not
// decode.
template <typename T>
Result<T> decode_node(Result<T> (*decode)(std::string_view), std::string& data,
                      const std::string& path) {
  Result<T> record = decode(data);
  wipe(data);
  if (!record.ok()) return Status(TokenErrc::kStoreCorrupt, path + ": " + record.status().to_string());
  return record;
}

// The record at `path` (nullopt if there is no such node), as decode_node().
template <typename T>
Result<std::optional<T>> read_node(ZkSession& session, const std::string& path,
                                   Result<T> (*decode)(std::string_view)) {
  auto node = session.get(path, false);
  if (node.rc == ZNONODE) return std::optional<T>();
  if (node.rc != ZOK) return zk_status(node.rc, "read " + path);
  auto record = decode_node(decode, node.data, path);
  if (!record.ok()) return record.status();
  return std::optional<T>(std::move(*record));
}

bool valid_root(const std::string& root) {
  return root.size() > 1 && root.front() == '/' && root.back() != '/' &&
         root.find("//") == std::string::npos;
}

}  // namespace

std::string ZkTokenStore::encode_token(const StoredToken& token) {
  std::string out;
  ByteWriter w(&out);
  w.u8(kRecordVersion);
  w.u64(token.sequence_number);
  w.i64(token.renew_date.time_since_epoch().count());
  w.str32(token.identifier);
  w.str32(token.password.view());
  return out;
}

Result<StoredToken> ZkTokenStore::decode_token(std::string_view data) {
  StoredToken token;
  std::int64_t renew = 0;
  std::string_view identifier, password;
  const Status read = read_record(data, kRecordVersion, "token record", [&](ByteReader& r) {
    return r.u64(&token.sequence_number) && r.i64(&renew) &&
           r.str32(&identifier, kMaxRecordField) && r.str32(&password, kMaxRecordField);
  });
  if (!read.ok()) return read;
  token.renew_date = TokenTime(std::chrono::milliseconds(renew));
  token.identifier.assign(identifier);
  token.password = SecretBytes(password);
  return token;
}

std::string ZkTokenStore::encode_key(const MasterKey& key) {
  std::string out;
  ByteWriter w(&out);
  w.u8(kRecordVersion);
  w.u32(key.id);
  w.i64(key.created.time_since_epoch().count());
  w.i64(key.expires.time_since_epoch().count());
  w.str32(key.secret.view());
  return out;
}

Result<MasterKey> ZkTokenStore::decode_key(std::string_view data) {
  MasterKey key;
  std::int64_t created = 0, expires = 0;
  std::string_view secret;
  const Status read = read_record(data, kRecordVersion, "key record", [&](ByteReader& r) {
    return r.u32(&key.id) && r.i64(&created) && r.i64(&expires) &&
           r.str32(&secret, kMaxRecordField);
  });
  if (!read.ok()) return read;
  key.created = TokenTime(std::chrono::milliseconds(created));
  key.expires = TokenTime(std::chrono::milliseconds(expires));
  key.secret = SecretBytes(secret);
  return key;
}

ZkTokenStore::ZkTokenStore(ZkTokenStoreOptions options)
    : options_(std::move(options)),
      tokens_dir_(options_.root + "/tokens"),
      keys_dir_(options_.root + "/keys"),
      seq_path_(options_.root + "/seq"),
      keyid_path_(options_.root + "/keyid"),
      current_path_(options_.root + "/current-key"),
      sweep_path_(options_.root + "/sweep") {}

Result<std::unique_ptr<ZkTokenStore>> ZkTokenStore::open(ZkTokenStoreOptions options) {
  using R = Result<std::unique_ptr<ZkTokenStore>>;
  if (!valid_root(options.root)) {
    return R(TokenErrc::kInvalidArgument, "ZooKeeper root '" + options.root +
                                              "' must be an absolute path like /authrpc/tokens/myservice");
  }
  if (options.sequence_batch == 0) return R(TokenErrc::kInvalidArgument, "sequence batch must be positive");
  if (options.stale_after.count() == 0) options.stale_after = options.session_timeout;
  std::unique_ptr<ZkTokenStore> store(new ZkTokenStore(std::move(options)));
  const auto deadline = std::chrono::steady_clock::now() + store->options_.start_timeout;
  for (int attempt = 1;; ++attempt) {
    Status s;
    {
      std::lock_guard lock(store->mu_);
      s = store->connect_locked();
    }
    if (s.ok()) break;
    if (!s.is(TokenErrc::kStoreUnavailable) || std::chrono::steady_clock::now() >= deadline) {
      if (attempt > 1) s.message += " (gave up after " + std::to_string(attempt) + " attempts)";
      return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  store->watcher_ = std::thread([s = store.get()] { s->watch_loop(); });
  return store;
}

ZkTokenStore::~ZkTokenStore() {
  stop_thread(events_mu_, stopping_, events_cv_, watcher_);
  std::lock_guard lock(mu_);
  session_.reset();
}

Status ZkTokenStore::connect_locked() {
  session_.reset();
  ZkSessionOptions o;
  o.connect = options_.connect;
  o.session_timeout = options_.session_timeout;
  o.connect_timeout = options_.connect_timeout;
  o.digest = options_.digest;
  auto session = ZkSession::connect(o, [this](ZkEvent e) { on_event(std::move(e)); });
  if (!session.ok()) return session.status();
  if (int rc = (*session)->ensure_path(options_.root); rc != ZOK) return zk_status(rc, "create " + options_.root);
  for (const auto* path : {&tokens_dir_, &keys_dir_, &seq_path_, &keyid_path_, &current_path_, &sweep_path_}) {
    const bool counter = path != &tokens_dir_ && path != &keys_dir_;
    const int rc = (*session)->create(*path, counter ? "0" : "");
    if (rc != ZOK && rc != ZNODEEXISTS) return zk_status(rc, "create " + *path);
  }
  session_ = std::move(*session);
  {
    std::lock_guard watch_lock(watch_mu_);
    watched_tokens_.clear();
  }
  ++stats_.sessions;
  cut_off_since_ = 0;
  return {};
}

Status ZkTokenStore::unavailable_locked() const {
  return Status(TokenErrc::kStoreUnavailable,
                     "the ZooKeeper session is being re-established (" + options_.connect + ")");
}

std::string ZkTokenStore::token_path(std::uint64_t seq) const { return tokens_dir_ + "/" + padded(seq, 20); }
std::string ZkTokenStore::key_path(std::uint32_t id) const { return keys_dir_ + "/" + padded(id, 10); }

Result<TokenStoreState> ZkTokenStore::read_all_locked(bool skip_unreadable) {
  using R = Result<TokenStoreState>;
  if (!session_) return unavailable_locked();
  if (int rc = session_->sync(options_.root); rc != ZOK) return zk_status(rc, "sync " + options_.root);
  TokenStoreState state;
  auto counters = session_->get_many({seq_path_, keyid_path_}, false);
  std::uint64_t keyid = 0;
  for (const auto& n : counters) {
    if (n.rc != ZOK) return zk_status(n.rc, "read the counters");
  }
  if (!parse_u64(counters[0].data, &state.last_sequence_number) || !parse_u64(counters[1].data, &keyid) ||
      keyid > std::numeric_limits<std::uint32_t>::max()) {
    return R(TokenErrc::kStoreCorrupt, "ZooKeeper counters under " + options_.root + " are not numbers");
  }
  state.last_master_key_id = static_cast<std::uint32_t>(keyid);

  std::vector<std::string> names;
  if (int rc = session_->children(keys_dir_, true, &names); rc != ZOK) return zk_status(rc, "list " + keys_dir_);
  std::vector<std::string> paths;
  for (const auto& name : names) paths.push_back(keys_dir_ + "/" + name);
  auto nodes = session_->get_many(paths, false);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].rc == ZNONODE) continue;
    if (nodes[i].rc != ZOK) return zk_status(nodes[i].rc, "read " + paths[i]);
    auto key = decode_node(&decode_key, nodes[i].data, paths[i]);
    if (!key.ok()) {
      if (skip_unreadable) continue;
      return key.status();
    }
    state.last_master_key_id = std::max(state.last_master_key_id, key->id);
    state.keys.push_back(std::move(*key));
  }

  if (int rc = session_->children(tokens_dir_, true, &names); rc != ZOK) return zk_status(rc, "list " + tokens_dir_);
  paths.clear();
  for (const auto& name : names) paths.push_back(tokens_dir_ + "/" + name);
  nodes = session_->get_many(paths, true);
  std::lock_guard watch_lock(watch_mu_);
  watched_tokens_.clear();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].rc == ZNONODE) continue;
    if (nodes[i].rc != ZOK) return zk_status(nodes[i].rc, "read " + paths[i]);
    auto token = decode_node(&decode_token, nodes[i].data, paths[i]);
    if (!token.ok()) {
      if (!skip_unreadable) return token.status();
      // Left out, and read again when it changes, as read_changes() does.
      std::uint64_t seq = 0;
      if (parse_u64(names[i], &seq)) watched_tokens_.insert(seq);
      continue;
    }
    watched_tokens_.insert(token->sequence_number);
    state.last_sequence_number = std::max(state.last_sequence_number, token->sequence_number);
    state.tokens.push_back(std::move(*token));
  }
  std::sort(state.keys.begin(), state.keys.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::sort(state.tokens.begin(), state.tokens.end(),
            [](const auto& a, const auto& b) { return a.sequence_number < b.sequence_number; });
  return state;
}

Result<TokenStoreState> ZkTokenStore::load() {
  std::lock_guard lock(mu_);
  return read_all_locked(false);
}

Result<std::uint64_t> ZkTokenStore::bump_counter_locked(const std::string& path, std::uint64_t by) {
  using R = Result<std::uint64_t>;
  if (!session_) return unavailable_locked();
  for (int attempt = 0; attempt < kMaxVersionRetries; ++attempt) {
    auto node = session_->get(path, false);
    if (node.rc != ZOK) return zk_status(node.rc, "read " + path);
    std::uint64_t value = 0;
    if (!parse_u64(node.data, &value)) return R(TokenErrc::kStoreCorrupt, path + " is not a number");
    if (value > std::numeric_limits<std::uint64_t>::max() - by) {
      return R(TokenErrc::kInvalidArgument, path + " is exhausted");
    }
    const int rc = session_->set(path, std::to_string(value + by), node.version);
    if (rc == ZOK) return value + by;
    if (rc != ZBADVERSION) return zk_status(rc, "update " + path);
  }
  return R(TokenErrc::kStoreUnavailable, path + ": too much contention, try again");
}

Result<std::uint64_t> ZkTokenStore::allocate_sequence_number() {
  std::lock_guard lock(mu_);
  if (next_seq_ > seq_block_end_) {
    auto top = bump_counter_locked(seq_path_, options_.sequence_batch);
    if (!top.ok()) return top;
    ++stats_.sequence_reservations;
    next_seq_ = *top - options_.sequence_batch + 1;
    seq_block_end_ = *top;
  }
  return next_seq_++;
}

Result<std::uint32_t> ZkTokenStore::allocate_master_key_id() {
  std::lock_guard lock(mu_);
  auto id = bump_counter_locked(keyid_path_, 1);
  if (!id.ok()) return id.status();
  if (*id > std::numeric_limits<std::uint32_t>::max()) {
    return Result<std::uint32_t>(TokenErrc::kInvalidArgument, "master key ids exhausted");
  }
  return static_cast<std::uint32_t>(*id);
}

Status ZkTokenStore::put_master_key(const MasterKey& key) {
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  std::string data = encode_key(key);
  const std::string path = key_path(key.id);
  int rc = session_->create(path, data);
  if (rc == ZNODEEXISTS) rc = session_->set(path, data, -1);
  wipe(data);
  return rc == ZOK ? Status() : zk_status(rc, "write " + path);
}

Status ZkTokenStore::remove_master_key(std::uint32_t id) {
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  const std::string path = key_path(id);
  const int rc = session_->remove(path);
  return rc == ZOK || rc == ZNONODE ? Status() : zk_status(rc, "remove " + path);
}

Status ZkTokenStore::add_token(const StoredToken& token) {
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  std::string data = encode_token(token);
  const std::string path = token_path(token.sequence_number);
  const int rc = session_->create(path, data);
  wipe(data);
  if (rc == ZNODEEXISTS) {
    return Status(TokenErrc::kInvalidArgument,
                       "token " + std::to_string(token.sequence_number) + " is stored already");
  }
  return rc == ZOK ? Status() : zk_status(rc, "create " + path);
}

Status ZkTokenStore::update_token(std::uint64_t sequence_number, TokenTime renew_date) {
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  const std::string path = token_path(sequence_number);
  for (int attempt = 0; attempt < kMaxVersionRetries; ++attempt) {
    auto node = session_->get(path, false);
    if (node.rc == ZNONODE) {
      return Status(TokenErrc::kUnknownToken, "token " + std::to_string(sequence_number) + " is not stored");
    }
    if (node.rc != ZOK) return zk_status(node.rc, "read " + path);
    auto token = decode_node(&decode_token, node.data, path);
    if (!token.ok()) return token.status();
    token->renew_date = renew_date;
    std::string data = encode_token(*token);
    const int rc = session_->set(path, data, node.version);
    wipe(data);
    if (rc == ZOK) return {};
    if (rc == ZNONODE) {
      return Status(TokenErrc::kUnknownToken, "token " + std::to_string(sequence_number) + " is not stored");
    }
    if (rc != ZBADVERSION) return zk_status(rc, "update " + path);
  }
  return Status(TokenErrc::kStoreUnavailable, path + ": too much contention, try again");
}

Status ZkTokenStore::remove_tokens(std::span<const std::uint64_t> sequence_numbers) {
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  for (auto seq : sequence_numbers) {
    const std::string path = token_path(seq);
    const int rc = session_->remove(path);
    if (rc != ZOK && rc != ZNONODE) return zk_status(rc, "remove " + path);
  }
  return {};
}

Result<std::optional<MasterKey>> ZkTokenStore::read_key_locked(std::uint32_t id) {
  return read_node(*session_, key_path(id), &decode_key);
}

Result<MasterKey> ZkTokenStore::roll_master_key(std::uint32_t replaces, const MasterKey& key) {
  using R = Result<MasterKey>;
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  auto current = session_->get(current_path_, false);
  if (current.rc != ZOK) return zk_status(current.rc, "read " + current_path_);
  std::uint64_t id = 0;
  if (!parse_u64(current.data, &id)) return R(TokenErrc::kStoreCorrupt, current_path_ + " is not a number");
  if (id == replaces) {
    std::string data = encode_key(key);
    const int rc = session_->create_and_set(key_path(key.id), data, current_path_, std::to_string(key.id),
                                            current.version);
    wipe(data);
    if (rc == ZOK) return key;
    if (rc != ZBADVERSION) return zk_status(rc, "roll the master key to " + key_path(key.id));
    // Another server rolled first: use its key.
    current = session_->get(current_path_, false);
    if (current.rc != ZOK) return zk_status(current.rc, "read " + current_path_);
    if (!parse_u64(current.data, &id)) return R(TokenErrc::kStoreCorrupt, current_path_ + " is not a number");
  }
  auto winner = read_key_locked(static_cast<std::uint32_t>(id));
  if (!winner.ok()) return winner.status();
  if (!winner->has_value()) {
    return R(TokenErrc::kStoreCorrupt, current_path_ + " names key " + std::to_string(id) + ", which is not stored");
  }
  return std::move(**winner);
}

Result<bool> ZkTokenStore::claim_sweep(TokenTime now) {
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  auto node = session_->get(sweep_path_, false);
  if (node.rc != ZOK) return zk_status(node.rc, "read " + sweep_path_);
  std::uint64_t last = 0;
  if (!parse_u64(node.data, &last)) return Result<bool>(TokenErrc::kStoreCorrupt, sweep_path_ + " is not a number");
  const auto now_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, now.time_since_epoch().count()));
  // A little slack, so that timer jitter does not make every round lose.
  const auto interval = static_cast<std::uint64_t>(options_.sweep_interval.count()) * 9 / 10;
  if (now_ms < last + interval) return false;
  const int rc = session_->set(sweep_path_, std::to_string(now_ms), node.version);
  if (rc == ZBADVERSION) return false;
  if (rc != ZOK) return zk_status(rc, "update " + sweep_path_);
  return true;
}

Result<std::optional<StoredToken>> ZkTokenStore::fetch_token(std::uint64_t sequence_number) {
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  ++stats_.fetches;
  if (int rc = session_->sync(tokens_dir_); rc != ZOK) return zk_status(rc, "sync " + tokens_dir_);
  return read_node(*session_, token_path(sequence_number), &decode_token);
}

Result<std::optional<MasterKey>> ZkTokenStore::fetch_master_key(std::uint32_t id) {
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  ++stats_.fetches;
  if (int rc = session_->sync(keys_dir_); rc != ZOK) return zk_status(rc, "sync " + keys_dir_);
  return read_key_locked(id);
}

Status ZkTokenStore::expire_session_for_testing() {
  std::lock_guard lock(mu_);
  if (!session_) return unavailable_locked();
  const int rc = session_->expire_for_testing(options_.connect);
  return rc == ZOK ? Status() : zk_status(rc, "expire the session");
}

bool ZkTokenStore::fresh() const noexcept {
  if (rebuilding_.load(std::memory_order_relaxed)) return false;
  const std::int64_t cut_off = cut_off_since_.load(std::memory_order_relaxed);
  const std::int64_t failing = failing_since_.load(std::memory_order_relaxed);
  if (cut_off == 0 && failing == 0) return true;
  const std::int64_t since = cut_off == 0 ? failing : failing == 0 ? cut_off : std::min(cut_off, failing);
  return steady_ms() - since < options_.stale_after.count();
}

void ZkTokenStore::set_observer(TokenStoreObserver* observer) {
  if (observer == nullptr) {
    observer_.store(nullptr, std::memory_order_release);
    std::lock_guard wait_for_apply(observer_mu_);  // a call in progress ends first
    return;
  }
  std::lock_guard wait_for_round(unobserved_mu_);  // a round without one ends first
  observer_.store(observer, std::memory_order_release);
}

ZkTokenStore::Stats ZkTokenStore::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ZkTokenStore::on_event(ZkEvent event) {
  if (event.type == ZOO_SESSION_EVENT) {
    if (event.state == ZOO_CONNECTING_STATE || event.state == ZOO_ASSOCIATING_STATE) {
      std::int64_t expected = 0;
      cut_off_since_.compare_exchange_strong(expected, steady_ms());
      return;
    }
    if (event.state == ZOO_CONNECTED_STATE) {
      cut_off_since_ = 0;
      return;
    }
    if (event.state != ZOO_EXPIRED_SESSION_STATE && event.state != ZOO_AUTH_FAILED_STATE) return;
  } else if (event.type == ZOO_NOTWATCHING_EVENT) {
    return;
  }
  {
    std::lock_guard lock(events_mu_);
    events_.push_back(std::move(event));
  }
  events_cv_.notify_one();
}

void ZkTokenStore::deliver(const std::function<Result<TokenStoreChanges>()>& read) {
  for (;;) {
    {
      std::lock_guard lock(unobserved_mu_);
      if (observer_.load(std::memory_order_acquire) == nullptr) {
        (void)read();  // keeps the watches armed
        return;
      }
    }
    std::lock_guard lock(observer_mu_);
    if (auto* observer = observer_.load(std::memory_order_acquire); observer != nullptr) {
      observer->apply(read);
      return;
    }
    // Cleared between the two looks: a round without an observer after all.
  }
}

namespace {

// What a round's events ask to read again.
struct ChangedNodes {
  bool relist_tokens = false;     // the tokens directory's children changed
  bool reread_keys = false;       // a key, or the keys directory, changed
  std::set<std::uint64_t> tokens;  // tokens whose node changed
};

ChangedNodes collect_events(const std::vector<ZkEvent>& events, const std::string& tokens_dir,
                            const std::string& keys_dir) {
  ChangedNodes out;
  const std::string token_prefix = tokens_dir + "/";
  for (const auto& e : events) {
    if (e.path == tokens_dir) {
      out.relist_tokens = true;
    } else if (e.path == keys_dir || e.path.starts_with(keys_dir + "/")) {
      out.reread_keys = true;
    } else if (e.path.starts_with(token_prefix)) {
      std::uint64_t seq = 0;
      if (parse_u64(std::string_view(e.path).substr(token_prefix.size()), &seq)) out.tokens.insert(seq);
    }
  }
  return out;
}

}  // namespace

Result<TokenStoreChanges> ZkTokenStore::read_changes(const std::vector<ZkEvent>& events, bool* retry) {
  // Without mu_, so that store calls do not wait for these reads: only this
  // (the watch) thread replaces session_, and watch_mu_ guards the rest.
  {
    std::lock_guard stats_lock(mu_);
    stats_.events += events.size();
  }
  std::lock_guard lock(watch_mu_);
  if (!session_) {
    *retry = true;
    return Status(TokenErrc::kStoreUnavailable, "no ZooKeeper session");
  }
  ChangedNodes changed = collect_events(events, tokens_dir_, keys_dir_);
  TokenStoreChanges changes;
  std::vector<std::uint64_t> now_watched;
  Status status = changed.relist_tokens ? relist_tokens(&changed.tokens) : Status();
  if (status.ok()) status = read_tokens(changed.tokens, &changes, &now_watched);
  if (status.ok() && changed.reread_keys) status = reread_keys(&changes);
  if (!status.ok()) {
    *retry = true;
    return status;
  }
  // The round is whole: what it found removed, and what it read, change
  // the watched set.
  for (auto seq : changes.tokens_removed) watched_tokens_.erase(seq);
  watched_tokens_.insert(now_watched.begin(), now_watched.end());
  return changes;
}

// Adds to `reads` the tokens whose node came or went since the last
// listing: watched and not listed (they read as NONODE: removed), listed
// and not watched.
Status ZkTokenStore::relist_tokens(std::set<std::uint64_t>* reads) {
  std::vector<std::string> names;
  if (int rc = session_->children(tokens_dir_, true, &names); rc != ZOK) {
    return zk_status(rc, "list " + tokens_dir_);
  }
  std::set<std::uint64_t> listed;
  for (const auto& name : names) {
    std::uint64_t seq = 0;
    if (parse_u64(name, &seq)) listed.insert(seq);
  }
  for (auto seq : watched_tokens_) {
    if (!listed.contains(seq)) reads->insert(seq);
  }
  for (auto seq : listed) {
    if (!watched_tokens_.contains(seq)) reads->insert(seq);
  }
  return {};
}

// Reads `seqs` (setting their watches) into `changes`: gone ones as
// removed, the others as put, with `now_watched` the ones that exist.
// All or nothing: watched_tokens_ changes only with a round that is
// delivered. Were a token found here marked watched while a later read of
// the round fails, the retry's listing would not read it again, and it
// would never reach the view.
Status ZkTokenStore::read_tokens(const std::set<std::uint64_t>& seqs, TokenStoreChanges* changes,
                                 std::vector<std::uint64_t>* now_watched) {
  if (seqs.empty()) return {};
  std::vector<std::string> paths;
  for (auto seq : seqs) paths.push_back(token_path(seq));
  auto nodes = session_->get_many(paths, true);
  std::size_t i = 0;
  for (auto seq : seqs) {
    const std::string& path = paths[i];
    auto& node = nodes[i++];
    if (node.rc == ZNONODE) {
      changes->tokens_removed.push_back(seq);
      continue;
    }
    if (node.rc != ZOK) return zk_status(node.rc, "read " + path);
    auto token = decode_node(&decode_token, node.data, path);
    now_watched->push_back(seq);
    // A record this code cannot read is left out of the view (load() reports it).
    if (token.ok() && token->sequence_number == seq) changes->tokens_put.push_back(std::move(*token));
  }
  return {};
}

// Every key, listed and read afresh (keys not listed any more were swept).
Status ZkTokenStore::reread_keys(TokenStoreChanges* changes) {
  std::vector<std::string> names;
  if (int rc = session_->children(keys_dir_, true, &names); rc != ZOK) {
    return zk_status(rc, "list " + keys_dir_);
  }
  std::vector<std::string> paths;
  for (const auto& name : names) paths.push_back(keys_dir_ + "/" + name);
  auto nodes = session_->get_many(paths, false);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto& node = nodes[i];
    if (node.rc == ZNONODE) continue;
    if (node.rc != ZOK) return zk_status(node.rc, "read " + keys_dir_);
    auto key = decode_node(&decode_key, node.data, paths[i]);
    if (key.ok()) changes->keys_put.push_back(std::move(*key));
  }
  changes->all_keys = true;
  return {};
}

void ZkTokenStore::watch_loop() {
  std::unique_lock lock(events_mu_);
  while (true) {
    events_cv_.wait(lock, [this] { return stopping_ || !events_.empty(); });
    if (stopping_) return;
    std::vector<ZkEvent> batch(events_.begin(), events_.end());
    events_.clear();
    lock.unlock();

    const std::int64_t round_began = steady_ms();
    const bool expired = std::any_of(batch.begin(), batch.end(),
                                     [](const ZkEvent& e) { return e.type == ZOO_SESSION_EVENT; });
    bool again = false;
    if (expired) {
      // A new session: every watch is gone, so everything is read again and
      // the observer's view replaced; until then fresh() is false.
      rebuilding_ = true;
      Status status;
      {
        std::lock_guard store_lock(mu_);
        status = connect_locked();
      }
      if (status.ok()) {
        deliver([&]() -> Result<TokenStoreChanges> {
          std::lock_guard store_lock(mu_);
          // A record this code cannot read is left out, as in a round;
          // failing on it would keep the view stale for good.
          auto state = read_all_locked(true);
          if (!state.ok()) {
            status = state.status();
            return state.status();
          }
          TokenStoreChanges changes;
          changes.reset = std::move(*state);
          return changes;
        });
      }
      if (status.ok()) {
        rebuilding_ = false;
      } else {
        again = true;
        batch = {ZkEvent{ZOO_SESSION_EVENT, ZOO_EXPIRED_SESSION_STATE, ""}};
      }
    } else {
      deliver([&] { return read_changes(batch, &again); });
    }
    if (again) {
      std::int64_t expected = 0;
      failing_since_.compare_exchange_strong(expected, round_began);
      std::lock_guard stats_lock(mu_);
      ++stats_.retries;
    } else {
      failing_since_ = 0;
    }
    lock.lock();
    if (again) {
      // Put the events back and try again shortly (ZooKeeper is unreachable).
      events_.insert(events_.begin(), batch.begin(), batch.end());
      events_cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; });
    }
  }
}

}  // namespace authrpc::security
