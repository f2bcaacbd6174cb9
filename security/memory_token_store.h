// MemoryTokenStore: a TokenStore that keeps everything in this process and
// loses it on exit — for tests and for servers whose tokens need not survive
// a restart. FileTokenStore uses one as its in-memory mirror. Thread-safe.
#pragma once

#include <map>
#include <mutex>

#include "authrpc/security/token_store.h"

namespace authrpc::security {

class MemoryTokenStore final : public TokenStore {
 public:
  Result<TokenStoreState> load() override;
  Result<std::uint64_t> allocate_sequence_number() override;
  Result<std::uint32_t> allocate_master_key_id() override;
  Status put_master_key(const MasterKey& key) override;
  Status remove_master_key(std::uint32_t id) override;
  Status add_token(const StoredToken& token) override;
  Status update_token(std::uint64_t sequence_number, TokenTime renew_date) override;
  Status remove_tokens(std::span<const std::uint64_t> sequence_numbers) override;

  // For stores that mirror their state here.
  bool has_token(std::uint64_t sequence_number) const;
  // Raises the counters to at least these values.
  void raise_counters(std::uint64_t sequence_number, std::uint32_t master_key_id);
  std::size_t token_count() const;

 private:
  mutable std::mutex mu_;
  std::uint64_t last_sequence_number_ = 0;
  std::uint32_t last_master_key_id_ = 0;
  std::map<std::uint32_t, MasterKey> keys_;
  std::map<std::uint64_t, StoredToken> tokens_;
};

}  // namespace authrpc::security
