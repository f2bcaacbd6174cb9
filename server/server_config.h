// ServerConfig: the JSON configuration file of authrpc-server (documented in
// docs/CONFIG.md), turned into ServerOptions and the services it enables. The
// library and authrpc-server read it through the same functions. Unknown keys
// and wrong types are refused with a message naming the key, so a typo never
// silently becomes a default.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/base/result.h"
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
  // no admin listener. authrpc-server starts one
  // (components/admin/admin_server.h).
  std::optional<std::string> admin_listen;
  // Its "hosts": the DNS names the admin listener answers to
  // (AdminOptions::hosts).
  std::vector<std::string> admin_hosts;

  // Adds the configured services (the token service's `token` service, if
  // any) to `server`; call it before server.start().
  Status add_services(Server& server) const;
};

// One problem of a configuration: the key it is about, as a dotted path
// ("tokens.store.type", "listen.1"; empty: the document as a whole), and
// what is wrong with it.
struct ConfigProblem {
  std::string key;
  std::string message;
};

// What a program adds to the check of its configuration file.
struct ConfigCheckHooks {
  // Replaces the file's "listen" list (authrpc-server --listen).
  std::vector<std::string> listen;
  // Checks of sections read by components the library does not link
  // (authrpc-server: the admin listener's address and host names); a
  // CONFIG_ERROR whose message starts with the quoted key ('admin.hosts').
  std::function<Status(const nlohmann::json& config)> extra;
};

// Checks a configuration as server_config_from_json() would build it:
// every key and type, the conflicts between keys that Server::start()
// refuses, that the files it names can be read and the places it writes
// to can be written. Opens no store, binds nothing, writes nothing. Returns
// every problem of a single key; when there is none, the first conflict
// between keys (a conflict after a bad key is often that key's echo).
// Empty: the configuration starts, unless an address is taken or a service
// it depends on is down.
std::vector<ConfigProblem> check_server_config(const nlohmann::json& config, const MechanismRegistry& registry,
                                               const security::TokenStoreRegistry& stores = {},
                                               const ConfigCheckHooks& hooks = {});
// Reads the configuration file at `path` and checks it as above, its syntax
// and duplicate keys too: every problem as "PATH:LINE:COLUMN: key: message",
// LINE:COLUMN where the key is in the file (authrpc-server --check).
std::vector<std::string> check_server_config_file(const std::string& path, const MechanismRegistry& registry,
                                                  const security::TokenStoreRegistry& stores = {},
                                                  const ConfigCheckHooks& hooks = {});

// Builds a ServerConfig from a configuration object, exactly as
// authrpc-server does: the whole configuration is checked first
// (check_server_config(); the first problem is the error), then the token
// service is opened if configured, and mechanisms are built through
// `registry` plus the token service's. A shared token store's type
// is looked up in `stores` (authrpc-server passes
// security::TokenStoreRegistry::with_builtins()).
Result<ServerConfig> server_config_from_json(const nlohmann::json& config,
                                             MechanismRegistry registry,
                                             const security::TokenStoreRegistry& stores = {});
// Reads a configuration file (comments allowed; a syntax error or a
// duplicate key names its line and column) and builds it as
// server_config_from_json() does; a problem found by the check is
// "PATH:LINE:COLUMN: key: message".
Result<ServerConfig> load_server_config(const std::string& path, MechanismRegistry registry,
                                        const security::TokenStoreRegistry& stores = {},
                                        const ConfigCheckHooks& hooks = {});

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
