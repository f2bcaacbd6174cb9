#include "authrpc/security/memory_token_store.h"

#include <algorithm>
#include <limits>

namespace authrpc::security {

Result<TokenStoreState> MemoryTokenStore::load() {
  std::lock_guard lock(mu_);
  TokenStoreState state;
  state.last_sequence_number = last_sequence_number_;
  state.last_master_key_id = last_master_key_id_;
  state.keys.reserve(keys_.size());
  for (const auto& [id, key] : keys_) state.keys.push_back(key);
  state.tokens.reserve(tokens_.size());
  for (const auto& [seq, token] : tokens_) state.tokens.push_back(token);
  return state;
}

Result<std::uint64_t> MemoryTokenStore::allocate_sequence_number() {
  std::lock_guard lock(mu_);
  if (last_sequence_number_ == std::numeric_limits<std::uint64_t>::max()) {
    return Result<std::uint64_t>(TokenErrc::kInvalidArgument, "sequence numbers exhausted");
  }
  return ++last_sequence_number_;
}

Result<std::uint32_t> MemoryTokenStore::allocate_master_key_id() {
  std::lock_guard lock(mu_);
  if (last_master_key_id_ == std::numeric_limits<std::uint32_t>::max()) {
    return Result<std::uint32_t>(TokenErrc::kInvalidArgument, "master key ids exhausted");
  }
  return ++last_master_key_id_;
}

Status MemoryTokenStore::put_master_key(const MasterKey& key) {
  std::lock_guard lock(mu_);
  keys_.insert_or_assign(key.id, key);
  last_master_key_id_ = std::max(last_master_key_id_, key.id);
  return {};
}

Status MemoryTokenStore::remove_master_key(std::uint32_t id) {
  std::lock_guard lock(mu_);
  keys_.erase(id);
  return {};
}

Status MemoryTokenStore::add_token(const StoredToken& token) {
  std::lock_guard lock(mu_);
  if (!tokens_.try_emplace(token.sequence_number, token).second) {
    return Status(TokenErrc::kInvalidArgument,
                       "token " + std::to_string(token.sequence_number) + " is stored already");
  }
  last_sequence_number_ = std::max(last_sequence_number_, token.sequence_number);
  return {};
}

Status MemoryTokenStore::update_token(std::uint64_t sequence_number, TokenTime renew_date) {
  std::lock_guard lock(mu_);
  auto it = tokens_.find(sequence_number);
  if (it == tokens_.end()) {
    return Status(TokenErrc::kUnknownToken,
                       "token " + std::to_string(sequence_number) + " is not stored");
  }
  it->second.renew_date = renew_date;
  return {};
}

Status MemoryTokenStore::remove_tokens(std::span<const std::uint64_t> sequence_numbers) {
  std::lock_guard lock(mu_);
  for (auto seq : sequence_numbers) tokens_.erase(seq);
  return {};
}

bool MemoryTokenStore::has_token(std::uint64_t sequence_number) const {
  std::lock_guard lock(mu_);
  return tokens_.contains(sequence_number);
}

void MemoryTokenStore::raise_counters(std::uint64_t sequence_number, std::uint32_t master_key_id) {
  std::lock_guard lock(mu_);
  last_sequence_number_ = std::max(last_sequence_number_, sequence_number);
  last_master_key_id_ = std::max(last_master_key_id_, master_key_id);
}

std::size_t MemoryTokenStore::token_count() const {
  std::lock_guard lock(mu_);
  return tokens_.size();
}

}  // namespace authrpc::security
