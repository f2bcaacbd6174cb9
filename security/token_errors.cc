#include "authrpc/security/token_errors.h"

#include <string>

#include "authrpc/base/error_table.h"

namespace authrpc::security {
namespace {

// The Errc is what each kind means in a token service call, or wherever a
// token failure is reported as it stands.
constexpr ErrorRow<TokenErrc> kTokenErrors[] = {
    {TokenErrc::kOk, "OK", "ok", Errc::kOk},
    {TokenErrc::kMalformed, "MALFORMED", "malformed token data", Errc::kInvalidArgument},
    {TokenErrc::kUnsupportedVersion, "UNSUPPORTED_VERSION", "unsupported token encoding version",
     Errc::kInvalidArgument},
    {TokenErrc::kUnknownToken, "UNKNOWN_TOKEN", "unknown token", Errc::kFailedPrecondition},
    // Another server (or this one later) may know the key.
    {TokenErrc::kUnknownKey, "UNKNOWN_KEY", "unknown master key", Errc::kUnavailable},
    {TokenErrc::kForged, "FORGED", "token does not match what was issued",
     Errc::kPermissionDenied},
    {TokenErrc::kExpired, "EXPIRED", "token expired", Errc::kFailedPrecondition},
    {TokenErrc::kCancelled, "CANCELLED", "token cancelled", Errc::kFailedPrecondition},
    {TokenErrc::kPermissionDenied, "PERMISSION_DENIED", "permission denied",
     Errc::kPermissionDenied},
    {TokenErrc::kInvalidArgument, "INVALID_ARGUMENT", "invalid argument", Errc::kInvalidArgument},
    // No token for this server: fetch one.
    {TokenErrc::kNotFound, "NOT_FOUND", "no token for that service", Errc::kUnauthenticated},
    {TokenErrc::kStoreCorrupt, "STORE_CORRUPT", "token store corrupt", Errc::kDataLoss},
    {TokenErrc::kStoreLocked, "STORE_LOCKED", "token store in use", Errc::kFailedPrecondition},
    {TokenErrc::kIoError, "IO_ERROR", "token store I/O error", Errc::kUnavailable},
    {TokenErrc::kStoreUnavailable, "STORE_UNAVAILABLE", "token store unavailable",
     Errc::kUnavailable},
};
constexpr ErrorTable<TokenErrc> kTokenTable{
    kTokenErrors, {TokenErrc{}, "UNKNOWN", "unknown token error ", Errc::kInternal},
    /*unknown_shows_value=*/true};
constinit const TableErrorCategory<TokenErrc> kTokenCategory("authrpc.token", kTokenTable);

}  // namespace

const std::error_category& token_category() noexcept { return kTokenCategory; }

std::error_code make_error_code(TokenErrc e) noexcept {
  return {static_cast<int>(e), kTokenCategory};
}

std::string_view token_errc_name(TokenErrc e) noexcept { return kTokenTable[e].name; }

Errc token_authentication_errc(TokenErrc e) noexcept {
  switch (e) {
    case TokenErrc::kExpired:
    case TokenErrc::kCancelled:
    case TokenErrc::kUnknownToken:
      return Errc::kCredentialsExpired;  // fetch a new token (kReauthenticate)
    case TokenErrc::kMalformed:
    case TokenErrc::kUnsupportedVersion:
    case TokenErrc::kForged:
    case TokenErrc::kPermissionDenied:
    case TokenErrc::kInvalidArgument:
      return Errc::kAuthenticationFailed;
    case TokenErrc::kStoreCorrupt:
    case TokenErrc::kStoreLocked:
      return Errc::kUnavailable;  // this server cannot check tokens now; another may
    default:
      return kTokenTable[e].errc;
  }
}

Status token_status(const Status& status, TokenUse use, std::string_view prefix) {
  if (status.ok()) return {};
  Errc e = to_wire_errc(status.code);
  if (use == TokenUse::kAuthentication && status.code.category() == token_category()) {
    e = token_authentication_errc(static_cast<TokenErrc>(status.code.value()));
  }
  std::string message(prefix);
  if (!message.empty()) message += ": ";
  message += status.to_string();  // "EXPIRED: token 12 ..."
  return {e, std::move(message)};
}

Status io_error(std::string_view what, int err) {
  return {TokenErrc::kIoError, std::string(what) + ": " + std::generic_category().message(err)};
}

}  // namespace authrpc::security
