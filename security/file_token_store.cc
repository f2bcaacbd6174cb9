#include "authrpc/security/file_token_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "authrpc/security/byte_codec.h"

namespace authrpc::security {
namespace {

// File header: magic, u32 format version, u64 generation; version 2 adds a
// random 16-byte salt that every record's checks cover (docs/TOKENS.md §5:
// a record body holds strings a client chose — a renewer — and without the
// salt such a string could be a well-formed record itself).
constexpr std::string_view kJournalMagic = "ATKJ";
constexpr std::string_view kSnapshotMagic = "ATKS";
constexpr std::uint32_t kFormatVersion1 = 1;  // read, and migrated at open
constexpr std::uint32_t kFormatVersion = 2;   // written
constexpr std::size_t kFileHeaderBytesV1 = 16;
constexpr std::size_t kSaltBytes = 16;
constexpr std::size_t kFileHeaderBytes = kFileHeaderBytesV1 + kSaltBytes;

// Record: u32 body length, 4-byte header check, body, 16-byte digest.
constexpr std::size_t kRecordHeaderBytes = 8;
constexpr std::size_t kLengthCheckBytes = 4;
constexpr std::size_t kDigestBytes = 16;
constexpr std::size_t kRecordOverhead = kRecordHeaderBytes + kDigestBytes;
constexpr std::size_t kMaxBodyBytes = std::size_t{1} << 20;
constexpr std::size_t kMaxRemovalsPerRecord = (kMaxBodyBytes - 8) / 8;

enum class RecordType : std::uint8_t {
  kCounters = 1,      // u64 last sequence number, u32 last master key id
  kPutKey = 2,        // u32 id, i64 created, i64 expires, str16 secret
  kRemoveKey = 3,     // u32 id
  kAddToken = 4,      // u64 seq, i64 renew date, str16 identifier, str16 password
  kUpdateToken = 5,   // u64 seq, i64 renew date
  kRemoveTokens = 6,  // u32 n, n x u64 seq
  kSnapshotEnd = 7,   // u64 records before it, u64 generation (snapshot only)
};

// A string whose contents are wiped when it goes out of scope (file images
// and record bodies hold keys and passwords).
struct WipedString {
  std::string s;
  WipedString() = default;
  WipedString(const WipedString&) = delete;
  WipedString& operator=(const WipedString&) = delete;
  ~WipedString() { cleanse(s.data(), s.size()); }
};

// Truncated SHA-256 of salt || data through OpenSSL (an empty salt for
// format version 1).
void digest(std::string_view salt, std::string_view data, std::size_t n, std::string* out) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, salt.data(), salt.size()) == 1 &&
                  EVP_DigestUpdate(ctx, data.data(), data.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, md, &len) == 1 && len >= n;
  EVP_MD_CTX_free(ctx);
  // Never fails with the default provider; a zero digest then fails every
  // check rather than passing one.
  if (!ok) std::memset(md, 0, sizeof md);
  out->append(reinterpret_cast<const char*>(md), n);
}

bool digest_matches(std::string_view salt, std::string_view data, std::string_view expected) {
  std::string d;
  digest(salt, data, expected.size(), &d);
  return d == expected;
}

// Appends a framed record. Reserves first: a reallocation would leave a
// copy of the body (keys, passwords) in freed memory.
void append_record(std::string* out, std::string_view salt, std::string_view body) {
  std::size_t start = out->size();
  if (out->capacity() < start + kRecordOverhead + body.size()) {
    out->reserve(start + kRecordOverhead + body.size());
  }
  ByteWriter w(out);
  w.u32(static_cast<std::uint32_t>(body.size()));
  digest(salt, std::string_view(*out).substr(start, 4), kLengthCheckBytes, out);
  out->append(body);
  digest(salt, std::string_view(*out).substr(start), kDigestBytes, out);
}

std::string new_salt() {
  std::string salt(kSaltBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(salt.data()), static_cast<int>(salt.size())) != 1) {
    // Only the defence against planted records weakens: damage is still found.
    salt.assign(kSaltBytes, '\0');
  }
  return salt;
}

std::string file_header(std::string_view magic, std::uint64_t generation, std::string_view salt) {
  std::string out(magic);
  ByteWriter w(&out);
  w.u32(kFormatVersion);
  w.u64(generation);
  w.raw(salt);
  return out;
}

// A file header: its version, generation and salt (empty for version 1).
struct FileHeader {
  std::uint32_t version = 0;
  std::uint64_t generation = 0;
  std::string_view salt;
  std::size_t size = 0;  // bytes before the first record
};

enum class HeaderCheck { kOk, kDamaged, kUnsupportedVersion };

HeaderCheck parse_file_header(std::string_view data, std::string_view magic, FileHeader* h) {
  ByteReader r(data);
  std::string_view m;
  if (!r.raw(4, &m) || m != magic || !r.u32(&h->version)) return HeaderCheck::kDamaged;
  if (h->version != kFormatVersion1 && h->version != kFormatVersion) {
    return HeaderCheck::kUnsupportedVersion;
  }
  if (!r.u64(&h->generation)) return HeaderCheck::kDamaged;
  if (h->version == kFormatVersion && !r.raw(kSaltBytes, &h->salt)) return HeaderCheck::kDamaged;
  h->size = h->version == kFormatVersion ? kFileHeaderBytes : kFileHeaderBytesV1;
  return HeaderCheck::kOk;
}

// The length in a record header at p whose check holds, or 0.
std::uint32_t intact_length_at(std::string_view data, std::string_view salt, std::size_t p) {
  if (data.size() - p < kRecordHeaderBytes) return 0;
  ByteReader r(data.substr(p, 4));
  std::uint32_t len = 0;
  r.u32(&len);
  if (len == 0 || len > kMaxBodyBytes) return 0;
  if (!digest_matches(salt, data.substr(p, 4), data.substr(p + 4, kLengthCheckBytes))) return 0;
  return len;
}

// The body of an intact record at offset p, and where the next one starts.
bool intact_record_at(std::string_view data, std::string_view salt, std::size_t p,
                      std::string_view* body, std::size_t* next) {
  if (data.size() - p < kRecordOverhead) return false;
  const std::uint32_t len = intact_length_at(data, salt, p);
  if (len == 0 || data.size() - p - kRecordOverhead < len) return false;
  std::size_t end = p + kRecordHeaderBytes + len;
  if (!digest_matches(salt, data.substr(p, end - p), data.substr(end, kDigestBytes))) return false;
  *body = data.substr(p + kRecordHeaderBytes, len);
  *next = end + kDigestBytes;
  return true;
}

// Whether any intact record starts after offset p.
bool intact_record_after(std::string_view data, std::string_view salt, std::size_t p) {
  std::string_view body;
  std::size_t next = 0;
  for (std::size_t q = p + 1; q + kRecordOverhead <= data.size(); ++q) {
    if (intact_record_at(data, salt, q, &body, &next)) return true;
  }
  return false;
}

// Makes what fd refers to private (`mode`) if it is looser, when this
// process owns it; *was gets the mode before (0 if unchanged). Someone
// else's file or directory open to others is refused: it cannot be fixed
// from here, and the store would hold keys in it.
Status make_private(int fd, mode_t mode, const std::string& name, std::uint32_t* was) {
  *was = 0;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error("stat " + name, errno);
  const mode_t current = st.st_mode & 07777;
  if (current == mode) return {};
  if (st.st_uid != ::geteuid()) {
    if ((current & 077) == 0) return {};
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(current));
    return Status(TokenErrc::kIoError,
                       name + " has mode " + text + " and belongs to uid " + std::to_string(st.st_uid) +
                           ", not to this process (uid " + std::to_string(::geteuid()) +
                           "): it cannot be made private; chown it to this user or chmod it go-rwx");
  }
  if (::fchmod(fd, mode) != 0) return io_error("chmod " + name, errno);
  // Only a looser mode is worth a report; a umask that removed owner bits
  // from a new directory is put right silently.
  if ((current & 077) != 0) *was = current;
  return {};
}

Status corrupt(std::string message) {
  return Status(TokenErrc::kStoreCorrupt, std::move(message));
}

// Applies one record body to the mirror.
// For a snapshot's end record, sets *snapshot_end and returns its fields.
Status apply(std::string_view body, MemoryTokenStore* mirror, bool* snapshot_end,
                  std::uint64_t* end_count, std::uint64_t* end_generation) {
  ByteReader r(body);
  std::uint8_t type = 0;
  r.u8(&type);
  switch (static_cast<RecordType>(type)) {
    case RecordType::kCounters: {
      std::uint64_t seq = 0;
      std::uint32_t key = 0;
      if (!r.u64(&seq) || !r.u32(&key) || !r.at_end()) break;
      mirror->raise_counters(seq, key);
      return {};
    }
    case RecordType::kPutKey: {
      MasterKey key;
      std::int64_t created = 0, expires = 0;
      std::string_view secret;
      if (!r.u32(&key.id) || !r.i64(&created) || !r.i64(&expires) || !r.str16(&secret) ||
          !r.at_end() || secret.empty()) {
        break;
      }
      key.created = TokenTime(std::chrono::milliseconds(created));
      key.expires = TokenTime(std::chrono::milliseconds(expires));
      key.secret = SecretBytes(secret);
      return mirror->put_master_key(key);
    }
    case RecordType::kRemoveKey: {
      std::uint32_t id = 0;
      if (!r.u32(&id) || !r.at_end()) break;
      return mirror->remove_master_key(id);
    }
    case RecordType::kAddToken: {
      StoredToken token;
      std::int64_t renew = 0;
      std::string_view identifier, password;
      if (!r.u64(&token.sequence_number) || !r.i64(&renew) || !r.str16(&identifier) ||
          !r.str16(&password) || !r.at_end()) {
        break;
      }
      token.renew_date = TokenTime(std::chrono::milliseconds(renew));
      token.identifier = identifier;
      token.password = SecretBytes(password);
      if (auto s = mirror->add_token(token); !s.ok()) return corrupt(s.message);
      return {};
    }
    case RecordType::kUpdateToken: {
      std::uint64_t seq = 0;
      std::int64_t renew = 0;
      if (!r.u64(&seq) || !r.i64(&renew) || !r.at_end()) break;
      if (auto s = mirror->update_token(seq, TokenTime(std::chrono::milliseconds(renew)));
          !s.ok()) {
        return corrupt("renewal of " + s.message);
      }
      return {};
    }
    case RecordType::kRemoveTokens: {
      std::uint32_t n = 0;
      if (!r.u32(&n) || r.remaining() != std::size_t{n} * 8) break;
      std::vector<std::uint64_t> seqs(n);
      for (auto& seq : seqs) r.u64(&seq);
      return mirror->remove_tokens(seqs);
    }
    case RecordType::kSnapshotEnd: {
      if (!r.u64(end_count) || !r.u64(end_generation) || !r.at_end()) break;
      *snapshot_end = true;
      return {};
    }
  }
  return corrupt("record of type " + std::to_string(type) + " and " +
                 std::to_string(body.size()) + " bytes does not parse");
}

std::string counters_body(std::uint64_t seq, std::uint32_t key) {
  std::string body;
  ByteWriter w(&body);
  w.u8(static_cast<std::uint8_t>(RecordType::kCounters));
  w.u64(seq);
  w.u32(key);
  return body;
}

void put_key_body(const MasterKey& key, std::string* body) {
  ByteWriter w(body);
  w.u8(static_cast<std::uint8_t>(RecordType::kPutKey));
  w.u32(key.id);
  w.i64(key.created.time_since_epoch().count());
  w.i64(key.expires.time_since_epoch().count());
  w.str16(key.secret.view());
}

void add_token_body(const StoredToken& token, std::string* body) {
  ByteWriter w(body);
  w.u8(static_cast<std::uint8_t>(RecordType::kAddToken));
  w.u64(token.sequence_number);
  w.i64(token.renew_date.time_since_epoch().count());
  w.str16(token.identifier);
  w.str16(token.password.view());
}

Status write_all(int fd, std::string_view data, off_t offset, const std::string& name) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("write " + name, errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
    offset += n;
  }
  return {};
}

// Reads a whole file into *out. ENOENT → *found = false.
Status read_file_at(int dir_fd, const std::string& name, bool* found, std::string* out) {
  int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *found = false;
      return {};
    }
    return io_error("open " + name, errno);
  }
  *found = true;
  // Sized up front: growing the string would leave copies of its secrets in
  // freed memory.
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out->reserve(static_cast<std::size_t>(st.st_size));
  char buf[64 * 1024];
  Status status;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      status = io_error("read " + name, errno);
      break;
    }
    if (n == 0) break;
    out->append(buf, static_cast<std::size_t>(n));
  }
  cleanse(buf, sizeof buf);
  ::close(fd);
  return status;
}

bool all_zero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

std::string journal_name(std::uint64_t generation) {
  return std::string(FileTokenStore::kJournalPrefix) + std::to_string(generation);
}

// "journal.<digits>" → its generation.
bool parse_journal_name(const char* name, std::uint64_t* generation) {
  std::string_view s(name);
  std::string_view prefix(FileTokenStore::kJournalPrefix);
  if (s.substr(0, prefix.size()) != prefix || s.size() == prefix.size() || s.size() > prefix.size() + 20) {
    return false;
  }
  std::uint64_t g = 0;
  for (char c : s.substr(prefix.size())) {
    if (c < '0' || c > '9') return false;
    g = g * 10 + static_cast<std::uint64_t>(c - '0');
  }
  *generation = g;
  return true;
}

constexpr const char* kSnapshotTemp = "snapshot.tmp";

// The snapshot of `state` for `generation`: a header, the counters, each
// key, each token, and the end record that counts them.
void snapshot_image(const TokenStoreState& state, std::uint64_t generation, std::string_view salt,
                    std::string* image) {
  std::size_t size = kFileHeaderBytes + 3 * kRecordOverhead + 64;
  for (const auto& key : state.keys) size += kRecordOverhead + 32 + key.secret.size();
  for (const auto& token : state.tokens) {
    size += kRecordOverhead + 32 + token.identifier.size() + token.password.size();
  }
  image->reserve(size);
  image->append(file_header(kSnapshotMagic, generation, salt));
  std::uint64_t records = 0;
  {
    WipedString body;
    body.s = counters_body(state.last_sequence_number, state.last_master_key_id);
    append_record(image, salt, body.s);
    ++records;
  }
  for (const auto& key : state.keys) {
    WipedString body;
    put_key_body(key, &body.s);
    append_record(image, salt, body.s);
    ++records;
  }
  for (const auto& token : state.tokens) {
    WipedString body;
    add_token_body(token, &body.s);
    append_record(image, salt, body.s);
    ++records;
  }
  std::string body;
  ByteWriter w(&body);
  w.u8(static_cast<std::uint8_t>(RecordType::kSnapshotEnd));
  w.u64(records);
  w.u64(generation);
  append_record(image, salt, body);
}

// OK if the damaged record at `p` of a journal is a torn last append, which
// was never acknowledged; corruption otherwise, which is reported, never
// skipped. Appends go one at a time and a failed one is truncated away, so
// bytes after a record's end mean it was acknowledged. When its header
// holds, its end is known: anything after it makes it corruption. When the
// header is damaged too, the end is unknown: it is corruption if an intact
// record starts anywhere after it. In version 2 that scan cannot be fooled
// by a record planted in a body (a renewer string chosen by a client):
// intact records need the file's random salt.
Status check_torn_tail(std::string_view data, std::string_view salt, std::size_t p,
                       const std::string& name) {
  if (const std::uint32_t len = intact_length_at(data, salt, p); len != 0) {
    const std::size_t end = p + kRecordOverhead + len;
    if (end < data.size()) {
      std::string_view ignored;
      std::size_t after = 0;
      return corrupt(name + ": damaged record at offset " + std::to_string(p) + " is followed by " +
                     (intact_record_at(data, salt, end, &ignored, &after)
                          ? std::string("intact records")
                          : std::to_string(data.size() - end) + " more bytes"));
    }
  } else if (intact_record_after(data, salt, p)) {
    return corrupt(name + ": damaged record at offset " + std::to_string(p) +
                   " is followed by intact records");
  }
  return {};
}

}  // namespace

FileTokenStore::FileTokenStore(std::string dir, FileTokenStoreOptions options)
    : dir_(std::move(dir)), options_(options) {}

FileTokenStore::~FileTokenStore() {
  if (journal_fd_ >= 0) ::close(journal_fd_);
  if (dir_fd_ >= 0) ::close(dir_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

Result<std::unique_ptr<FileTokenStore>> FileTokenStore::open(const std::string& dir,
                                                                   FileTokenStoreOptions options) {
  using R = Result<std::unique_ptr<FileTokenStore>>;
  if (dir.empty()) return R(TokenErrc::kInvalidArgument, "token store directory not set");
  if (::mkdir(dir.c_str(), 0700) == 0) {
    // Make the new directory entry durable.
    std::string parent = dir;
    while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
    auto slash = parent.rfind('/');
    parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : parent.substr(0, slash));
    int pfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd >= 0) {
      ::fsync(pfd);
      ::close(pfd);
    }
  } else if (errno != EEXIST) {
    return io_error("create token store directory " + dir, errno);
  }
  std::unique_ptr<FileTokenStore> store(new FileTokenStore(dir, options));
  store->dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (store->dir_fd_ < 0) return io_error("open token store directory " + dir, errno);
  // An existing directory may have been made by hand or by an older
  // release with the umask's mode: it holds the master keys.
  if (auto s = store->tighten(store->dir_fd_, 0700, "token store directory " + dir); !s.ok()) return s;
  store->lock_fd_ = ::openat(store->dir_fd_, kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (store->lock_fd_ < 0) return io_error("open " + dir + "/" + kLockFile, errno);
  if (auto s = store->tighten(store->lock_fd_, 0600, dir + "/" + kLockFile); !s.ok()) return s;
  if (::flock(store->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return R(TokenErrc::kStoreLocked, "token store " + dir + " is open in another process or object");
    }
    return io_error("lock " + dir + "/" + kLockFile, errno);
  }
  if (auto s = store->recover(); !s.ok()) return s;
  if (store->recovery_.format_version == kFormatVersion1) {
    // Rewrite a version-1 store as version 2 (salted records). If that
    // fails, it keeps working as version 1 and the next compaction retries.
    std::lock_guard lock(store->mu_);
    store->recovery_.migrated = store->compact_locked().ok();
  }
  return store;
}

Status FileTokenStore::tighten(int fd, unsigned mode, const std::string& name) {
  std::uint32_t was = 0;
  if (auto s = make_private(fd, static_cast<mode_t>(mode), name, &was); !s.ok()) return s;
  if (was != 0) recovery_.tightened.push_back({name, was});
  return {};
}

Status FileTokenStore::recover() {
  if (::unlinkat(dir_fd_, kSnapshotTemp, 0) == 0) {
    ++recovery_.stale_files_removed;
  } else if (errno != ENOENT) {
    return io_error("remove " + dir_ + "/" + kSnapshotTemp, errno);
  }
  bool have_snapshot = false;
  if (auto s = read_snapshot(&have_snapshot); !s.ok()) return s;

  // Journals of other generations are left over by a compaction that was
  // interrupted before (G+1) or after (G-1) its rename. Without a snapshot,
  // only journal.0 can be current: anything else means the snapshot is gone.
  int list_fd = ::dup(dir_fd_);
  DIR* d = list_fd < 0 ? nullptr : ::fdopendir(list_fd);
  if (d == nullptr) {
    int err = errno;
    if (list_fd >= 0) ::close(list_fd);
    return io_error("list " + dir_, err);
  }
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    std::uint64_t g = 0;
    if (!parse_journal_name(e->d_name, &g) || g == generation_) continue;
    if (!have_snapshot) {
      std::string name = e->d_name;
      ::closedir(d);
      return corrupt(dir_ + " has " + name + " but no " + kSnapshotFile);
    }
    stale.push_back(e->d_name);
  }
  ::closedir(d);
  // Only once the current journal has been read are the others removed.
  if (auto s = open_journal(); !s.ok()) return s;
  for (const auto& name : stale) {
    if (::unlinkat(dir_fd_, name.c_str(), 0) != 0) return io_error("remove " + dir_ + "/" + name, errno);
    ++recovery_.stale_files_removed;
  }
  recovery_.generation = generation_;
  return {};
}

Status FileTokenStore::read_snapshot(bool* found) {
  WipedString image;
  if (auto s = read_file_at(dir_fd_, kSnapshotFile, found, &image.s); !s.ok()) return s;
  if (!*found) {
    generation_ = 0;
    return {};
  }
  std::string_view data(image.s);
  const std::string name = dir_ + "/" + kSnapshotFile;
  FileHeader header;
  switch (parse_file_header(data, kSnapshotMagic, &header)) {
    case HeaderCheck::kOk: break;
    case HeaderCheck::kDamaged: return corrupt(name + " has no valid header");
    case HeaderCheck::kUnsupportedVersion:
      return Status(TokenErrc::kUnsupportedVersion,
                         name + " has format version " + std::to_string(header.version));
  }
  generation_ = header.generation;
  if (header.version == kFormatVersion1) recovery_.format_version = kFormatVersion1;
  {
    const int fd = ::openat(dir_fd_, kSnapshotFile, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_error("open " + name, errno);
    Status s = tighten(fd, 0600, name);
    ::close(fd);
    if (!s.ok()) return s;
  }
  // A snapshot is renamed into place only when complete: any damage is
  // corruption, and it must end with its end record.
  std::size_t p = header.size;
  std::uint64_t records = 0;
  bool ended = false;
  while (p < data.size() && !ended) {
    std::string_view body;
    std::size_t next = 0;
    if (!intact_record_at(data, header.salt, p, &body, &next)) {
      return corrupt(name + ": damaged record at offset " + std::to_string(p));
    }
    std::uint64_t count = 0, end_generation = 0;
    if (auto s = apply(body, &mirror_, &ended, &count, &end_generation); !s.ok()) {
      return corrupt(name + ": record at offset " + std::to_string(p) + ": " + s.message);
    }
    // The end record repeats the header's generation: the header is checked
    // before any journal is trusted (or removed) because of it.
    if (ended && (count != records || end_generation != generation_)) {
      return corrupt(name + ": end record (" + std::to_string(count) + " records, generation " +
                     std::to_string(end_generation) + ") does not match the file (" +
                     std::to_string(records) + " records, generation " + std::to_string(generation_) + ")");
    }
    if (!ended) ++records;
    p = next;
  }
  if (!ended || p != data.size()) return corrupt(name + " is incomplete or has trailing bytes");
  recovery_.snapshot_records = records;
  snapshot_bytes_ = data.size();
  return {};
}

Status FileTokenStore::open_journal() {
  const std::string file = journal_name(generation_);
  const std::string name = dir_ + "/" + file;
  if (auto s = open_journal_file(file, name); !s.ok()) return s;
  WipedString image;
  {
    bool found = false;
    if (auto s = read_file_at(dir_fd_, file, &found, &image.s); !s.ok()) return s;
  }
  std::string_view data(image.s);
  FileHeader header;
  const HeaderCheck check = parse_file_header(data, kJournalMagic, &header);
  if (check == HeaderCheck::kDamaged &&
      (data.size() < kFileHeaderBytes || all_zero(data.substr(0, kFileHeaderBytes)))) {
    return restart_journal(data, name);
  }
  switch (check) {
    case HeaderCheck::kOk: break;
    case HeaderCheck::kDamaged:
      return corrupt(name + " has no valid header for generation " + std::to_string(generation_));
    case HeaderCheck::kUnsupportedVersion:
      return Status(TokenErrc::kUnsupportedVersion, name + " has another format version (" +
                                                             std::to_string(header.version) + ")");
  }
  if (header.generation != generation_) {
    return corrupt(name + " has no valid header for generation " + std::to_string(generation_));
  }
  if (header.version == kFormatVersion1) recovery_.format_version = kFormatVersion1;
  salt_ = std::string(header.salt);
  return replay_journal(data, header.size, name);
}

// Opens the current journal, creating it for a new store.
Status FileTokenStore::open_journal_file(const std::string& file, const std::string& name) {
  journal_fd_ = ::openat(dir_fd_, file.c_str(), O_RDWR | O_CLOEXEC);
  if (journal_fd_ < 0) {
    if (errno != ENOENT) return io_error("open " + name, errno);
    // The current journal is created before its snapshot is renamed into
    // place, so only generation 0 may be missing (a new store).
    if (generation_ != 0) return corrupt(name + " is missing");
    journal_fd_ = ::openat(dir_fd_, file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (journal_fd_ < 0) return io_error("create " + name, errno);
  }
  return tighten(journal_fd_, 0600, name);
}

// A journal whose creation was cut short: it holds no record yet, so it
// gets a fresh header.
Status FileTokenStore::restart_journal(std::string_view data, const std::string& name) {
  if (data.size() > kFileHeaderBytes && !all_zero(data.substr(kFileHeaderBytes))) {
    return corrupt(name + " has no valid header");
  }
  salt_ = new_salt();
  const std::string fresh = file_header(kJournalMagic, generation_, salt_);
  if (::ftruncate(journal_fd_, 0) != 0) return io_error("truncate " + name, errno);
  if (auto s = write_all(journal_fd_, fresh, 0, name); !s.ok()) return s;
  if (::fsync(journal_fd_) != 0 || ::fsync(dir_fd_) != 0) return io_error("fsync " + name, errno);
  journal_bytes_ = fresh.size();
  return {};
}

// Applies the journal's records from offset `p` to the mirror, cutting off
// a torn last append.
Status FileTokenStore::replay_journal(std::string_view data, std::size_t p, const std::string& name) {
  while (p < data.size()) {
    std::string_view body;
    std::size_t next = 0;
    if (!intact_record_at(data, salt_, p, &body, &next)) {
      if (auto s = check_torn_tail(data, salt_, p, name); !s.ok()) return s;
      if (auto s = cut_torn_tail(p, name); !s.ok()) return s;
      recovery_.dropped_tail_bytes = data.size() - p;
      break;
    }
    bool ended = false;
    std::uint64_t count = 0, end_generation = 0;
    if (auto s = apply(body, &mirror_, &ended, &count, &end_generation); !s.ok() || ended) {
      return corrupt(name + ": record at offset " + std::to_string(p) + ": " +
                     (ended ? std::string("snapshot end record in a journal") : s.message));
    }
    ++recovery_.journal_records;
    p = next;
  }
  journal_bytes_ = p;
  return {};
}

// The torn last append was never acknowledged: cut it off at `p` so that
// new records follow the last intact one.
Status FileTokenStore::cut_torn_tail(std::size_t p, const std::string& name) {
  if (::ftruncate(journal_fd_, static_cast<off_t>(p)) != 0 || ::fsync(journal_fd_) != 0) {
    return io_error("truncate the torn tail of " + name, errno);
  }
  return {};
}

Status FileTokenStore::broken_status() const {
  return Status(TokenErrc::kIoError, "token store " + dir_ +
                                              " refuses writes after a write it could not undo; reopen it");
}

Status FileTokenStore::append(std::string* body) {
  WipedString record;
  append_record(&record.s, salt_, *body);
  cleanse(body->data(), body->size());
  if (broken_) return broken_status();
  const std::string name = dir_ + "/" + journal_name(generation_);
  Status status = write_all(journal_fd_, record.s, static_cast<off_t>(journal_bytes_), name);
  if (status.ok() && ::fdatasync(journal_fd_) != 0) status = io_error("fdatasync " + name, errno);
  if (!status.ok()) {
    // Undo a partial record so that later appends do not follow garbage.
    if (::ftruncate(journal_fd_, static_cast<off_t>(journal_bytes_)) != 0) broken_ = true;
    return status;
  }
  journal_bytes_ += record.s.size();
  return {};
}

Status FileTokenStore::journal_locked(std::string* body, const std::function<void()>& apply) {
  if (auto s = append(body); !s.ok()) return s;
  apply();
  compact_if_due_locked();
  return {};
}

void FileTokenStore::compact_if_due_locked() {
  if (journal_bytes_ > options_.compact_after_bytes && journal_bytes_ > snapshot_bytes_) compact_locked();
}

Result<TokenStoreState> FileTokenStore::load() {
  std::lock_guard lock(mu_);
  return mirror_.load();
}

Result<std::uint64_t> FileTokenStore::allocate_sequence_number() {
  std::lock_guard lock(mu_);
  // Not journaled: the token record that uses the number carries it.
  return mirror_.allocate_sequence_number();
}

Result<std::uint32_t> FileTokenStore::allocate_master_key_id() {
  std::lock_guard lock(mu_);
  return mirror_.allocate_master_key_id();
}

Status FileTokenStore::put_master_key(const MasterKey& key) {
  std::lock_guard lock(mu_);
  if (key.secret.empty() || key.secret.size() > 0xffff) {
    return Status(TokenErrc::kInvalidArgument, "master key secret empty or over-long");
  }
  std::string body;
  put_key_body(key, &body);
  return journal_locked(&body, [&] { mirror_.put_master_key(key); });
}

Status FileTokenStore::remove_master_key(std::uint32_t id) {
  std::lock_guard lock(mu_);
  std::string body;
  ByteWriter w(&body);
  w.u8(static_cast<std::uint8_t>(RecordType::kRemoveKey));
  w.u32(id);
  return journal_locked(&body, [&] { mirror_.remove_master_key(id); });
}

Status FileTokenStore::add_token(const StoredToken& token) {
  std::lock_guard lock(mu_);
  if (token.identifier.empty() || token.identifier.size() > 0xffff || token.password.empty() ||
      token.password.size() > 0xffff) {
    return Status(TokenErrc::kInvalidArgument, "token identifier or password empty or over-long");
  }
  if (mirror_.has_token(token.sequence_number)) {
    return Status(TokenErrc::kInvalidArgument,
                       "token " + std::to_string(token.sequence_number) + " is stored already");
  }
  std::string body;
  add_token_body(token, &body);
  return journal_locked(&body, [&] { mirror_.add_token(token); });
}

Status FileTokenStore::update_token(std::uint64_t sequence_number, TokenTime renew_date) {
  std::lock_guard lock(mu_);
  if (!mirror_.has_token(sequence_number)) {
    return Status(TokenErrc::kUnknownToken, "token " + std::to_string(sequence_number) + " is not stored");
  }
  std::string body;
  ByteWriter w(&body);
  w.u8(static_cast<std::uint8_t>(RecordType::kUpdateToken));
  w.u64(sequence_number);
  w.i64(renew_date.time_since_epoch().count());
  return journal_locked(&body, [&] { mirror_.update_token(sequence_number, renew_date); });
}

Status FileTokenStore::remove_tokens(std::span<const std::uint64_t> sequence_numbers) {
  std::lock_guard lock(mu_);
  std::vector<std::uint64_t> present;
  for (auto seq : sequence_numbers) {
    if (mirror_.has_token(seq)) present.push_back(seq);
  }
  for (std::size_t i = 0; i < present.size(); i += kMaxRemovalsPerRecord) {
    std::span<const std::uint64_t> batch =
        std::span<const std::uint64_t>(present).subspan(i, std::min(kMaxRemovalsPerRecord, present.size() - i));
    std::string body;
    ByteWriter w(&body);
    w.u8(static_cast<std::uint8_t>(RecordType::kRemoveTokens));
    w.u32(static_cast<std::uint32_t>(batch.size()));
    for (auto seq : batch) w.u64(seq);
    if (auto s = append(&body); !s.ok()) return s;
    mirror_.remove_tokens(batch);
  }
  compact_if_due_locked();
  return {};
}

Status FileTokenStore::compact() {
  std::lock_guard lock(mu_);
  return compact_locked();
}

Status FileTokenStore::compact_locked() {
  if (broken_) return broken_status();
  Status status = [&]() -> Status {
    auto state = mirror_.load();
    const std::uint64_t next_generation = generation_ + 1;
    WipedString image;
    const std::string snapshot_salt = new_salt();
    const std::string journal_salt = new_salt();
    snapshot_image(*state, next_generation, snapshot_salt, &image.s);
    int next_fd = -1;
    if (auto s = write_generation(image.s, next_generation, journal_salt, &next_fd); !s.ok()) return s;
    if (::fsync(dir_fd_) != 0) {
      // The rename may or may not survive a crash, so neither journal can be
      // trusted to be the one recovery reads.
      int err = errno;
      ::close(next_fd);
      broken_ = true;
      return io_error("fsync " + dir_, err);
    }
    switch_generation(next_fd, next_generation, journal_salt, image.s.size());
    return {};
  }();
  if (status.ok()) {
    ++compactions_;
  } else {
    ++compaction_failures_;
  }
  return status;
}

// Writes `image` as the snapshot of `generation` and that generation's empty
// journal, then renames the snapshot into place; `*journal_fd` is the new
// journal's. On failure nothing has changed: the old snapshot and journal
// are still current, and what was written is removed.
Status FileTokenStore::write_generation(std::string_view image, std::uint64_t generation,
                                        std::string_view journal_salt, int* journal_fd) {
  const std::string temp_name = dir_ + "/" + kSnapshotTemp;
  int fd = ::openat(dir_fd_, kSnapshotTemp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("create " + temp_name, errno);
  Status s = write_all(fd, image, 0, temp_name);
  if (s.ok() && ::fsync(fd) != 0) s = io_error("fsync " + temp_name, errno);
  ::close(fd);
  const std::string next_file = journal_name(generation);
  const std::string next_name = dir_ + "/" + next_file;
  int next_fd = -1;
  if (s.ok()) {
    next_fd = ::openat(dir_fd_, next_file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (next_fd < 0) s = io_error("create " + next_name, errno);
  }
  if (s.ok()) {
    s = write_all(next_fd, file_header(kJournalMagic, generation, journal_salt), 0, next_name);
  }
  if (s.ok() && ::fsync(next_fd) != 0) s = io_error("fsync " + next_name, errno);
  if (s.ok() && ::renameat(dir_fd_, kSnapshotTemp, dir_fd_, kSnapshotFile) != 0) {
    s = io_error("rename " + temp_name, errno);
  }
  if (!s.ok()) {
    if (next_fd >= 0) ::close(next_fd);
    ::unlinkat(dir_fd_, kSnapshotTemp, 0);
    ::unlinkat(dir_fd_, next_file.c_str(), 0);
    return s;
  }
  *journal_fd = next_fd;
  return {};
}

// Makes the generation write_generation() wrote the current one, and
// removes the old journal.
void FileTokenStore::switch_generation(int journal_fd, std::uint64_t generation,
                                       std::string journal_salt, std::size_t snapshot_bytes) {
  const std::string old_file = journal_name(generation_);
  ::close(journal_fd_);
  journal_fd_ = journal_fd;
  generation_ = generation;
  salt_ = std::move(journal_salt);
  journal_bytes_ = kFileHeaderBytes;
  snapshot_bytes_ = snapshot_bytes;
  // A leftover old journal is removed at the next open if this fails.
  ::unlinkat(dir_fd_, old_file.c_str(), 0);
}

FileTokenStore::Stats FileTokenStore::stats() const {
  std::lock_guard lock(mu_);
  return {generation_, journal_bytes_, snapshot_bytes_, compactions_, compaction_failures_};
}

std::string FileTokenStore::journal_path() const {
  std::lock_guard lock(mu_);
  return dir_ + "/" + journal_name(generation_);
}

}  // namespace authrpc::security
