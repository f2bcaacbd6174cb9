#include "authrpc/base/log.h"
#include "authrpc/tools/token_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/client/client.h"
#include "authrpc/security/credentials_file.h"
#include "authrpc/security/token_errors.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/flag_parser.h"
#include "authrpc/tools/mechanism_flags.h"
#include "authrpc/tools/tls_flags.h"

namespace authrpc::cli {
namespace {

using security::token_status;
using security::TokenUse;

constexpr const char* kProgram = "authrpc";

constexpr const char* kOverview = R"(usage: authrpc token <fetch|renew|cancel|print> [options]

Delegation tokens: fetch one over Kerberos, hand the credentials file to a
job, which then authenticates with `--auth token` alone (no ticket, no KDC).

  fetch    get a token from the server and store it in a credentials file
  renew    extend a token's life (its renewer only)
  cancel   revoke a token and remove it from the file (owner or renewer)
  print    show the tokens of a credentials file (never the password)

authrpc token SUBCOMMAND --help shows each one's options. Exit status as for
every authrpc command (authrpc help): 0 success, 1 other failure, 2 usage,
3 credentials, 4 unavailable, 5 permission denied.
)";

constexpr const char* kConnectionOptions = R"(
Connection options:
  --auth NAME        mechanism for the connection (default: kerberos; repeat
                     to allow several)
  --service-principal P, --principal P, --keytab F, --ccache C
                     Kerberos options, as for `authrpc call`
  --connect-timeout MS  connect + negotiation bound (default: 10000)
  --tls, --ca FILE, --cert FILE, --key FILE, --tls-min-version V
                     TLS options, as for `authrpc call` (a tls:// --server
                     needs --ca)
)";

constexpr const char* kFetchHelp = R"(usage: authrpc token fetch --server URI --renewer R -o FILE [options]

Gets a token from the server's token service (token.get) and adds it to the
credentials file FILE (created mode 0600; other tokens in it stay). The
connection must be Kerberos-authenticated (never a token).

  --server URI       the server to ask (required)
  --renewer R        who may renew the token: a principal (yarn@REALM) or a
                     short name (yarn), compared through the server's
                     principal mapping; "" for nobody (required)
  -o FILE, --output FILE, --token-file FILE
                     credentials file (default: $AUTHRPC_TOKEN_FILE)
  --service S        the service stamped into the token, i.e. the server URI
                     clients will connect to (default: --server)
)";

constexpr const char* kRenewHelp = R"(usage: authrpc token renew --server URI [--token-file FILE] [--service S] [options]

Renews the token for S (default: --server) found in FILE; only the token's
renewer may, over Kerberos. Prints the new expiry.

  --server URI       the server to ask (required)
  --token-file FILE  credentials file (default: $AUTHRPC_TOKEN_FILE)
  --service S        which token of the file (default: --server)
)";

constexpr const char* kCancelHelp = R"(usage: authrpc token cancel --server URI [--token-file FILE] [--service S] [options]

Cancels the token for S (default: --server) found in FILE (its owner or
renewer may) and removes it from FILE.

  --server URI       the server to ask (required)
  --token-file FILE  credentials file (default: $AUTHRPC_TOKEN_FILE)
  --service S        which token of the file (default: --server)
)";

constexpr const char* kPrintHelp = R"(usage: authrpc token print [--token-file FILE] [--json]

Shows each token's service, kind, owner, renewer, real user, dates, sequence
number and master key id. Never the password.

  --token-file FILE  credentials file (default: $AUTHRPC_TOKEN_FILE)
  --json             one JSON array instead of text
)";

enum class Sub { kFetch, kRenew, kCancel, kPrint };

std::string help_of(Sub sub) {
  switch (sub) {
    case Sub::kFetch: return std::string(kFetchHelp) + kConnectionOptions;
    case Sub::kRenew: return std::string(kRenewHelp) + kConnectionOptions;
    case Sub::kCancel: return std::string(kCancelHelp) + kConnectionOptions;
    case Sub::kPrint: return kPrintHelp;
  }
  return kOverview;
}

const char* name_of(Sub sub) {
  switch (sub) {
    case Sub::kFetch: return "fetch";
    case Sub::kRenew: return "renew";
    case Sub::kCancel: return "cancel";
    case Sub::kPrint: return "print";
  }
  return "?";
}

int usage_error(Sub sub, const std::string& message) {
  return report_usage(kProgram, "token " + std::string(name_of(sub)) + ": " + message,
                      "authrpc token " + std::string(name_of(sub)) + " --help");
}

int failure(const Status& s) { return report_failure(kProgram, s); }

struct Args {
  Args() = default;
  Args(const Args&) = delete;  // mechanism_flags refers to registry
  Args& operator=(const Args&) = delete;

  std::string server, token_file, renewer, service;
  bool renewer_given = false, json = false;
  std::vector<std::string> mechanisms;
  MechanismRegistry registry = MechanismRegistry::with_builtins();
  // --keytab, --ccache, ...: what the mechanisms declare.
  MechanismFlags mechanism_flags{registry};
  std::chrono::milliseconds connect_timeout{10'000};
  TlsFlags tls;
};

// Only the options `sub` takes are accepted. nullopt on success, else the
// exit status (0: --help printed).
std::optional<int> parse(Sub sub, int argc, char** argv, Args& a) {
  FlagParser parser;
  parser.value("--token-file", &a.token_file);
  if (sub == Sub::kFetch) {
    parser.value("-o", &a.token_file).value("--output", &a.token_file).value("--renewer", [&a](std::string_view v) {
      a.renewer = std::string(v);
      a.renewer_given = true;
      return Status();
    });
  }
  if (sub == Sub::kPrint) parser.flag("--json", &a.json);
  if (sub != Sub::kPrint) {
    a.tls.add_to(parser);
    parser.value("--server", &a.server)
        .value("--service", &a.service)
        .value("--auth",
               [&a](std::string_view v) {
                 a.mechanisms.emplace_back(v);
                 return Status();
               })
        .value("--connect-timeout", milliseconds(&a.connect_timeout));
    a.mechanism_flags.add_to(parser);
  }
  const std::string name = name_of(sub);
  return parse_or_exit(parser, argc, argv, help_of(sub), kProgram, "authrpc token " + name + " --help",
                       "token " + name + ": ");
}

// Connects, or prints why not and gives the exit status: flags that do not
// fit together are a usage error, as in `authrpc call`.
std::variant<std::unique_ptr<Client>, int> connect(Sub sub, const Args& a, const Endpoint& endpoint) {
  const auto& registry = a.registry;
  ClientOptions options;
  options.endpoint = endpoint;
  options.connect_timeout = a.connect_timeout;
  if (Status s = a.tls.apply(options); !s.ok()) {
    return s.code == Errc::kInvalidArgument ? usage_error(sub, s.message) : failure(s);
  }
  std::vector<std::string> names = a.mechanisms;
  if (names.empty()) names.emplace_back("kerberos");  // names: documented default (--help)
  const auto known = registry.client_names();
  for (const auto& name : names) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return usage_error(sub, "--auth " + name + ": unknown mechanism");
    }
    nlohmann::json o = a.mechanism_flags.options_for(name);
    // The command's credentials file is also the one a token mechanism
    // authenticates with (cancelling a token with itself).
    for (const auto& flag : a.mechanism_flags.credentials_files(name)) {
      if (!a.token_file.empty()) o[flag.option] = a.token_file;
    }
    auto m = registry.make_client(name, o);
    if (!m.ok()) {
      return m.code() == Errc::kConfigError ? usage_error(sub, m.status().message) : failure(m.status());
    }
    options.mechanisms.push_back(*m);
  }
  auto client = Client::connect(std::move(options));
  if (!client.ok()) return failure(client.status());
  return std::move(*client);
}

nlohmann::json describe(const security::Token& token) {
  nlohmann::json out = {{"service", token.service}, {"kind", token.kind}};
  auto id = token.decode_identifier();
  if (!id.ok()) {
    out["error"] = id.status().to_string();
    return out;
  }
  out["owner"] = id->owner;
  out["renewer"] = id->renewer;
  out["real_user"] = id->real_user;
  out["issue_date"] = security::format_token_time(id->issue_date);
  out["max_date"] = security::format_token_time(id->max_date);
  out["sequence_number"] = id->sequence_number;
  out["master_key_id"] = id->master_key_id;
  return out;
}

void print_human(const nlohmann::json& t) {
  std::printf("service:         %s\n", t["service"].get<std::string>().c_str());
  std::printf("kind:            %s\n", t["kind"].get<std::string>().c_str());
  if (t.contains("error")) {
    std::printf("error:           %s\n", t["error"].get<std::string>().c_str());
    return;
  }
  auto s = [&](const char* k) { return t[k].get<std::string>(); };
  std::printf("owner:           %s\n", s("owner").c_str());
  std::printf("renewer:         %s\n", s("renewer").empty() ? "(none)" : s("renewer").c_str());
  std::printf("real user:       %s\n", s("real_user").empty() ? "(the owner)" : s("real_user").c_str());
  std::printf("issue date:      %s\n", s("issue_date").c_str());
  std::printf("max date:        %s\n", s("max_date").c_str());
  std::printf("sequence number: %llu\n",
              static_cast<unsigned long long>(t["sequence_number"].get<std::uint64_t>()));
  std::printf("master key id:   %u\n", t["master_key_id"].get<std::uint32_t>());
}

int fetch(const Args& a) {
  constexpr Sub sub = Sub::kFetch;
  if (a.server.empty()) return usage_error(sub, "--server is required");
  if (!a.renewer_given) return usage_error(sub, "--renewer is required (\"\" for nobody)");
  const std::string path = security::CredentialsFile::locate(a.token_file);
  if (path.empty()) return usage_error(sub, "-o FILE is required (or set AUTHRPC_TOKEN_FILE)");
  auto endpoint = Endpoint::parse(a.server);
  if (!endpoint.ok()) return usage_error(sub, "--server: " + endpoint.status().message);
  security::CredentialsFile file;
  if (::access(path.c_str(), F_OK) == 0) {
    auto existing = security::CredentialsFile::read(path);
    if (!existing.ok()) return failure(credentials_status(existing.status(), path));
    file = std::move(*existing);
  }
  auto connected = connect(sub, a, *endpoint);
  if (const int* code = std::get_if<int>(&connected)) return *code;
  auto& client = std::get<std::unique_ptr<Client>>(connected);
  nlohmann::json request = {{"renewer", a.renewer},
                            {"service", a.service.empty() ? endpoint->to_string() : a.service}};
  auto response = client->call_json("token", "get", request);
  if (!response.ok()) return failure(response.status());
  if (!response->contains("token") || !(*response)["token"].is_string()) {
    return failure({Errc::kDataLoss, "token.get returned no token"});
  }
  auto token = security::Token::from_string((*response)["token"].get_ref<const std::string&>());
  auto& text = (*response)["token"].get_ref<std::string&>();
  security::cleanse(text.data(), text.size());
  if (!token.ok()) return failure(token_status(token.status(), TokenUse::kService));
  const nlohmann::json shown = describe(*token);
  file.add(std::move(*token));
  if (auto s = file.write(path); !s.ok()) return failure(credentials_status(s, path));
  std::printf("stored in %s:\n", path.c_str());
  print_human(shown);
  if (response->contains("renew_date")) {
    std::printf("renew by:        %s\n", (*response)["renew_date"].get<std::string>().c_str());
  }
  return 0;
}

// renew and cancel: the token for the service in the file, sent to the server.
int renew_or_cancel(const Args& a, bool renew) {
  const Sub sub = renew ? Sub::kRenew : Sub::kCancel;
  if (a.server.empty()) return usage_error(sub, "--server is required");
  const std::string path = security::CredentialsFile::locate(a.token_file);
  if (path.empty()) return usage_error(sub, "--token-file FILE is required (or set AUTHRPC_TOKEN_FILE)");
  auto endpoint = Endpoint::parse(a.server);
  if (!endpoint.ok()) return usage_error(sub, "--server: " + endpoint.status().message);
  auto file = security::CredentialsFile::read(path);
  if (!file.ok()) return failure(credentials_status(file.status(), path));
  const std::string service = a.service.empty() ? endpoint->to_string() : a.service;
  auto token = file->find(service);
  if (!token.ok()) return failure(token_status(token.status(), TokenUse::kService));
  auto text = token->to_string();
  if (!text.ok()) return failure(token_status(text.status(), TokenUse::kService));
  nlohmann::json request = {{"token", *text}};
  security::cleanse(text->data(), text->size());
  auto connected = connect(sub, a, *endpoint);
  if (const int* code = std::get_if<int>(&connected)) return *code;
  auto& client = std::get<std::unique_ptr<Client>>(connected);
  auto response = client->call_json("token", renew ? "renew" : "cancel", request);
  security::cleanse(request["token"].get_ref<std::string&>().data(),
                    request["token"].get_ref<std::string&>().size());
  if (!response.ok()) return failure(response.status());
  if (renew) {
    std::printf("renewed token %s: valid until %s\n",
                std::to_string(describe(*token)["sequence_number"].get<std::uint64_t>()).c_str(),
                response->value("renew_date", std::string("?")).c_str());
    return 0;
  }
  file->remove(service);
  if (auto s = file->write(path); !s.ok()) return failure(credentials_status(s, path));
  std::printf("cancelled the token for %s and removed it from %s\n", service.c_str(), path.c_str());
  return 0;
}

int print(const Args& a) {
  const std::string path = security::CredentialsFile::locate(a.token_file);
  if (path.empty()) return usage_error(Sub::kPrint, "--token-file FILE is required (or set AUTHRPC_TOKEN_FILE)");
  auto file = security::CredentialsFile::read(path);
  if (!file.ok()) return failure(credentials_status(file.status(), path));
  nlohmann::json all = nlohmann::json::array();
  for (const auto& t : file->tokens()) all.push_back(describe(t));
  if (a.json) {
    std::printf("%s\n", all.dump(2).c_str());
    return 0;
  }
  bool first = true;
  for (const auto& t : all) {
    if (!first) std::printf("\n");
    first = false;
    print_human(t);
  }
  if (all.empty()) std::printf("no tokens in %s\n", path.c_str());
  return 0;
}

}  // namespace

Status credentials_status(const Status& status, const std::string& path) {
  if (status.is(security::TokenErrc::kIoError)) {
    return {Errc::kUnauthenticated, status.message + " (authrpc token fetch stores a token there)"};
  }
  return token_status(status, TokenUse::kService, "credentials file " + path);
}

int token_command(int argc, char** argv) {
  if (auto code = overview_or_exit(argc, argv, kOverview)) return *code;
  const std::string name = argv[0];
  Sub sub;
  if (name == "fetch") {
    sub = Sub::kFetch;
  } else if (name == "renew") {
    sub = Sub::kRenew;
  } else if (name == "cancel") {
    sub = Sub::kCancel;
  } else if (name == "print") {
    sub = Sub::kPrint;
  } else {
    return report_usage(kProgram, "unknown token command '" + escape_for_log(name) + "'", "authrpc token --help");
  }
  Args a;
  if (auto code = parse(sub, argc - 1, argv + 1, a)) return *code;
  switch (sub) {
    case Sub::kFetch: return fetch(a);
    case Sub::kRenew: return renew_or_cancel(a, true);
    case Sub::kCancel: return renew_or_cancel(a, false);
    case Sub::kPrint: return print(a);
  }
  return kExitFailure;
}

}  // namespace authrpc::cli
