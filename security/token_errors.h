// Typed failures of the delegation-token code in security/ (encoding,
// secret manager, token stores, credentials file): a Status whose code is a
// TokenErrc in the "authrpc.token" category. Its default_error_condition() is
// the Errc the failure means in a token service call (docs/TOKENS.md §4 has
// the table), so retry_advice() is right for it as it stands; at
// authentication some kinds mean something else (token_authentication_errc).
//
// The text never contains key material, passwords or encoded tokens.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

#include "authrpc/base/result.h"
#include "authrpc/base/status.h"

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
// "EXPIRED", "FORGED", ...: Status::to_string() starts with it.
std::string_view token_errc_name(TokenErrc e) noexcept;

// The Errc of a token presented to authenticate (in HELLO or a SASL
// exchange): EXPIRED, CANCELLED and UNKNOWN_TOKEN become CREDENTIALS_EXPIRED
// (fetch a new token), a refused request AUTHENTICATION_FAILED, a store that
// cannot answer UNAVAILABLE. Elsewhere the category's default condition holds.
Errc token_authentication_errc(TokenErrc e) noexcept;

enum class TokenUse {
  kAuthentication,  // a token presented in HELLO or a SASL exchange
  kService,         // a token handed to token.renew / token.cancel, or a store failure there
};

// A token failure as a peer or a user sees it: code
// token_authentication_errc() or the default condition, per `use`; text
// `prefix` ("token") plus to_string(): "token: EXPIRED: token 12 ...", so
// that both ends can tell EXPIRED from CANCELLED from FORGED.
Status token_status(const Status& status, TokenUse use, std::string_view prefix = "token");  // names: a message prefix

// A Status for a failed system call: kIoError, "what: strerror(err)".
Status io_error(std::string_view what, int err);

}  // namespace authrpc::security

template <>
struct std::is_error_code_enum<authrpc::security::TokenErrc> : std::true_type {};
