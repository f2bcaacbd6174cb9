#include "client/token_commands.h"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "auth/mechanism_registry.h"
#include "client/client.h"
#include "client/client_tls.h"
#include "security/credentials_file.h"

namespace authrpc::cli {
namespace {

constexpr const char* kUsage = R"(usage: authrpc token <fetch|renew|cancel|print> [options]

Delegation tokens: fetch one over Kerberos, hand the credentials file to a
job, which then authenticates with `--auth token` alone (no ticket, no KDC).

authrpc token fetch --server URI --renewer R -o FILE [options]
    Gets a token from the server's token service (token.get) and adds it to
    the credentials file FILE (created mode 0600; other tokens in it stay).
    The connection must be Kerberos-authenticated (never a token).
  --renewer R        who may renew the token (a principal, e.g. yarn@REALM);
                     "" for nobody (required)
  --service S        the service stamped into the token, i.e. the server URI
                     clients will connect to (default: --server)
authrpc token renew --server URI [--token-file FILE] [--service S]
    Renews the token for S (default: --server) found in FILE; only the
    token's renewer may, over Kerberos. Prints the new expiry.
authrpc token cancel --server URI [--token-file FILE] [--service S]
    Cancels that token (its owner or renewer may) and removes it from FILE.
authrpc token print [--token-file FILE] [--json]
    Shows each token's service, kind, owner, renewer, real user, dates,
    sequence number and master key id. Never the password.

Common options:
  --token-file FILE, -o FILE   credentials file (default: $AUTHRPC_TOKEN_FILE)
  --auth NAME        mechanism for the connection (default: kerberos; repeat
                     to allow several)
  --service-principal P, --principal P, --keytab F, --ccache C
                     Kerberos options, as for `authrpc call`
  --connect-timeout MS  connect + negotiation bound (default: 10000)
  --tls, --ca FILE, --cert FILE, --key FILE, --tls-min-version V
                     TLS options, as for `authrpc call` (a tls:// --server
                     needs --ca)

Exit status: 0 on success, 1 on failure (CODE: message [advice] on stderr),
2 for usage errors.
)";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "authrpc token: %s\n(see authrpc token --help)\n", message.c_str());
  return 2;
}

int failure(const Status& s) {
  std::fprintf(stderr, "error: %s [%s]\n", s.to_string().c_str(),
               std::string(to_string(retry_advice(s.code))).c_str());
  return 1;
}

int token_failure(const security::TokenStatus& s) {
  std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
  return 1;
}

struct Args {
  std::string server, token_file, renewer, service;
  bool renewer_given = false, json = false;
  std::vector<std::string> mechanisms;
  nlohmann::json kerberos = nlohmann::json::object();
  long connect_timeout_ms = 10'000;
  TlsFlags tls;
};

// 0 on success, else the exit status (-1: --help printed).
int parse(int argc, char** argv, Args& a) {
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    std::string tls_error;
    if (const int used = a.tls.parse(arg, i + 1 < argc ? argv[i + 1] : nullptr, &tls_error);
        used > 0 || !tls_error.empty()) {
      if (!tls_error.empty()) return usage_error(tls_error);
      i += used - 1;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return -1;
    } else if (arg == "--server") {
      if (!value(&a.server)) return usage_error("--server needs a value");
    } else if (arg == "--token-file" || arg == "-o" || arg == "--output") {
      if (!value(&a.token_file)) return usage_error(arg + " needs a value");
    } else if (arg == "--renewer") {
      if (!value(&a.renewer)) return usage_error("--renewer needs a value");
      a.renewer_given = true;
    } else if (arg == "--service") {
      if (!value(&a.service)) return usage_error("--service needs a value");
    } else if (arg == "--auth") {
      if (!value(&v)) return usage_error("--auth needs a value");
      a.mechanisms.push_back(v);
    } else if (arg == "--service-principal" || arg == "--principal" || arg == "--keytab" ||
               arg == "--ccache") {
      if (!value(&v)) return usage_error(arg + " needs a value");
      a.kerberos[arg == "--service-principal" ? "service_principal" : arg.substr(2)] = v;
    } else if (arg == "--connect-timeout") {
      if (!value(&v)) return usage_error(arg + " needs a value");
      try {
        a.connect_timeout_ms = std::stol(v);
      } catch (...) {
        return usage_error(arg + " must be a number of milliseconds");
      }
    } else if (arg == "--json") {
      a.json = true;
    } else {
      return usage_error("unexpected argument '" + arg + "'");
    }
  }
  return 0;
}

Result<std::unique_ptr<Client>> connect(const Args& a, const Endpoint& endpoint) {
  const auto registry = MechanismRegistry::with_builtins();
  ClientOptions options;
  options.endpoint = endpoint;
  options.connect_timeout = std::chrono::milliseconds(a.connect_timeout_ms);
  if (Status s = a.tls.apply(options); !s.ok()) return s;
  std::vector<std::string> names = a.mechanisms;
  if (names.empty()) names.emplace_back("kerberos");
  for (const auto& name : names) {
    nlohmann::json o = nlohmann::json::object();
    if (name == "kerberos" || name == "kerberos-sasl") o = a.kerberos;
    if (name == "token" && !a.token_file.empty()) o["token_file"] = a.token_file;
    auto m = registry.make_client(name, o);
    if (!m.ok()) return m.status();
    options.mechanisms.push_back(*m);
  }
  return Client::connect(std::move(options));
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
  if (a.server.empty()) return usage_error("--server is required");
  if (!a.renewer_given) return usage_error("--renewer is required (\"\" for nobody)");
  const std::string path = security::CredentialsFile::locate(a.token_file);
  if (path.empty()) return usage_error("-o FILE is required (or set AUTHRPC_TOKEN_FILE)");
  auto endpoint = Endpoint::parse(a.server);
  if (!endpoint.ok()) return usage_error(endpoint.status().message);
  security::CredentialsFile file;
  if (::access(path.c_str(), F_OK) == 0) {
    auto existing = security::CredentialsFile::read(path);
    if (!existing.ok()) return token_failure(existing.status());
    file = std::move(*existing);
  }
  auto client = connect(a, *endpoint);
  if (!client.ok()) return failure(client.status());
  nlohmann::json request = {{"renewer", a.renewer},
                            {"service", a.service.empty() ? endpoint->to_string() : a.service}};
  auto response = (*client)->call_json("token", "get", request);
  if (!response.ok()) return failure(response.status());
  if (!response->contains("token") || !(*response)["token"].is_string()) {
    return failure({Errc::kDataLoss, "token.get returned no token"});
  }
  auto token = security::Token::from_string((*response)["token"].get_ref<const std::string&>());
  auto& text = (*response)["token"].get_ref<std::string&>();
  security::cleanse(text.data(), text.size());
  if (!token.ok()) return token_failure(token.status());
  const nlohmann::json shown = describe(*token);
  file.add(std::move(*token));
  if (auto s = file.write(path); !s.ok()) return token_failure(s);
  std::printf("stored in %s:\n", path.c_str());
  print_human(shown);
  if (response->contains("renew_date")) {
    std::printf("renew by:        %s\n", (*response)["renew_date"].get<std::string>().c_str());
  }
  return 0;
}

// renew and cancel: the token for the service in the file, sent to the server.
int renew_or_cancel(const Args& a, bool renew) {
  if (a.server.empty()) return usage_error("--server is required");
  const std::string path = security::CredentialsFile::locate(a.token_file);
  if (path.empty()) return usage_error("--token-file FILE is required (or set AUTHRPC_TOKEN_FILE)");
  auto endpoint = Endpoint::parse(a.server);
  if (!endpoint.ok()) return usage_error(endpoint.status().message);
  auto file = security::CredentialsFile::read(path);
  if (!file.ok()) return token_failure(file.status());
  const std::string service = a.service.empty() ? endpoint->to_string() : a.service;
  auto token = file->find(service);
  if (!token.ok()) return token_failure(token.status());
  auto text = token->to_string();
  if (!text.ok()) return token_failure(text.status());
  nlohmann::json request = {{"token", *text}};
  security::cleanse(text->data(), text->size());
  auto client = connect(a, *endpoint);
  if (!client.ok()) return failure(client.status());
  auto response = (*client)->call_json("token", renew ? "renew" : "cancel", request);
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
  if (auto s = file->write(path); !s.ok()) return token_failure(s);
  std::printf("cancelled the token for %s and removed it from %s\n", service.c_str(), path.c_str());
  return 0;
}

int print(const Args& a) {
  const std::string path = security::CredentialsFile::locate(a.token_file);
  if (path.empty()) return usage_error("--token-file FILE is required (or set AUTHRPC_TOKEN_FILE)");
  auto file = security::CredentialsFile::read(path);
  if (!file.ok()) return token_failure(file.status());
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

int token_command(int argc, char** argv) {
  if (argc < 1) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string sub = argv[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  Args a;
  if (int rc = parse(argc - 1, argv + 1, a); rc != 0) return rc < 0 ? 0 : rc;
  if (sub == "fetch") return fetch(a);
  if (sub == "renew") return renew_or_cancel(a, true);
  if (sub == "cancel") return renew_or_cancel(a, false);
  if (sub == "print") return print(a);
  return usage_error("unknown token command '" + sub + "'");
}

}  // namespace authrpc::cli
