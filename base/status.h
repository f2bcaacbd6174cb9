// Typed errors for everything authrpc reports: call outcomes, negotiation
// failures, connection failures, and the failures of each layer below them.
// Every error is a Status: a std::error_code plus text. Codes are in the
// authrpc category (Errc, the wire's), or in a domain's own category (tokens,
// TLS, shared memory) whose default_error_condition() is the Errc that says
// what to do; retry_advice() and to_wire_errc() read that. docs/DESIGN.md
// ("Errors") has the model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace authrpc {

// Status codes as carried on the wire (u16). 0–16 follow gRPC's numbering;
// 100 and up are connection-level outcomes of authrpc itself.
enum class Errc : std::uint16_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,  // unknown service or method
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,  // server stopping or unreachable: retry elsewhere/later
  kDataLoss = 15,
  kUnauthenticated = 16,

  kProtocolError = 100,          // malformed, truncated or out-of-order frames
  kFrameTooLarge = 101,          // a frame above the peer's limit
  kUnsupportedVersion = 102,     // preamble magic/version not understood
  kMechanismUnavailable = 103,   // no mechanism both sides allow
  kAuthenticationFailed = 104,   // credentials refused: give up or fix them
  kCredentialsExpired = 105,     // credentials too old: re-login and retry
  kNegotiationTimeout = 106,     // peer too slow to finish negotiation
  kServerBusy = 107,             // connection limit reached: back off, retry
  kConnectionClosed = 108,       // peer closed the connection
  kIdleTimeout = 109,            // connection closed for inactivity
  kConfigError = 110,            // local configuration refused
};

// A domain's category whose codes have short upper-case names ("EXPIRED"), as
// Errc's do; Status::to_string() prints the name rather than message().
class NamedErrorCategory : public std::error_category {
 public:
  virtual std::string_view code_name(int value) const noexcept = 0;
};

const std::error_category& authrpc_category() noexcept;
std::error_code make_error_code(Errc e) noexcept;

// What a caller should do after a failure.
enum class RetryAdvice {
  kNone,            // success
  kRetry,           // transient: retry (after backoff), maybe elsewhere
  kReauthenticate,  // credentials need renewing (kinit, new token), then retry
  kGiveUp,          // retrying the same thing will fail the same way
};

// Classifies authrpc codes and the system/asio codes transports report.
RetryAdvice retry_advice(std::error_code ec) noexcept;
std::string_view to_string(RetryAdvice advice) noexcept;

// An error code plus a human-readable detail. Never carries secrets.
struct Status {
  std::error_code code;
  std::string message;

  Status() = default;
  Status(std::error_code c, std::string m = {}) : code(c), message(std::move(m)) {}
  Status(Errc e, std::string m = {}) : code(make_error_code(e)), message(std::move(m)) {}

  bool ok() const noexcept { return !code; }
  // The exact kind, in any category: status.is(TokenErrc::kExpired).
  bool is(std::error_code c) const noexcept { return code == c; }
  // "PERMISSION_DENIED: user bob may not call x.y"
  std::string to_string() const;
};

// The wire name of an authrpc code, e.g. "DEADLINE_EXCEEDED".
std::string_view errc_name(Errc e) noexcept;
// Maps a wire status value to Errc; unknown values become kUnknown.
Errc errc_from_wire(std::uint16_t value) noexcept;
// Maps any error code onto the closest wire status (for sending to a peer).
Errc to_wire_errc(std::error_code ec) noexcept;

}  // namespace authrpc

template <>
struct std::is_error_code_enum<authrpc::Errc> : std::true_type {};
