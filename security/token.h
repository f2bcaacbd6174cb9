// Delegation tokens: the identifier a secret manager signs, the token a
// client holds (identifier + password + kind + service), their versioned
// binary encodings and the URL-safe string form. Byte-by-byte layouts are in
// docs/TOKENS.md. Plain values: no locking, safe to copy between threads.
//
// A token's password is a secret: Token has no operator<<, describe() leaves
// the password out, and the password is wiped when the token is freed. The
// string form (to_string) contains the password; wipe it with cleanse().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/security/secret_bytes.h"
#include "authrpc/security/token_errors.h"

namespace authrpc::security {

// Token times: milliseconds since the Unix epoch, UTC.
using TokenTime = std::chrono::sys_time<std::chrono::milliseconds>;

// "2024-05-01T10:00:00.000Z"
std::string format_token_time(TokenTime t);

// What a token says about itself, signed by the secret manager.
struct TokenIdentifier {
  static constexpr std::uint8_t kVersion = 1;
  // kind, owner, renewer and real user are at most this many bytes each.
  static constexpr std::size_t kMaxFieldBytes = 1024;

  std::string kind;       // e.g. "authrpc-delegation"; never empty
  std::string owner;      // the principal the token authenticates as; never empty
  std::string renewer;    // who may renew it; empty: nobody
  std::string real_user;  // who asked for it on the owner's behalf; empty: the owner
  TokenTime issue_date{};
  TokenTime max_date{};   // no renewal reaches past this
  std::uint64_t sequence_number = 0;  // unique per store
  std::uint32_t master_key_id = 0;    // the key its password was made with

  // The signed bytes. kInvalidArgument if a field is empty or over-long or
  // max_date < issue_date.
  Result<std::string> encode() const;
  // kMalformed for truncated, over-long, trailing or inconsistent bytes,
  // kUnsupportedVersion for a version other than kVersion.
  static Result<TokenIdentifier> decode(std::string_view bytes);
  // The sequence number as encoded bytes would decode it, read from its
  // fixed place (the last 12 bytes are the sequence number and the key id)
  // without decoding the rest; nullopt if the bytes are too short. Only a
  // key to look a token up by: whoever uses it compares the bytes whole.
  static std::optional<std::uint64_t> peek_sequence_number(std::string_view bytes);

  // "authrpc-delegation token 42 (owner alice, renewer yarn, key 3, max 2024-...)"
  // Safe for logs: identifiers carry no secret.
  std::string describe() const;

  bool operator==(const TokenIdentifier&) const = default;
};

// password = HMAC-SHA256(master key, identifier bytes): 32 bytes.
SecretBytes token_password(const SecretBytes& master_key, std::string_view identifier);

// A delegation token as a client holds and presents it.
struct Token {
  static constexpr std::uint8_t kVersion = 1;
  static constexpr std::size_t kMaxIdentifierBytes = 8192;
  static constexpr std::size_t kMaxPasswordBytes = 64;

  std::string identifier;  // TokenIdentifier::encode() bytes
  SecretBytes password;
  std::string kind;        // the identifier's kind, readable without decoding it
  std::string service;     // where it is meant to be used, e.g. "tcp://host:7000"

  // Binary form; kInvalidArgument if a field is over-long or the identifier
  // or password is empty.
  Result<std::string> encode() const;
  // kMalformed / kUnsupportedVersion as for identifiers; the identifier
  // inside is decoded too, so garbage is refused here and not later.
  static Result<Token> decode(std::string_view bytes);

  // URL-safe base64 of encode(), no padding. Contains the password.
  Result<std::string> to_string() const;
  static Result<Token> from_string(std::string_view text);

  Result<TokenIdentifier> decode_identifier() const {
    return TokenIdentifier::decode(identifier);
  }
  // The identifier's describe() plus the service; never the password.
  std::string describe() const;
};

}  // namespace authrpc::security
