#include "authrpc/tools/cli_exit.h"

#include <cstdio>
#include <string>

namespace authrpc::cli {

int exit_code_for(const Status& status) {
  if (status.ok()) return kExitOk;
  const Errc code = to_wire_errc(status.code);
  switch (code) {
    case Errc::kPermissionDenied:
      return kExitPermission;
    case Errc::kConfigError:
      return kExitUsage;
    // Credentials: missing, refused or too old. MECHANISM_UNAVAILABLE is
    // here because the fix is the same (get credentials the server accepts).
    case Errc::kAuthenticationFailed:
    case Errc::kCredentialsExpired:
    case Errc::kUnauthenticated:
    case Errc::kMechanismUnavailable:
      return kExitAuth;
    default:
      break;
  }
  switch (retry_advice(status.code)) {
    case RetryAdvice::kRetry: return kExitUnavailable;
    case RetryAdvice::kReauthenticate: return kExitAuth;
    default: return kExitFailure;
  }
}

int report_failure(std::string_view program, const Status& status) {
  const std::string_view name = errc_name(to_wire_errc(status.code));
  // A system error (a refused connect) has no authrpc name of its own: its
  // text goes after the mapped code so that nothing is lost.
  std::string message = status.message;
  if (status.code.category() != authrpc_category() &&
      status.code.default_error_condition().category() != authrpc_category()) {
    message = message.empty() ? status.code.message() : message + ": " + status.code.message();
  }
  if (!message.empty() && message.back() == '\n') message.pop_back();
  std::fprintf(stderr, "%.*s: %.*s: %s [%.*s]\n", static_cast<int>(program.size()), program.data(),
               static_cast<int>(name.size()), name.data(), message.c_str(),
               static_cast<int>(to_string(retry_advice(status.code)).size()),
               to_string(retry_advice(status.code)).data());
  return exit_code_for(status);
}

int report_usage(std::string_view program, std::string_view message, std::string_view help) {
  std::fprintf(stderr, "%.*s: USAGE: %.*s (see %.*s)\n", static_cast<int>(program.size()),
               program.data(), static_cast<int>(message.size()), message.data(),
               static_cast<int>(help.size()), help.data());
  return kExitUsage;
}

}  // namespace authrpc::cli
