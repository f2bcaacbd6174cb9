#include "auth/token_status.h"

#include <string>

namespace authrpc {

using security::TokenErrc;

namespace {

Errc map(TokenErrc e, TokenUse use) {
  const bool auth = use == TokenUse::kAuthentication;
  switch (e) {
    case TokenErrc::kOk: return Errc::kOk;
    case TokenErrc::kMalformed:
    case TokenErrc::kUnsupportedVersion:
      return auth ? Errc::kAuthenticationFailed : Errc::kInvalidArgument;
    case TokenErrc::kForged:
      return auth ? Errc::kAuthenticationFailed : Errc::kPermissionDenied;
    case TokenErrc::kExpired:
    case TokenErrc::kCancelled:
    case TokenErrc::kUnknownToken:
      // At authentication: fetch a new token (kReauthenticate).
      return auth ? Errc::kCredentialsExpired : Errc::kFailedPrecondition;
    case TokenErrc::kUnknownKey:
      return Errc::kUnavailable;  // another server (or this one later) may know the key
    case TokenErrc::kPermissionDenied:
      return auth ? Errc::kAuthenticationFailed : Errc::kPermissionDenied;
    case TokenErrc::kInvalidArgument:
      return auth ? Errc::kAuthenticationFailed : Errc::kInvalidArgument;
    case TokenErrc::kNotFound:
      return Errc::kUnauthenticated;  // no token for this server: fetch one
    case TokenErrc::kStoreCorrupt:
      return auth ? Errc::kUnavailable : Errc::kDataLoss;
    case TokenErrc::kStoreLocked:
      return auth ? Errc::kUnavailable : Errc::kFailedPrecondition;
    case TokenErrc::kIoError:
    case TokenErrc::kStoreUnavailable:
      return Errc::kUnavailable;
  }
  return Errc::kInternal;
}

}  // namespace

Status token_status(const security::TokenStatus& status, TokenUse use, std::string_view prefix) {
  if (status.ok()) return {};
  const auto e = static_cast<TokenErrc>(status.code.value());
  std::string message(prefix);
  if (!message.empty()) message += ": ";
  message += status.to_string();  // "EXPIRED: token 12 ..."
  return {map(e, use), std::move(message)};
}

}  // namespace authrpc
