#include "authrpc/server/server_config.h"

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/rpc/json_document.h"
#include "authrpc/server/audit_log.h"
#include "authrpc/server/config_check.h"
#include "authrpc/server/server_policy.h"
#include "authrpc/server/tls_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

namespace authrpc {
namespace {

Status config_error(const std::string& message) { return {Errc::kConfigError, message}; }

// What the readers do with what a configuration names: open it (the audit
// log) or, for a check, only see that it could be.
enum class Mode { kOpen, kCheck };

// OK if this process could create or append to the file at `path`: the file
// is writable, or it does not exist and its directory is.
Status check_writable(const std::string& key, const std::string& path) {
  if (::access(path.c_str(), W_OK) == 0) return {};
  if (errno == ENOENT) {
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (::access(dir.c_str(), W_OK | X_OK) == 0) return {};
    return config_error("'" + key + "' " + escape_for_log(path) + ": cannot create it in " + escape_for_log(dir) +
                        ": " + std::strerror(errno));
  }
  return config_error("'" + key + "' " + escape_for_log(path) + ": cannot write it: " + std::strerror(errno));
}

Status check_keys(const nlohmann::json& object, const std::string& where,
                  const std::set<std::string>& allowed) {
  for (const auto& [key, _] : object.items()) {
    if (!allowed.contains(key)) return config_error("unknown key '" + where + key + "'");
  }
  return {};
}

template <typename T>
Status read_number(const nlohmann::json& object, const char* key, T& out) {
  if (!object.contains(key)) return {};
  const auto& v = object[key];
  const bool non_negative_integer =
      v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
  if (!non_negative_integer || v.get<std::uint64_t>() > std::numeric_limits<T>::max()) {
    return config_error(std::string("'") + key + "' must be a non-negative integer");
  }
  out = static_cast<T>(v.get<std::uint64_t>());
  return {};
}

// Durations are bounded so that now + duration cannot overflow.
constexpr std::uint64_t kMaxDurationMs = 30ull * 24 * 3600 * 1000;  // 30 days

Status read_ms(const nlohmann::json& object, const char* key, std::chrono::milliseconds& out) {
  std::uint64_t ms = static_cast<std::uint64_t>(out.count());
  if (Status s = read_number(object, key, ms); !s.ok()) return s;
  if (ms > kMaxDurationMs) {
    return config_error(std::string("'") + key + "' must be at most 30 days (" +
                        std::to_string(kMaxDurationMs) + " ms)");
  }
  out = std::chrono::milliseconds(ms);
  return {};
}

// "authorization": {"acl_file": PATH} and "audit_log": {"enabled": BOOL,
// "path": PATH} (docs/AUTHZ.md).
Status read_authz(const nlohmann::json& config, ServerOptions& o, Mode mode) {
  if (config.contains("authorization")) {
    const auto& a = config["authorization"];
    if (!a.is_object()) return config_error("'authorization' must be an object");
    if (Status s = check_keys(a, "authorization.", {"acl_file"}); !s.ok()) return s;
    if (!a.contains("acl_file") || !a["acl_file"].is_string()) {
      return config_error("'authorization.acl_file' must be a path string");
    }
    auto authorizer = Authorizer::from_file(a["acl_file"].get<std::string>());
    if (!authorizer.ok()) return config_error("'authorization': " + authorizer.status().message);
    o.authorizer = std::move(*authorizer);
  }
  if (config.contains("audit_log")) {
    const auto& a = config["audit_log"];
    if (!a.is_object()) return config_error("'audit_log' must be an object");
    if (Status s = check_keys(a, "audit_log.", {"enabled", "path"}); !s.ok()) return s;
    if (a.contains("enabled") && !a["enabled"].is_boolean()) {
      return config_error("'audit_log.enabled' must be true or false");
    }
    if (!a.contains("path") || !a["path"].is_string()) {
      return config_error("'audit_log.path' must be a path string");
    }
    if (a.value("enabled", true) && mode == Mode::kCheck) {
      return check_writable("audit_log.path", a["path"].get<std::string>());
    }
    if (a.value("enabled", true)) {
      auto log = AuditLog::open(a["path"].get<std::string>(), 65536, o.log);
      if (!log.ok()) return config_error("'audit_log': " + log.status().message);
      o.audit_log = std::move(*log);
    }
  }
  return {};
}

// "admin": {"listen": "HOST:PORT", "hosts": [NAME, ...]}: where
// authrpc-server's admin listener listens and the host names it answers
// to; the address and the names themselves are checked by
// AdminServer::start().
struct AdminSection {
  std::string listen;
  std::vector<std::string> hosts;
};

Result<std::optional<AdminSection>> read_admin(const nlohmann::json& config) {
  if (!config.contains("admin")) return std::optional<AdminSection>();
  const auto& a = config["admin"];
  if (!a.is_object()) return config_error("'admin' must be an object");
  if (Status s = check_keys(a, "admin.", {"listen", "hosts"}); !s.ok()) return s;
  if (!a.contains("listen") || !a["listen"].is_string() || a["listen"].get_ref<const std::string&>().empty()) {
    return config_error("'admin.listen' must be a \"HOST:PORT\" string, e.g. \"127.0.0.1:9464\"");
  }
  AdminSection out{a["listen"].get<std::string>(), {}};
  if (!Endpoint::parse("tcp://" + out.listen).ok()) {
    return config_error("'admin.listen' must be a \"HOST:PORT\" string, e.g. \"127.0.0.1:9464\"");
  }
  if (a.contains("hosts")) {
    const auto& hosts = a["hosts"];
    if (!hosts.is_array()) return config_error("'admin.hosts' must be an array of host names");
    for (const auto& host : hosts) {
      if (!host.is_string()) return config_error("'admin.hosts' must be an array of host names");
      out.hosts.push_back(host.get<std::string>());
    }
  }
  return std::optional<AdminSection>(std::move(out));
}

Result<LogLevel> parse_level(const std::string& name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return config_error("'log_level' must be debug, info, warning or error");
}

// "log_level" (default info).
Result<LogLevel> read_log_level(const nlohmann::json& config) {
  if (!config.contains("log_level")) return LogLevel::kInfo;
  if (!config["log_level"].is_string()) return config_error("'log_level' must be a string");
  return parse_level(config["log_level"].get<std::string>());
}

// "log_level" and "log_format": the one sink the server, its token service
// and its audit log report to, so that a level set on it (SIGHUP) applies to
// all of them.
Result<LogSink> read_log_sink(const nlohmann::json& config) {
  auto level = read_log_level(config);
  if (!level.ok()) return level.status();
  const nlohmann::json format = config.value("log_format", nlohmann::json("text"));
  if (format == "text") return stderr_log_sink(*level);
  if (format == "json") return json_log_sink(*level);
  return config_error("'log_format' must be \"text\" or \"json\"");
}

// "shared_memory": the same-host data plane for streams on unix:// endpoints
// (docs/SHM.md): {"enabled": bool, "slot_size": bytes, "slots": n,
// "peer_uid": uid (default: the server's own)}.
Status read_shared_memory(const nlohmann::json& config, ServerOptions& o) {
  if (!config.contains("shared_memory")) return {};
  const auto& shm = config["shared_memory"];
  if (!shm.is_object()) return config_error("'shared_memory' must be an object");
  if (Status s = check_keys(shm, "shared_memory.", {"enabled", "slot_size", "slots", "peer_uid"});
      !s.ok()) {
    return s;
  }
  if (shm.contains("enabled")) {
    if (!shm["enabled"].is_boolean()) return config_error("'shared_memory.enabled' must be a boolean");
    o.shm.enabled = shm["enabled"].get<bool>();
  }
  if (Status s = read_number(shm, "slot_size", o.shm.ring.slot_size); !s.ok()) return s;
  if (Status s = read_number(shm, "slots", o.shm.ring.slot_count); !s.ok()) return s;
  const auto slot = o.shm.ring.slot_size;
  if (slot % 4096 != 0 || slot < 4096 || slot > (64u << 20)) {
    return config_error("'shared_memory.slot_size' must be a multiple of 4096 from 4096 to 64 MiB");
  }
  if (o.shm.ring.slot_count < 2 || o.shm.ring.slot_count > 1024) {
    return config_error("'shared_memory.slots' must be from 2 to 1024");
  }
  if (shm.contains("peer_uid")) {
    uid_t uid = 0;
    if (Status s = read_number(shm, "peer_uid", uid); !s.ok()) return s;
    o.shm.peer.uid = uid;
  }
  return {};
}

// "auth": the mechanisms, made by the registry with their options.
Status read_auth(const nlohmann::json& config, const MechanismRegistry& registry,
                 ServerOptions& o) {
  const nlohmann::json auth = config.value("auth", nlohmann::json::object());
  if (!auth.is_object()) return config_error("'auth' must be an object");
  if (Status s = check_keys(auth, "auth.", {"mechanisms", "options"}); !s.ok()) return s;
  // names: documented default (docs/CONFIG.md)
  const nlohmann::json names = auth.value("mechanisms", nlohmann::json::array({"simple"}));
  if (!names.is_array() || names.empty()) {
    return config_error("'auth.mechanisms' must be a non-empty array of mechanism names");
  }
  const nlohmann::json mech_options = auth.value("options", nlohmann::json::object());
  if (!mech_options.is_object()) return config_error("'auth.options' must be an object");
  for (const auto& [key, _] : mech_options.items()) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      return config_error("'auth.options." + key + "' given but '" + key + "' is not enabled");
    }
  }
  for (const auto& name : names) {
    if (!name.is_string()) return config_error("'auth.mechanisms' entries must be strings");
    const auto n = name.get<std::string>();
    auto mechanism = registry.make_server(
        n, mech_options.contains(n) ? mech_options[n] : nlohmann::json::object());
    if (!mechanism.ok()) {
      const std::string key = mech_options.contains(n) ? "auth.options." + n : "auth.mechanisms";
      return config_error("'" + key + "': " + mechanism.status().message);
    }
    o.mechanisms.push_back(*mechanism);
  }
  return Status();
}

// The limits and timeouts, each a plain number (docs/CONFIG.md), checked in
// this order. The limits before authentication are checked against each
// other by Server::start().
Status read_limits(const nlohmann::json& config, ServerOptions& o) {
  static constexpr std::pair<const char*, std::size_t ServerOptions::*> kCounts[] = {
      {"io_threads", &ServerOptions::io_threads},
      {"blocking_threads", &ServerOptions::blocking_threads},
      {"max_connections", &ServerOptions::max_connections},
      {"max_frame_size", &ServerOptions::max_frame_size},
      {"max_unauthenticated", &ServerOptions::max_unauthenticated},
      {"max_unauthenticated_per_address", &ServerOptions::max_unauthenticated_per_address},
      {"max_connections_per_address", &ServerOptions::max_connections_per_address},
      {"max_connections_per_user", &ServerOptions::max_connections_per_user},
      {"max_negotiation_frame_size", &ServerOptions::max_negotiation_frame_size},
      {"max_pending_output", &ServerOptions::max_pending_output},
      {"max_streams_per_connection", &ServerOptions::max_streams_per_connection},
      {"max_stream_bytes_per_connection", &ServerOptions::max_stream_bytes_per_connection},
      {"max_buffered_bytes", &ServerOptions::max_buffered_bytes},
  };
  for (const auto& [key, member] : kCounts) {
    if (Status s = read_number(config, key, o.*member); !s.ok()) return s;
  }
  static constexpr std::pair<const char*, std::chrono::milliseconds ServerOptions::*> kTimes[] = {
      {"negotiation_timeout_ms", &ServerOptions::negotiation_timeout},
      {"idle_timeout_ms", &ServerOptions::idle_timeout},
      {"stop_grace_ms", &ServerOptions::stop_grace},
  };
  for (const auto& [key, member] : kTimes) {
    if (Status s = read_ms(config, key, o.*member); !s.ok()) return s;
  }
  if (Status s = read_number(config, "stream_window", o.stream_window); !s.ok()) return s;
  if (config.contains("stream_window") && o.stream_window < 65536) {
    return config_error("'stream_window' must be at least 65536 bytes");
  }
  return Status();
}

Status read_unix_socket_mode(const nlohmann::json& config, ServerOptions& o) {
  if (!config.contains("unix_socket_mode")) return Status();
  const auto& mode = config["unix_socket_mode"];
  const std::string text = mode.is_string() ? mode.get<std::string>() : std::string();
  char* end = nullptr;
  const unsigned long value = text.empty() ? 0 : std::strtoul(text.c_str(), &end, 8);
  if (text.empty() || end != text.c_str() + text.size() || value > 07777) {
    return config_error("'unix_socket_mode' must be an octal string like \"0660\"");
  }
  o.listen.unix_socket_mode = static_cast<unsigned>(value);
  return Status();
}

// server_options_from_json() with the sink read from the configuration
// already, so that server_config_from_json() can share it with the token
// service.
Result<ServerOptions> build_server_options(const nlohmann::json& config,
                                           const MechanismRegistry& registry,
                                           const security::TokenStoreRegistry& stores, LogSink log,
                                           Mode mode = Mode::kOpen);

}  // namespace

Result<ServerOptions> server_options_from_json(const nlohmann::json& config,
                                               const MechanismRegistry& registry,
                                               const security::TokenStoreRegistry& stores) {
  return read_config_guarded("configuration", [&]() -> Result<ServerOptions> {
    if (!config.is_object()) return config_error("configuration must be a JSON object");
    auto log = read_log_sink(config);
    if (!log.ok()) return log.status();
    return build_server_options(config, registry, stores, std::move(*log));
  });
}

namespace {

Result<ServerOptions> build_server_options(const nlohmann::json& config,
                                           const MechanismRegistry& registry,
                                           const security::TokenStoreRegistry& stores, LogSink log,
                                           Mode mode) {
  if (!config.is_object()) return config_error("configuration must be a JSON object");
  if (Status s = check_keys(config, "",
                            {"listen", "auth", "io_threads", "blocking_threads",
                             "negotiation_timeout_ms", "idle_timeout_ms", "max_connections",
                             "max_frame_size", "max_pending_output", "max_streams_per_connection",
                             "max_stream_bytes_per_connection", "max_buffered_bytes", "stop_grace_ms",
                             "max_unauthenticated", "max_unauthenticated_per_address",
                             "max_connections_per_address", "max_connections_per_user",
                             "max_negotiation_frame_size",
                             "unix_socket_mode", "log_level", "log_format", "tls", "encryption",
                             "authentication", "authorization", "audit_log",
                             "stream_window", "shared_memory", "admin",
                             "tokens"});  // "tokens": server/token_service.h
      !s.ok()) {
    return s;
  }
  ServerOptions o;
  if (Status s = read_auth(config, registry, o); !s.ok()) return s;
  if (Status s = read_limits(config, o); !s.ok()) return s;
  if (Status s = read_shared_memory(config, o); !s.ok()) return s;
  if (Status s = read_unix_socket_mode(config, o); !s.ok()) return s;
  if (Status s = apply_tls_config(config, o); !s.ok()) return s;
  o.log = std::move(log);
  if (config.contains("tokens")) {
    auto tokens = token_service_options_from_json(config["tokens"], stores);
    if (!tokens.ok()) return tokens.status();
    if (Status s = check_issue_mechanisms(*tokens, registry); !s.ok()) return s;
  }
  if (auto admin = read_admin(config); !admin.ok()) return admin.status();
  if (Status s = read_authz(config, o, mode); !s.ok()) return s;
  // Last, so that a check finds the problems of the other keys even when
  // this required one is missing.
  if (!config.contains("listen") || !config["listen"].is_array() || config["listen"].empty()) {
    return config_error("'listen' must be a non-empty array of endpoint URIs");
  }
  for (const auto& uri : config["listen"]) {
    if (!uri.is_string()) return config_error("'listen' entries must be strings");
    auto ep = Endpoint::parse(uri.get<std::string>());
    if (!ep.ok()) return config_error("'listen': " + ep.status().message);
    o.endpoints.push_back(*ep);
  }
  return o;
}

}  // namespace

Status ServerConfig::add_services(Server& server) const {
  if (!tokens) return {};
  return server.add_service(tokens->service());
}

namespace {

// The token store directory a file store would open: an existing directory
// this process can write, or one it can create.
Status check_token_dir(const std::string& dir) {
  if (::access(dir.c_str(), W_OK | X_OK) == 0 || errno == ENOENT) {
    return errno == ENOENT ? check_writable("tokens.dir", dir) : Status();
  }
  return config_error("'tokens.dir' " + escape_for_log(dir) + ": cannot use it: " + std::strerror(errno));
}

// One pass of the check (check_server_config()): the first problem, if
// any, and whether it is a conflict between keys rather than a problem of
// one. The "tokens" section is checked and its mechanism made over a store
// in memory, so that auth.mechanisms may name it; nothing is opened.
Status check_once(const nlohmann::json& config, MechanismRegistry registry, const security::TokenStoreRegistry& stores,
                  const ConfigCheckHooks& hooks, bool& conflict) {
  conflict = false;
  return read_config_guarded("configuration", [&]() -> Status {
    if (!config.is_object()) return config_error("configuration must be a JSON object");
    auto log = read_log_sink(config);
    if (!log.ok()) return log.status();
    if (config.contains("tokens")) {
      auto tokens = token_service_options_from_json(config["tokens"], stores);
      if (!tokens.ok()) return tokens.status();
      if (tokens->store == TokenServiceOptions::Store::kFile) {
        if (Status s = check_token_dir(tokens->dir); !s.ok()) return s;
      }
      tokens->store = TokenServiceOptions::Store::kMemory;
      tokens->log = null_log_sink();
      tokens->metrics = nullptr;
      auto service = TokenService::open(std::move(*tokens));
      if (!service.ok()) return Status(service.code(), "'tokens': " + service.status().message);
      if (Status s = (*service)->register_mechanism(registry); !s.ok()) return s;
    }
    if (hooks.extra) {
      if (Status s = hooks.extra(config); !s.ok()) return s;
    }
    auto options = build_server_options(config, registry, stores, null_log_sink(), Mode::kCheck);
    if (!options.ok()) return options.status();
    conflict = true;
    return validate_server_options(*options);
  });
}

std::vector<ConfigProblem> check_document(nlohmann::json config, const MechanismRegistry& registry,
                                          const security::TokenStoreRegistry& stores, const ConfigCheckHooks& hooks) {
  if (!hooks.listen.empty() && config.is_object()) config["listen"] = hooks.listen;
  return collect_config_problems(std::move(config), [&](const nlohmann::json& document, bool& conflict) {
    return check_once(document, registry, stores, hooks, conflict);
  });
}

Result<ServerConfig> read_server_config(const nlohmann::json& config, MechanismRegistry registry,
                                        const security::TokenStoreRegistry& stores) {
  if (!config.is_object()) return config_error("configuration must be a JSON object");
  ServerConfig out;
  auto log = read_log_sink(config);
  if (!log.ok()) return log.status();
  if (config.contains("tokens")) {
    auto options = token_service_options_from_json(config["tokens"], stores);
    if (!options.ok()) return options.status();
    // The service logs where the server does.
    options->log = *log;
    auto service = TokenService::open(std::move(*options));
    if (!service.ok()) return service.status();
    if (Status s = (*service)->register_mechanism(registry); !s.ok()) return s;
    out.tokens = std::move(*service);
  }
  auto options = build_server_options(config, registry, stores, std::move(*log));
  if (!options.ok()) return options.status();
  out.options = std::move(*options);
  if (auto admin = *read_admin(config)) {  // checked by server_options_from_json
    out.admin_listen = std::move(admin->listen);
    out.admin_hosts = std::move(admin->hosts);
  }
  // Renewers compare by short name through the configuration's mapping rules.
  if (out.tokens && out.options.authorizer) out.tokens->use_authorizer(out.options.authorizer);
  // Token operations are audited with the server's events.
  if (out.tokens && out.options.audit_log) out.tokens->use_audit_log(out.options.audit_log);
  return out;
}

}  // namespace

std::vector<ConfigProblem> check_server_config(const nlohmann::json& config, const MechanismRegistry& registry,
                                               const security::TokenStoreRegistry& stores,
                                               const ConfigCheckHooks& hooks) {
  return check_document(config, registry, stores, hooks);
}

std::vector<std::string> check_server_config_file(const std::string& path, const MechanismRegistry& registry,
                                                  const security::TokenStoreRegistry& stores,
                                                  const ConfigCheckHooks& hooks) {
  auto text = read_document_text(path, "configuration file");
  if (!text.ok()) return {text.status().message};
  JsonKeyIndex index;
  auto document = parse_json_document(*text, path, index);
  if (!document.ok()) return {document.status().message};
  std::vector<std::pair<JsonPosition, std::string>> found;
  for (const auto& d : index.duplicates) {
    found.emplace_back(d.at, format_config_problem(path, d.at, {d.path, "duplicate key (first at line " +
                                                                            std::to_string(d.first.line) + ", column " +
                                                                            std::to_string(d.first.column) + ")"}));
  }
  for (const auto& problem : check_document(std::move(*document), registry, stores, hooks)) {
    const JsonPosition at = index.find(problem.key);
    found.emplace_back(at, format_config_problem(path, at, problem));
  }
  // In the file's order, as a compiler reports.
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::pair(a.first.line, a.first.column) < std::pair(b.first.line, b.first.column);
  });
  std::vector<std::string> lines;
  for (auto& [at, line] : found) lines.push_back(std::move(line));
  return lines;
}

Result<ServerConfig> server_config_from_json(const nlohmann::json& config,
                                             MechanismRegistry registry,
                                             const security::TokenStoreRegistry& stores) {
  if (auto problems = check_document(config, registry, stores, {}); !problems.empty()) {
    return config_error(problem_text(problems.front()));
  }
  return read_config_guarded("configuration", [&] {
    return read_server_config(config, std::move(registry), stores);
  });
}

Result<ServerConfig> load_server_config(const std::string& path, MechanismRegistry registry,
                                        const security::TokenStoreRegistry& stores, const ConfigCheckHooks& hooks) {
  auto text = read_document_text(path, "configuration file");
  if (!text.ok()) return text.status();
  auto config = parse_json_document(*text, path);
  if (!config.ok()) return config.status();
  if (!hooks.listen.empty() && config->is_object()) (*config)["listen"] = hooks.listen;
  if (auto problems = check_document(*config, registry, stores, hooks); !problems.empty()) {
    const JsonKeyIndex index = index_json_keys(*text);
    return config_error(format_config_problem(path, index.find(problems.front().key), problems.front()));
  }
  return read_config_guarded("configuration", [&] {
    return read_server_config(*config, std::move(registry), stores);
  });
}

Result<LogLevel> reload_log_level(const std::string& path, const LogSink& log) {
  auto config = read_json_document(path, "configuration file");
  if (!config.ok()) return config.status();
  if (!config->is_object()) return config_error(path + ": configuration must be a JSON object");
  auto level = read_config_guarded("configuration", [&] { return read_log_level(*config); });
  if (!level.ok()) return Status(level.code(), path + ": " + level.status().message);
  log.set_level(*level);
  return *level;
}

}  // namespace authrpc
