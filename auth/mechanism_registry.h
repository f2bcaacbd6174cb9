// MechanismRegistry: mechanism names → factories, so that configuration files
// and command lines can name mechanisms. Applications register their own next
// to the built-ins; the connection code only ever sees the interfaces.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "auth/mechanism.h"

namespace authrpc {
namespace security {
class SecretManager;
}

class MechanismRegistry {
 public:
  using ServerFactory =
      std::function<Result<std::shared_ptr<ServerMechanism>>(const nlohmann::json& options)>;
  using ClientFactory =
      std::function<Result<std::shared_ptr<ClientMechanism>>(const nlohmann::json& options)>;
  // A server mechanism that verifies delegation tokens with the server's
  // SecretManager: TokenService::register_mechanism() (server/token_service.h)
  // binds each one to its own and registers it as a server factory. So the
  // token service needs to know no mechanism but its own `token`.
  using TokenServerFactory = std::function<Result<std::shared_ptr<ServerMechanism>>(
      const nlohmann::json& options, std::shared_ptr<const security::SecretManager> secrets)>;

  // An empty registry; see with_builtins().
  MechanismRegistry() = default;
  // `simple` (options: client {"user": "..."}), `kerberos` and
  // `kerberos-sasl` (the same options: docs/KERBEROS.md), and `token`
  // (client options {"token_file", "service"}; the server half comes from
  // the server's token service: docs/TOKENS.md).
  static MechanismRegistry with_builtins();

  void register_server(std::string name, ServerFactory factory);
  void register_client(std::string name, ClientFactory factory);
  void register_token_server(std::string name, TokenServerFactory factory);

  // kMechanismUnavailable for an unknown name, the factory's error otherwise.
  Result<std::shared_ptr<ServerMechanism>> make_server(std::string_view name,
                                                       const nlohmann::json& options) const;
  Result<std::shared_ptr<ClientMechanism>> make_client(std::string_view name,
                                                       const nlohmann::json& options) const;

  std::vector<std::string> server_names() const;
  std::vector<std::string> client_names() const;
  const std::map<std::string, TokenServerFactory, std::less<>>& token_servers() const noexcept {
    return token_server_;
  }

 private:
  static void register_token_builtins(MechanismRegistry& r);
  std::map<std::string, ServerFactory, std::less<>> server_;
  std::map<std::string, ClientFactory, std::less<>> client_;
  std::map<std::string, TokenServerFactory, std::less<>> token_server_;
};

}  // namespace authrpc
