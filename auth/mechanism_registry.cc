#include "auth/mechanism_registry.h"

#include <nlohmann/json.hpp>

#include "auth/simple.h"

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

}  // namespace

MechanismRegistry MechanismRegistry::with_builtins() {
  MechanismRegistry r;
  r.register_server(std::string(kSimpleMechanism),
                    [](const nlohmann::json&) -> Result<std::shared_ptr<ServerMechanism>> {
                      return std::shared_ptr<ServerMechanism>(
                          std::make_shared<SimpleServerMechanism>());
                    });
  r.register_client(
      std::string(kSimpleMechanism),
      [](const nlohmann::json& options) -> Result<std::shared_ptr<ClientMechanism>> {
        std::string user;
        if (options.is_object() && options.contains("user")) {
          if (!options["user"].is_string()) return Status(Errc::kConfigError, "simple: 'user' must be a string");
          user = options["user"].get<std::string>();
        }
        if (!user.empty()) {
          if (auto why = check_simple_user_name(user); !why.empty()) {
            return Status(Errc::kConfigError, "simple: " + why);
          }
        }
        return std::shared_ptr<ClientMechanism>(std::make_shared<SimpleClientMechanism>(user));
      });
  return r;
}

void MechanismRegistry::register_server(std::string name, ServerFactory factory) {
  server_[std::move(name)] = std::move(factory);
}

void MechanismRegistry::register_client(std::string name, ClientFactory factory) {
  client_[std::move(name)] = std::move(factory);
}

Result<std::shared_ptr<ServerMechanism>> MechanismRegistry::make_server(
    std::string_view name, const nlohmann::json& options) const {
  const auto it = server_.find(name);
  if (it == server_.end()) {
    return Status(Errc::kMechanismUnavailable, "unknown server mechanism '" + std::string(name) +
                                                   "' (known: " + known(server_) + ")");
  }
  return it->second(options);
}

Result<std::shared_ptr<ClientMechanism>> MechanismRegistry::make_client(
    std::string_view name, const nlohmann::json& options) const {
  const auto it = client_.find(name);
  if (it == client_.end()) {
    return Status(Errc::kMechanismUnavailable, "unknown client mechanism '" + std::string(name) +
                                                   "' (known: " + known(client_) + ")");
  }
  return it->second(options);
}

std::vector<std::string> MechanismRegistry::server_names() const { return keys(server_); }
std::vector<std::string> MechanismRegistry::client_names() const { return keys(client_); }

}  // namespace authrpc
