#include "authrpc/security/timed_token_store.h"

#include <chrono>
#include <utility>

namespace authrpc::security {

std::string_view TimedTokenStore::operation_name(Operation op) noexcept {
  switch (op) {
    case Operation::kLoad: return "load";
    case Operation::kAllocateSequenceNumber: return "allocate_sequence_number";
    case Operation::kAllocateMasterKeyId: return "allocate_master_key_id";
    case Operation::kPutMasterKey: return "put_master_key";
    case Operation::kRemoveMasterKey: return "remove_master_key";
    case Operation::kAddToken: return "add_token";
    case Operation::kUpdateToken: return "update_token";
    case Operation::kRemoveTokens: return "remove_tokens";
    case Operation::kRollMasterKey: return "roll_master_key";
    case Operation::kClaimSweep: return "claim_sweep";
    case Operation::kFetchToken: return "fetch_token";
    case Operation::kFetchMasterKey: return "fetch_master_key";
  }
  return "unknown";
}

TimedTokenStore::TimedTokenStore(std::shared_ptr<TokenStore> store, std::string_view store_kind,
                                 MetricsRegistry& metrics)
    : store_(std::move(store)) {
  for (std::size_t i = 0; i < kOperations; ++i) {
    seconds_[i] = &metrics.histogram(
        kTokenStoreOperationSeconds, "Duration of delegation-token store operations",
        {{"store", std::string(store_kind)},
         {"operation", std::string(operation_name(static_cast<Operation>(i)))}});
  }
}

template <typename F>
auto TimedTokenStore::timed(Operation op, F&& call) {
  const auto start = std::chrono::steady_clock::now();
  auto result = std::forward<F>(call)();
  seconds_[static_cast<std::size_t>(op)]->observe(std::chrono::steady_clock::now() - start);
  return result;
}

Result<TokenStoreState> TimedTokenStore::load() {
  return timed(Operation::kLoad, [&] { return store_->load(); });
}

Result<std::uint64_t> TimedTokenStore::allocate_sequence_number() {
  return timed(Operation::kAllocateSequenceNumber, [&] { return store_->allocate_sequence_number(); });
}

Result<std::uint32_t> TimedTokenStore::allocate_master_key_id() {
  return timed(Operation::kAllocateMasterKeyId, [&] { return store_->allocate_master_key_id(); });
}

Status TimedTokenStore::put_master_key(const MasterKey& key) {
  return timed(Operation::kPutMasterKey, [&] { return store_->put_master_key(key); });
}

Status TimedTokenStore::remove_master_key(std::uint32_t id) {
  return timed(Operation::kRemoveMasterKey, [&] { return store_->remove_master_key(id); });
}

Status TimedTokenStore::add_token(const StoredToken& token) {
  return timed(Operation::kAddToken, [&] { return store_->add_token(token); });
}

Status TimedTokenStore::update_token(std::uint64_t sequence_number, TokenTime renew_date) {
  return timed(Operation::kUpdateToken, [&] { return store_->update_token(sequence_number, renew_date); });
}

Status TimedTokenStore::remove_tokens(std::span<const std::uint64_t> sequence_numbers) {
  return timed(Operation::kRemoveTokens, [&] { return store_->remove_tokens(sequence_numbers); });
}

bool TimedTokenStore::shared() const noexcept { return store_->shared(); }

Result<MasterKey> TimedTokenStore::roll_master_key(std::uint32_t replaces, const MasterKey& key) {
  return timed(Operation::kRollMasterKey, [&] { return store_->roll_master_key(replaces, key); });
}

Result<bool> TimedTokenStore::claim_sweep(TokenTime now) {
  return timed(Operation::kClaimSweep, [&] { return store_->claim_sweep(now); });
}

Result<std::optional<StoredToken>> TimedTokenStore::fetch_token(std::uint64_t sequence_number) {
  return timed(Operation::kFetchToken, [&] { return store_->fetch_token(sequence_number); });
}

Result<std::optional<MasterKey>> TimedTokenStore::fetch_master_key(std::uint32_t id) {
  return timed(Operation::kFetchMasterKey, [&] { return store_->fetch_master_key(id); });
}

bool TimedTokenStore::fresh() const noexcept { return store_->fresh(); }

void TimedTokenStore::set_observer(TokenStoreObserver* observer) { store_->set_observer(observer); }

}  // namespace authrpc::security
