#include "authrpc/server/token_service.h"

#include "authrpc/rpc/json_document.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "authrpc/base/stop_thread.h"
#include "authrpc/security/file_token_store.h"
#include "authrpc/security/memory_token_store.h"
#include "authrpc/security/timed_token_store.h"
#include "authrpc/security/token_errors.h"
#include "authrpc/security/tokens_config.h"

namespace authrpc {

using security::read_tokens_ms;
using security::Token;
using security::tokens_config_error;
using security::token_status;
using security::TokenUse;

namespace {

Status read_strings(const nlohmann::json& o, const char* key, std::vector<std::string>& out) {
  if (!o.contains(key)) return {};
  const auto& v = o[key];
  if (!v.is_array()) return tokens_config_error(std::string(".") + key + "' must be an array of strings");
  out.clear();
  for (const auto& s : v) {
    if (!s.is_string()) return tokens_config_error(std::string(".") + key + "' must be an array of strings");
    out.push_back(s.get<std::string>());
  }
  return {};
}

nlohmann::json describe_json(const security::TokenIdentifier& id) {
  return {{"kind", id.kind},
          {"owner", id.owner},
          {"renewer", id.renewer},
          {"real_user", id.real_user},
          {"issue_date", security::format_token_time(id.issue_date)},
          {"max_date", security::format_token_time(id.max_date)},
          {"sequence_number", id.sequence_number},
          {"master_key_id", id.master_key_id}};
}

// The token in a renew/cancel request.
Result<Token> request_token(const nlohmann::json& request) {
  if (!request.is_object() || !request.contains("token") || !request["token"].is_string()) {
    return Status(Errc::kInvalidArgument, "request must be {\"token\": \"<token string>\"}");
  }
  auto token = Token::from_string(request["token"].get_ref<const std::string&>());
  if (!token.ok()) return token_status(token.status(), TokenUse::kService);
  return std::move(*token);
}

std::string caller_of(const Identity& identity) {
  return identity.principal.empty() ? identity.user : identity.principal;
}

// How an audit line names a token: enough to find its token.get line and
// the key it was made with, nothing that authenticates.
std::string token_id_of(const security::TokenIdentifier& id) {
  return "sequence_number=" + std::to_string(id.sequence_number) +
         ",master_key_id=" + std::to_string(id.master_key_id);
}

std::string token_id_of(const Token& token) {
  auto id = token.decode_identifier();
  return id.ok() ? token_id_of(*id) : std::string();
}

// The outcomes a token.* call can have (token_status() maps every TokenErrc
// to one of these): their counters are made when the service is, so that a
// call never looks one up. Another code (none today) is looked up.
constexpr Errc kCountedOutcomes[] = {
    Errc::kOk,          Errc::kInvalidArgument,  Errc::kPermissionDenied, Errc::kFailedPrecondition,
    Errc::kUnavailable, Errc::kUnauthenticated, Errc::kDataLoss,         Errc::kInternal,
};
constexpr const char* kOperationNames[] = {"get", "renew", "cancel"};

// "ok", "permission_denied": the outcome label of a wire code.
std::string outcome_label(Errc e) {
  std::string name(errc_name(e));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

Counter& operations_counter(MetricsRegistry& metrics, const char* operation, Errc outcome) {
  return metrics.counter(kTokenOperationsTotal, "Delegation-token service calls by operation and outcome",
                         {{"operation", operation}, {"outcome", outcome_label(outcome)}});
}

// The `store` label of a shared store: its component's name ("ZooKeeper"
// → "zookeeper"); a fixed word, never an address.
std::string store_kind(const TokenServiceOptions& options) {
  switch (options.store) {
    case TokenServiceOptions::Store::kFile: return "file";
    case TokenServiceOptions::Store::kMemory: return "memory";
    case TokenServiceOptions::Store::kShared: break;
  }
  std::string kind;
  for (const char c : options.shared_store.label) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      kind += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return kind.empty() ? "shared" : kind;
}

}  // namespace

namespace {

// An integer count from min to max, if the key is there.
Status read_count(const nlohmann::json& config, const char* key, std::size_t min, std::size_t max,
                  std::size_t& out) {
  if (!config.contains(key)) return {};
  const auto& v = config[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() < static_cast<std::int64_t>(min) ||
      v.get<std::int64_t>() > static_cast<std::int64_t>(max)) {
    return tokens_config_error(std::string(".") + key + "' must be an integer from " +
                               std::to_string(min) + " to " + std::to_string(max));
  }
  out = v.get<std::size_t>();
  return {};
}

// "store" (a plain string, or an object whose type a component registered)
// and "dir", which only the file store takes.
Status read_store(const nlohmann::json& config, const security::TokenStoreRegistry& stores,
                  TokenServiceOptions& o) {
  const bool store_object = config.contains("store") && config["store"].is_object();
  // A shared store's type: what an optional component registered (e.g.
  // "zookeeper"), named in errors so the message lists what this program has.
  std::string shared_types;
  for (const auto& type : stores.types()) {
    shared_types += (shared_types.empty() ? "\"" : " or \"") + type + "\"";
  }
  if (config.contains("store") && !config["store"].is_string() && !store_object) {
    return tokens_config_error(".store' must be \"file\", \"memory\" or {\"type\": " +
                        (shared_types.empty() ? std::string("...") : shared_types) + ", ...}");
  }
  if (store_object && config["store"].contains("type") && !config["store"]["type"].is_string()) {
    return tokens_config_error(".store.type' must be a string");
  }
  std::string store = store_object ? config["store"].value("type", std::string())
                                   : config.value("store", std::string("file"));
  const security::TokenStoreRegistry::Factory* shared = stores.find(store);
  if (store_object && shared == nullptr) {
    if (shared_types.empty()) {
      return tokens_config_error(".store.type' \"" + store +
                          "\": this program has no shared token store (authrpc built without ZooKeeper "
                          "support, or the program not linked with authrpc::builtins)");
    }
    return tokens_config_error(".store.type' must be " + shared_types +
                        " (\"file\" and \"memory\" are plain strings)");
  }
  if (shared != nullptr) {
    // Given the plain string, the factory says what its object needs.
    o.store = TokenServiceOptions::Store::kShared;
    if (store_object && config.contains("dir")) return tokens_config_error(".dir' is only for the file store");
    auto opener = (*shared)(config["store"]);
    if (!opener.ok()) return opener.status();
    o.shared_store = std::move(*opener);
  } else if (store == "file") {
    o.store = TokenServiceOptions::Store::kFile;
    if (!config.contains("dir") || !config["dir"].is_string() ||
        config["dir"].get<std::string>().empty()) {
      return tokens_config_error(".dir' (the token store directory) is required with the file store");
    }
    o.dir = config["dir"].get<std::string>();
  } else if (store == "memory") {
    o.store = TokenServiceOptions::Store::kMemory;
    if (config.contains("dir")) return tokens_config_error(".dir' is only for the file store");
  } else {
    return tokens_config_error(".store' must be \"file\" or \"memory\"");
  }
  return Status();
}

Result<TokenServiceOptions> read_token_service_options(const nlohmann::json& config,
                                                       const security::TokenStoreRegistry& stores) {
  TokenServiceOptions o;
  if (!config.is_object()) return tokens_config_error("' must be an object");
  static const std::set<std::string> kKeys = {
      "store", "dir", "key_roll_interval_ms", "max_lifetime_ms", "renew_interval_ms",
      "sweep_interval_ms", "issue_mechanisms", "services", "max_clock_skew_ms",
      "replay_cache_capacity", "replay_cache_per_token", "allow_plaintext", "session_tickets",
      "session_ticket_lifetime_ms"};
  for (const auto& [key, _] : config.items()) {
    if (!kKeys.contains(key)) return Status(Errc::kConfigError, "unknown key 'tokens." + key + "'");
  }
  if (Status s = read_store(config, stores, o); !s.ok()) return s;
  for (Status s : {read_tokens_ms(config, "", "key_roll_interval_ms", o.secrets.key_roll_interval, 1000),
                   read_tokens_ms(config, "", "max_lifetime_ms", o.secrets.max_lifetime, 1000),
                   read_tokens_ms(config, "", "renew_interval_ms", o.secrets.renew_interval, 1000),
                   read_tokens_ms(config, "", "sweep_interval_ms", o.sweep_interval, 100),
                   read_tokens_ms(config, "", "max_clock_skew_ms", o.mechanism.max_clock_skew, 1000),
                   read_tokens_ms(config, "", "session_ticket_lifetime_ms",
                                  o.mechanism.session_ticket_lifetime, 1000,
                                  TokenTickets::kMaxLifetime.count()),
                   read_strings(config, "services", o.mechanism.services)}) {
    if (!s.ok()) return s;
  }
  if (config.contains("issue_mechanisms")) {
    // Delegation-token names are refused by register_mechanism(), which
    // knows what each name declares.
    if (Status s = read_strings(config, "issue_mechanisms", o.issue_mechanisms.emplace()); !s.ok()) {
      return s;
    }
  }
  for (Status s : {read_count(config, "replay_cache_capacity", 1, std::size_t{1} << 26,
                              o.mechanism.replay_cache_capacity),
                   read_count(config, "replay_cache_per_token", 1, std::size_t{1} << 26,
                              o.mechanism.replay_cache_per_token),
                   read_count(config, "session_tickets", 0, TokenTickets::kMaxWindow,
                              o.mechanism.session_tickets)}) {
    if (!s.ok()) return s;
  }
  if (config.contains("allow_plaintext")) {
    if (!config["allow_plaintext"].is_boolean()) return tokens_config_error(".allow_plaintext' must be true or false");
    o.mechanism.allow_plaintext = config["allow_plaintext"].get<bool>();
  }
  return o;
}

}  // namespace

Result<TokenServiceOptions> token_service_options_from_json(const nlohmann::json& config,
                                                             const security::TokenStoreRegistry& stores) {
  return read_config_guarded("'tokens'", [&] { return read_token_service_options(config, stores); });
}

Result<std::unique_ptr<TokenService>> TokenService::open(TokenServiceOptions options) {
  std::shared_ptr<security::TokenStore> store;
  if (options.store == TokenServiceOptions::Store::kFile) {
    auto file = security::FileTokenStore::open(options.dir);
    if (!file.ok()) return token_status(file.status(), TokenUse::kService, "token store");
    if (options.log) {
      const auto& recovery = (*file)->recovery();
      for (const auto& [path, mode] : recovery.tightened) {
        char text[8];
        std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
        options.log(LogLevel::kWarning, "token store: " + path + " had mode " + text +
                                            "; made it private (0700 directory, 0600 files)");
      }
      if (recovery.format_version == 1) {
        options.log(recovery.migrated ? LogLevel::kInfo : LogLevel::kWarning,
                    "token store: " + options.dir +
                        (recovery.migrated ? " rewritten from format version 1 to 2"
                                           : " is in format version 1 and could not be rewritten as 2; "
                                             "the next compaction retries"));
      }
    }
    store = std::move(*file);
  } else if (options.store == TokenServiceOptions::Store::kShared) {
    if (!options.shared_store.open) {
      return Status(Errc::kConfigError, "token store: a shared store needs TokenServiceOptions::shared_store");
    }
    auto shared = options.shared_store.open(options.sweep_interval);
    if (!shared.ok()) {
      return token_status(shared.status(), TokenUse::kService,
                          "token store (" + options.shared_store.label + ")");
    }
    store = std::move(*shared);
  } else {
    store = std::make_shared<security::MemoryTokenStore>();
  }
  if (options.metrics) {
    store = std::make_shared<security::TimedTokenStore>(std::move(store), store_kind(options),
                                                        *options.metrics);
  }
  auto renewers = RenewerMatcher::create();
  if (!renewers.ok()) return renewers.status();
  auto secrets = security::SecretManager::open(store, options.secrets);
  if (!secrets.ok()) return token_status(secrets.status(), TokenUse::kService, "token store");
  std::unique_ptr<TokenService> service(
      new TokenService(std::move(options), std::shared_ptr<security::SecretManager>(std::move(*secrets)),
                       std::move(*renewers)));
  return service;
}

TokenService::TokenService(TokenServiceOptions options,
                           std::shared_ptr<security::SecretManager> secrets,
                           std::unique_ptr<RenewerMatcher> renewers)
    : options_(std::move(options)), audit_log_(options_.audit_log), secrets_(std::move(secrets)),
      mechanism_(std::make_shared<TokenServerMechanism>(secrets_, options_.mechanism)),
      renewers_(std::move(renewers)) {
  static_assert(std::size(kCountedOutcomes) == kCountedOutcomeCount);
  if (options_.metrics) {
    for (std::size_t op = 0; op < operations_.size(); ++op) {
      for (std::size_t i = 0; i < kCountedOutcomeCount; ++i) {
        operations_[op][i] = &operations_counter(*options_.metrics, kOperationNames[op], kCountedOutcomes[i]);
      }
    }
  }
  sweeper_ = std::thread([this] { sweeper(); });
}

void TokenService::record(Operation op, const Identity& who, std::string_view token_id,
                          const Status& status) const {
  const Errc code = status.ok() ? Errc::kOk : to_wire_errc(status.code);
  const auto index = static_cast<std::size_t>(op);
  if (options_.metrics) {
    const auto* slot = std::find(std::begin(kCountedOutcomes), std::end(kCountedOutcomes), code);
    if (slot != std::end(kCountedOutcomes)) {
      operations_[index][static_cast<std::size_t>(slot - std::begin(kCountedOutcomes))]->inc();
    } else {
      operations_counter(*options_.metrics, kOperationNames[index], code).inc();
    }
  }
  if (!audit_log_) return;
  AuditEvent e;
  e.event = kTokenServiceName;  // the audit event is named after the service
  e.outcome = status.ok() ? "success" : code == Errc::kPermissionDenied ? "denied" : "failure";
  e.peer = who.peer_address;
  e.mechanism = who.mechanism;
  e.principal = who.principal;
  e.user = who.user;
  if (who.real_user) e.real_user = *who.real_user;
  e.service = kTokenServiceName;
  e.method = kOperationNames[index];
  e.operation = kOperationNames[index];
  e.token_id = token_id;
  if (!status.ok()) e.code = errc_name(code);
  e.reason = status.message;
  audit_log_->record(e);
}

// The SecretManager compares names exactly; a caller whose short name is the
// renewer's is handed over as the stored renewer (Hadoop compares short
// names). Anyone else keeps their own name and is refused or allowed (an
// owner cancelling) by the SecretManager as before.
std::string TokenService::renew_caller(const Identity& who, const Token& token) const {
  const std::string caller = caller_of(who);
  const auto id = token.decode_identifier();
  if (id.ok() && renewers_->is_renewer(caller, id->renewer)) return id->renewer;
  return caller;
}

TokenService::~TokenService() {
  stop_thread(mu_, stopping_, wake_, sweeper_);
}

void TokenService::sweeper() {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, options_.sweep_interval, [this] { return stopping_; })) {
    lock.unlock();
    auto result = secrets_->sweep();
    if (!result.ok()) {
      if (options_.log) options_.log(LogLevel::kWarning, "token sweeper: " + result.status().to_string());
    } else if (options_.log && (result->tokens_removed > 0 || result->keys_removed > 0 ||
                                result->key_rolled)) {
      options_.log(LogLevel::kInfo,
                   "token sweeper: removed " + std::to_string(result->tokens_removed) +
                       " expired tokens and " + std::to_string(result->keys_removed) + " keys" +
                       (result->key_rolled ? "; rolled the master key" : ""));
    }
    lock.lock();
  }
}

Status TokenService::ready() const {
  if (!secrets_->store_fresh()) {
    return Status(Errc::kUnavailable, "token store cut off from its backend: verification refused");
  }
  const auto now = secrets_->options().clock->now();
  for (const auto& key : secrets_->master_keys()) {
    if (key.current && now >= key.created + secrets_->options().key_roll_interval + 2 * options_.sweep_interval) {
      return Status(Errc::kUnavailable, "master key " + std::to_string(key.id) +
                                            " is overdue for its roll: the token sweeper keeps failing");
    }
  }
  return {};
}

bool TokenService::may_issue(const Identity& identity) const {
  if (identity.mechanism_traits.delegation_token) return false;
  if (!options_.issue_mechanisms) return identity.mechanism_traits.may_be_issued_tokens;
  const auto& names = *options_.issue_mechanisms;
  return std::find(names.begin(), names.end(), identity.mechanism) != names.end();
}

Status check_issue_mechanisms(const TokenServiceOptions& options, const MechanismRegistry& registry) {
  if (!options.issue_mechanisms) return {};
  for (const auto& name : *options.issue_mechanisms) {
    const auto* entry = registry.server(name);
    if (entry != nullptr && entry->traits.delegation_token) {
      return tokens_config_error(".issue_mechanisms' must not contain \"" + name +
                          "\": a token never begets a token");
    }
  }
  return {};
}

Status TokenService::register_mechanism(MechanismRegistry& registry) const {
  if (Status s = check_issue_mechanisms(options_, registry); !s.ok()) return s;
  registry.provide_delegation_tokens({secrets_, options_.mechanism});
  // The service's own mechanism (mechanism()) under its own name: the
  // configuration gets that very object, so that there is one replay cache
  // however the server's mechanisms were made.
  registry.register_server(
      std::string(mechanism_->name()),
      [m = mechanism_](const nlohmann::json& options) -> Result<std::shared_ptr<ServerMechanism>> {
        if (options.is_object() && !options.empty()) {
          return Status(Errc::kConfigError, std::string(m->name()) + ": the " + std::string(m->name()) +
                                                " mechanism's options live in the 'tokens' section");
        }
        return std::shared_ptr<ServerMechanism>(m);
      },
      mechanism_->traits());
  return {};
}

bool TokenService::may_cancel(const Identity& identity) const {
  return may_issue(identity) || identity.mechanism_traits.delegation_token;
}

// The token service's requests are one small object of strings; a token's
// text is well under a kilobyte (an identifier's strings are at most 1 KiB each).
// Who may call is checked before the body is parsed (docs/TOKENS.md §9).
JsonMethodOptions TokenService::method_options(std::string_view method) const {
  JsonMethodOptions o;
  o.execution = Execution::kBlocking;
  o.limits.max_bytes = std::size_t{256} << 10;
  o.limits.max_depth = 4;
  const bool cancel = method == "cancel";
  const Operation op = method == "get" ? Operation::kGet : cancel ? Operation::kCancel : Operation::kRenew;
  o.admit = [this, cancel, op, method = std::string(method)](const CallContext& ctx) -> Status {
    const Identity& who = ctx.identity();
    // A token's password travels in token.get's answer: issued where it
    // would be accepted, never readable on the network path.
    if (op == Operation::kGet && ctx.plaintext_network() && !options_.mechanism.allow_plaintext) {
      Status refused(Errc::kFailedPrecondition,
                     "token.get: PLAINTEXT: this server issues delegation tokens only over tls:// or "
                     "unix:// (on plaintext tcp:// anyone on the path could read the token and use "
                     "it), unless it sets tokens.allow_plaintext");
      record(op, who, {}, refused);
      return refused;
    }
    if (cancel ? may_cancel(who) : may_issue(who)) return {};
    Status refused(Errc::kPermissionDenied,
                   "token." + method + " needs a connection authenticated by Kerberos" +
                       (cancel ? " or by a token" : "") + "; this one used '" + who.mechanism + "'");
    record(op, who, {}, refused);
    return refused;
  };
  return o;
}

Result<nlohmann::json> TokenService::get(const Identity& who, const nlohmann::json& request,
                                         std::string& token_id) {
  if (!request.is_object()) return Status(Errc::kInvalidArgument, "request must be an object");
  for (const auto& [key, _] : request.items()) {
    if (key != "renewer" && key != "service") {
      return Status(Errc::kInvalidArgument, "token.get: unknown key '" + key + "'");
    }
  }
  security::TokenRequest r;
  r.owner = caller_of(who);
  if (who.real_user) r.real_user = *who.real_user;
  for (auto [key, out] : {std::pair{"renewer", &r.renewer}, std::pair{"service", &r.service}}) {
    if (!request.contains(key)) continue;
    if (!request[key].is_string()) {
      return Status(Errc::kInvalidArgument, std::string("token.get: '") + key + "' must be a string");
    }
    *out = request[key].get<std::string>();
  }
  if (Status st = check_renewer(r.renewer); !st.ok()) return st;
  const auto& services = options_.mechanism.services;
  if (!services.empty() && std::find(services.begin(), services.end(), r.service) == services.end()) {
    return Status(Errc::kInvalidArgument,
                  "token.get: this server does not accept tokens for service '" + r.service + "'");
  }
  auto token = secrets_->issue(r);
  if (!token.ok()) return token_status(token.status(), TokenUse::kService);
  auto id = token->decode_identifier();
  if (!id.ok()) return token_status(id.status(), TokenUse::kService);
  token_id = token_id_of(*id);
  auto text = token->to_string();
  if (!text.ok()) return token_status(text.status(), TokenUse::kService);
  nlohmann::json out = describe_json(*id);
  out["token"] = *text;
  security::cleanse(text->data(), text->size());
  out["service"] = token->service;
  const auto renew = std::min(id->max_date, id->issue_date + secrets_->options().renew_interval);
  out["renew_date"] = security::format_token_time(renew);
  out["renew_date_ms"] = renew.time_since_epoch().count();
  return out;
}

Result<nlohmann::json> TokenService::renew(const Identity& who, const nlohmann::json& request,
                                           std::string& token_id) {
  auto token = request_token(request);
  if (!token.ok()) return token.status();
  token_id = token_id_of(*token);
  auto renewed = secrets_->renew(*token, renew_caller(who, *token));
  if (!renewed.ok()) return token_status(renewed.status(), TokenUse::kService);
  return nlohmann::json{{"renew_date", security::format_token_time(*renewed)},
                        {"renew_date_ms", renewed->time_since_epoch().count()}};
}

Result<nlohmann::json> TokenService::cancel(const Identity& who, const nlohmann::json& request,
                                            std::string& token_id) {
  auto token = request_token(request);
  if (!token.ok()) return token.status();
  token_id = token_id_of(*token);
  if (auto st = secrets_->cancel(*token, renew_caller(who, *token)); !st.ok()) {
    return token_status(st, TokenUse::kService);
  }
  return nlohmann::json::object();
}

Service TokenService::service() {
  Service s{std::string(kTokenServiceName)};
  using TokenHandler = Result<nlohmann::json> (TokenService::*)(const Identity&, const nlohmann::json&,
                                                           std::string&);
  for (const auto& entry : {std::pair{Operation::kGet, TokenHandler{&TokenService::get}},
                            std::pair{Operation::kRenew, TokenHandler{&TokenService::renew}},
                            std::pair{Operation::kCancel, TokenHandler{&TokenService::cancel}}}) {
    const Operation op = entry.first;
    const TokenHandler handler = entry.second;
    const char* name = kOperationNames[static_cast<std::size_t>(op)];
    s.add_json(
        name,
        [this, op, handler](CallContext& ctx, const nlohmann::json& request) -> Result<nlohmann::json> {
          std::string token_id;
          auto out = (this->*handler)(ctx.identity(), request, token_id);
          record(op, ctx.identity(), token_id, out.status());
          return out;
        },
        method_options(name));
  }
  return s;
}

}  // namespace authrpc
