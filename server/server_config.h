// ServerConfig: the JSON configuration file of authrpc-server (documented in
// docs/CONFIG.md), turned into ServerOptions and the services it enables. The
// library and authrpc-server read it through the same functions. Unknown keys
// and wrong types are refused with a message naming the key, so a typo never
// silently becomes a default.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/security/base/result.h"
#include "authrpc/security/token_store_registry.h"
#include "authrpc/server/server.h"
#include "authrpc/server/token_service.h"

namespace authrpc {

// A configuration as authrpc-server runs it: the server's options and, when
// the configuration has a "tokens" section, the delegation-token service it
// opened (store open, sweeper running, its mechanisms available to
// auth.mechanisms). The application owns both; the token service must
// outlive the Server built from `options`.
struct ServerConfig {
  ServerOptions options;
  std::unique_ptr<TokenService> tokens;  // null without a "tokens" section
  // The "admin" section's listen address (docs/CONFIG.md "admin"); unset:
  // no admin listener. authrpc-server starts one (server/admin_server.h).
  std::optional<std::string> admin_listen;
  // Its "hosts": the DNS names the admin listener answers to
  // (AdminOptions::hosts).
  std::vector<std::string> admin_hosts;

  // Adds the configured services (the token service's `token` service, if
  // any) to `server`; call it before server.start().
  Status add_services(Server& server) const;
};

// Builds a ServerConfig from a configuration object, exactly as
// authrpc-server does: every key is checked (the "tokens" section's too),
// the token service is opened if configured, and mechanisms are built
// through `registry` plus the token service's. A shared token store's type
// is looked up in `stores` (authrpc-server passes
// security::TokenStoreRegistry::with_builtins()).
Result<ServerConfig> server_config_from_json(const nlohmann::json& config,
                                             MechanismRegistry registry,
                                             const security::TokenStoreRegistry& stores = {});
// Reads a configuration file (comments allowed; a syntax error names its
// line and column) and builds it as server_config_from_json() does.
Result<ServerConfig> load_server_config(const std::string& path, MechanismRegistry registry,
                                        const security::TokenStoreRegistry& stores = {});

// Re-reads "log_level" (only that key) from the configuration file at `path`
// and sets it on `log`, and so on every copy of it: authrpc-server on SIGHUP.
// Returns the level now in force. A file that cannot be read or parsed, or a
// bad log_level, is CONFIG_ERROR and leaves `log` as it was.
Result<LogLevel> reload_log_level(const std::string& path, const LogSink& log);

// The options alone, opening nothing: a "tokens" section is checked but not
// opened, so auth.mechanisms may name `token` only if `registry` already
// makes it (e.g. a TokenService the application opened itself).
Result<ServerOptions> server_options_from_json(const nlohmann::json& config,
                                               const MechanismRegistry& registry,
                                               const security::TokenStoreRegistry& stores = {});

}  // namespace authrpc
