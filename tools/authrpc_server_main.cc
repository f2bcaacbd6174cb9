// authrpc-server: runs an authrpc server from a JSON configuration file,
// serving the built-in sys service (whoami, echo) and, when configured, the
// delegation-token service (token.get/renew/cancel), and, when configured,
// the admin listener (/metrics, /healthz, /readyz). SIGINT/SIGTERM stop it
// gracefully.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/server/audit_log.h"
#include "authrpc/server/server.h"
#include "authrpc/server/server_config.h"
#include "authrpc/tools/cli_exit.h"
#include "authrpc/tools/flag_parser.h"
#ifdef AUTHRPC_HAVE_ADMIN
#include "authrpc/components/admin/admin_server.h"
#endif

namespace {

constexpr const char* kUsage = R"(usage: authrpc-server --config FILE [--listen URI]... [--check]

Runs an authrpc server configured by FILE (JSON; see docs/CONFIG.md).

  --config FILE   configuration file (required)
  --listen URI    listen on URI instead of the file's "listen" list
                  (tcp://127.0.0.1:7000, tcp://[::1]:7000, unix:/path.sock)
  --check         check FILE and exit: every problem as FILE:LINE:COLUMN:
                  key: message, exit 0 if there is none, else 2; opens no
                  store, binds nothing, writes nothing (the server runs the
                  same check before it starts)
  --print-endpoints  print each bound endpoint on stdout once serving, then
                  the admin listener's http://HOST:PORT if configured
  --version       print the version
  --help          this text

SIGHUP reloads the authorization ACL file (a broken file is refused and the
old policy stays in force), reopens the audit log and re-reads log_level
from FILE (a bad value is logged and the old level stays).
SIGINT or SIGTERM stops the server gracefully: it stops accepting, sends
GOAWAY, lets in-flight calls finish (stop_grace_ms) and exits 0.
Exit status: 0 after a clean stop, 2 for usage or configuration errors,
1 if the server cannot start (an address in use, a store that cannot be
opened; the numbers authrpc uses too; docs/CLI.md).
)";

constexpr const char* kProgram = "authrpc-server";
constexpr const char* kHelp = "authrpc-server --help";

// The exit statuses authrpc-server has, numbered as tools/cli_exit.h numbers
// them for authrpc.
constexpr int kExitCannotStart = authrpc::cli::kExitFailure;
using authrpc::cli::kExitUsage;

// SIGHUP: the configuration file's log_level, applied to `log` (and so to
// every component's copy). Reported on stderr like the other SIGHUP steps,
// whatever the level.
void reread_log_level(const std::string& config_path, const authrpc::LogSink& log) {
  const auto before = authrpc::log_level_name(log.level());
  auto level = authrpc::reload_log_level(config_path, log);
  if (!level.ok()) {
    std::fprintf(stderr, "authrpc-server: SIGHUP: log_level not changed, stays %.*s: %s\n",
                 static_cast<int>(before.size()), before.data(), level.status().to_string().c_str());
    return;
  }
  const auto after = authrpc::log_level_name(*level);
  if (after == before) return;
  std::fprintf(stderr, "authrpc-server: SIGHUP: log level %.*s -> %.*s\n", static_cast<int>(before.size()),
               before.data(), static_cast<int>(after.size()), after.data());
}
// The checks of what the library does not read itself: the admin
// listener's address and host names.
authrpc::ConfigCheckHooks check_hooks(const std::vector<std::string>& listen) {
  authrpc::ConfigCheckHooks hooks;
  hooks.listen = listen;
  hooks.extra = [](const nlohmann::json& config) -> authrpc::Status {
    if (!config.contains("admin")) return {};
#ifdef AUTHRPC_HAVE_ADMIN
    const auto& admin = config["admin"];
    authrpc::AdminOptions options;
    if (admin.contains("listen") && admin["listen"].is_string()) options.listen = admin["listen"];
    // AdminServer's messages name what they are about ("admin listen 'X':
    // why", "admin hosts: why"); the key says it here.
    const auto reason = [](const std::string& message) {
      if (message.rfind("admin hosts: ", 0) == 0) return message.substr(13);
      const auto at = message.rfind("admin listen '", 0) == 0 ? message.find("': ") : std::string::npos;
      return at == std::string::npos ? message : message.substr(at + 3);
    };
    if (auto s = authrpc::AdminServer::check(options); !s.ok()) {
      return {s.code, "'admin.listen': " + reason(s.message)};
    }
    options.listen = "127.0.0.1:0";
    if (admin.contains("hosts") && admin["hosts"].is_array()) {
      for (const auto& host : admin["hosts"]) {
        if (host.is_string()) options.hosts.push_back(host);
      }
    }
    if (auto s = authrpc::AdminServer::check(options); !s.ok()) return {s.code, "'admin.hosts': " + reason(s.message)};
    return {};
#else
    return {authrpc::Errc::kConfigError,
            "'admin': this authrpc-server was built without the admin listener (prometheus-cpp-dev and "
            "libmicrohttpd-dev were not found)"};
#endif
  };
  return hooks;
}

#ifdef AUTHRPC_HAVE_ADMIN
// The admin listener of the "admin" section (docs/CONFIG.md "admin"): the
// server's metrics, and ready while the server serves, the token service
// (if any) can verify tokens and every mechanism can authenticate.
authrpc::Result<std::unique_ptr<authrpc::AdminServer>> start_admin(
    const authrpc::ServerConfig& config, const authrpc::Server& server,
    const std::vector<std::shared_ptr<authrpc::ServerMechanism>>& mechanisms, const authrpc::LogSink& log) {
  authrpc::AdminOptions admin;
  admin.listen = *config.admin_listen;
  admin.hosts = config.admin_hosts;
  admin.metrics = server.metrics() ? server.metrics() : authrpc::default_metrics_registry();
  admin.log = log;
  admin.readiness.emplace_back("server", authrpc::server_serving_check(server));
  if (const authrpc::TokenService* tokens = config.tokens.get()) {
    admin.readiness.emplace_back("tokens", [tokens] { return tokens->ready(); });
  }
  for (const auto& mechanism : mechanisms) {
    admin.readiness.emplace_back("mechanism " + std::string(mechanism->name()),
                                 [mechanism] { return mechanism->ready(); });
  }
  return authrpc::AdminServer::start(std::move(admin));
}
#endif

// Waits for a stop signal, answering each SIGHUP on the way: the log level
// is read again, the audit log reopened and the authorization policy
// reloaded (the old one stays if the new one is refused). Returns the signal
// that stopped it.
int serve_until_stopped(const sigset_t& signals, const std::string& config_path, const authrpc::LogSink& log,
                        const std::shared_ptr<authrpc::AuditLog>& audit_log,
                        const std::shared_ptr<authrpc::Authorizer>& authorizer) {
  int received = 0;
  for (;;) {
    sigwait(&signals, &received);
    if (received != SIGHUP) return received;
    reread_log_level(config_path, log);
    if (audit_log) {
      if (auto s = audit_log->reopen(); !s.ok()) {
        std::fprintf(stderr, "authrpc-server: %s\n", s.to_string().c_str());
      }
    }
    if (!authorizer) {
      std::fprintf(stderr, "authrpc-server: SIGHUP: no authorization configured\n");
      continue;
    }
    if (auto s = authorizer->reload(); !s.ok()) {
      std::fprintf(stderr, "authrpc-server: SIGHUP: reload refused, old policy stays: %s\n",
                   s.to_string().c_str());
    } else {
      std::fprintf(stderr, "authrpc-server: SIGHUP: authorization policy reloaded (generation %llu)\n",
                   static_cast<unsigned long long>(authorizer->generation()));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  std::vector<std::string> listen;
  bool print_endpoints = false;
  bool check_only = false;
  bool version = false;
  authrpc::cli::FlagParser parser;
  parser.value("--config", &config_path)
      .value("--listen",
             [&listen](std::string_view uri) {
               listen.emplace_back(uri);
               return authrpc::Status();
             })
      .flag("--print-endpoints", &print_endpoints)
      .flag("--check", &check_only)
      .flag("--version", &version);
  if (auto code = authrpc::cli::parse_or_exit(parser, argc - 1, argv + 1, kUsage, kProgram, kHelp)) return *code;
  if (version) return authrpc::cli::print_version(kProgram);
  if (config_path.empty()) {
    return authrpc::cli::report_usage(kProgram, "--config is required", kHelp);
  }
  for (const auto& uri : listen) {
    if (auto ep = authrpc::Endpoint::parse(uri); !ep.ok()) {
      return authrpc::cli::report_usage(kProgram, "--listen: " + ep.status().message, kHelp);
    }
  }
  const auto registry = authrpc::MechanismRegistry::with_builtins();
  const auto stores = authrpc::security::TokenStoreRegistry::with_builtins();
  const auto hooks = check_hooks(listen);
  if (check_only) {
    const auto problems = authrpc::check_server_config_file(config_path, registry, stores, hooks);
    for (const auto& problem : problems) std::fprintf(stderr, "%s\n", problem.c_str());
    if (!problems.empty()) return kExitUsage;
    std::printf("%s: configuration OK\n", config_path.c_str());
    return 0;
  }
  // Block the stop and reload signals before any thread (the token
  // sweeper, the server's, the audit writer) starts, then wait for them here.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // The configuration, checked whole before anything is opened, and the
  // token service if it has a "tokens" section, read by the library exactly
  // as an application would (docs/CONFIG.md).
  auto config = authrpc::load_server_config(config_path, registry, stores, hooks);
  if (!config.ok()) {
    if (config.code() != authrpc::Errc::kConfigError) {
      std::fprintf(stderr, "authrpc-server: cannot start: %s\n", config.status().to_string().c_str());
      return kExitCannotStart;
    }
    // Every problem, not only the first.
    auto problems = authrpc::check_server_config_file(config_path, registry, stores, hooks);
    if (problems.empty()) problems.push_back(config.status().message);
    for (const auto& problem : problems) std::fprintf(stderr, "authrpc-server: %s\n", problem.c_str());
    return kExitUsage;
  }
  auto& options = config->options;
  const auto authorizer = options.authorizer;
  const auto audit_log = options.audit_log;
  // A copy shares the level with the server's and the token service's sink.
  const authrpc::LogSink log = options.log;
  const auto mechanisms = options.mechanisms;
  const auto& server_log = log;
  authrpc::Server server(std::move(options));
  if (auto s = config->add_services(server); !s.ok()) {
    std::fprintf(stderr, "authrpc-server: %s\n", s.to_string().c_str());
    return kExitCannotStart;
  }
#ifdef AUTHRPC_HAVE_ADMIN
  // The admin listener first: an address it cannot take stops the start
  // before the server serves anything.
  std::unique_ptr<authrpc::AdminServer> admin;
  if (config->admin_listen) {
    auto started = start_admin(*config, server, mechanisms, server_log);
    if (!started.ok()) {
      std::fprintf(stderr, "authrpc-server: cannot start: %s\n", started.status().to_string().c_str());
      return started.code() == authrpc::Errc::kConfigError ? kExitUsage : kExitCannotStart;
    }
    admin = std::move(*started);
  }
#endif
  if (auto s = server.start(); !s.ok()) {
    std::fprintf(stderr, "authrpc-server: cannot start: %s\n", s.to_string().c_str());
    return s.code == authrpc::Errc::kConfigError ? kExitUsage : kExitCannotStart;
  }
  if (print_endpoints) {
    for (const auto& ep : server.bound_endpoints()) std::cout << ep.to_string() << "\n";
  }
#ifdef AUTHRPC_HAVE_ADMIN
  if (admin) {
    const std::string& admin_listen = *config->admin_listen;
    const std::string where =
        admin_listen.substr(0, admin_listen.rfind(':')) + ":" + std::to_string(admin->port());
    server_log(authrpc::LogLevel::kInfo, "admin listener on " + where);
    if (print_endpoints) std::cout << "http://" << where << "\n";
  }
#endif
  std::cout.flush();
  const int received = serve_until_stopped(signals, config_path, log, audit_log, authorizer);
  std::fprintf(stderr, "authrpc-server: %s received, stopping\n", strsignal(received));
#ifdef AUTHRPC_HAVE_ADMIN
  if (admin) admin->stop();  // probes fail from now on, as the server stops
#endif
  server.stop();
  return 0;
}
