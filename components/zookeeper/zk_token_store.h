// ZkTokenStore: a TokenStore in ZooKeeper, shared by a fleet of servers
// (after Hadoop's ZKDelegationTokenSecretManager). Layout under `root`, one
// root per service (docs/ZOOKEEPER.md has the record formats):
//
//   root/seq           last reserved sequence number (decimal); each server
//                      reserves a batch with a version-checked set
//   root/keyid         last allocated master key id (decimal, version-checked)
//   root/current-key   id of the current master key; a roll creates the key
//                      node and bumps this in one zoo_multi, version-checked,
//                      so exactly one server wins each roll
//   root/sweep         when the last sweep was claimed (ms since the epoch)
//   root/keys/<id>     one master key per node
//   root/tokens/<seq>  one token per node (a single create: never half-written)
//
// Every mutation returns after ZooKeeper committed it. A watch thread keeps
// child watches on keys/ and tokens/ and a data watch on every token, re-arms
// them as they fire, reads what changed and hands it to the observer (the
// SecretManager's view). When ZooKeeper expires the session the thread opens
// a new one and hands over the whole state again; while cut off for longer
// than stale_after, or failing to read what changed for that long (a round
// is applied whole or not at all, and tried again), fresh() is false.
//
// With a digest credential every node below root is created creator-only
// (ZOO_CREATOR_ALL_ACL): only sessions with the same credential read keys and
// token passwords. Debian's C client has no SASL or TLS: the credential
// crosses the network in clear, so keep the ensemble on a trusted network.
//
// Thread-safe; calls are serialised and block on ZooKeeper round trips.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "authrpc/components/zookeeper/zk_session.h"
#include "authrpc/security/secret_bytes.h"
#include "authrpc/security/token_store.h"

namespace authrpc::security {

struct ZkTokenStoreOptions {
  std::string connect;                  // "host:port[,host:port...]"
  std::string root = "/authrpc/tokens";  // one per service
  SecretBytes digest;                   // "user:password"; empty: open ACLs
  std::chrono::milliseconds session_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};  // one attempt
  // How long open() keeps retrying while ZooKeeper is unreachable; 0: one
  // attempt, then a clear kStoreUnavailable.
  std::chrono::milliseconds start_timeout{0};
  // Sequence numbers reserved per round trip to root/seq.
  std::uint32_t sequence_batch = 100;
  // One server per interval wins claim_sweep().
  std::chrono::milliseconds sweep_interval{std::chrono::minutes(1)};
  // Cut off from ZooKeeper, or failing to read what changed, for longer than
  // this, the view is stale; 0: the session timeout (after which ZooKeeper
  // expires the session anyway).
  std::chrono::milliseconds stale_after{0};
};

class ZkTokenStore final : public TokenStore {
 public:
  struct Stats {
    std::uint64_t sessions = 0;              // established, the first included
    std::uint64_t sequence_reservations = 0;  // round trips to root/seq
    std::uint64_t fetches = 0;               // sync + read after a local miss
    std::uint64_t events = 0;                // watch events handled
    std::uint64_t retries = 0;               // watch rounds (reads, rebuilds) that failed, tried again
  };

  // Connects (retrying up to start_timeout), authenticates and creates the
  // layout under root if missing. Validates the root path.
  static Result<std::unique_ptr<ZkTokenStore>> open(ZkTokenStoreOptions options);
  ~ZkTokenStore() override;
  ZkTokenStore(const ZkTokenStore&) = delete;
  ZkTokenStore& operator=(const ZkTokenStore&) = delete;

  // Everything, read afresh; the watches' bookkeeping restarts from it, so
  // it is for the observer's own start (SecretManager::open), whose view
  // the next rounds then change.
  Result<TokenStoreState> load() override;
  Result<std::uint64_t> allocate_sequence_number() override;
  Result<std::uint32_t> allocate_master_key_id() override;
  Status put_master_key(const MasterKey& key) override;
  Status remove_master_key(std::uint32_t id) override;
  Status add_token(const StoredToken& token) override;
  Status update_token(std::uint64_t sequence_number, TokenTime renew_date) override;
  Status remove_tokens(std::span<const std::uint64_t> sequence_numbers) override;

  bool shared() const noexcept override { return true; }
  Result<MasterKey> roll_master_key(std::uint32_t replaces, const MasterKey& key) override;
  Result<bool> claim_sweep(TokenTime now) override;
  Result<std::optional<StoredToken>> fetch_token(std::uint64_t sequence_number) override;
  Result<std::optional<MasterKey>> fetch_master_key(std::uint32_t id) override;
  bool fresh() const noexcept override;
  void set_observer(TokenStoreObserver* observer) override;

  Stats stats() const;
  const ZkTokenStoreOptions& options() const noexcept { return options_; }
  // Fault injection for tests: makes ZooKeeper expire this store's session
  // (ZkSession::expire_for_testing); the watch thread then rebuilds.
  Status expire_session_for_testing();

  // Record formats (docs/ZOOKEEPER.md), exposed for tests.
  static std::string encode_token(const StoredToken& token);
  static Result<StoredToken> decode_token(std::string_view data);
  static std::string encode_key(const MasterKey& key);
  static Result<MasterKey> decode_key(std::string_view data);

 private:
  explicit ZkTokenStore(ZkTokenStoreOptions options);
  Status connect_locked();
  Status unavailable_locked() const;
  // Everything; a record this code cannot decode is kStoreCorrupt, or with
  // skip_unreadable left out (a rebuild's view, as a round's).
  Result<TokenStoreState> read_all_locked(bool skip_unreadable);
  Result<std::uint64_t> bump_counter_locked(const std::string& path, std::uint64_t by);
  Result<std::optional<MasterKey>> read_key_locked(std::uint32_t id);
  Result<TokenStoreChanges> read_changes(const std::vector<ZkEvent>& events, bool* rebuild);
  // read_changes()'s steps, under watch_mu_ with a session.
  Status relist_tokens(std::set<std::uint64_t>* reads);
  Status read_tokens(const std::set<std::uint64_t>& seqs, TokenStoreChanges* changes,
                     std::vector<std::uint64_t>* now_watched);
  Status reread_keys(TokenStoreChanges* changes);
  void on_event(ZkEvent event);
  void watch_loop();
  void deliver(const std::function<Result<TokenStoreChanges>()>& read);
  std::string token_path(std::uint64_t seq) const;
  std::string key_path(std::uint32_t id) const;

  const ZkTokenStoreOptions options_;
  const std::string tokens_dir_, keys_dir_, seq_path_, keyid_path_, current_path_, sweep_path_;

  mutable std::mutex mu_;  // serialises calls; guards everything below
  std::unique_ptr<ZkSession> session_;
  std::uint64_t next_seq_ = 1, seq_block_end_ = 0;  // reserved: [next_seq_, seq_block_end_]
  Stats stats_;
  std::mutex watch_mu_;  // after mu_ if both
  // Tokens holding a data watch whose last read was handed over: to the
  // observer, to load()'s caller, or (no observer yet) to nobody, and then
  // the observer's load() lists afresh. Changes only with a whole round.
  std::set<std::uint64_t> watched_tokens_;

  // A round with no observer runs under unobserved_mu_, a round that calls
  // the observer under observer_mu_. Setting an observer waits for the
  // former (its load() then lists after anything that round marked watched),
  // clearing one for the latter (the observer outlives its last call). Two
  // locks, because SecretManager sets itself under its write lock while its
  // apply() takes that lock under observer_mu_.
  std::mutex unobserved_mu_;
  std::mutex observer_mu_;
  std::atomic<TokenStoreObserver*> observer_{nullptr};

  std::mutex events_mu_;
  std::condition_variable events_cv_;
  std::deque<ZkEvent> events_;
  bool stopping_ = false;

  // Steady-clock ms since which the session has been cut off; 0: connected.
  std::atomic<std::int64_t> cut_off_since_{0};
  // Steady-clock ms since which every watch round has failed (from the
  // start of the first); 0: the last one read whole.
  std::atomic<std::int64_t> failing_since_{0};
  std::atomic<bool> rebuilding_{false};
  std::thread watcher_;
};

}  // namespace authrpc::security
