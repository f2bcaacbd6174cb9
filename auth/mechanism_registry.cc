#include "auth/mechanism_registry.h"

#include <nlohmann/json.hpp>

namespace authrpc {
namespace {

template <typename Map>
std::vector<std::string> keys(const Map& m) {
  std::vector<std::string> out;
  for (const auto& [name, _] : m) out.push_back(name);
  return out;
}

template <typename Map>
std::string known(const Map& m) {
  std::string out;
  for (const auto& [name, _] : m) out += (out.empty() ? "" : ", ") + name;
  return out;
}

template <typename Map>
auto make(const Map& factories, std::string_view side, std::string_view name,
          const nlohmann::json& options) -> decltype(factories.begin()->second(options)) {
  const auto it = factories.find(name);
  if (it == factories.end()) {
    return Status(Errc::kMechanismUnavailable, "unknown " + std::string(side) + " mechanism '" +
                                                   std::string(name) + "' (known: " +
                                                   known(factories) + ")");
  }
  return it->second(options);
}

}  // namespace

void MechanismRegistry::register_server(std::string name, ServerFactory factory) {
  server_[std::move(name)] = std::move(factory);
}

void MechanismRegistry::register_client(std::string name, ClientFactory factory) {
  client_[std::move(name)] = std::move(factory);
}

void MechanismRegistry::register_token_server(std::string name, TokenServerFactory factory) {
  token_server_[std::move(name)] = std::move(factory);
}

Result<std::shared_ptr<ServerMechanism>> MechanismRegistry::make_server(
    std::string_view name, const nlohmann::json& options) const {
  return make(server_, "server", name, options);
}

Result<std::shared_ptr<ClientMechanism>> MechanismRegistry::make_client(
    std::string_view name, const nlohmann::json& options) const {
  return make(client_, "client", name, options);
}

std::vector<std::string> MechanismRegistry::server_names() const { return keys(server_); }
std::vector<std::string> MechanismRegistry::client_names() const { return keys(client_); }

}  // namespace authrpc
