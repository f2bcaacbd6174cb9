// ServerConfig: the JSON configuration file of authrpc-server (documented in
// docs/CONFIG.md), turned into ServerOptions. Unknown keys and wrong types are
// refused with a message naming the key, so a typo never silently becomes a
// default.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "auth/mechanism_registry.h"
#include "rpc/result.h"
#include "server/server.h"

namespace authrpc {

// Parses a configuration object. Mechanisms are built through `registry`.
Result<ServerOptions> server_options_from_json(const nlohmann::json& config,
                                               const MechanismRegistry& registry);
// Reads and parses a configuration file.
Result<ServerOptions> load_server_config(const std::string& path,
                                         const MechanismRegistry& registry);

}  // namespace authrpc
