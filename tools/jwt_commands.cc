#include "authrpc/tools/jwt_commands.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "authrpc/base/log.h"
#include "authrpc/components/jwt/jwt_compact.h"
#include "authrpc/components/jwt/jwt_credential_source.h"
#include "authrpc/security/base64url.h"
#include "authrpc/security/secret_bytes.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/flag_parser.h"
#include "authrpc/tools/stats_summary.h"

namespace authrpc::cli {
namespace {

using json = nlohmann::json;
using SysClock = std::chrono::system_clock;

constexpr const char* kProgram = "authrpc";

constexpr const char* kOverview = R"(usage: authrpc jwt inspect FILE|-

Access tokens (JWTs) of the jwt mechanism (docs/JWT.md).

  inspect  print a token's header, claims and times (not verified)

authrpc jwt inspect --help has the details. Exit status as for every
authrpc command (authrpc help).
)";

constexpr const char* kInspectHelp = R"(usage: authrpc jwt inspect FILE|-

Decodes the JWT in FILE (- for stdin; whitespace around it is ignored) and
prints its JOSE header and its claims as indented JSON, then exp, nbf and
iat in UTC with how far they are from now ("expires in ...", "expired ...
ago"), and the signature's length, never the signature itself.

Nothing is verified: the output is what the token claims, signed by anyone
or no one. authrpc-server checks the signature against the issuer's keys,
then iss, aud and the times (docs/JWT.md, "What the server checks"); this
shows which of them a refused token gets wrong.

Strings from the token are printed with control characters and everything
outside printable ASCII escaped (\uXXXX), so a token cannot drive the
terminal.

Example:
  authrpc jwt inspect ~/.cache/orders.jwt
  oidc-token orders | authrpc jwt inspect -

Exit status: 0 decoded, 1 not a JWT (INVALID_ARGUMENT: not three parts, a
part not base64url, header or payload not a JSON object), 2 usage (or FILE
cannot be read).
)";

int inspect_usage(const std::string& message) {
  return report_usage(kProgram, "jwt inspect: " + message, "authrpc jwt inspect --help");
}

std::string_view trim_space(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  const auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

// JSON with every string's control characters and non-ASCII escaped
// (\uXXXX): nothing from the token reaches the terminal as it was sent.
std::string safe_json(const json& j) {
  return j.dump(2, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
}

// One line for a date claim: "exp: 2026-12-01T22:00:00Z (expires in 0h 59m 58s)".
std::string date_line(const json& claims, std::string_view name, SysClock::time_point now) {
  const auto it = claims.find(std::string(name));
  const std::string label = std::string(name) + ": ";
  if (it == claims.end()) {
    return name == "exp" ? label + "none (authrpc-server refuses a token without exp)\n" : "";
  }
  const auto secs = jwt_numeric_date(*it);
  if (!secs) {
    return label + "not a date (seconds since 1970, up to the year 3000): authrpc-server refuses the token\n";
  }
  const double ahead = *secs - std::chrono::duration<double>(now.time_since_epoch()).count();
  const std::string in = "in " + duration_text(ahead), ago = duration_text(-ahead) + " ago";
  std::string when;
  if (name == "exp") {
    when = ahead >= 0 ? "expires " + in : "expired " + ago;
  } else if (name == "nbf") {
    when = ahead > 0 ? "not valid yet: " + in : ago;
  } else {
    when = ahead > 0 ? in + ": issued in the future" : ago;
  }
  return label + jwt_utc(static_cast<std::int64_t>(std::floor(*secs))) + " (" + when + ")\n";
}

// The text in `source` (a path, or "-" for stdin), at most
// JwtCredentialSource::kMaxTokenBytes + 1 bytes; why not as a usage message.
std::optional<std::string> read_source(const std::string& source, std::string* text) {
  const bool from_stdin = source == "-";
  const int fd = from_stdin ? STDIN_FILENO : ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "cannot read " + source + ": " + std::strerror(errno);
  char buf[4096];
  std::optional<std::string> error;
  while (text->size() <= JwtCredentialSource::kMaxTokenBytes) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) error = "cannot read " + (from_stdin ? std::string("stdin") : source) + ": " + std::strerror(errno);
    if (n <= 0) break;
    text->append(buf, static_cast<std::size_t>(n));
  }
  security::cleanse(buf, sizeof buf);
  if (!from_stdin) ::close(fd);
  return error;
}

int inspect(int argc, char** argv) {
  std::vector<std::string> files;
  FlagParser parser;
  parser.positional(&files);
  if (auto code = parse_or_exit(parser, argc, argv, kInspectHelp, kProgram, "authrpc jwt inspect --help", "jwt inspect: ")) {
    return *code;
  }
  if (files.size() > 1) {
    return inspect_usage("unexpected argument '" + escape_for_log(files[1]) + "' (one FILE or -)");
  }
  const std::string source = files.empty() ? std::string() : files[0];
  if (source.empty()) return inspect_usage("FILE (or - for stdin) is required");
  std::string text;
  if (auto error = read_source(source, &text)) {
    security::cleanse(text.data(), text.size());
    return inspect_usage(*error);
  }
  const std::string_view token = trim_space(text);
  Result<std::string> described = Status(Errc::kInvalidArgument, "empty: no token");
  if (text.size() > JwtCredentialSource::kMaxTokenBytes) {
    described = Status(Errc::kInvalidArgument,
                       "over " + std::to_string(JwtCredentialSource::kMaxTokenBytes) + " bytes: not a token");
  } else if (!token.empty()) {
    described = describe_jwt(token, SysClock::now());
  }
  security::cleanse(text.data(), text.size());
  if (!described.ok()) {
    const std::string from = source == "-" ? "stdin" : source;
    return report_failure(kProgram, Status(described.status().code, from + ": " + described.status().message));
  }
  std::fwrite(described->data(), 1, described->size(), stdout);
  if (std::fflush(stdout) != 0) {
    return report_failure(kProgram, {std::error_code(errno, std::generic_category()), "writing the token"});
  }
  return kExitOk;
}

}  // namespace

Result<std::string> describe_jwt(std::string_view token, SysClock::time_point now) {
  auto parts = split_compact_jws(token);
  if (!parts.ok()) return parts.status();
  auto header = decode_jwt_object(parts->header, "header");
  if (!header.ok()) return header.status();
  auto claims = decode_jwt_object(parts->payload, "payload");
  if (!claims.ok()) return claims.status();
  const auto signature = security::base64url_decode(parts->signature);
  if (!signature) return Status(Errc::kInvalidArgument, "signature is not base64url");

  std::string out = "not verified: decoded only; neither the signature nor the claims are checked\n";
  out += "header:\n" + safe_json(*header) + "\n";
  out += "claims:\n" + safe_json(*claims) + "\n";
  for (const char* name : {"exp", "nbf", "iat"}) out += date_line(*claims, name, now);
  out += signature->empty() ? "signature: none (an unsigned token: authrpc-server never accepts one)\n"
                            : "signature: " + std::to_string(signature->size()) + " bytes (not shown)\n";
  return out;
}

int jwt_command(int argc, char** argv) {
  if (auto code = overview_or_exit(argc, argv, kOverview)) return *code;
  const std::string name = argv[0];
  if (name == "inspect") return inspect(argc - 1, argv + 1);
  return report_usage(kProgram, "unknown jwt command '" + escape_for_log(name) + "'", "authrpc jwt --help");
}

}  // namespace authrpc::cli
