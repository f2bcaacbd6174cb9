#include "auth/identity.h"

#include <nlohmann/json.hpp>

namespace authrpc {

std::string Identity::to_json() const {
  nlohmann::json j = {{"user", user},
                      {"principal", principal},
                      {"realm", realm},
                      {"mechanism", mechanism},
                      {"peer", peer_address}};
  j["real_user"] = real_user ? nlohmann::json(*real_user) : nlohmann::json(nullptr);
  return j.dump();
}

std::ostream& operator<<(std::ostream& os, const Identity& id) {
  os << id.user;
  if (!id.principal.empty() && id.principal != id.user) os << " (" << id.principal << ")";
  if (id.real_user) os << " via " << *id.real_user;
  return os << " [" << id.mechanism << " from " << id.peer_address << "]";
}

}  // namespace authrpc
