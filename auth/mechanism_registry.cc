#include "authrpc/auth/mechanism_registry.h"

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
Status unknown(const Map& m, std::string_view side, std::string_view name) {
  std::string known;
  for (const auto& [n, _] : m) known += (known.empty() ? "" : ", ") + n;
  return Status(Errc::kMechanismUnavailable, "unknown " + std::string(side) + " mechanism '" +
                                                 std::string(name) + "' (known: " + known + ")");
}

// A mechanism whose traits differ from its registration would be judged by
// the registry's copy before it exists (the CLI, the token service) and by
// its own once it runs: refuse it rather than let the two disagree.
template <typename Mechanism>
Result<std::shared_ptr<Mechanism>> checked(Result<std::shared_ptr<Mechanism>> made,
                                           const MechanismTraits& registered) {
  if (!made.ok()) return made;
  if (*made == nullptr) return Status(Errc::kInternal, "a mechanism factory returned nothing");
  if ((*made)->traits() != registered) {
    return Status(Errc::kInternal, "mechanism '" + std::string((*made)->name()) +
                                       "': its traits() differ from those it was registered with");
  }
  return made;
}

}  // namespace

void MechanismRegistry::register_server(std::string name, ServerFactory factory,
                                        MechanismTraits traits) {
  server_[std::move(name)] = ServerEntry{traits, std::move(factory), {}};
}

void MechanismRegistry::register_token_server(std::string name, TokenServerFactory factory,
                                              MechanismTraits traits) {
  server_[std::move(name)] = ServerEntry{traits, {}, std::move(factory)};
}

void MechanismRegistry::register_client(std::string name, ClientFactory factory,
                                        MechanismTraits traits, std::vector<MechanismFlag> flags) {
  client_[std::move(name)] = ClientEntry{traits, std::move(flags), std::move(factory)};
}

void MechanismRegistry::provide_delegation_tokens(DelegationTokenHost tokens) {
  tokens_ = std::move(tokens);
}

Result<std::shared_ptr<ServerMechanism>> MechanismRegistry::make_server(
    std::string_view name, const nlohmann::json& options) const {
  const ServerEntry* entry = server(name);
  if (entry == nullptr) return unknown(server_, "server", name);
  if (entry->make) return checked(entry->make(options), entry->traits);
  if (!tokens_) {
    return Status(Errc::kConfigError, std::string(name) +
                                          ": enable the token service (the 'tokens' section) to "
                                          "use the " + std::string(name) + " mechanism");
  }
  return checked(entry->make_with_tokens(options, *tokens_), entry->traits);
}

Result<std::shared_ptr<ClientMechanism>> MechanismRegistry::make_client(
    std::string_view name, const nlohmann::json& options) const {
  const ClientEntry* entry = client(name);
  if (entry == nullptr) return unknown(client_, "client", name);
  return checked(entry->make(options), entry->traits);
}

const MechanismRegistry::ServerEntry* MechanismRegistry::server(std::string_view name) const {
  const auto it = server_.find(name);
  return it == server_.end() ? nullptr : &it->second;
}

const MechanismRegistry::ClientEntry* MechanismRegistry::client(std::string_view name) const {
  const auto it = client_.find(name);
  return it == client_.end() ? nullptr : &it->second;
}

std::vector<std::string> MechanismRegistry::server_names() const { return keys(server_); }
std::vector<std::string> MechanismRegistry::client_names() const { return keys(client_); }

}  // namespace authrpc
