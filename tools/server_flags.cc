#include "authrpc/tools/server_flags.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "authrpc/security/credentials_file.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/token_commands.h"

namespace authrpc::cli {

namespace {

constexpr const char* kProgram = "authrpc";

int usage_error(const std::string& message, const char* help) { return report_usage(kProgram, message, help); }

}  // namespace

ServerFlags::ServerFlags() : registry_(MechanismRegistry::with_builtins()), mechanism_flags_(registry_) {}

void ServerFlags::add_to(FlagParser& parser) {
  tls_flags_.add_to(parser);
  parser.value("--server", &server_)
      .value("--auth",
             [this](std::string_view v) {
               mechanisms_.emplace_back(v);
               return Status();
             })
      .value("--do-as", &do_as_)
      .value("--timeout", milliseconds(&timeout_))
      .value("--connect-timeout", milliseconds(&connect_timeout_));
  mechanism_flags_.add_to(parser);
}

std::variant<std::unique_ptr<Client>, int> ServerFlags::connect(const char* help) {
  if (server_.empty()) return usage_error("--server is required", help);
  auto endpoint = Endpoint::parse(server_);
  if (!endpoint.ok()) return usage_error("--server: " + endpoint.status().message, help);
  if (mechanisms_.empty()) mechanisms_.emplace_back("simple");  // names: documented default (--help)

  const auto known = registry_.client_names();
  ClientOptions options;
  options.endpoint = *endpoint;
  options.connect_timeout = connect_timeout_;
  if (Status s = tls_flags_.apply(options); !s.ok()) {
    return s.code == Errc::kInvalidArgument ? usage_error(s.message, help) : report_failure(kProgram, s);
  }
  options.do_as = do_as_;
  for (const auto& name : mechanisms_) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return usage_error("--auth " + name + ": unknown mechanism (known: " + list + ")", help);
    }
    nlohmann::json mech_options = mechanism_flags_.options_for(name);
    for (const auto& flag : mechanism_flags_.credentials_files(name)) {
      // Checked here so that a missing file says "fetch a token", not the
      // transport-style advice the mechanism gives for an unreadable file.
      const std::string* given = mechanism_flags_.given(flag.flag);
      const std::string path = security::CredentialsFile::locate(given ? *given : "");
      if (path.empty()) {
        return usage_error("--auth " + name + " needs " + flag.flag + " FILE (or AUTHRPC_TOKEN_FILE)", help);
      }
      if (auto file = security::CredentialsFile::read(path); !file.ok()) {
        return report_failure(kProgram, credentials_status(file.status(), path));
      }
      mech_options[flag.option] = path;
    }
    auto mechanism = registry_.make_client(name, mech_options);
    if (!mechanism.ok()) {
      const auto& s = mechanism.status();
      return s.code == Errc::kConfigError ? usage_error(s.message, help) : report_failure(kProgram, s);
    }
    options.mechanisms.push_back(*mechanism);
  }
  auto client = Client::connect(std::move(options));
  if (!client.ok()) return report_failure(kProgram, client.status());
  return std::move(*client);
}

}  // namespace authrpc::cli
