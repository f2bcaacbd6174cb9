#include "authrpc/base/status.h"

#include <asio/error.hpp>
#include <cerrno>

namespace authrpc {
namespace {

class AuthrpcCategory final : public NamedErrorCategory {
 public:
  const char* name() const noexcept override { return "authrpc"; }
  std::string message(int value) const override { return std::string(code_name(value)); }
  std::string_view code_name(int value) const noexcept override {
    return errc_name(static_cast<Errc>(value));
  }
};

// True for codes that carry an errno value (asio 1.22 has its own system
// category, which does not map to std::errc).
bool is_errno(std::error_code ec) noexcept {
  return ec.category() == std::system_category() || ec.category() == std::generic_category() ||
         ec.category() == asio::error::get_system_category();
}

}  // namespace

const std::error_category& authrpc_category() noexcept {
  static const AuthrpcCategory category;
  return category;
}

std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), authrpc_category()};
}

std::string_view errc_name(Errc e) noexcept {
  switch (e) {
    case Errc::kOk: return "OK";
    case Errc::kCancelled: return "CANCELLED";
    case Errc::kUnknown: return "UNKNOWN";
    case Errc::kInvalidArgument: return "INVALID_ARGUMENT";
    case Errc::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case Errc::kNotFound: return "NOT_FOUND";
    case Errc::kAlreadyExists: return "ALREADY_EXISTS";
    case Errc::kPermissionDenied: return "PERMISSION_DENIED";
    case Errc::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case Errc::kFailedPrecondition: return "FAILED_PRECONDITION";
    case Errc::kAborted: return "ABORTED";
    case Errc::kOutOfRange: return "OUT_OF_RANGE";
    case Errc::kUnimplemented: return "UNIMPLEMENTED";
    case Errc::kInternal: return "INTERNAL";
    case Errc::kUnavailable: return "UNAVAILABLE";
    case Errc::kDataLoss: return "DATA_LOSS";
    case Errc::kUnauthenticated: return "UNAUTHENTICATED";
    case Errc::kProtocolError: return "PROTOCOL_ERROR";
    case Errc::kFrameTooLarge: return "FRAME_TOO_LARGE";
    case Errc::kUnsupportedVersion: return "UNSUPPORTED_VERSION";
    case Errc::kMechanismUnavailable: return "MECHANISM_UNAVAILABLE";
    case Errc::kAuthenticationFailed: return "AUTHENTICATION_FAILED";
    case Errc::kCredentialsExpired: return "CREDENTIALS_EXPIRED";
    case Errc::kNegotiationTimeout: return "NEGOTIATION_TIMEOUT";
    case Errc::kServerBusy: return "SERVER_BUSY";
    case Errc::kConnectionClosed: return "CONNECTION_CLOSED";
    case Errc::kIdleTimeout: return "IDLE_TIMEOUT";
    case Errc::kConfigError: return "CONFIG_ERROR";
  }
  return "UNKNOWN";
}

Errc errc_from_wire(std::uint16_t value) noexcept {
  const auto e = static_cast<Errc>(value);
  // errc_name() returns "UNKNOWN" only for kUnknown and values we do not know.
  if (e != Errc::kUnknown && errc_name(e) == "UNKNOWN") return Errc::kUnknown;
  return e;
}

Errc to_wire_errc(std::error_code ec) noexcept {
  if (!ec) return Errc::kOk;
  if (ec.category() == authrpc_category()) return static_cast<Errc>(ec.value());
  // Other authrpc categories (TLS) name their Errc as the default condition.
  if (const auto cond = ec.default_error_condition(); cond.category() == authrpc_category()) {
    return static_cast<Errc>(cond.value());
  }
  if (ec == asio::error::operation_aborted) return Errc::kCancelled;
  if (ec == asio::error::timed_out) return Errc::kDeadlineExceeded;
  if (ec == asio::error::eof) return Errc::kUnavailable;
  // Network failures mean "not reachable now"; anything else a handler
  // passes on is an unknown failure (not worth a blind retry).
  if (!is_errno(ec)) return Errc::kUnknown;
  switch (ec.value()) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ENETUNREACH:
    case ENETDOWN:
    case EHOSTUNREACH:
    case ETIMEDOUT:
    case EAGAIN:  // a Unix listener's queue is full: busy now
      return Errc::kUnavailable;
    default:
      return Errc::kUnknown;
  }
}

RetryAdvice retry_advice(std::error_code ec) noexcept {
  if (!ec) return RetryAdvice::kNone;
  if (const auto cond = ec.default_error_condition();
      ec.category() != authrpc_category() && cond.category() == authrpc_category()) {
    return retry_advice(make_error_code(static_cast<Errc>(cond.value())));
  }
  if (ec.category() != authrpc_category()) {
    // Transport failures (refused, reset, unreachable, timed out) are transient;
    // a bad address or a missing socket path will not fix itself.
    if (!is_errno(ec)) return RetryAdvice::kRetry;
    switch (ec.value()) {
      case EAFNOSUPPORT:
      case EINVAL:
      case ENOENT:
      case EACCES:
      case ENOTDIR:
        return RetryAdvice::kGiveUp;
      default:
        return RetryAdvice::kRetry;
    }
  }
  switch (static_cast<Errc>(ec.value())) {
    case Errc::kOk: return RetryAdvice::kNone;
    case Errc::kUnavailable:
    case Errc::kResourceExhausted:
    case Errc::kAborted:
    case Errc::kDeadlineExceeded:
    case Errc::kNegotiationTimeout:
    case Errc::kServerBusy:
    case Errc::kConnectionClosed:
    case Errc::kIdleTimeout:
      return RetryAdvice::kRetry;
    case Errc::kUnauthenticated:
    case Errc::kCredentialsExpired:
      return RetryAdvice::kReauthenticate;
    default:
      return RetryAdvice::kGiveUp;
  }
}

std::string_view to_string(RetryAdvice advice) noexcept {
  switch (advice) {
    case RetryAdvice::kNone: return "none";
    case RetryAdvice::kRetry: return "retry";
    case RetryAdvice::kReauthenticate: return "reauthenticate";
    case RetryAdvice::kGiveUp: return "give-up";
  }
  return "give-up";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  const auto* named = dynamic_cast<const NamedErrorCategory*>(&code.category());
  std::string out = named != nullptr ? std::string(named->code_name(code.value())) : code.message();
  if (!message.empty()) {
    out += ": ";
    out += message;
  }
  return out;
}

}  // namespace authrpc
