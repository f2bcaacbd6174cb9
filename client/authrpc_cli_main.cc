// authrpc: command-line client. `authrpc call` makes one call and prints the
// response on stdout.
#include <cstdio>
#include <unistd.h>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "auth/mechanism_registry.h"
#include "client/client.h"
#include "client/token_commands.h"
#include "client/client_tls.h"

namespace {

constexpr const char* kUsage = R"(usage: authrpc <command> [options]

commands:
  call     make one call and print the response
  token    fetch, renew, cancel or print delegation tokens (authrpc token --help)
  help     this text

authrpc call --server URI [options] SERVICE METHOD
  --server URI       tcp://HOST:PORT, tcp://[::1]:PORT, tls://HOST:PORT or
                     unix:/path.sock (required)
  --auth NAME        mechanism to use; repeat to allow several, in order of
                     preference (default: simple). Never falls back to one
                     not listed.
  --user NAME        user name for --auth simple (default: the OS user)
  --do-as USER       act as USER (proxy user); the server must allow the
                     authenticated user to impersonate USER (docs/AUTHZ.md)
  --service-principal P  kerberos, kerberos-sasl: the server principal to
                     expect, e.g. rpc/host@REALM (default: rpc@<host of
                     --server>, localhost for unix:)
  --principal P --keytab F   kerberos, kerberos-sasl: log in from a keytab
                     instead of using the ticket cache
  --ccache C         kerberos, kerberos-sasl: ticket cache (default:
                     KRB5CCNAME)
  --token-file F     token, token-digest, token-scram: credentials file
                     holding a token for --server (default: AUTHRPC_TOKEN_FILE)
  --sasl-service S --server-fqdn H   token-digest, token-scram: the SASL
                     service and host names the server is configured with
                     (default: authrpc, localhost)
  --data TEXT        request payload (default: empty)
  --data-file FILE   request payload from FILE ('-' for stdin)
  --timeout MS       call deadline in milliseconds (default: none)
  --connect-timeout MS  connect + negotiation bound (default: 10000)
  --tls              use TLS (same as a tls:// server URI); needs --ca
  --ca FILE          CA bundle (PEM) the server's certificate must chain to
  --cert F --key F   client certificate and key (PEM) for mutual TLS / --auth x509
  --tls-min-version V   1.3 (default) or 1.2
  --encryption P     disabled|optional|required (default: required for
                     tls://, else disabled); optional falls back to plaintext
  --authentication P disabled|optional|required: required refuses simple

Examples:
  authrpc call --server tcp://127.0.0.1:7000 --auth simple sys whoami
  authrpc call --server tcp://localhost:7000 --auth kerberos sys whoami
  authrpc call --server tcp://localhost:7000 --auth kerberos-sasl sys whoami
  authrpc call --server tcp://localhost:7000 --auth token --token-file job.tokens sys whoami
  authrpc call --server tcp://localhost:7000 --auth token-scram --token-file job.tokens sys whoami
  authrpc call --server tls://localhost:7443 --ca ca.pem --auth kerberos sys whoami

Exit status: 0 on success; 1 when the call fails (the error is printed on
stderr as CODE: message, with what to do about it); 2 for usage errors.
)";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "authrpc: %s\n(see authrpc help)\n", message.c_str());
  return 2;
}

int print_failure(const authrpc::Status& s) {
  std::fprintf(stderr, "error: %s [%s]\n", s.to_string().c_str(),
               std::string(authrpc::to_string(authrpc::retry_advice(s.code))).c_str());
  return 1;
}

int call_command(int argc, char** argv) {
  std::string server;
  std::vector<std::string> mechanisms;
  std::string user, data, token_file, do_as;
  nlohmann::json token_sasl = nlohmann::json::object();  // --sasl-service, --server-fqdn
  nlohmann::json kerberos = nlohmann::json::object();
  long timeout_ms = 0, connect_timeout_ms = 10'000;
  std::vector<std::string> positional;
  authrpc::TlsFlags tls_flags;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)name;
      return argv[++i];
    };
    const char* v = nullptr;
    std::string tls_error;
    if (const int used = tls_flags.parse(arg, i + 1 < argc ? argv[i + 1] : nullptr, &tls_error);
        used > 0 || !tls_error.empty()) {
      if (!tls_error.empty()) return usage_error(tls_error);
      i += used - 1;
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--server") {
      if (!(v = value("--server"))) return usage_error("--server needs a value");
      server = v;
    } else if (arg == "--auth") {
      if (!(v = value("--auth"))) return usage_error("--auth needs a value");
      mechanisms.emplace_back(v);
    } else if (arg == "--do-as") {
      if (!(v = value("--do-as"))) return usage_error("--do-as needs a value");
      do_as = v;
    } else if (arg == "--user") {
      if (!(v = value("--user"))) return usage_error("--user needs a value");
      user = v;
    } else if (arg == "--service-principal" || arg == "--principal" || arg == "--keytab" ||
               arg == "--ccache") {
      if (!(v = value(arg.c_str()))) return usage_error(arg + " needs a value");
      const std::string key = arg == "--service-principal" ? "service_principal" : arg.substr(2);
      kerberos[key] = v;
    } else if (arg == "--sasl-service" || arg == "--server-fqdn") {
      if (!(v = value(arg.c_str()))) return usage_error(arg + " needs a value");
      token_sasl[arg == "--sasl-service" ? "sasl_service" : "server_fqdn"] = v;
    } else if (arg == "--token-file") {
      if (!(v = value("--token-file"))) return usage_error("--token-file needs a value");
      token_file = v;
    } else if (arg == "--data") {
      if (!(v = value("--data"))) return usage_error("--data needs a value");
      data = v;
    } else if (arg == "--data-file") {
      if (!(v = value("--data-file"))) return usage_error("--data-file needs a value");
      std::stringstream buf;
      if (std::string(v) == "-") {
        buf << std::cin.rdbuf();
      } else {
        std::ifstream in(v, std::ios::binary);
        if (!in) return usage_error(std::string("cannot read ") + v);
        buf << in.rdbuf();
      }
      data = buf.str();
    } else if (arg == "--timeout" || arg == "--connect-timeout") {
      if (!(v = value(arg.c_str()))) return usage_error(arg + " needs a value");
      try {
        (arg == "--timeout" ? timeout_ms : connect_timeout_ms) = std::stol(v);
      } catch (...) {
        return usage_error(arg + " must be a number of milliseconds");
      }
    } else if (arg.starts_with("--")) {
      return usage_error("unknown option " + arg);
    } else {
      positional.push_back(arg);
    }
  }
  if (server.empty()) return usage_error("--server is required");
  if (positional.size() != 2) return usage_error("expected SERVICE METHOD");
  auto endpoint = authrpc::Endpoint::parse(server);
  if (!endpoint.ok()) return usage_error(endpoint.status().message);
  if (mechanisms.empty()) mechanisms.emplace_back("simple");

  const auto registry = authrpc::MechanismRegistry::with_builtins();
  authrpc::ClientOptions options;
  options.endpoint = *endpoint;
  options.connect_timeout = std::chrono::milliseconds(connect_timeout_ms);
  if (authrpc::Status s = tls_flags.apply(options); !s.ok()) return usage_error(s.message);
  options.do_as = do_as;
  for (const auto& name : mechanisms) {
    nlohmann::json mech_options = nlohmann::json::object();
    if (name == "simple" && !user.empty()) mech_options["user"] = user;
    if (name == "kerberos" || name == "kerberos-sasl") mech_options = kerberos;
    if (name == "token-digest" || name == "token-scram") mech_options = token_sasl;
    if (name.starts_with("token") && !token_file.empty()) mech_options["token_file"] = token_file;
    auto mechanism = registry.make_client(name, mech_options);
    if (!mechanism.ok()) return usage_error(mechanism.status().message);
    options.mechanisms.push_back(*mechanism);
  }
  auto client = authrpc::Client::connect(std::move(options));
  if (!client.ok()) return print_failure(client.status());
  authrpc::CallOptions call_options;
  call_options.timeout = std::chrono::milliseconds(timeout_ms);
  auto response = (*client)->call(positional[0], positional[1], data, call_options);
  if (!response.ok()) return print_failure(response.status());
  std::fwrite(response->data(), 1, response->size(), stdout);
  if (!response->empty() && response->back() != '\n' && isatty(fileno(stdout))) std::fputc('\n', stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "call") return call_command(argc - 2, argv + 2);
  if (command == "token") return authrpc::cli::token_command(argc - 2, argv + 2);
  return usage_error("unknown command '" + command + "'");
}
