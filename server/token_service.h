// TokenService: the delegation-token service built into the server
// (docs/TOKENS.md §9, docs/CONFIG.md "tokens"). Owns the SecretManager and
// its store (the embedded FileTokenStore by default, or memory), the
// sweeper thread that expires tokens and rolls master keys on a timer, the
// `token` server mechanism that shares the SecretManager, and the `token`
// RPC service:
//
//   token.get     {"renewer": R, "service": S}  → {"token": ..., ...}
//                 only on connections a token may be issued to (below)
//   token.renew   {"token": T} → {"renew_date": ..., "renew_date_ms": ...}
//                 only the renewer, on such a connection
//   token.cancel  {"token": T} → {} — the owner or the renewer, on such a
//                 connection or one authenticated by a delegation token
//
// Which connections those are is read from the identity's mechanism traits
// (auth/mechanism_traits.h): may_be_issued_tokens (the Kerberos mechanisms
// among the built-ins), or the names in issue_mechanisms when the server
// lists them; never a delegation_token mechanism. The token mechanisms'
// server halves reach the SecretManager through register_mechanism(), which
// names none of them.
//
// Who may call a method is checked before its request is parsed, and
// requests are parsed with small size and depth limits (service.h).
//
// Every call, refused ones included, is recorded: an audit event "token"
// (options.audit_log: operation, outcome, caller, the token's sequence
// number and master key id, never the token or its password) and the counter
// authrpc_token_operations_total{operation, outcome} (options.metrics). The
// store is wrapped in a TimedTokenStore, which times each store call
// (authrpc_token_store_operation_seconds{store, operation}).
//
// The handlers run on the server's blocking pool (each mutation fsyncs the
// store). Created by authrpc-server when its configuration has a "tokens"
// section, or by applications and tests directly; then
// `options.mechanisms.push_back(mechanism())` and
// `server.add_service(service())`.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/auth/mechanisms/token/token_mechanism.h"
#include "authrpc/base/log.h"
#include "authrpc/base/metrics.h"
#include "authrpc/base/result.h"
#include "authrpc/security/secret_manager.h"
#include "authrpc/security/token_store.h"
#include "authrpc/security/token_store_registry.h"
#include "authrpc/server/audit_log.h"
#include "authrpc/server/service.h"
#include "authrpc/server/token_renewer.h"

namespace authrpc {

inline constexpr std::string_view kTokenServiceName = "token";
inline constexpr std::string_view kTokenOperationsTotal = "authrpc_token_operations_total";

struct TokenServiceOptions {
  enum class Store { kFile, kMemory, kShared };
  Store store = Store::kFile;
  std::string dir;  // kFile: the store directory (required)
  // kShared: a store from an optional component, shared by a fleet (e.g.
  // security::zookeeper_store(): docs/ZOOKEEPER.md); opened with
  // sweep_interval below.
  security::TokenStoreOpener shared_store;
  security::SecretManagerOptions secrets;  // lifetimes, key roll, clock
  // How often the sweeper runs (expired tokens, retired keys, key roll).
  std::chrono::milliseconds sweep_interval{std::chrono::minutes(1)};
  // Connections authenticated by these may get (and renew) tokens; unset:
  // those whose mechanism declares may_be_issued_tokens.
  std::optional<std::vector<std::string>> issue_mechanisms;
  // The `token` mechanism's options; `services` also limits what token.get
  // will stamp into a token.
  TokenServerOptions mechanism;
  LogSink log = stderr_log_sink(LogLevel::kInfo);
  // Where token.get/renew/cancel are audited (event "token"); null: not
  // audited. authrpc-server passes the server's audit log.
  std::shared_ptr<AuditLog> audit_log;
  // Token operation counts and store latency; null: not counted.
  std::shared_ptr<MetricsRegistry> metrics = default_metrics_registry();
};

// The "tokens" object of the server configuration; unknown keys and wrong
// types are kConfigError. A "store" object's "type" is looked up in `stores`
// (the file and memory stores need none).
Result<TokenServiceOptions> token_service_options_from_json(
    const nlohmann::json& config, const security::TokenStoreRegistry& stores = {});
// CONFIG_ERROR if `options.issue_mechanisms` names a mechanism that
// `registry` says authenticates with a delegation token.
Status check_issue_mechanisms(const TokenServiceOptions& options, const MechanismRegistry& registry);

class TokenService {
 public:
  // Opens the store and the secret manager; starts the sweeper thread.
  static Result<std::unique_ptr<TokenService>> open(TokenServiceOptions options);
  ~TokenService();  // stops the sweeper
  TokenService(const TokenService&) = delete;
  TokenService& operator=(const TokenService&) = delete;

  // The `token` mechanism to enable on the server (shares the SecretManager).
  std::shared_ptr<TokenServerMechanism> mechanism() const { return mechanism_; }
  // The `token` service (get, renew, cancel); add it to the server.
  Service service();
  // Lends the registry's delegation-token mechanisms (register_token_server)
  // this service's SecretManager and rules, so that the configuration can
  // enable them, and registers mechanism() itself under its name; CONFIG_ERROR
  // if issue_mechanisms names a delegation-token mechanism (a token never
  // begets a token).
  Status register_mechanism(MechanismRegistry& registry) const;

  // Compare renewers through this authorizer's auth_to_local rules instead
  // of Hadoop's DEFAULT rule (docs/TOKENS.md §9). authrpc-server passes its
  // configuration's authorizer.
  void use_authorizer(std::shared_ptr<const Authorizer> authorizer) {
    renewers_->use_authorizer(std::move(authorizer));
  }
  // Audit to `audit_log` instead of options().audit_log: for a server
  // configuration, whose audit log is opened after the token service
  // (server_config_from_json). Call it before service() is added to a
  // server: it is not synchronised with calls being served.
  void use_audit_log(std::shared_ptr<AuditLog> audit_log) { audit_log_ = std::move(audit_log); }

  // For a readiness probe (the admin listener's /readyz): UNAVAILABLE while
  // the store is cut off from its backend, or while the master key is
  // overdue for its roll by more than two sweeps (the sweeper keeps failing:
  // see the log). No key yet is ready: the first token.get makes one.
  Status ready() const;

  security::SecretManager& secrets() { return *secrets_; }
  const TokenServiceOptions& options() const noexcept { return options_; }

 private:
  TokenService(TokenServiceOptions options, std::shared_ptr<security::SecretManager> secrets,
               std::unique_ptr<RenewerMatcher> renewers);
  // The name to hand the SecretManager for a renew or cancel by `who`.
  std::string renew_caller(const Identity& who, const security::Token& token) const;
  void sweeper();
  bool may_issue(const Identity& identity) const;
  // token.cancel: also a caller authenticated by a token (its owner or renewer).
  bool may_cancel(const Identity& identity) const;
  JsonMethodOptions method_options(std::string_view method) const;

  enum class Operation { kGet, kRenew, kCancel };
  // The handlers; `token_id` gets the token's id for the audit line as soon
  // as it is known.
  Result<nlohmann::json> get(const Identity& who, const nlohmann::json& request, std::string& token_id);
  Result<nlohmann::json> renew(const Identity& who, const nlohmann::json& request, std::string& token_id);
  Result<nlohmann::json> cancel(const Identity& who, const nlohmann::json& request, std::string& token_id);
  // Audits and counts one call's outcome.
  void record(Operation op, const Identity& who, std::string_view token_id, const Status& status) const;

  const TokenServiceOptions options_;
  std::shared_ptr<AuditLog> audit_log_;
  // authrpc_token_operations_total by [operation][outcome], outcomes in the
  // order of kCountedOutcomes (token_service.cc); null without metrics.
  static constexpr std::size_t kCountedOutcomeCount = 8;
  std::array<std::array<Counter*, kCountedOutcomeCount>, 3> operations_{};
  std::shared_ptr<security::SecretManager> secrets_;
  std::shared_ptr<TokenServerMechanism> mechanism_;
  std::unique_ptr<RenewerMatcher> renewers_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread sweeper_;
};

}  // namespace authrpc
