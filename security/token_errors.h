// Typed failures of the delegation-token code in security/ (encoding,
// secret manager, token stores, credentials file), as std::error_codes in
// the "authrpc.token" category. security/ includes nothing from rpc/, so the
// auth layer maps these onto authrpc::Errc (docs/TOKENS.md has the table).
//
// Like GssStatus for Kerberos, a TokenStatus carries a code plus readable
// text; the text never contains key material, passwords or encoded tokens.
#pragma once

#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace authrpc::security {

enum class TokenErrc {
  kOk = 0,
  kMalformed = 1,           // truncated, garbage or over-long encoding
  kUnsupportedVersion = 2,  // an encoding version this code does not read
  kUnknownToken = 3,        // well-formed, but not (or no longer) known here
  kUnknownKey = 4,          // signed with a master key this server does not hold
  kForged = 5,              // password or identifier does not match what was issued
  kExpired = 6,             // past its renew date or its max date
  kCancelled = 7,           // cancelled by its owner or renewer
  kPermissionDenied = 8,    // caller may not renew/cancel this token
  kInvalidArgument = 9,     // a request the secret manager refuses (empty owner, ...)
  kNotFound = 10,           // no token for that service in a credentials file
  kStoreCorrupt = 11,       // a store's files fail their checks: not silently skipped
  kStoreLocked = 12,        // another process (or object) has the store open
  kIoError = 13,            // a system call failed; the text names it and errno
  kStoreUnavailable = 14,   // a shared store (ZooKeeper) cannot be reached now: retry
};

const std::error_category& token_category() noexcept;
std::error_code make_error_code(TokenErrc e) noexcept;
// "EXPIRED", "FORGED", ...
std::string_view token_errc_name(TokenErrc e) noexcept;

// A code plus detail text. ok() when the code is empty.
struct TokenStatus {
  std::error_code code;
  std::string message;

  TokenStatus() = default;
  TokenStatus(TokenErrc e, std::string m) : code(make_error_code(e)), message(std::move(m)) {}

  bool ok() const noexcept { return !code; }
  bool is(TokenErrc e) const noexcept { return code == make_error_code(e); }
  // "EXPIRED: token 12 expired at 2024-05-01T10:00:00.000Z"
  std::string to_string() const;
};

// A value or a TokenStatus (security/'s counterpart of authrpc::Result).
template <typename T>
class [[nodiscard]] TokenResult {
 public:
  TokenResult(T value) : v_(std::move(value)) {}
  TokenResult(TokenStatus status) : v_(std::move(status)) {}
  TokenResult(TokenErrc e, std::string message) : v_(TokenStatus(e, std::move(message))) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

  // The failure; an OK status when a value is held.
  TokenStatus status() const { return ok() ? TokenStatus() : std::get<1>(v_); }
  std::error_code code() const { return ok() ? std::error_code() : std::get<1>(v_).code; }
  bool is(TokenErrc e) const noexcept { return !ok() && std::get<1>(v_).is(e); }

 private:
  std::variant<T, TokenStatus> v_;
  static_assert(!std::is_same_v<T, TokenStatus>);
};

// A TokenStatus for a failed system call: kIoError, "what: strerror(err)".
TokenStatus io_error(std::string_view what, int err);

}  // namespace authrpc::security

template <>
struct std::is_error_code_enum<authrpc::security::TokenErrc> : std::true_type {};
