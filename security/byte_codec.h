// Big-endian byte writer and bounds-checked reader for security/'s binary
// formats (token identifiers, tokens, token-store records). Internal to
// security/; the formats themselves are specified in docs/TOKENS.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "authrpc/base/status.h"
#include "authrpc/security/token_errors.h"

namespace authrpc::security {

class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}

  void u8(std::uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { be(v, 2); }
  void u32(std::uint32_t v) { be(v, 4); }
  void u64(std::uint64_t v) { be(v, 8); }
  void i64(std::int64_t v) { be(static_cast<std::uint64_t>(v), 8); }
  void raw(std::string_view bytes) { out_->append(bytes); }
  // u16 length + bytes; the caller has checked the length fits.
  void str16(std::string_view s) {
    u16(static_cast<std::uint16_t>(s.size()));
    raw(s);
  }
  // u32 length + bytes.
  void str32(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    raw(s);
  }

 private:
  void be(std::uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) out_->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string* out_;
};

// Reads fields front to back; once a read runs past the end, every later
// read fails too and ok() is false.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  bool u8(std::uint8_t* v) {
    std::uint64_t x = 0;
    if (!be(&x, 1)) return false;
    *v = static_cast<std::uint8_t>(x);
    return true;
  }
  bool u16(std::uint16_t* v) {
    std::uint64_t x = 0;
    if (!be(&x, 2)) return false;
    *v = static_cast<std::uint16_t>(x);
    return true;
  }
  bool u32(std::uint32_t* v) {
    std::uint64_t x = 0;
    if (!be(&x, 4)) return false;
    *v = static_cast<std::uint32_t>(x);
    return true;
  }
  bool u64(std::uint64_t* v) { return be(v, 8); }
  bool i64(std::int64_t* v) {
    std::uint64_t x = 0;
    if (!be(&x, 8)) return false;
    *v = static_cast<std::int64_t>(x);
    return true;
  }
  bool raw(std::size_t n, std::string_view* out) {
    if (!ok_ || in_.size() - pos_ < n) return fail();
    *out = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  // u16 length + bytes, at most max bytes.
  bool str16(std::string_view* out, std::size_t max = std::numeric_limits<std::uint16_t>::max()) {
    std::uint16_t n = 0;
    if (!u16(&n)) return false;
    if (n > max) return fail();
    return raw(n, out);
  }
  bool str32(std::string_view* out, std::size_t max) {
    std::uint32_t n = 0;
    if (!u32(&n)) return false;
    if (n > max) return fail();
    return raw(n, out);
  }

  bool ok() const noexcept { return ok_; }
  bool at_end() const noexcept { return ok_ && pos_ == in_.size(); }
  std::size_t position() const noexcept { return pos_; }
  std::size_t remaining() const noexcept { return in_.size() - pos_; }

 private:
  bool fail() {
    ok_ = false;
    return false;
  }
  bool be(std::uint64_t* v, std::size_t n) {
    if (!ok_ || in_.size() - pos_ < n) return fail();
    std::uint64_t x = 0;
    for (std::size_t i = 0; i < n; ++i) x = (x << 8) | static_cast<std::uint8_t>(in_[pos_ + i]);
    pos_ += n;
    *v = x;
    return true;
  }
  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

// Reads a whole versioned record from `bytes`, named `what` in errors
// ("token identifier"): its version byte (kMalformed if there is none,
// kUnsupportedVersion if it is not `version`), then the fields that
// `read_fields(ByteReader&)` reads, false when one is missing or over-long
// (kMalformed), then nothing more (kMalformed).
template <typename ReadFields>
Status read_record(std::string_view bytes, std::uint8_t version, std::string_view what,
                   ReadFields&& read_fields) {
  ByteReader r(bytes);
  const std::string name(what);
  std::uint8_t found = 0;
  if (!r.u8(&found)) return Status(TokenErrc::kMalformed, "empty " + name);
  if (found != version) {
    return Status(TokenErrc::kUnsupportedVersion, name + " version " + std::to_string(found) +
                                                      " (this code reads " +
                                                      std::to_string(version) + ")");
  }
  if (!read_fields(r)) return Status(TokenErrc::kMalformed, name + " truncated or a field over-long");
  if (!r.at_end()) {
    return Status(TokenErrc::kMalformed,
                  name + " has " + std::to_string(r.remaining()) + " trailing bytes");
  }
  return {};
}

}  // namespace authrpc::security
