#include "authrpc/components/kerberos/kerberos_sasl.h"

#include <asio/co_spawn.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <gssapi/gssapi_krb5.h>
#include <sasl/sasl.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "authrpc/auth/mechanism_options.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/components/kerberos/kerberos_acceptor.h"
#include "authrpc/components/kerberos/kerberos_credentials.h"
#include "authrpc/components/kerberos/kerberos_errors.h"
#include "authrpc/components/kerberos/sasl_library.h"
#include "authrpc/components/kerberos/sasl_session.h"

namespace authrpc {
namespace {

using security::gss_status;
using security::GssName;
using security::KerberosCredentials;
using security::kerberos_status;

constexpr std::string_view kCyrusMechanism = "GSSAPI";

// Kerberos needs no SASL security layer under authrpc: max SSF 0 (TLS brings
// confidentiality), and only mechanisms that authenticate the server.
sasl::SecurityProperties security_properties() {
  sasl::SecurityProperties p;
  p.min_ssf = 0;
  p.max_ssf = 0;
  p.max_buffer = 0;
  p.flags = SASL_SEC_NOPLAINTEXT | SASL_SEC_NOACTIVE | SASL_SEC_NOANONYMOUS | SASL_SEC_MUTUAL_AUTH;
  return p;
}

// Names this mechanism at the start of a message (instead of `kerberos`, for
// the errors kerberos_status() types).
Status prefixed(Status s) {
  constexpr std::string_view kFastPath = "kerberos: ";
  std::string_view rest = s.message;
  if (rest.starts_with(kFastPath)) rest.remove_prefix(kFastPath.size());
  s.message = std::string(kKerberosSaslMechanism) + ": " + std::string(rest);
  return s;
}

// "service/host[@REALM]": how SASL GSSAPI names a server.
struct ServiceName {
  std::string service;
  std::string host;
  std::string realm;  // empty if none was given
};

std::optional<ServiceName> parse_service_name(const std::string& principal) {
  const auto slash = principal.find('/');
  const auto at = principal.rfind('@');
  if (slash == std::string::npos || slash == 0) return std::nullopt;
  const auto host_end = at == std::string::npos || at < slash ? principal.size() : at;
  ServiceName n;
  n.service = principal.substr(0, slash);
  n.host = principal.substr(slash + 1, host_end - slash - 1);
  if (host_end < principal.size()) n.realm = principal.substr(host_end + 1);
  if (n.host.empty() || n.host.find('/') != std::string::npos ||
      (host_end < principal.size() && n.realm.empty())) {
    return std::nullopt;
  }
  return n;
}

Status not_a_service_name(std::string_view what, const std::string& principal) {
  return {Errc::kConfigError, std::string(kKerberosSaslMechanism) + ": " + std::string(what) +
                                  " '" + principal +
                                  "' is not of the form service/host[@REALM] (SASL GSSAPI names "
                                  "a server by service and host)"};
}

// The realm GSSAPI gives a user name without one (the default realm of
// krb5.conf): what Cyrus's GSSAPI plugin strips from local principals.
Result<std::string> default_realm() {
  const std::string probe = "authrpc";
  gss_buffer_desc buffer{probe.size(), const_cast<char*>(probe.data())};
  gss_name_t imported = GSS_C_NO_NAME;
  gss_name_t canonical = GSS_C_NO_NAME;
  OM_uint32 minor = 0;
  OM_uint32 major = gss_import_name(&minor, &buffer, GSS_C_NT_USER_NAME, &imported);
  const GssName imported_name(imported);
  if (!GSS_ERROR(major)) {
    major = gss_canonicalize_name(&minor, imported, const_cast<gss_OID>(gss_mech_krb5), &canonical);
  }
  const GssName canonical_name(canonical);
  const std::string full = GSS_ERROR(major) ? std::string() : canonical_name.display();
  const auto at = full.rfind('@');
  if (at == std::string::npos || at + 1 == full.size()) {
    const Status status = gss_status(major, minor, "default realm");
    return Status(Errc::kConfigError,
                  std::string(kKerberosSaslMechanism) +
                      ": no default realm in the Kerberos configuration (Cyrus GSSAPI needs one)" +
                      (status.ok() ? std::string() : ": " + status.message));
  }
  return full.substr(at + 1);
}

Status require_cyrus_gssapi(const std::vector<std::string>& mechanisms, std::string_view side) {
  if (std::find(mechanisms.begin(), mechanisms.end(), kCyrusMechanism) != mechanisms.end()) {
    return {};
  }
  return {Errc::kConfigError, std::string(kKerberosSaslMechanism) + ": Cyrus SASL has no " +
                                  std::string(side) +
                                  " GSSAPI plugin (Debian: libsasl2-modules-gssapi-mit)"};
}

// SASL GSSAPI asks for the host-based name service@host, which Kerberos
// turns into service/host@<the realm krb5.conf maps the host to>. If that
// realm is known locally ([domain_realm]) it must be the one in
// service_principal: checked here, at startup. Without a mapping the KDC
// decides by referral when the ticket is requested, as for any SASL GSSAPI
// client.
Status check_host_realm(const ServiceName& expected) {
  std::string realm = expected.realm;
  if (realm.empty()) {
    auto def = default_realm();
    if (!def.ok()) return def.status();
    realm = std::move(*def);
  }
  const auto host_based = GssName::host_based(expected.service, expected.host);
  if (!host_based.ok()) return prefixed(kerberos_status(host_based.status()));
  gss_name_t canonical = GSS_C_NO_NAME;
  OM_uint32 minor = 0;
  const OM_uint32 major = gss_canonicalize_name(
      &minor, host_based->get(), const_cast<gss_OID>(gss_mech_krb5), &canonical);
  const GssName canonical_name(canonical);
  if (Status s = gss_status(major, minor,
                            "service name " + expected.service + "@" + expected.host);
      !s.ok()) {
    return prefixed(kerberos_status(s));
  }
  const std::string resolved = canonical_name.display();
  const std::string wanted = expected.service + "/" + expected.host + "@" + realm;
  const auto at = resolved.rfind('@');
  const bool referral = at != std::string::npos && at + 1 == resolved.size();
  if (resolved == wanted || (referral && resolved == wanted.substr(0, wanted.rfind('@') + 1))) {
    return {};
  }
  return {Errc::kConfigError, std::string(kKerberosSaslMechanism) + ": service_principal " +
                                  wanted + " cannot be named by SASL GSSAPI, which asks for " +
                                  expected.service + "@" + expected.host + " = " + resolved +
                                  " under this Kerberos configuration"};
}

}  // namespace

// --- server --------------------------------------------------------------------------

struct KerberosSaslServerMechanism::State {
  std::unique_ptr<KerberosCredentials> credentials;
  std::string principal;
  ServiceName name;
  std::string default_realm;
};

namespace {

class KerberosSaslServerSession final : public ServerAuthSession {
 public:
  explicit KerberosSaslServerSession(std::shared_ptr<KerberosSaslServerMechanism::State> state)
      : state_(std::move(state)) {}

  asio::awaitable<ServerStep> step(std::string_view client_message) override {
    Result<sasl::Output> out = Status(Errc::kInternal, "no step");
    if (!sasl_) {
      sasl::ServerConfig config;
      config.service = state_->name.service;
      config.server_fqdn = state_->name.host;
      config.security = security_properties();
      config.gss_credentials = state_->credentials->handle();
      auto session = sasl::ServerSession::create(std::move(config));
      if (!session.ok()) co_return ServerStep::failure(prefixed(session.status()));
      sasl_ = std::move(*session);
      out = sasl_->start(kCyrusMechanism, client_message);
    } else {
      out = sasl_->step(client_message);
    }
    if (!out.ok()) co_return ServerStep::failure(prefixed(out.status()));
    if (!out->done) co_return ServerStep::challenge(std::move(out->message));

    // Cyrus drops the realm of principals in the default realm ("alice" for
    // alice@DEFAULT.REALM); give it back, so that the identity is the same
    // as with `kerberos`.
    const std::string authid = sasl_->authentication_id();
    if (authid.empty()) {
      co_return ServerStep::failure(
          {Errc::kAuthenticationFailed, "kerberos-sasl: no authenticated identity"});
    }
    Identity id;
    id.principal = authid.find('@') == std::string::npos ? authid + "@" + state_->default_realm
                                                          : authid;
    id.user = id.principal;
    id.realm = security::realm_of(id.principal);
    co_return ServerStep::success(std::move(id), std::move(out->message));
  }

 private:
  std::shared_ptr<KerberosSaslServerMechanism::State> state_;
  std::unique_ptr<sasl::ServerSession> sasl_;
};

}  // namespace

Result<std::shared_ptr<KerberosSaslServerMechanism>> KerberosSaslServerMechanism::create(
    const KerberosServerOptions& options) {
  const std::string principal = acceptor_principal(options);
  auto name = parse_service_name(principal);
  if (!name) return not_a_service_name("principal", principal);
  if (Status s = sasl::init_sasl_library(); !s.ok()) return prefixed(s);
  if (Status s = require_cyrus_gssapi(sasl::server_plugin_mechanisms(), "server"); !s.ok()) {
    return s;
  }
  auto realm = default_realm();
  if (!realm.ok()) return realm.status();

  auto credentials = load_acceptor(options, principal, kKerberosSaslMechanism);
  if (!credentials.ok()) return credentials.status();

  auto state = std::make_shared<State>();
  state->credentials = std::move(*credentials);
  state->principal = principal;
  state->name = std::move(*name);
  state->default_realm = std::move(*realm);
  return std::shared_ptr<KerberosSaslServerMechanism>(
      new KerberosSaslServerMechanism(std::move(state)));
}

std::unique_ptr<ServerAuthSession> KerberosSaslServerMechanism::start(const ChannelInfo&) {
  return std::make_unique<KerberosSaslServerSession>(state_);
}

const std::string& KerberosSaslServerMechanism::principal() const noexcept {
  return state_->principal;
}

// --- client --------------------------------------------------------------------------

struct KerberosSaslClientMechanism::State {
  // Null: the default ticket cache, acquired again for every session so that
  // a kinit is picked up (and an empty cache is reported as such).
  std::unique_ptr<KerberosCredentials> credentials;
  std::string principal;
  // From service_principal; empty host: the host connected to.
  ServiceName target;
  // Targets we already hold a service ticket for (as in `kerberos`).
  std::mutex mu;
  std::set<std::string> warm_targets;
};

namespace {

class KerberosSaslClientSession final : public ClientAuthSession {
 public:
  KerberosSaslClientSession(std::shared_ptr<KerberosSaslClientMechanism::State> state,
                            const ChannelInfo& channel)
      : state_(std::move(state)),
        blocking_host_(channel.host) {
    service_ = state_->target.service;
    host_ = state_->target.host;
    if (host_.empty()) {
      host_ = channel.scheme == Endpoint::Scheme::kUnix || channel.server_host.empty()
                  ? std::string("localhost")
                  : channel.server_host;
    }
    target_label_ = service_ + "@" + host_;
  }

  asio::awaitable<ClientStep> initial() override {
    bool warm = false;
    {
      std::lock_guard lock(state_->mu);
      warm = state_->warm_targets.contains(target_label_);
    }
    // Work that may wait for the KDC runs on the host's blocking thread
    // (auth/mechanism_host.h). No co_await inside ?: — GCC 12 miscompiles it.
    MechanismHost* host = blocking_host_;
    if (!warm) {
      if (host == nullptr) host = &mechanism_host_of(co_await asio::this_coro::executor);
      co_return co_await asio::co_spawn(
          host->blocking_executor(),
          [this]() -> asio::awaitable<ClientStep> { co_return cold_start(); },
          asio::use_awaitable);
    }
    ClientStep step = start_exchange();
    if (step.kind == ClientStep::Kind::kFailure && cyrus_failed_) {
      forget_target();
      // Cyrus reports every GSS-API error as SASL_FAIL; ask GSSAPI directly
      // (maybe the KDC) for the typed reason, on the blocking thread.
      if (host == nullptr) host = &mechanism_host_of(co_await asio::this_coro::executor);
      Status why = co_await asio::co_spawn(
          host->blocking_executor(),
          [this]() -> asio::awaitable<Status> { co_return get_service_ticket(); },
          asio::use_awaitable);
      if (!why.ok()) co_return ClientStep::failure(std::move(why));
    }
    co_return step;
  }

  asio::awaitable<ClientStep> challenge(std::string_view server_message) override {
    if (!sasl_ || sasl_->done()) {
      co_return ClientStep::failure(
          {Errc::kProtocolError, "kerberos-sasl: unexpected challenge after the exchange ended"});
    }
    auto out = sasl_->step(server_message);
    if (!out.ok()) {
      forget_target();
      co_return ClientStep::failure(prefixed(out.status()));
    }
    co_return ClientStep::send(std::move(out->message), out->done);
  }

  asio::awaitable<Status> complete(std::string_view server_message) override {
    if (!sasl_) {
      co_return Status(Errc::kProtocolError, "kerberos-sasl: success before any exchange");
    }
    if (!sasl_->done()) {
      // GSSAPI has no success data: the server claims success before the
      // client saw the security-layer offer only it could have wrapped.
      co_return Status(Errc::kAuthenticationFailed,
                       "kerberos-sasl: the server reported success before the SASL GSSAPI "
                       "exchange finished; mutual authentication with " +
                           target_label_ + " not completed");
    }
    if (!server_message.empty()) {
      co_return Status(Errc::kProtocolError,
                       "kerberos-sasl: unexpected data in AUTH_SUCCESS (GSSAPI has none)");
    }
    std::lock_guard lock(state_->mu);
    state_->warm_targets.insert(target_label_);
    co_return Status();
  }

 private:
  gss_cred_id_t credentials() const {
    if (state_->credentials) return state_->credentials->handle();
    return session_credentials_ ? session_credentials_->handle() : GSS_C_NO_CREDENTIAL;
  }

  void forget_target() {
    std::lock_guard lock(state_->mu);
    state_->warm_targets.erase(target_label_);
  }

  // The default ticket cache, read for this session.
  Status acquire_session_credentials() {
    if (state_->credentials || session_credentials_) return {};
    auto credentials = KerberosCredentials::initiator({});
    if (!credentials.ok()) return kerberos_status(credentials.status());
    session_credentials_ = std::move(*credentials);
    return {};
  }

  ClientStep cold_start() {
    if (Status s = acquire_session_credentials(); !s.ok()) return ClientStep::failure(prefixed(s));
    if (Status s = get_service_ticket(); !s.ok()) {
      forget_target();
      return ClientStep::failure(std::move(s));
    }
    return start_exchange();
  }

  // Gets the service ticket for the name Cyrus will use into the
  // credentials' cache, where Cyrus's gss_init_sec_context finds it, with
  // typed errors (Cyrus only says SASL_FAIL). The token is never sent.
  Status get_service_ticket() {
    const auto target = GssName::host_based(service_, host_);
    if (!target.ok()) return prefixed(kerberos_status(target.status()));
    security::GssContext context;
    gss_buffer_desc token = GSS_C_EMPTY_BUFFER;
    OM_uint32 minor = 0;
    const OM_uint32 major = gss_init_sec_context(
        &minor, credentials(), context.get(), target->get(), const_cast<gss_OID>(gss_mech_krb5),
        0, 0, GSS_C_NO_CHANNEL_BINDINGS, GSS_C_NO_BUFFER, nullptr, &token, nullptr, nullptr);
    OM_uint32 ignored = 0;
    gss_release_buffer(&ignored, &token);
    if (GSS_ERROR(major)) {
      return prefixed(
          kerberos_status(gss_status(major, minor, "ticket for " + target_label_)));
    }
    return {};
  }

  // sasl_client_new + sasl_client_start: the client's first SASL message.
  ClientStep start_exchange() {
    cyrus_failed_ = false;
    if (Status s = acquire_session_credentials(); !s.ok()) return ClientStep::failure(prefixed(s));
    sasl::ClientConfig config;
    config.service = service_;
    config.server_fqdn = host_;
    config.security = security_properties();
    config.gss_credentials = credentials();
    auto session = sasl::ClientSession::create(std::move(config));
    if (!session.ok()) return ClientStep::failure(prefixed(session.status()));
    sasl_ = std::move(*session);
    auto out = sasl_->start(kCyrusMechanism);
    if (!out.ok()) {
      cyrus_failed_ = true;
      return ClientStep::failure(prefixed(out.status()));
    }
    return ClientStep::send(std::move(out->message), out->done);
  }

  std::shared_ptr<KerberosSaslClientMechanism::State> state_;
  MechanismHost* blocking_host_;  // ChannelInfo::host (not owned); null: the IO context's
  std::string service_;
  std::string host_;
  std::string target_label_;
  // Declared before sasl_: Cyrus uses them until sasl_ is destroyed.
  std::unique_ptr<KerberosCredentials> session_credentials_;
  std::unique_ptr<sasl::ClientSession> sasl_;
  bool cyrus_failed_ = false;
};

}  // namespace

Result<std::shared_ptr<KerberosSaslClientMechanism>> KerberosSaslClientMechanism::create(
    const KerberosClientOptions& options) {
  if (!options.keytab.empty() && options.principal.empty()) {
    return Status(Errc::kConfigError, "kerberos-sasl: a client keytab needs a principal");
  }
  auto state = std::make_shared<State>();
  state->target.service = options.service;
  if (!options.service_principal.empty()) {
    auto name = parse_service_name(options.service_principal);
    if (!name) return not_a_service_name("service_principal", options.service_principal);
    if (Status s = check_host_realm(*name); !s.ok()) return s;
    state->target = *name;
  }
  if (Status s = sasl::init_sasl_library(); !s.ok()) return prefixed(s);
  if (Status s = require_cyrus_gssapi(sasl::client_plugin_mechanisms(), "client"); !s.ok()) {
    return s;
  }

  KerberosCredentials::InitiatorOptions initiator{options.ccache, options.principal,
                                                  options.keytab};
  auto credentials = KerberosCredentials::initiator(initiator);
  if (!credentials.ok()) return prefixed(kerberos_status(credentials.status()));
  state->principal = (*credentials)->principal();
  if (!options.keytab.empty() || !options.ccache.empty()) {
    // With max SSF 0 Cyrus sets GSS_KRB5_CRED_NO_CI_FLAGS_X on the
    // credentials it is given (no integrity/confidentiality flags in the
    // AP-REQ), on every session. Set it once now, so that sessions sharing
    // this handle only ever rewrite the value it already has.
    gss_cred_id_t handle = (*credentials)->handle();
    gss_buffer_desc empty = GSS_C_EMPTY_BUFFER;
    OM_uint32 minor = 0;
    const OM_uint32 major = gss_set_cred_option(
        &minor, &handle, const_cast<gss_OID>(GSS_KRB5_CRED_NO_CI_FLAGS_X), &empty);
    if (GSS_ERROR(major)) {
      return prefixed(kerberos_status(gss_status(major, minor, "credential options")));
    }
    state->credentials = std::move(*credentials);
  }
  return std::shared_ptr<KerberosSaslClientMechanism>(
      new KerberosSaslClientMechanism(std::move(state)));
}

std::unique_ptr<ClientAuthSession> KerberosSaslClientMechanism::start(const ChannelInfo& channel) {
  return std::make_unique<KerberosSaslClientSession>(state_, channel);
}

const std::string& KerberosSaslClientMechanism::principal() const noexcept {
  return state_->principal;
}

void register_kerberos_sasl(MechanismRegistry& registry) {
  register_kerberos_family<KerberosSaslServerMechanism, KerberosSaslClientMechanism>(
      registry, kKerberosSaslMechanism);
}

}  // namespace authrpc
