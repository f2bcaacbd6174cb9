#include "authrpc/security/token_errors.h"

#include <string>

namespace authrpc::security {
namespace {

// In a token service call, or wherever a token failure is reported as it
// stands.
Errc service_errc(TokenErrc e) noexcept {
  switch (e) {
    case TokenErrc::kOk: return Errc::kOk;
    case TokenErrc::kMalformed:
    case TokenErrc::kUnsupportedVersion:
    case TokenErrc::kInvalidArgument:
      return Errc::kInvalidArgument;
    case TokenErrc::kForged:
    case TokenErrc::kPermissionDenied:
      return Errc::kPermissionDenied;
    case TokenErrc::kExpired:
    case TokenErrc::kCancelled:
    case TokenErrc::kUnknownToken:
    case TokenErrc::kStoreLocked:
      return Errc::kFailedPrecondition;
    case TokenErrc::kUnknownKey:  // another server (or this one later) may know the key
    case TokenErrc::kIoError:
    case TokenErrc::kStoreUnavailable:
      return Errc::kUnavailable;
    case TokenErrc::kNotFound:
      return Errc::kUnauthenticated;  // no token for this server: fetch one
    case TokenErrc::kStoreCorrupt:
      return Errc::kDataLoss;
  }
  return Errc::kInternal;
}

class TokenCategory final : public NamedErrorCategory {
 public:
  const char* name() const noexcept override { return "authrpc.token"; }
  std::string message(int value) const override {
    switch (static_cast<TokenErrc>(value)) {
      case TokenErrc::kOk: return "ok";
      case TokenErrc::kMalformed: return "malformed token data";
      case TokenErrc::kUnsupportedVersion: return "unsupported token encoding version";
      case TokenErrc::kUnknownToken: return "unknown token";
      case TokenErrc::kUnknownKey: return "unknown master key";
      case TokenErrc::kForged: return "token does not match what was issued";
      case TokenErrc::kExpired: return "token expired";
      case TokenErrc::kCancelled: return "token cancelled";
      case TokenErrc::kPermissionDenied: return "permission denied";
      case TokenErrc::kInvalidArgument: return "invalid argument";
      case TokenErrc::kNotFound: return "no token for that service";
      case TokenErrc::kStoreCorrupt: return "token store corrupt";
      case TokenErrc::kStoreLocked: return "token store in use";
      case TokenErrc::kIoError: return "token store I/O error";
      case TokenErrc::kStoreUnavailable: return "token store unavailable";
    }
    return "unknown token error " + std::to_string(value);
  }
  std::string_view code_name(int value) const noexcept override {
    return token_errc_name(static_cast<TokenErrc>(value));
  }
  std::error_condition default_error_condition(int value) const noexcept override {
    return {static_cast<int>(service_errc(static_cast<TokenErrc>(value))), authrpc_category()};
  }
};

}  // namespace

const std::error_category& token_category() noexcept {
  static const TokenCategory category;
  return category;
}

std::error_code make_error_code(TokenErrc e) noexcept {
  return {static_cast<int>(e), token_category()};
}

std::string_view token_errc_name(TokenErrc e) noexcept {
  switch (e) {
    case TokenErrc::kOk: return "OK";
    case TokenErrc::kMalformed: return "MALFORMED";
    case TokenErrc::kUnsupportedVersion: return "UNSUPPORTED_VERSION";
    case TokenErrc::kUnknownToken: return "UNKNOWN_TOKEN";
    case TokenErrc::kUnknownKey: return "UNKNOWN_KEY";
    case TokenErrc::kForged: return "FORGED";
    case TokenErrc::kExpired: return "EXPIRED";
    case TokenErrc::kCancelled: return "CANCELLED";
    case TokenErrc::kPermissionDenied: return "PERMISSION_DENIED";
    case TokenErrc::kInvalidArgument: return "INVALID_ARGUMENT";
    case TokenErrc::kNotFound: return "NOT_FOUND";
    case TokenErrc::kStoreCorrupt: return "STORE_CORRUPT";
    case TokenErrc::kStoreLocked: return "STORE_LOCKED";
    case TokenErrc::kIoError: return "IO_ERROR";
    case TokenErrc::kStoreUnavailable: return "STORE_UNAVAILABLE";
  }
  return "UNKNOWN";
}

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
      return service_errc(e);
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
