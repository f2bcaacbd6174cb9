// MechanismRegistry: mechanism names → what each mechanism declares about
// itself (traits, command-line flags) and the factories that make it from
// JSON options, so that configuration files and command lines can name
// mechanisms. Each mechanism registers itself from its own module
// (register_simple(), register_kerberos(), ... next to its classes);
// applications register theirs the same way. The connection code only ever
// sees the interfaces (auth/mechanism.h). Not thread-safe: filled at start-up,
// then read.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "authrpc/auth/delegation_token_host.h"
#include "authrpc/auth/mechanism.h"

namespace authrpc {

// A command-line flag of a mechanism's client half. `authrpc call` and
// `authrpc token` accept every flag some registered client declares and hand
// its value to each chosen mechanism that declares it, as options[option].
struct MechanismFlag {
  std::string flag;    // "--keytab"
  std::string option;  // the client options key it sets: "keytab"
  std::string help;    // one line: "F  log in from keytab F"
  // The value names a delegation-token credentials file
  // (security/credentials_file.h): the CLI falls back to
  // $AUTHRPC_TOKEN_FILE and checks the file is readable before connecting;
  // `authrpc token` passes its own --token-file.
  bool credentials_file = false;
};

class MechanismRegistry {
 public:
  using ServerFactory =
      std::function<Result<std::shared_ptr<ServerMechanism>>(const nlohmann::json& options)>;
  using ClientFactory =
      std::function<Result<std::shared_ptr<ClientMechanism>>(const nlohmann::json& options)>;
  // A server half that authenticates with the server's delegation tokens.
  using TokenServerFactory = std::function<Result<std::shared_ptr<ServerMechanism>>(
      const nlohmann::json& options, const DelegationTokenHost& tokens)>;

  struct ServerEntry {
    MechanismTraits traits;
    ServerFactory make;                   // set, or
    TokenServerFactory make_with_tokens;  // needs provide_delegation_tokens()
  };
  struct ClientEntry {
    MechanismTraits traits;
    std::vector<MechanismFlag> flags;
    ClientFactory make;
  };

  // An empty registry; see with_builtins().
  MechanismRegistry() = default;
  // Every mechanism authrpc ships (auth/builtin_mechanisms.cc, in
  // authrpc::builtins, which links the kerberos and jwt components):
  // `simple`, `kerberos`, `kerberos-sasl`, `token`, `token-digest`,
  // `token-scram`, `x509`, `jwt`; their options in docs/CONFIG.md.
  static MechanismRegistry with_builtins();

  // `traits` must equal what the mechanisms the factory makes say in
  // traits(): make_server()/make_client() refuse a mismatch (INTERNAL).
  // Registering a name again replaces it.
  void register_server(std::string name, ServerFactory factory, MechanismTraits traits = {});
  void register_token_server(std::string name, TokenServerFactory factory,
                             MechanismTraits traits);
  void register_client(std::string name, ClientFactory factory, MechanismTraits traits = {},
                       std::vector<MechanismFlag> flags = {});

  // What the server's token service lends the register_token_server()
  // mechanisms; until it is called they are CONFIG_ERROR ("enable the token
  // service").
  void provide_delegation_tokens(DelegationTokenHost tokens);

  // MECHANISM_UNAVAILABLE for an unknown name, the factory's error otherwise.
  Result<std::shared_ptr<ServerMechanism>> make_server(std::string_view name,
                                                       const nlohmann::json& options) const;
  Result<std::shared_ptr<ClientMechanism>> make_client(std::string_view name,
                                                       const nlohmann::json& options) const;

  // What a name declares; null if it is not registered.
  const ServerEntry* server(std::string_view name) const;
  const ClientEntry* client(std::string_view name) const;

  std::vector<std::string> server_names() const;
  std::vector<std::string> client_names() const;

 private:
  std::map<std::string, ServerEntry, std::less<>> server_;
  std::map<std::string, ClientEntry, std::less<>> client_;
  std::optional<DelegationTokenHost> tokens_;
};

}  // namespace authrpc
