#include "authrpc/components/kerberos/token_sasl.h"

#include <sasl/sasl.h>
#include <sasl/saslplug.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "authrpc/auth/mechanism_options.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/components/kerberos/sasl_library.h"
#include "authrpc/components/kerberos/sasl_session.h"
#include "authrpc/components/kerberos/scram_verifier_cache.h"
#include "authrpc/security/base64url.h"
#include "authrpc/security/token_errors.h"

namespace authrpc {
namespace {

constexpr char kAuxpropName[] = "authrpc-token";
// The SASL_CB_GETOPT option through which a server session tells the plugin
// where its LookupContext is (a pointer, in this process only).
constexpr char kContextOption[] = "authrpc_token_context";

// What one server session's lookups need and found. Owned by the session,
// outlives its sasl_conn_t.
struct LookupContext {
  std::shared_ptr<const security::SecretManager> secrets;
  std::optional<security::TokenSecret> found;  // the authentication id's token
  std::optional<Status> refused;  // why the lookup refused it
  // token-scram with a verifier cache: the plugin answers `authPassword` (a
  // SCRAM verifier) instead of `userPassword`, so Cyrus skips its PBKDF2.
  ScramVerifierCache* scram = nullptr;
};

// --- the auxprop plugin -------------------------------------------------------

LookupContext* context_of(sasl_server_params_t* sparams) {
  const char* value = nullptr;
  unsigned len = 0;
  if (sparams->utils->getopt == nullptr ||
      sparams->utils->getopt(sparams->utils->getopt_context, kAuxpropName, kContextOption, &value,
                             &len) != SASL_OK ||
      value == nullptr) {
    return nullptr;
  }
  void* p = nullptr;
  if (std::sscanf(value, "%p", &p) != 1) return nullptr;
  return static_cast<LookupContext*>(p);
}

int token_lookup(void*, sasl_server_params_t* sparams, unsigned flags, const char* user,
                 unsigned ulen) {
  if (sparams == nullptr || user == nullptr) return SASL_BADPARAM;
  LookupContext* context = context_of(sparams);
  if (context == nullptr) return SASL_NOUSER;  // not one of ours
  // Cyrus may append "@realm"; base64url has no '@'.
  std::string_view name(user, ulen);
  name = name.substr(0, name.find('@'));
  auto identifier = security::base64url_decode(name);
  if (!identifier) {
    if (!(flags & SASL_AUXPROP_AUTHZID)) {
      context->refused =
          Status(security::TokenErrc::kMalformed, "the SASL user name is not a base64url token id");
    }
    return SASL_NOUSER;
  }
  auto secret = context->secrets->retrieve_password(*identifier);
  if (!secret.ok()) {
    if (!(flags & SASL_AUXPROP_AUTHZID)) context->refused = secret.status();
    // A cancelled, expired or unknown token's verifier is of no further use.
    if (context->scram != nullptr) context->scram->erase(*identifier);
    return SASL_NOUSER;
  }
  std::string password = security::base64url_encode(secret->password.view());
  // Cyrus SCRAM prefers `userPassword` (and then runs PBKDF2) when both are
  // there: with a verifier, only `authPassword` is answered.
  std::string verifier;
  if (context->scram != nullptr && !(flags & SASL_AUXPROP_AUTHZID)) {
    verifier = context->scram->verifier(*identifier, password);
  }
  const propval* to_fetch = sparams->utils->prop_get(sparams->propctx);
  for (const propval* cur = to_fetch; cur != nullptr && cur->name != nullptr; ++cur) {
    // "*name": a property of the authentication id; "name": of the authzid.
    const bool authid_prop = cur->name[0] == '*';
    if (authid_prop == ((flags & SASL_AUXPROP_AUTHZID) != 0)) continue;
    const char* real = authid_prop ? cur->name + 1 : cur->name;
    const std::string* value = nullptr;
    if (std::strcmp(real, "userPassword") == 0 && verifier.empty()) value = &password;
    if (std::strcmp(real, "authPassword") == 0 && !verifier.empty()) value = &verifier;
    if (value == nullptr) continue;
    if (cur->values != nullptr && !(flags & SASL_AUXPROP_OVERRIDE)) continue;
    if (cur->values != nullptr) sparams->utils->prop_erase(sparams->propctx, cur->name);
    sparams->utils->prop_set(sparams->propctx, cur->name, value->c_str(),
                             static_cast<int>(value->size()));
  }
  security::cleanse(password.data(), password.size());
  security::cleanse(verifier.data(), verifier.size());
  if (!(flags & SASL_AUXPROP_AUTHZID)) context->found = std::move(*secret);
  return SASL_OK;
}

sasl_auxprop_plug_t token_plugin = {
    0,               // features
    0,               // spare
    nullptr,         // glob_context
    nullptr,         // auxprop_free
    &token_lookup,   // auxprop_lookup
    const_cast<char*>(kAuxpropName),
    nullptr,         // auxprop_store: tokens are never written through SASL
};

int token_plugin_init(const sasl_utils_t*, int max_version, int* out_version,
                      sasl_auxprop_plug_t** plug, const char*) {
  if (max_version < SASL_AUXPROP_PLUG_VERSION) return SASL_BADVERS;
  *out_version = SASL_AUXPROP_PLUG_VERSION;
  *plug = &token_plugin;
  return SASL_OK;
}

Status register_plugin() {
  static const Status status = []() -> Status {
    if (Status s = sasl::init_sasl_library(); !s.ok()) return s;
    if (int rc = sasl_auxprop_add_plugin(kAuxpropName, &token_plugin_init); rc != SASL_OK) {
      return {Errc::kConfigError, std::string("sasl_auxprop_add_plugin: ") +
                                      sasl_errstring(rc, nullptr, nullptr)};
    }
    return {};
  }();
  return status;
}

std::string cyrus_name(std::string_view mechanism) {
  return mechanism == kTokenScramMechanism ? "SCRAM-SHA-256" : "DIGEST-MD5";
}

Status prefixed(std::string_view name, const Status& s) {
  return {s.code, std::string(name) + ": " + s.message};
}

// --- server --------------------------------------------------------------------

class TokenSaslServerSession final : public ServerAuthSession {
 public:
  TokenSaslServerSession(std::string name, std::string cyrus, TokenSaslServerOptions options,
                         std::shared_ptr<const security::SecretManager> secrets,
                         std::shared_ptr<ScramVerifierCache> scram)
      : name_(std::move(name)), cyrus_(std::move(cyrus)), options_(std::move(options)),
        scram_(std::move(scram)) {
    context_.secrets = std::move(secrets);
    context_.scram = scram_.get();
  }

  asio::awaitable<ServerStep> step(std::string_view client_message) override {
    co_return next(client_message);
  }

 private:
  ServerStep next(std::string_view client_message) {
    Result<sasl::Output> out = Status(Errc::kInternal, "no step");
    if (!sasl_) {
      if (Status s = register_plugin(); !s.ok()) return ServerStep::failure(prefixed(name_, s));
      sasl::ServerConfig config;
      config.service = options_.service;
      config.server_fqdn = options_.server_fqdn;
      config.flags = SASL_SUCCESS_DATA;
      char pointer[32];
      std::snprintf(pointer, sizeof pointer, "%p", static_cast<void*>(&context_));
      config.options = {{"auxprop_plugin", kAuxpropName},
                        {"pwcheck_method", "auxprop"},
                        {"mech_list", cyrus_},
                        {kContextOption, pointer}};
      auto session = sasl::ServerSession::create(std::move(config));
      if (!session.ok()) return ServerStep::failure(prefixed(name_, session.status()));
      sasl_ = std::move(*session);
      out = sasl_->start(cyrus_, client_message);
    } else {
      out = sasl_->step(client_message);
    }
    if (!out.ok()) return ServerStep::failure(refusal(out.status()));
    if (!out->done) return ServerStep::challenge(std::move(out->message));
    if (!context_.found) {
      return ServerStep::failure({Errc::kAuthenticationFailed, name_ + ": no token looked up"});
    }
    return ServerStep::success(token_identity(context_.found->identifier),
                               std::move(out->message));
  }

  // The typed reason the plugin recorded, else a failed proof: FORGED.
  Status refusal(const Status& cyrus) const {
    if (context_.refused) {
      return security::token_status(*context_.refused, security::TokenUse::kAuthentication, name_);
    }
    if (cyrus.code == Errc::kAuthenticationFailed && context_.found) {
      return {Errc::kAuthenticationFailed,
              name_ + ": FORGED: wrong proof for " + context_.found->identifier.describe()};
    }
    return prefixed(name_, cyrus);
  }

  std::string name_;
  std::string cyrus_;
  TokenSaslServerOptions options_;
  std::shared_ptr<ScramVerifierCache> scram_;  // token-scram only; shared by the mechanism's sessions
  LookupContext context_;
  std::unique_ptr<sasl::ServerSession> sasl_;  // after context_: disposed first
};

// --- client --------------------------------------------------------------------

class TokenSaslClientSession final : public ClientAuthSession {
 public:
  TokenSaslClientSession(std::string name, std::string cyrus, TokenSaslServerOptions names,
                         Result<security::Token> token)
      : name_(std::move(name)), cyrus_(std::move(cyrus)), names_(std::move(names)),
        token_(std::move(token)) {}

  asio::awaitable<ClientStep> initial() override {
    if (!token_.ok()) co_return ClientStep::failure(token_.status());
    if (Status s = sasl::init_sasl_library(); !s.ok()) co_return ClientStep::failure(prefixed(name_, s));
    sasl::ClientConfig config;
    config.service = names_.service;
    config.server_fqdn = names_.server_fqdn;
    config.flags = SASL_SUCCESS_DATA;
    config.authentication_id = token_sasl_user(*token_);
    config.password = token_sasl_password(*token_);
    token_ = Status(Errc::kInternal, "already used");  // wipes the password copy
    auto session = sasl::ClientSession::create(std::move(config));
    if (!session.ok()) co_return ClientStep::failure(prefixed(name_, session.status()));
    sasl_ = std::move(*session);
    auto out = sasl_->start(cyrus_);
    if (!out.ok()) co_return ClientStep::failure(prefixed(name_, out.status()));
    co_return ClientStep::send(std::move(out->message), false);
  }

  asio::awaitable<ClientStep> challenge(std::string_view server_message) override {
    if (!sasl_) co_return ClientStep::failure({Errc::kProtocolError, name_ + ": challenge first"});
    auto out = sasl_->step(server_message);
    if (!out.ok()) co_return ClientStep::failure(prefixed(name_, out.status()));
    // DIGEST-MD5's response and SCRAM's client-final are the last messages
    // the server needs (it answers with SASL_SUCCESS_DATA): calls may follow.
    co_return ClientStep::send(std::move(out->message), true);
  }

  asio::awaitable<Status> complete(std::string_view server_final_message) override {
    if (!sasl_) co_return Status(Errc::kProtocolError, name_ + ": success before any exchange");
    if (!sasl_->done()) {
      auto out = sasl_->step(server_final_message);
      if (!out.ok()) {
        co_return Status(Errc::kAuthenticationFailed,
                         name_ + ": the server did not prove it knows the token's password: " +
                             out.status().message);
      }
      if (!out->done) {
        co_return Status(Errc::kProtocolError, name_ + ": the server ended the exchange early");
      }
    }
    co_return Status();
  }

 private:
  std::string name_;
  std::string cyrus_;
  TokenSaslServerOptions names_;
  Result<security::Token> token_;
  std::unique_ptr<sasl::ClientSession> sasl_;
};

}  // namespace

std::string token_sasl_user(const security::Token& token) {
  return security::base64url_encode(token.identifier);
}

std::string token_sasl_password(const security::Token& token) {
  return security::base64url_encode(token.password.view());
}

TokenSaslServerMechanism::TokenSaslServerMechanism(
    std::string_view mechanism, std::shared_ptr<const security::SecretManager> secrets,
    TokenSaslServerOptions options)
    : name_(mechanism), cyrus_mechanism_(cyrus_name(mechanism)), secrets_(std::move(secrets)),
      options_(std::move(options)) {
  if (mechanism == kTokenScramMechanism && options_.scram_verifier_cache > 0) {
    scram_cache_ = std::make_shared<ScramVerifierCache>(options_.scram_verifier_cache);
  }
}

std::unique_ptr<ServerAuthSession> TokenSaslServerMechanism::start(const ChannelInfo&) {
  return std::make_unique<TokenSaslServerSession>(name_, cyrus_mechanism_, options_, secrets_,
                                                  scram_cache_);
}

TokenSaslClientMechanism::TokenSaslClientMechanism(std::string_view mechanism,
                                                   TokenClientOptions options,
                                                   TokenSaslServerOptions names)
    : name_(mechanism), cyrus_mechanism_(cyrus_name(mechanism)), service_(options.service),
      names_(std::move(names)), tokens_(std::move(options)) {}

std::unique_ptr<ClientAuthSession> TokenSaslClientMechanism::start(const ChannelInfo& channel) {
  const std::string service = service_.empty() ? channel.server_uri : service_;
  auto token = tokens_.find_token(service);
  return std::make_unique<TokenSaslClientSession>(name_, cyrus_mechanism_, names_,
                                                  std::move(token));
}

void register_token_sasl(MechanismRegistry& registry) {
  for (std::string_view name : {kTokenDigestMechanism, kTokenScramMechanism}) {
    const bool scram = name == kTokenScramMechanism;
    registry.register_token_server(
        std::string(name),
        [name, scram](const nlohmann::json& json,
                      const DelegationTokenHost& tokens) -> Result<std::shared_ptr<ServerMechanism>> {
          MechanismOptions o(name, json);
          TokenSaslServerOptions n;
          for (Status s : {scram ? o.check({"sasl_service", "server_fqdn", "scram_verifier_cache"})
                                 : o.check({"sasl_service", "server_fqdn"}),
                           o.read("sasl_service", n.service), o.read("server_fqdn", n.server_fqdn),
                           o.read("scram_verifier_cache", n.scram_verifier_cache, 1u << 26)}) {
            if (!s.ok()) return s;
          }
          return std::shared_ptr<ServerMechanism>(
              std::make_shared<TokenSaslServerMechanism>(name, tokens.secrets, std::move(n)));
        },
        kTokenTraits);
    registry.register_client(
        std::string(name),
        [name](const nlohmann::json& json) -> Result<std::shared_ptr<ClientMechanism>> {
          MechanismOptions o(name, json);
          TokenClientOptions t;
          TokenSaslServerOptions n;
          for (Status s : {o.check({"token_file", "service", "sasl_service", "server_fqdn"}),
                           o.read("token_file", t.token_file), o.read("service", t.service),
                           o.read("sasl_service", n.service), o.read("server_fqdn", n.server_fqdn)}) {
            if (!s.ok()) return s;
          }
          return std::shared_ptr<ClientMechanism>(
              std::make_shared<TokenSaslClientMechanism>(name, std::move(t), std::move(n)));
        },
        kTokenTraits,
        {token_file_flag(),
         {"--sasl-service", "sasl_service",
          "S  the SASL service name the server is configured with (default: authrpc)"},
         {"--server-fqdn", "server_fqdn",
          "H  the SASL host name the server is configured with (default: localhost)"}});
  }
}

}  // namespace authrpc
