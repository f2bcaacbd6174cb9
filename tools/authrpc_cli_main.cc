// authrpc: command-line client. `authrpc call` makes one call and prints the
// response on stdout (with --json, tools/json_call.cc); `authrpc stats`
// summarises sys.stats (tools/stats_summary.h); `authrpc describe` is in
// tools/proto_commands.cc, `authrpc token ...` in tools/token_commands.cc,
// `authrpc jwt ...` in tools/jwt_commands.cc.
// Exit statuses and the failure line: tools/cli_exit.h, docs/CLI.md.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "authrpc/base/log.h"
#include "authrpc/client/client.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/flag_parser.h"
#include "authrpc/tools/json_call.h"
#include "authrpc/tools/jwt_commands.h"
#include "authrpc/tools/proto_commands.h"
#include "authrpc/tools/server_flags.h"
#include "authrpc/tools/stats_summary.h"
#include "authrpc/tools/token_commands.h"

namespace {

using authrpc::cli::report_failure;

constexpr const char* kProgram = "authrpc";

constexpr const char* kOverview = R"(usage: authrpc <command> [options]

commands:
  call       make one call and print the response (authrpc call --help)
  describe   list a server's services and their schemas (authrpc describe --help)
  token      fetch, renew, cancel or print delegation tokens (authrpc token --help)
  stats      print a server's metrics: sessions, calls, p50/p99 (authrpc stats --help)
  jwt        inspect an access token (JWT) without verifying it (authrpc jwt --help)
  version    print the version (also: authrpc --version)
  help       this text

Exit status (the same for every command; docs/CLI.md):
  0  success
  1  the call failed for another reason (NOT_FOUND, not an authrpc server, ...)
  2  usage: a bad option, value or argument; an unreadable --ca/--cert/--key
  3  credentials: missing, unreadable, refused or expired (kinit, fetch a token)
  4  unavailable: unreachable, busy, timed out (retry later)
  5  permission denied
A failure prints one line on stderr: authrpc: CODE: message [advice]
(a usage error: authrpc: USAGE: message (see ...)).
)";

constexpr const char* kCallHelp = R"(usage: authrpc call --server URI [options] SERVICE METHOD

Makes one call and prints the response on stdout, followed by a newline
unless it ends with one (--raw: the bytes exactly as received).
With --json, the call is to a protobuf service (authrpc describe): the
request is written and the response printed in the proto3 JSON mapping.

  --server URI       tcp://HOST:PORT, tcp://[::1]:PORT, tls://HOST:PORT or
                     unix:/path.sock (required)
  --auth NAME        mechanism to use; repeat to allow several, in order of
                     preference (default: simple). Never falls back to one
                     not listed.
  --do-as USER       act as USER (proxy user); the server must allow the
                     authenticated user to impersonate USER (docs/AUTHZ.md)
  --data TEXT        request payload (default: empty)
  --data-file FILE   request payload from FILE ('-' for stdin)
  --json TEXT        the request message in JSON, for a protobuf service:
                     the CLI reads the service's schema (sys.describe),
                     sends the message's encoding and prints the response
                     as indented JSON with the .proto's field names (fields
                     at their default value left out). A method the client
                     streams to takes a JSON array of messages; a method
                     the server streams to prints one JSON document per
                     line, per message. Not with --data or --raw.
  --json-file FILE   --json's text from FILE ('-' for stdin)
  --raw              print the response exactly, without adding a newline
  --timeout MS       call deadline, 1 to 2147483647 milliseconds (default:
                     none)
  --connect-timeout MS  connect + negotiation bound (default: 10000)
  --tls              use TLS (same as a tls:// server URI); needs --ca
  --ca FILE          CA bundle (PEM) the server's certificate must chain to
  --cert F --key F   client certificate and key (PEM) for mutual TLS / --auth x509
  --tls-min-version V   1.3 (default) or 1.2
  --encryption P     disabled|optional|required (default: required for
                     tls://, else disabled); optional falls back to plaintext
  --authentication P disabled|optional|required: required refuses simple
)";

// After the mechanisms' own options (MechanismFlags::help()).
constexpr const char* kCallExamples = R"(
Examples:
  authrpc call --server tcp://127.0.0.1:7000 --auth simple sys whoami
  authrpc call --server tcp://localhost:7000 --auth kerberos sys whoami
  authrpc call --server tcp://localhost:7000 --auth kerberos-sasl sys whoami
  authrpc call --server unix:/run/db.sock --auth token --token-file job.tokens sys whoami
  authrpc call --server tcp://localhost:7000 --auth token-scram --token-file job.tokens sys whoami
  authrpc call --server tls://localhost:7443 --ca ca.pem --auth kerberos sys whoami
  authrpc call --server tls://localhost:7443 --ca ca.pem --auth jwt --jwt-file token.jwt sys whoami
  authrpc call --server tcp://localhost:7000 kv.Store Get --json '{"key": "k1"}'

Exit status: 0 success, 1 other failure, 2 usage, 3 credentials,
4 unavailable (retry), 5 permission denied (authrpc help).
)";

int usage_error(const std::string& message, const char* help = "authrpc call --help") {
  return authrpc::cli::report_usage(kProgram, message, help);
}

// A FlagParser value that reads the file it names ('-': stdin) into *out
// and sets *given.
authrpc::cli::FlagParser::OnValue file_contents(std::string* out, bool* given) {
  return [out, given](std::string_view path) {
    std::stringstream buf;
    if (path == "-") {
      buf << std::cin.rdbuf();
    } else {
      std::ifstream in(std::string(path), std::ios::binary);
      if (!in) return authrpc::Status(authrpc::Errc::kInvalidArgument, "cannot read " + std::string(path));
      buf << in.rdbuf();
    }
    *out = buf.str();
    *given = true;
    return authrpc::Status();
  };
}

// A FlagParser value kept as given; sets *given.
authrpc::cli::FlagParser::OnValue text(std::string* out, bool* given) {
  return [out, given](std::string_view v) {
    *out = std::string(v);
    *given = true;
    return authrpc::Status();
  };
}

int call_command(int argc, char** argv) {
  authrpc::cli::ServerFlags flags;
  std::string data, json;
  bool raw = false, data_given = false, json_given = false;
  std::vector<std::string> positional;
  authrpc::cli::FlagParser parser;
  flags.add_to(parser);
  parser.flag("--raw", &raw)
      .value("--data", text(&data, &data_given))
      .value("--data-file", file_contents(&data, &data_given))
      .value("--json", text(&json, &json_given))
      .value("--json-file", file_contents(&json, &json_given))
      .positional(&positional);
  const std::string help = std::string(kCallHelp) + "\nMechanism options (declared by the mechanisms named):\n" +
                           flags.mechanism_flags().help() + kCallExamples;
  if (auto code = authrpc::cli::parse_or_exit(parser, argc, argv, help, kProgram, "authrpc call --help")) return *code;
  if (!flags.has_server()) return usage_error("--server is required");
  if (positional.size() != 2) return usage_error("expected SERVICE METHOD");
  if (json_given && data_given) return usage_error("--json and --data (or --data-file) exclude each other");
  if (json_given && raw) return usage_error("--raw prints a --data call's bytes; --json prints JSON");
  auto connected = flags.connect("authrpc call --help");
  if (const int* code = std::get_if<int>(&connected)) return *code;
  auto& client = std::get<std::unique_ptr<authrpc::Client>>(connected);
  if (json_given) return authrpc::cli::json_call(*client, {positional[0], positional[1], json, flags.timeout()});
  authrpc::CallOptions call_options;
  call_options.timeout = flags.timeout();
  auto response = client->call(positional[0], positional[1], data, call_options);
  if (!response.ok()) return report_failure(kProgram, response.status());
  std::fwrite(response->data(), 1, response->size(), stdout);
  if (!raw && !response->empty() && response->back() != '\n') std::fputc('\n', stdout);
  if (std::fflush(stdout) != 0) {
    return report_failure(kProgram, {std::error_code(errno, std::generic_category()), "writing the response"});
  }
  return 0;
}

constexpr const char* kStatsHelp = R"(usage: authrpc stats --server URI [options]

Calls sys.stats and prints a summary of the server's metrics: version and
uptime, connections, sessions by mechanism and outcome, calls by method and
code with the handlers' p50/p99 (interpolated in the histogram's buckets, as
Prometheus' histogram_quantile does), token operations, the process's
descriptors, memory and CPU. The caller must be an authorization admin of
the server (docs/AUTHZ.md); a server without an authorization policy refuses
everyone (PERMISSION_DENIED).

  --json             print the server's JSON as received (docs/OPERATIONS.md)
  --server, --auth, --do-as, --timeout, --connect-timeout, TLS and the
  mechanisms' options: as for authrpc call (authrpc call --help)

Example:
  authrpc stats --server tcp://localhost:7000 --auth kerberos

Exit status: 0 success, 1 other failure, 2 usage, 3 credentials,
4 unavailable (retry), 5 permission denied (authrpc help).
)";

int stats_command(int argc, char** argv) {
  constexpr const char* kHelp = "authrpc stats --help";
  authrpc::cli::ServerFlags flags;
  bool json = false;
  authrpc::cli::FlagParser parser;
  flags.add_to(parser);
  parser.flag("--json", &json);
  if (auto code = authrpc::cli::parse_or_exit(parser, argc, argv, kStatsHelp, kProgram, kHelp)) return *code;
  auto connected = flags.connect(kHelp);
  if (const int* code = std::get_if<int>(&connected)) return *code;
  auto& client = std::get<std::unique_ptr<authrpc::Client>>(connected);
  authrpc::CallOptions call_options;
  call_options.timeout = flags.timeout();
  auto response = client->call("sys", "stats", "", call_options);
  if (!response.ok()) return report_failure(kProgram, response.status());
  std::string text(response->begin(), response->end());
  if (!json) {
    const auto parsed = nlohmann::json::parse(text, nullptr, false);
    auto summary = authrpc::cli::stats_summary(parsed);
    if (!summary.ok()) return report_failure(kProgram, summary.status());
    text = std::move(*summary);
  } else if (text.empty() || text.back() != '\n') {
    text += '\n';
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0) {
    return report_failure(kProgram, {std::error_code(errno, std::generic_category()), "writing the answer"});
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (auto code = authrpc::cli::overview_or_exit(argc - 1, argv + 1, kOverview)) return *code;
  const std::string command = argv[1];
  if (command == "version" || command == "--version") return authrpc::cli::print_version(kProgram);
  if (command == "call") return call_command(argc - 2, argv + 2);
  if (command == "describe") return authrpc::cli::describe_command(argc - 2, argv + 2);
  if (command == "token") return authrpc::cli::token_command(argc - 2, argv + 2);
  if (command == "stats") return stats_command(argc - 2, argv + 2);
  if (command == "jwt") return authrpc::cli::jwt_command(argc - 2, argv + 2);  // names: a subcommand (--help)
  return authrpc::cli::report_usage(kProgram, "unknown command '" + authrpc::escape_for_log(command) + "'", "authrpc help");
}
