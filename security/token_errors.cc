#include "security/token_errors.h"

#include <string>

namespace authrpc::security {
namespace {

class TokenCategory final : public std::error_category {
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

std::string TokenStatus::to_string() const {
  if (ok()) return "OK";
  std::string out;
  if (code.category() == token_category()) {
    out = token_errc_name(static_cast<TokenErrc>(code.value()));
  } else {
    out = code.message();
  }
  if (!message.empty()) out += ": " + message;
  return out;
}

TokenStatus io_error(std::string_view what, int err) {
  return TokenStatus(TokenErrc::kIoError, std::string(what) + ": " + std::generic_category().message(err));
}

}  // namespace authrpc::security
