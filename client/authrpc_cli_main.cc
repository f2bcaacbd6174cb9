// authrpc: command-line client. `authrpc call` makes one call and prints the
// response on stdout; `authrpc token ...` is in client/token_commands.cc.
// Exit statuses and the failure line: client/cli_exit.h, docs/CLI.md.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/client/cli_args.h"
#include "authrpc/client/cli_exit.h"
#include "authrpc/client/client.h"
#include "authrpc/client/mechanism_flags.h"
#include "authrpc/client/token_commands.h"
#include "authrpc/client/tls_flags.h"
#include "authrpc/security/credentials_file.h"

#ifndef AUTHRPC_VERSION
#error "AUTHRPC_VERSION must be defined (CMakeLists.txt sets it from project(VERSION))"
#endif
#ifndef AUTHRPC_GIT_COMMIT
#define AUTHRPC_GIT_COMMIT "unknown"
#endif

namespace {

using authrpc::cli::report_failure;

constexpr const char* kProgram = "authrpc";

constexpr const char* kOverview = R"(usage: authrpc <command> [options]

commands:
  call       make one call and print the response (authrpc call --help)
  token      fetch, renew, cancel or print delegation tokens (authrpc token --help)
  version    print the version (also: authrpc --version)
  help       this text

Exit status (the same for every command; docs/CLI.md):
  0  success
  1  the call failed for another reason (NOT_FOUND, INVALID_ARGUMENT, ...)
  2  usage: a bad option, value or argument
  3  credentials: missing, refused or expired (kinit, fetch a token, retry)
  4  unavailable: unreachable, busy, timed out (retry later)
  5  permission denied
A failure prints one line on stderr: authrpc: CODE: message [advice]
(a usage error: authrpc: USAGE: message (see ...)).
)";

constexpr const char* kCallHelp = R"(usage: authrpc call --server URI [options] SERVICE METHOD

Makes one call and prints the response on stdout, followed by a newline
unless it ends with one (--raw: the bytes exactly as received).

  --server URI       tcp://HOST:PORT, tcp://[::1]:PORT, tls://HOST:PORT or
                     unix:/path.sock (required)
  --auth NAME        mechanism to use; repeat to allow several, in order of
                     preference (default: simple). Never falls back to one
                     not listed.
  --do-as USER       act as USER (proxy user); the server must allow the
                     authenticated user to impersonate USER (docs/AUTHZ.md)
  --data TEXT        request payload (default: empty)
  --data-file FILE   request payload from FILE ('-' for stdin)
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

Exit status: 0 success, 1 other failure, 2 usage, 3 credentials,
4 unavailable (retry), 5 permission denied (authrpc help).
)";

int usage_error(const std::string& message) {
  return authrpc::cli::report_usage(kProgram, message, "authrpc call --help");
}

int call_command(int argc, char** argv) {
  std::string server;
  std::vector<std::string> mechanisms;
  std::string data, do_as;
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  // --user, --keytab, --token-file, ...: what the mechanisms declare.
  authrpc::cli::MechanismFlags mechanism_flags(registry);
  std::chrono::milliseconds timeout{0}, connect_timeout{10'000};
  bool raw = false;
  std::vector<std::string> positional;
  authrpc::cli::TlsFlags tls_flags;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    const auto tls_used = tls_flags.parse(arg, i + 1 < argc ? argv[i + 1] : nullptr);
    if (!tls_used.ok()) {
      return usage_error(tls_used.status().message);
    } else if (*tls_used > 0) {
      i += *tls_used - 1;
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kCallHelp, stdout);
      std::fputs("\nMechanism options (declared by the mechanisms named):\n", stdout);
      std::fputs(mechanism_flags.help().c_str(), stdout);
      std::fputs(kCallExamples, stdout);
      return 0;
    } else if (arg == "--raw") {
      raw = true;
    } else if (arg == "--server" || arg == "--auth" || arg == "--do-as" || arg == "--data") {
      if (!(v = value())) return usage_error(arg + " needs a value");
      if (arg == "--server") server = v;
      if (arg == "--auth") mechanisms.emplace_back(v);
      if (arg == "--do-as") do_as = v;
      if (arg == "--data") data = v;
    } else if (mechanism_flags.declares(arg)) {
      if (!(v = value())) return usage_error(arg + " needs a value");
      mechanism_flags.set(arg, v);
    } else if (arg == "--data-file") {
      if (!(v = value())) return usage_error("--data-file needs a value");
      std::stringstream buf;
      if (std::string(v) == "-") {
        buf << std::cin.rdbuf();
      } else {
        std::ifstream in(v, std::ios::binary);
        if (!in) return usage_error(std::string("--data-file: cannot read ") + v);
        buf << in.rdbuf();
      }
      data = buf.str();
    } else if (arg == "--timeout" || arg == "--connect-timeout") {
      if (!(v = value())) return usage_error(arg + " needs a value");
      const auto ms = authrpc::cli::parse_milliseconds(v);
      if (!ms) return usage_error(arg + " '" + v + "' is not a number of milliseconds from 1 to 2147483647");
      (arg == "--timeout" ? timeout : connect_timeout) = *ms;
    } else if (arg.starts_with("-") && arg != "-") {
      return usage_error("unknown option " + arg);
    } else {
      positional.push_back(arg);
    }
  }
  if (server.empty()) return usage_error("--server is required");
  if (positional.size() != 2) return usage_error("expected SERVICE METHOD");
  auto endpoint = authrpc::Endpoint::parse(server);
  if (!endpoint.ok()) return usage_error("--server: " + endpoint.status().message);
  if (mechanisms.empty()) mechanisms.emplace_back("simple");  // names: documented default (--help)

  const auto known = registry.client_names();
  authrpc::ClientOptions options;
  options.endpoint = *endpoint;
  options.connect_timeout = connect_timeout;
  if (authrpc::Status s = tls_flags.apply(options); !s.ok()) {
    return s.code == authrpc::Errc::kConfigError ? usage_error(s.message) : report_failure(kProgram, s);
  }
  options.do_as = do_as;
  for (const auto& name : mechanisms) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return usage_error("--auth " + name + ": unknown mechanism (known: " + list + ")");
    }
    nlohmann::json mech_options = mechanism_flags.options_for(name);
    for (const auto& flag : mechanism_flags.credentials_files(name)) {
      // Checked here so that a missing file says "fetch a token", not the
      // transport-style advice the mechanism gives for an unreadable file.
      const std::string* given = mechanism_flags.given(flag.flag);
      const std::string path = authrpc::security::CredentialsFile::locate(given ? *given : "");
      if (path.empty()) {
        return usage_error("--auth " + name + " needs " + flag.flag + " FILE (or AUTHRPC_TOKEN_FILE)");
      }
      if (auto file = authrpc::security::CredentialsFile::read(path); !file.ok()) {
        return report_failure(kProgram, authrpc::cli::credentials_status(file.status(), path));
      }
      mech_options[flag.option] = path;
    }
    auto mechanism = registry.make_client(name, mech_options);
    if (!mechanism.ok()) {
      const auto& s = mechanism.status();
      return s.code == authrpc::Errc::kConfigError ? usage_error(s.message) : report_failure(kProgram, s);
    }
    options.mechanisms.push_back(*mechanism);
  }
  auto client = authrpc::Client::connect(std::move(options));
  if (!client.ok()) return report_failure(kProgram, client.status());
  authrpc::CallOptions call_options;
  call_options.timeout = timeout;
  auto response = (*client)->call(positional[0], positional[1], data, call_options);
  if (!response.ok()) return report_failure(kProgram, response.status());
  std::fwrite(response->data(), 1, response->size(), stdout);
  if (!raw && !response->empty() && response->back() != '\n') std::fputc('\n', stdout);
  if (std::fflush(stdout) != 0) {
    return report_failure(kProgram, {std::error_code(errno, std::generic_category()), "writing the response"});
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kOverview, stderr);
    return authrpc::cli::kExitUsage;
  }
  const std::string command = argv[1];
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kOverview, stdout);
    return 0;
  }
  if (command == "version" || command == "--version") {
    std::printf("authrpc %s (commit %s)\n", AUTHRPC_VERSION, AUTHRPC_GIT_COMMIT);
    return 0;
  }
  if (command == "call") return call_command(argc - 2, argv + 2);
  if (command == "token") return authrpc::cli::token_command(argc - 2, argv + 2);
  return authrpc::cli::report_usage(kProgram, "unknown command '" + command + "'", "authrpc help");
}
