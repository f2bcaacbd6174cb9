// Fuzz target: recovery of the file token store (security/file_token_store.h)
// — what a server does at startup with whatever a crash, a full disk or an
// attacker with write access to its directory left behind. Each input
// becomes a `snapshot` and a `journal.G` in a scratch directory (on
// /dev/shm when there is one: the store fsyncs), the store is opened, the
// secret manager loads it, and then:
//   - what opened must take one more token and open again with it (a
//     recovery that truncates too much or too little fails here);
//   - what failed must fail with a typed store error, never crash.
//
// Files are raw bytes from the input, or built by the harness from record
// bodies in the input with valid lengths and digests (the byte layout of
// docs/TOKENS.md), so the fuzzer reaches the record decoder behind the
// checks. Input: a flags byte (bit 0: journal framed; bit 1: a snapshot too;
// bit 2: snapshot framed; bits 4-5: the journal's generation), then the
// snapshot if any, then the journal. A raw file is a u16 length and bytes; a
// framed one a generation byte, a record count byte, per record a u16
// length and the body, then a u8 length and trailing bytes (a torn append).
#include <openssl/evp.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "authrpc/security/byte_codec.h"
#include "authrpc/security/file_token_store.h"
#include "authrpc/security/secret_manager.h"
#include "tests/fuzz/fuzz_support.h"

namespace authrpc::fuzz {
namespace {

std::string_view take(std::string_view& data, std::size_t n) {
  auto out = data.substr(0, n);
  data.remove_prefix(out.size());
  return out;
}

std::size_t take_u8(std::string_view& data) {
  auto b = take(data, 1);
  return b.empty() ? 0 : static_cast<std::uint8_t>(b[0]);
}

std::size_t take_u16(std::string_view& data) {
  const std::size_t hi = take_u8(data);
  return hi << 8 | take_u8(data);
}

std::string sha256_prefix(std::string_view bytes, std::size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) != 1) fail("EVP_Digest");
  return std::string(reinterpret_cast<const char*>(md), n);
}

// docs/TOKENS.md: magic, u32 format version 1, u64 generation; records of
// u32 length, 4 bytes of SHA-256(length), body, 16 bytes of SHA-256(all before).
std::string framed_file(std::string_view magic, std::string_view& data) {
  std::string out(magic);
  security::ByteWriter w(&out);
  w.u32(1);
  w.u64(take_u8(data));
  for (std::size_t records = take_u8(data); records > 0 && !data.empty(); --records) {
    const auto body = take(data, take_u16(data));
    const std::size_t start = out.size();
    w.u32(static_cast<std::uint32_t>(body.size()));
    out += sha256_prefix(std::string_view(out).substr(start, 4), 4);
    out += body;
    out += sha256_prefix(std::string_view(out).substr(start), 16);
  }
  out += take(data, take_u8(data));
  return out;
}

std::string raw_file(std::string_view& data) { return std::string(take(data, take_u16(data))); }

void require(bool ok, const char* what) {
  if (!ok) fail(what);
}

const ScratchDir& scratch() {
  static const ScratchDir dir("journal");
  return dir;
}

}  // namespace

int fuzz_input(std::uint8_t flags, std::string_view data) {
  const ScratchDir& dir = scratch();
  dir.clear();
  if (flags & 2) {
    dir.write(security::FileTokenStore::kSnapshotFile,
              (flags & 4) ? framed_file("ATKS", data) : raw_file(data));
  }
  const std::string journal = (flags & 1) ? framed_file("ATKJ", data) : raw_file(data);
  dir.write(std::string(security::FileTokenStore::kJournalPrefix) + std::to_string((flags >> 4) & 3),
            journal);

  // One more token, as the secret manager would add it (a sequence number is
  // durable only once a record uses it).
  security::StoredToken added;
  {
    auto store = security::FileTokenStore::open(dir.path());
    if (!store.ok()) return 0;
    std::shared_ptr<security::FileTokenStore> shared = std::move(*store);
    auto state = shared->load();
    require(state.ok(), "load() failed after open() succeeded");
    (void)security::SecretManager::open(shared);
    auto next = shared->allocate_sequence_number();
    if (!next.ok()) return 0;  // e.g. the counter is at its maximum
    added.sequence_number = *next;
    added.identifier = token_realm().token.identifier;
    added.password = token_realm().token.password;
    added.renew_date = token_realm().clock->now();
    if (!shared->add_token(added).ok()) return 0;
  }
  auto again = security::FileTokenStore::open(dir.path());
  require(again.ok(), "a store that opened and took a record does not open again");
  auto state = (*again)->load();
  require(state.ok() && state->last_sequence_number >= added.sequence_number,
          "the sequence number went back across a reopen");
  bool found = false;
  for (const auto& t : state->tokens) found |= t.sequence_number == added.sequence_number;
  require(found, "a token added before the reopen is gone after it");
  return 0;
}

}  // namespace authrpc::fuzz
