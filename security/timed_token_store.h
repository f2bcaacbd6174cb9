// TimedTokenStore: a TokenStore that forwards every call to another store
// and observes how long each one took in the histogram
// authrpc_token_store_operation_seconds{store, operation} (docs/CONFIG.md,
// "tokens"; docs/OPERATIONS.md). A store's calls fsync or go over the
// network (ZooKeeper), and they run on the token service's callers' and the
// sweeper's threads: their latency is what an operator looks at when
// token.get slows down.
//
// TokenService wraps the store it opens; the SecretManager, the only caller,
// sees no difference. The histogram children are resolved in the
// constructor, so a call costs two clock reads and a relaxed add or two.
// shared(), fresh() and set_observer() are forwarded untimed (no I/O).
// Thread-safe if the wrapped store is.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "authrpc/base/metrics.h"
#include "authrpc/security/token_store.h"

namespace authrpc::security {

inline constexpr std::string_view kTokenStoreOperationSeconds = "authrpc_token_store_operation_seconds";

class TimedTokenStore final : public TokenStore {
 public:
  // `store_kind` is the `store` label: "file", "memory", "zookeeper" (a
  // fixed name, never a path or address). `store` and `metrics` must not be
  // null.
  TimedTokenStore(std::shared_ptr<TokenStore> store, std::string_view store_kind,
                  MetricsRegistry& metrics);

  Result<TokenStoreState> load() override;
  Result<std::uint64_t> allocate_sequence_number() override;
  Result<std::uint32_t> allocate_master_key_id() override;
  Status put_master_key(const MasterKey& key) override;
  Status remove_master_key(std::uint32_t id) override;
  Status add_token(const StoredToken& token) override;
  Status update_token(std::uint64_t sequence_number, TokenTime renew_date) override;
  Status remove_tokens(std::span<const std::uint64_t> sequence_numbers) override;
  bool shared() const noexcept override;
  Result<MasterKey> roll_master_key(std::uint32_t replaces, const MasterKey& key) override;
  Result<bool> claim_sweep(TokenTime now) override;
  Result<std::optional<StoredToken>> fetch_token(std::uint64_t sequence_number) override;
  Result<std::optional<MasterKey>> fetch_master_key(std::uint32_t id) override;
  bool fresh() const noexcept override;
  void set_observer(TokenStoreObserver* observer) override;

  // The `operation` label values, in the order of Operation.
  enum class Operation {
    kLoad, kAllocateSequenceNumber, kAllocateMasterKeyId, kPutMasterKey, kRemoveMasterKey,
    kAddToken, kUpdateToken, kRemoveTokens, kRollMasterKey, kClaimSweep, kFetchToken,
    kFetchMasterKey,
  };
  static constexpr std::size_t kOperations = 12;
  static std::string_view operation_name(Operation op) noexcept;

 private:
  template <typename F>
  auto timed(Operation op, F&& call);

  const std::shared_ptr<TokenStore> store_;
  std::array<Histogram*, kOperations> seconds_{};
};

}  // namespace authrpc::security
