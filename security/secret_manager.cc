#include "authrpc/security/secret_manager.h"

#include <algorithm>

namespace authrpc::security {
namespace {

constexpr std::size_t kMasterKeyBytes = 32;

std::string seq_name(std::uint64_t seq) { return "token " + std::to_string(seq); }

}  // namespace

IssuedToken::IssuedToken(TokenIdentifier decoded, std::string bytes, SecretBytes secret)
    : id(std::move(decoded)), identifier(std::move(bytes)), password(std::move(secret)) {}

const HmacSha256Key& IssuedToken::password_key() const {
  std::call_once(prepared_, [this] { password_key_ = HmacSha256Key(password.span()); });
  return password_key_;
}

SecretManager::Entry SecretManager::make_entry(TokenIdentifier id, std::string identifier,
                                               SecretBytes password, TokenTime renew_date) {
  return Entry{std::make_shared<const IssuedToken>(std::move(id), std::move(identifier),
                                                   std::move(password)),
               renew_date};
}

SecretManager::SecretManager(std::shared_ptr<TokenStore> store, SecretManagerOptions options)
    : options_(std::move(options)), store_(std::move(store)), shared_(store_->shared()) {}

SecretManager::~SecretManager() {
  if (shared_) store_->set_observer(nullptr);
}

Result<std::unique_ptr<SecretManager>> SecretManager::open(std::shared_ptr<TokenStore> store,
                                                                SecretManagerOptions options) {
  using R = Result<std::unique_ptr<SecretManager>>;
  if (!store) return R(TokenErrc::kInvalidArgument, "no token store");
  if (options.kind.empty() || options.kind.size() > TokenIdentifier::kMaxFieldBytes) {
    return R(TokenErrc::kInvalidArgument, "token kind empty or over-long");
  }
  using std::chrono::milliseconds;
  if (options.key_roll_interval <= milliseconds(0) || options.max_lifetime <= milliseconds(0) ||
      options.renew_interval <= milliseconds(0)) {
    return R(TokenErrc::kInvalidArgument, "key roll interval, max lifetime and renew interval must be positive");
  }
  if (!options.clock) options.clock = std::make_shared<SystemClock>();
  std::unique_ptr<SecretManager> manager(new SecretManager(std::move(store), std::move(options)));
  // A shared store reports changes from now on; apply() waits for write_mu_,
  // so none is lost between the load and the first report.
  std::lock_guard write(manager->write_mu_);
  if (manager->shared_) manager->store_->set_observer(manager.get());
  if (auto s = manager->load(); !s.ok()) return s;
  return manager;
}

Status SecretManager::load() {
  auto state = store_->load();
  if (!state.ok()) return state.status();
  for (auto& key : state->keys) {
    current_key_ = std::max(current_key_, key.id);
    keys_.insert_or_assign(key.id, std::move(key));
  }
  for (auto& stored : state->tokens) {
    auto id = TokenIdentifier::decode(stored.identifier);
    if (!id.ok()) {
      return Status(TokenErrc::kStoreCorrupt,
                         "stored " + seq_name(stored.sequence_number) + ": " + id.status().to_string());
    }
    if (id->sequence_number != stored.sequence_number) {
      return Status(TokenErrc::kStoreCorrupt, "stored " + seq_name(stored.sequence_number) +
                                                       " has an identifier with sequence number " +
                                                       std::to_string(id->sequence_number));
    }
    tokens_.insert_or_assign(stored.sequence_number,
                             make_entry(std::move(*id), std::move(stored.identifier),
                                        std::move(stored.password), stored.renew_date));
  }
  return {};
}

Result<const SecretManager::Entry*> SecretManager::check(
    std::string_view identifier, const std::span<const std::uint8_t>* password, TokenTime now,
    Use use) const {
  using R = Result<const Entry*>;
  auto id = TokenIdentifier::decode(identifier);
  if (!id.ok()) return id.status();
  if (id->kind != options_.kind) {
    return R(TokenErrc::kUnknownToken, "a " + id->kind + " token is not issued here (kind " + options_.kind + ")");
  }
  const std::uint64_t seq = id->sequence_number;
  auto key = keys_.find(id->master_key_id);
  if (key == keys_.end()) {
    // Another server's token, one whose key was dropped after its max date,
    // or (with a shared store) a key this server has not loaded yet.
    if (now > id->max_date) {
      return R(TokenErrc::kExpired, seq_name(seq) + " expired at its max date " + format_token_time(id->max_date));
    }
    return R(TokenErrc::kUnknownKey, seq_name(seq) + " was made with master key " +
                                         std::to_string(id->master_key_id) + ", which is not known here");
  }
  auto it = tokens_.find(seq);
  if (it == tokens_.end()) {
    // The key is known: a wrong password means the token was not made here.
    if (password != nullptr && !token_password(key->second.secret, identifier).equals(*password)) {
      return R(TokenErrc::kForged, seq_name(seq) + ": password does not match");
    }
    if (auto removed = removed_.find(seq); removed != removed_.end()) {
      if (removed->second.why == TokenErrc::kCancelled) {
        return R(TokenErrc::kCancelled, seq_name(seq) + " was cancelled");
      }
      return R(TokenErrc::kExpired, seq_name(seq) + " expired and was removed");
    }
    if (now > id->max_date) {
      return R(TokenErrc::kExpired, seq_name(seq) + " expired at its max date " + format_token_time(id->max_date));
    }
    return R(TokenErrc::kUnknownToken,
             seq_name(seq) + " is not known here (expired and removed, cancelled before a restart, "
                             "or never issued)");
  }
  if (auto s = check_entry(it->second, identifier, password, now, use); !s.ok()) return s;
  return &it->second;
}

Status SecretManager::check_entry(const Entry& entry, std::string_view identifier,
                                       const std::span<const std::uint8_t>* password, TokenTime now,
                                       Use use) const {
  const std::uint64_t seq = entry.token->id.sequence_number;
  // Compare the whole identifier, not only its sequence number: the password
  // was made over all of it.
  if (entry.token->identifier != identifier) {
    return Status(TokenErrc::kForged, seq_name(seq) + ": identifier does not match the issued token");
  }
  if (password != nullptr && !entry.token->password.equals(*password)) {
    return Status(TokenErrc::kForged, seq_name(seq) + ": password does not match");
  }
  if (use != Use::kCancel && now > entry.renew_date) {
    bool at_max = entry.renew_date >= entry.token->id.max_date;
    return Status(TokenErrc::kExpired, seq_name(seq) + " expired at " + format_token_time(entry.renew_date) +
                                                (at_max ? " (its max date)" : ""));
  }
  return {};
}

bool SecretManager::worth_fetching(const Status& refusal, std::string_view identifier,
                                   TokenTime now) const {
  if (!shared_) return false;
  if (refusal.is(TokenErrc::kExpired)) {
    // Expired here, but another server may have renewed it.
    auto id = TokenIdentifier::decode(identifier);
    if (!id.ok() || now > id->max_date) return false;
  } else if (!refusal.is(TokenErrc::kUnknownToken) && !refusal.is(TokenErrc::kUnknownKey)) {
    return false;
  }
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count();
  std::lock_guard lock(fetch_mu_);
  if (now_ms - fetch_window_ms_ >= 1000) {
    fetch_window_ms_ = now_ms;
    fetches_in_window_ = 0;
  }
  return ++fetches_in_window_ <= kMaxFetchesPerSecond;
}

Result<std::optional<SecretManager::Entry>> SecretManager::fetch(std::string_view identifier) const {
  using R = Result<std::optional<Entry>>;
  auto id = TokenIdentifier::decode(identifier);
  if (!id.ok()) return id.status();
  auto stored = store_->fetch_token(id->sequence_number);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return std::optional<Entry>();
  StoredToken& token = **stored;
  auto stored_id = TokenIdentifier::decode(token.identifier);
  if (!stored_id.ok() || stored_id->sequence_number != token.sequence_number) {
    return R(TokenErrc::kStoreCorrupt, "stored " + seq_name(token.sequence_number) + " does not decode");
  }
  return std::optional<Entry>(make_entry(std::move(*stored_id), std::move(token.identifier),
                                         std::move(token.password), token.renew_date));
}

Result<const SecretManager::Entry*> SecretManager::check_or_fetch_locked(
    std::string_view identifier, const std::span<const std::uint8_t>* password, TokenTime now, Use use) {
  auto found = check(identifier, password, now, use);
  if (found.ok() || !worth_fetching(found.status(), identifier, now)) return found;
  auto fetched = fetch(identifier);
  if (!fetched.ok()) return fetched.status();
  if (!fetched->has_value()) return found;
  const std::uint64_t seq = (*fetched)->token->id.sequence_number;
  {
    std::unique_lock lock(view_mu_);
    tokens_.insert_or_assign(seq, std::move(**fetched));
    touched_.insert(seq);
    removed_.erase(seq);
  }
  auto it = tokens_.find(seq);
  if (auto s = check_entry(it->second, identifier, password, now, use); !s.ok()) return s;
  return &it->second;
}

void SecretManager::forget_locked(std::uint64_t seq, TokenTime now) {
  auto it = tokens_.find(seq);
  if (it == tokens_.end()) return;
  const TokenErrc why = now > it->second.renew_date ? TokenErrc::kExpired : TokenErrc::kCancelled;
  removed_.insert_or_assign(seq, Removed{why, it->second.token->id.max_date});
  tokens_.erase(it);
}

void SecretManager::apply(const std::function<Result<TokenStoreChanges>()>& read) {
  // The read runs without write_mu_, so that issuing here does not wait for
  // it. What this server changed meanwhile is newer than what was read (a
  // change made before the read began is in it: one session reads its own
  // writes), so those tokens and a fresh roll are left as they are.
  {
    std::lock_guard write(write_mu_);
    touched_.clear();
    key_rolled_ = false;
  }
  auto changes = read();
  if (!changes.ok()) return;
  std::lock_guard write(write_mu_);
  auto fresher_here = [&](std::uint64_t seq) { return touched_.contains(seq); };
  const TokenTime now = options_.clock->now();
  auto decode = [](StoredToken& stored) -> std::optional<Entry> {
    auto id = TokenIdentifier::decode(stored.identifier);
    if (!id.ok() || id->sequence_number != stored.sequence_number) return std::nullopt;
    return make_entry(std::move(*id), std::move(stored.identifier), std::move(stored.password),
                      stored.renew_date);
  };
  std::unique_lock lock(view_mu_);
  if (changes->reset) {
    auto old_keys = std::move(keys_);
    keys_.clear();
    for (auto& key : changes->reset->keys) keys_.insert_or_assign(key.id, std::move(key));
    if (key_rolled_) keys_.merge(old_keys);
    std::unordered_map<std::uint64_t, Entry> tokens;
    for (auto& stored : changes->reset->tokens) {
      if (auto entry = decode(stored)) tokens.insert_or_assign(stored.sequence_number, std::move(*entry));
    }
    std::vector<std::uint64_t> gone;
    for (auto& [seq, entry] : tokens_) {
      if (fresher_here(seq)) {
        tokens.insert_or_assign(seq, std::move(entry));
      } else if (!tokens.contains(seq)) {
        gone.push_back(seq);
      }
    }
    for (auto seq : gone) forget_locked(seq, now);
    for (auto seq : touched_) {
      if (removed_.contains(seq)) tokens.erase(seq);
    }
    tokens_ = std::move(tokens);
  }
  if (changes->all_keys && !key_rolled_) {
    std::erase_if(keys_, [&](const auto& kv) {
      return std::none_of(changes->keys_put.begin(), changes->keys_put.end(),
                          [&](const MasterKey& k) { return k.id == kv.first; });
    });
  }
  for (auto& key : changes->keys_put) keys_.insert_or_assign(key.id, std::move(key));
  for (auto id : changes->keys_removed) keys_.erase(id);
  // Keys are rolled (made current) in id order: the highest is current.
  current_key_ = keys_.empty() ? 0 : keys_.rbegin()->first;
  for (auto& stored : changes->tokens_put) {
    const std::uint64_t seq = stored.sequence_number;
    if (fresher_here(seq)) continue;
    if (auto entry = decode(stored)) {
      tokens_.insert_or_assign(seq, std::move(*entry));
      removed_.erase(seq);
    }
  }
  for (auto seq : changes->tokens_removed) {
    if (!fresher_here(seq)) forget_locked(seq, now);
  }
}

Result<std::shared_ptr<const IssuedToken>> SecretManager::find(
    std::string_view identifier, const std::span<const std::uint8_t>* password) const {
  const TokenTime now = options_.clock->now();
  if (shared_ && !store_->fresh()) {
    return Status(TokenErrc::kStoreUnavailable,
                  "this server's view of the shared token store may be stale "
                  "(cut off from it, or unable to read its changes)");
  }
  Status refusal;
  {
    std::shared_lock lock(view_mu_);
    // Without a password to check: when the bytes equal a token's in the
    // view, decoding them would give that token's identifier, so check()
    // would pass exactly when this does; anything else takes check() for
    // its error.
    const auto seq = password == nullptr ? TokenIdentifier::peek_sequence_number(identifier)
                                         : std::nullopt;
    if (seq) {
      if (auto it = tokens_.find(*seq); it != tokens_.end()) {
        const Entry& entry = it->second;
        if (entry.token->identifier == identifier && entry.token->id.kind == options_.kind &&
            keys_.contains(entry.token->id.master_key_id) && now <= entry.renew_date) {
          return entry.token;
        }
      }
    }
    auto entry = check(identifier, password, now, Use::kVerify);
    if (entry.ok()) return (*entry)->token;
    refusal = entry.status();
  }
  if (!worth_fetching(refusal, identifier, now)) return refusal;
  auto fetched = fetch(identifier);
  if (!fetched.ok()) return fetched.status();
  if (!fetched->has_value()) return refusal;
  if (auto s = check_entry(**fetched, identifier, password, now, Use::kVerify); !s.ok()) return s;
  return (*fetched)->token;
}

Result<TokenIdentifier> SecretManager::verify(std::string_view identifier,
                                              std::span<const std::uint8_t> password) const {
  auto token = find(identifier, &password);
  if (!token.ok()) return token.status();
  return (*token)->id;
}

Result<std::shared_ptr<const IssuedToken>> SecretManager::retrieve(std::string_view identifier) const {
  return find(identifier, nullptr);
}

Result<TokenSecret> SecretManager::retrieve_password(std::string_view identifier) const {
  auto token = retrieve(identifier);
  if (!token.ok()) return token.status();
  return TokenSecret{(*token)->id, (*token)->password};
}

bool SecretManager::roll_due(TokenTime now) const {
  if (current_key_ == 0) return true;
  auto it = keys_.find(current_key_);
  return it == keys_.end() || now >= it->second.created + options_.key_roll_interval;
}

Status SecretManager::roll_locked(TokenTime now) {
  auto id = store_->allocate_master_key_id();
  if (!id.ok()) return id.status();
  MasterKey key;
  key.id = *id;
  key.created = now;
  // An upper bound until the key retires: no token made with it can outlive
  // its last day of signing plus the max lifetime.
  key.expires = now + options_.key_roll_interval + options_.max_lifetime;
  key.secret = SecretBytes::random(kMasterKeyBytes);
  if (key.secret.empty()) return Status(TokenErrc::kIoError, "the CSPRNG failed to make a master key");
  auto rolled = store_->roll_master_key(current_key_, key);
  if (!rolled.ok()) return rolled.status();
  if (rolled->id != key.id) {
    // Another server rolled first (shared store): its key is current.
    std::unique_lock lock(view_mu_);
    current_key_ = std::max(current_key_, rolled->id);
    keys_.insert_or_assign(rolled->id, std::move(*rolled));
    return {};
  }

  const std::uint32_t old_id = current_key_;
  {
    std::unique_lock lock(view_mu_);
    keys_.insert_or_assign(key.id, key);
    current_key_ = key.id;
    key_rolled_ = true;
  }
  auto old = keys_.find(old_id);
  // With a shared store this view may not hold every token of the old key
  // (other servers' latest ones arrive by watch): keep the upper bound.
  if (old == keys_.end() || shared_) return {};
  // The retired key signs nothing new: it is needed until the last max date
  // of its tokens. If storing that fails, the key keeps its (later) bound.
  TokenTime last = now;
  for (const auto& [seq, entry] : tokens_) {
    if (entry.token->id.master_key_id == old_id) last = std::max(last, entry.token->id.max_date);
  }
  MasterKey retired = old->second;
  retired.expires = std::min(retired.expires, last);
  if (store_->put_master_key(retired).ok()) {
    std::unique_lock lock(view_mu_);
    old->second.expires = retired.expires;
  }
  return {};
}

Status SecretManager::roll_master_key() {
  std::lock_guard write(write_mu_);
  return roll_locked(options_.clock->now());
}

Result<Token> SecretManager::issue(const TokenRequest& request) {
  using R = Result<Token>;
  if (request.owner.empty()) return R(TokenErrc::kInvalidArgument, "a token needs an owner");
  if (request.service.size() > TokenIdentifier::kMaxFieldBytes) {
    return R(TokenErrc::kInvalidArgument, "token service over-long");
  }
  std::lock_guard write(write_mu_);
  const TokenTime now = options_.clock->now();
  if (roll_due(now)) {
    if (auto s = roll_locked(now); !s.ok()) return s;
  }
  const MasterKey& key = keys_.at(current_key_);

  TokenIdentifier id;
  id.kind = options_.kind;
  id.owner = request.owner;
  id.renewer = request.renewer;
  id.real_user = request.real_user;
  id.issue_date = now;
  id.max_date = now + options_.max_lifetime;
  id.master_key_id = key.id;
  // Validate before using up a sequence number.
  if (auto probe = id.encode(); !probe.ok()) return probe.status();
  auto seq = store_->allocate_sequence_number();
  if (!seq.ok()) return seq.status();
  id.sequence_number = *seq;
  auto bytes = id.encode();
  if (!bytes.ok()) return bytes.status();

  StoredToken stored;
  stored.sequence_number = id.sequence_number;
  stored.identifier = *bytes;
  stored.password = token_password(key.secret, *bytes);
  stored.renew_date = std::min(id.max_date, now + options_.renew_interval);
  if (stored.password.empty()) return R(TokenErrc::kIoError, "HMAC-SHA256 failed");
  if (auto s = store_->add_token(stored); !s.ok()) return s;

  Token token;
  token.identifier = *bytes;
  token.password = stored.password;
  token.kind = options_.kind;
  token.service = request.service;
  {
    std::unique_lock lock(view_mu_);
    touched_.insert(id.sequence_number);
    tokens_.insert_or_assign(id.sequence_number,
                             make_entry(std::move(id), std::move(stored.identifier),
                                        std::move(stored.password), stored.renew_date));
  }
  return token;
}

Result<TokenTime> SecretManager::renew(const Token& token, std::string_view caller) {
  using R = Result<TokenTime>;
  std::lock_guard write(write_mu_);
  const TokenTime now = options_.clock->now();
  auto password = token.password.span();
  auto found = check_or_fetch_locked(token.identifier, &password, now, Use::kRenew);
  if (!found.ok()) return found.status();
  const Entry& entry = **found;
  const std::uint64_t seq = entry.token->id.sequence_number;
  if (entry.token->id.renewer.empty() || caller != entry.token->id.renewer) {
    return R(TokenErrc::kPermissionDenied,
             "'" + std::string(caller) + "' may not renew " + seq_name(seq) + " (renewer: " +
                 (entry.token->id.renewer.empty() ? std::string("none") : "'" + entry.token->id.renewer + "'") + ")");
  }
  const TokenTime renew_date = std::min(entry.token->id.max_date, now + options_.renew_interval);
  if (auto s = store_->update_token(seq, renew_date); !s.ok()) return s;
  {
    std::unique_lock lock(view_mu_);
    tokens_.at(seq).renew_date = renew_date;
    touched_.insert(seq);
  }
  return renew_date;
}

Status SecretManager::cancel(const Token& token, std::string_view caller) {
  std::lock_guard write(write_mu_);
  const TokenTime now = options_.clock->now();
  auto password = token.password.span();
  auto found = check_or_fetch_locked(token.identifier, &password, now, Use::kCancel);
  if (!found.ok()) return found.status();
  const Entry& entry = **found;
  const std::uint64_t seq = entry.token->id.sequence_number;
  const bool allowed =
      !caller.empty() && (caller == entry.token->id.owner || (!entry.token->id.renewer.empty() && caller == entry.token->id.renewer));
  if (!allowed) {
    return Status(TokenErrc::kPermissionDenied, "'" + std::string(caller) + "' may not cancel " +
                                                         seq_name(seq) + " (only its owner or renewer)");
  }
  const TokenTime max_date = entry.token->id.max_date;
  const std::uint64_t seqs[] = {seq};
  if (auto s = store_->remove_tokens(seqs); !s.ok()) return s;
  std::unique_lock lock(view_mu_);
  tokens_.erase(seq);
  touched_.insert(seq);
  removed_.insert_or_assign(seq, Removed{TokenErrc::kCancelled, max_date});
  return {};
}

Result<SweepResult> SecretManager::sweep() {
  std::lock_guard write(write_mu_);
  const TokenTime now = options_.clock->now();
  SweepResult result;
  // With a shared store one server per interval sweeps; the others learn
  // of the removals from the store.
  auto claimed = store_->claim_sweep(now);
  if (!claimed.ok()) return claimed.status();

  std::vector<std::uint64_t> expired;
  for (const auto& [seq, entry] : tokens_) {
    if (*claimed && now > entry.renew_date) expired.push_back(seq);
  }
  if (!expired.empty()) {
    if (auto s = store_->remove_tokens(expired); !s.ok()) return s;
  }
  {
    std::unique_lock lock(view_mu_);
    std::erase_if(removed_, [&](const auto& kv) { return now > kv.second.max_date; });
    for (auto seq : expired) {
      auto it = tokens_.find(seq);
      if (it->second.token->id.max_date >= now) removed_.insert_or_assign(seq, Removed{TokenErrc::kExpired, it->second.token->id.max_date});
      tokens_.erase(it);
    }
  }
  result.tokens_removed = expired.size();

  std::vector<std::uint32_t> dropped;
  for (const auto& [id, key] : keys_) {
    if (*claimed && id != current_key_ && now > key.expires) dropped.push_back(id);
  }
  for (auto id : dropped) {
    if (auto s = store_->remove_master_key(id); !s.ok()) return s;
    std::unique_lock lock(view_mu_);
    keys_.erase(id);
    ++result.keys_removed;
  }

  if (roll_due(now)) {
    if (auto s = roll_locked(now); !s.ok()) return s;
    result.key_rolled = true;
  }
  return result;
}

std::vector<MasterKeyInfo> SecretManager::master_keys() const {
  std::shared_lock lock(view_mu_);
  std::vector<MasterKeyInfo> out;
  for (const auto& [id, key] : keys_) out.push_back({id, key.created, key.expires, id == current_key_});
  return out;
}

std::size_t SecretManager::token_count() const {
  std::shared_lock lock(view_mu_);
  return tokens_.size();
}

}  // namespace authrpc::security
