// FileTokenStore: the embedded durable TokenStore, one directory per server.
//
//   LOCK        flock()ed while open: a second open (any process) is refused
//   snapshot    the whole state as of generation G (absent before the first
//               compaction: generation 0)
//   journal.G   records appended since that snapshot, each fsync'd before
//               the call that wrote it returns
//
// Records carry a checked length and a truncated SHA-256 digest, both over a
// random per-file salt. At open the snapshot is read, then the journal is
// replayed: a damaged last record is a torn append (never acknowledged) and
// is truncated away; a damaged record with anything after it is reported as
// kStoreCorrupt, never skipped. Compaction writes snapshot.tmp, fsyncs it,
// creates journal.G+1, renames snapshot.tmp over snapshot and fsyncs the
// directory; a crash at any point leaves either the old or the new pair.
// Files are created mode 0600, the directory 0700; existing ones with looser
// modes are tightened at open (Recovery::tightened) or, if this process does
// not own them, refused. docs/TOKENS.md has the
// byte layout and the recovery rules.
//
// Every mutation blocks on fdatasync (milliseconds on a disk): call it from
// the secret manager on a blocking thread, never on an IO thread. Thread-safe;
// calls are serialised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/token_store.h"

namespace authrpc::security {

struct FileTokenStoreOptions {
  // Compact once the journal is larger than this and larger than the last
  // snapshot (so that compaction costs stay proportional to the state).
  std::size_t compact_after_bytes = std::size_t{1} << 20;
};

class FileTokenStore final : public TokenStore {
 public:
  static constexpr const char* kLockFile = "LOCK";
  static constexpr const char* kSnapshotFile = "snapshot";
  static constexpr const char* kJournalPrefix = "journal.";

  // What open() found.
  struct Recovery {
    std::uint64_t generation = 0;
    std::size_t snapshot_records = 0;
    std::size_t journal_records = 0;
    std::size_t dropped_tail_bytes = 0;  // a torn last record, truncated away
    std::size_t stale_files_removed = 0;  // left over by an interrupted compaction
    // The format the files were in: 1 is rewritten as 2 at open (`migrated`
    // unless that compaction failed; the store then keeps appending 1).
    std::uint32_t format_version = 2;
    bool migrated = false;
    // Paths open() made private (0700/0600), with the looser mode they had.
    std::vector<std::pair<std::string, std::uint32_t>> tightened;
  };
  struct Stats {
    std::uint64_t generation = 0;
    std::size_t journal_bytes = 0;
    std::size_t snapshot_bytes = 0;
    std::uint64_t compactions = 0;
    std::uint64_t compaction_failures = 0;  // the mutation itself was durable
  };

  // Creates dir (one level) if missing. kStoreLocked if it is open elsewhere,
  // kStoreCorrupt if its files fail their checks, kIoError for system errors.
  static Result<std::unique_ptr<FileTokenStore>> open(const std::string& dir,
                                                           FileTokenStoreOptions options = {});
  ~FileTokenStore() override;
  FileTokenStore(const FileTokenStore&) = delete;
  FileTokenStore& operator=(const FileTokenStore&) = delete;

  Result<TokenStoreState> load() override;
  Result<std::uint64_t> allocate_sequence_number() override;
  Result<std::uint32_t> allocate_master_key_id() override;
  Status put_master_key(const MasterKey& key) override;
  Status remove_master_key(std::uint32_t id) override;
  Status add_token(const StoredToken& token) override;
  Status update_token(std::uint64_t sequence_number, TokenTime renew_date) override;
  Status remove_tokens(std::span<const std::uint64_t> sequence_numbers) override;

  // Writes a snapshot of the current state and starts an empty journal.
  Status compact();

  const Recovery& recovery() const noexcept { return recovery_; }
  Stats stats() const;
  const std::string& dir() const noexcept { return dir_; }
  // The journal now being appended to.
  std::string journal_path() const;

 private:
  FileTokenStore(std::string dir, FileTokenStoreOptions options);
  Status recover();
  Status read_snapshot(bool* found);
  Status open_journal();
  // open_journal()'s steps.
  Status open_journal_file(const std::string& file, const std::string& name);
  Status restart_journal(std::string_view data, const std::string& name);
  Status replay_journal(std::string_view data, std::size_t p, const std::string& name);
  Status cut_torn_tail(std::size_t p, const std::string& name);
  Status append(std::string* body);  // wipes *body
  // A change: its record appended, then `apply` (the change made to
  // mirror_), then a compaction if the journal has grown past
  // compact_after_bytes (one that fails leaves the journal as it is).
  Status journal_locked(std::string* body, const std::function<void()>& apply);
  Status compact_locked();
  // Compacts once the journal has outgrown compact_after_bytes and the last
  // snapshot: after a whole change, never between its records.
  void compact_if_due_locked();
  // compact_locked()'s steps, after the snapshot's image is made.
  Status write_generation(std::string_view image, std::uint64_t generation,
                          std::string_view journal_salt, int* journal_fd);
  void switch_generation(int journal_fd, std::uint64_t generation, std::string journal_salt,
                         std::size_t snapshot_bytes);
  Status broken_status() const;
  Status tighten(int fd, unsigned mode, const std::string& name);

  const std::string dir_;
  const FileTokenStoreOptions options_;
  mutable std::mutex mu_;
  MemoryTokenStore mirror_;
  int dir_fd_ = -1;
  int lock_fd_ = -1;
  int journal_fd_ = -1;
  std::uint64_t generation_ = 0;
  std::string salt_;  // the journal's (docs/TOKENS.md §5); empty in format version 1
  std::size_t journal_bytes_ = 0;
  std::size_t snapshot_bytes_ = 0;
  std::uint64_t compactions_ = 0;
  std::uint64_t compaction_failures_ = 0;
  bool broken_ = false;  // a failed write could not be undone: refuse further writes
  Recovery recovery_;
};

}  // namespace authrpc::security
