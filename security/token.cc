#include "authrpc/security/token.h"


#include <array>
#include <cstdio>
#include <ctime>

#include "authrpc/security/base64url.h"
#include "authrpc/security/byte_codec.h"
#include "authrpc/security/hmac_sha256.h"

namespace authrpc::security {
namespace {

constexpr std::size_t kPasswordBytes = 32;  // SHA-256

bool field_ok(std::string_view s) { return s.size() <= TokenIdentifier::kMaxFieldBytes; }

}  // namespace

std::string format_token_time(TokenTime t) {
  auto ms = t.time_since_epoch().count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  long frac = static_cast<long>(ms % 1000);
  if (frac < 0) {
    frac += 1000;
    secs -= 1;
  }
  std::tm tm{};
  if (gmtime_r(&secs, &tm) == nullptr) return std::to_string(ms) + "ms";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

Result<std::string> TokenIdentifier::encode() const {
  if (kind.empty() || owner.empty()) {
    return Result<std::string>(TokenErrc::kInvalidArgument, "token kind and owner must be set");
  }
  if (!field_ok(kind) || !field_ok(owner) || !field_ok(renewer) || !field_ok(real_user)) {
    return Result<std::string>(TokenErrc::kInvalidArgument,
                                    "token kind, owner, renewer and real user are limited to " +
                                        std::to_string(kMaxFieldBytes) + " bytes");
  }
  if (max_date < issue_date) {
    return Result<std::string>(TokenErrc::kInvalidArgument, "max date before issue date");
  }
  std::string out;
  ByteWriter w(&out);
  w.u8(kVersion);
  w.str16(kind);
  w.str16(owner);
  w.str16(renewer);
  w.str16(real_user);
  w.i64(issue_date.time_since_epoch().count());
  w.i64(max_date.time_since_epoch().count());
  w.u64(sequence_number);
  w.u32(master_key_id);
  return out;
}

Result<TokenIdentifier> TokenIdentifier::decode(std::string_view bytes) {
  using R = Result<TokenIdentifier>;
  std::string_view kind, owner, renewer, real_user;
  std::int64_t issue = 0, max = 0;
  TokenIdentifier id;
  const Status read = read_record(bytes, kVersion, "token identifier", [&](ByteReader& r) {
    return r.str16(&kind, kMaxFieldBytes) && r.str16(&owner, kMaxFieldBytes) &&
           r.str16(&renewer, kMaxFieldBytes) && r.str16(&real_user, kMaxFieldBytes) &&
           r.i64(&issue) && r.i64(&max) && r.u64(&id.sequence_number) && r.u32(&id.master_key_id);
  });
  if (!read.ok()) return read;
  if (kind.empty() || owner.empty()) return R(TokenErrc::kMalformed, "token identifier without kind or owner");
  if (max < issue) return R(TokenErrc::kMalformed, "token identifier max date before issue date");
  id.kind = kind;
  id.owner = owner;
  id.renewer = renewer;
  id.real_user = real_user;
  id.issue_date = TokenTime(std::chrono::milliseconds(issue));
  id.max_date = TokenTime(std::chrono::milliseconds(max));
  return id;
}

std::optional<std::uint64_t> TokenIdentifier::peek_sequence_number(std::string_view bytes) {
  constexpr std::size_t kTail = 8 + 4;  // sequence number, master key id: encode()'s last fields
  if (bytes.size() <= kTail) return std::nullopt;
  ByteReader r(bytes.substr(bytes.size() - kTail));
  std::uint64_t seq = 0;
  if (!r.u64(&seq)) return std::nullopt;
  return seq;
}

std::string TokenIdentifier::describe() const {
  std::string out = kind + " token " + std::to_string(sequence_number) + " (owner " + owner;
  if (!real_user.empty()) out += ", real user " + real_user;
  out += ", renewer " + (renewer.empty() ? std::string("none") : renewer);
  out += ", key " + std::to_string(master_key_id) + ", max " + format_token_time(max_date) + ")";
  return out;
}

SecretBytes token_password(const SecretBytes& master_key, std::string_view identifier) {
  static_assert(kPasswordBytes == kHmacSha256Bytes);
  std::array<std::uint8_t, kHmacSha256Bytes> mac{};
  SecretBytes out;
  if (hmac_sha256(master_key.span(), {identifier}, &mac)) out = SecretBytes(std::span<const std::uint8_t>(mac));
  cleanse(mac.data(), mac.size());
  return out;
}

Result<std::string> Token::encode() const {
  using R = Result<std::string>;
  if (identifier.empty() || identifier.size() > kMaxIdentifierBytes) {
    return R(TokenErrc::kInvalidArgument, "token identifier empty or over-long");
  }
  if (password.empty() || password.size() > kMaxPasswordBytes) {
    return R(TokenErrc::kInvalidArgument, "token password empty or over-long");
  }
  if (!field_ok(kind) || !field_ok(service)) {
    return R(TokenErrc::kInvalidArgument, "token kind or service over-long");
  }
  std::string out;
  ByteWriter w(&out);
  w.u8(kVersion);
  w.str16(identifier);
  w.str16(password.view());
  w.str16(kind);
  w.str16(service);
  return out;
}

Result<Token> Token::decode(std::string_view bytes) {
  using R = Result<Token>;
  std::string_view identifier, password, kind, service;
  // names: the delegation token this decodes, in its error message
  const Status read = read_record(bytes, kVersion, "token", [&](ByteReader& r) {
    return r.str16(&identifier, kMaxIdentifierBytes) && r.str16(&password, kMaxPasswordBytes) &&
           r.str16(&kind, TokenIdentifier::kMaxFieldBytes) &&
           r.str16(&service, TokenIdentifier::kMaxFieldBytes);
  });
  if (!read.ok()) return read;
  if (password.empty()) return R(TokenErrc::kMalformed, "token without password");
  if (auto id = TokenIdentifier::decode(identifier); !id.ok()) return id.status();
  Token t;
  t.identifier = identifier;
  t.password = SecretBytes(password);
  t.kind = kind;
  t.service = service;
  return t;
}

Result<std::string> Token::to_string() const {
  auto bytes = encode();
  if (!bytes.ok()) return bytes;
  std::string text = base64url_encode(*bytes);
  cleanse(bytes->data(), bytes->size());
  return text;
}

Result<Token> Token::from_string(std::string_view text) {
  constexpr std::size_t kMaxText = 4 * (kMaxIdentifierBytes + kMaxPasswordBytes + 4096) / 3;
  if (text.size() > kMaxText) return Result<Token>(TokenErrc::kMalformed, "token string over-long");
  auto bytes = base64url_decode(text);
  if (!bytes) {
    return Result<Token>(TokenErrc::kMalformed, "token string is not URL-safe base64");
  }
  auto token = decode(*bytes);
  cleanse(bytes->data(), bytes->size());
  return token;
}

std::string Token::describe() const {
  auto id = decode_identifier();
  std::string out = id.ok() ? id->describe() : kind + " token (undecodable identifier)";
  out += " for service " + (service.empty() ? std::string("(any)") : service);
  return out;
}

}  // namespace authrpc::security
