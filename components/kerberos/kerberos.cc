#include "authrpc/components/kerberos/kerberos.h"

#include <asio/co_spawn.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <gssapi/gssapi_krb5.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "authrpc/auth/mechanism_options.h"
#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/components/kerberos/kerberos_acceptor.h"
#include "authrpc/components/kerberos/kerberos_credentials.h"
#include "authrpc/components/kerberos/kerberos_errors.h"
#include "authrpc/components/kerberos/kerberos_ticket_names.h"

namespace authrpc {
namespace {

using security::gss_accept_status;
using security::gss_status;
using security::GssBuffer;
using security::GssContext;
using security::GssName;
using security::KerberosCredentials;
using security::kerberos_status;

gss_buffer_desc view(std::string_view bytes) {
  return {bytes.size(), const_cast<char*>(bytes.data())};
}

// GSS channel bindings for a TLS connection (RFC 9266: "tls-exporter:" and
// the exporter value as application data). Without TLS: no bindings.
class ChannelBindings {
 public:
  explicit ChannelBindings(const ChannelInfo& channel) {
    if (channel.channel_binding.empty()) return;
    data_ = "tls-exporter:" + channel.channel_binding;
    bindings_.application_data = view(data_);
  }
  gss_channel_bindings_t get() noexcept {
    return data_.empty() ? GSS_C_NO_CHANNEL_BINDINGS : &bindings_;
  }

 private:
  std::string data_;
  gss_channel_bindings_struct bindings_{};
};

}  // namespace

struct KerberosServerMechanism::State {
  std::unique_ptr<KerberosCredentials> credentials;
  std::string principal;
  KerberosTicketNames ticket_names;  // see KerberosServerSession::step
};

struct KerberosClientMechanism::State {
  KerberosClientOptions options;
  std::unique_ptr<KerberosCredentials> credentials;  // null: default ccache each time
  std::string principal;
  // Targets we already hold a service ticket for: their first message needs no
  // KDC request, so it is made on the IO thread. The first one per target may
  // wait for the KDC and is made on the host's blocking executor
  // (auth/mechanism_host.h).
  std::mutex mu;
  std::set<std::string> warm_targets;
  // Targets already turned into Kerberos names (see KerberosClientSession).
  std::map<std::string, std::shared_ptr<const GssName>, std::less<>> canonical_targets;
};

namespace {

class KerberosServerSession final : public ServerAuthSession {
 public:
  KerberosServerSession(std::shared_ptr<KerberosServerMechanism::State> state,
                        const ChannelInfo& channel)
      : state_(std::move(state)), bindings_(channel) {}

  asio::awaitable<ServerStep> step(std::string_view client_message) override {
    // MIT would take an empty token for SPNEGO's and fail for want of a
    // credential, which reads as "credentials expired" to the client.
    if (client_message.empty()) {
      co_return ServerStep::failure(
          {Errc::kAuthenticationFailed, "kerberos: the client sent an empty token (no AP-REQ)"});
    }
    gss_buffer_desc input = view(client_message);
    // A ticket accepted before names its client already: then MIT is asked
    // for no name (three krb5 contexts fewer;
    // components/kerberos/kerberos_ticket_names.h). The context token is
    // accepted in full either way.
    const std::string_view ticket = KerberosTicketNames::ticket_of(client_message);
    std::optional<std::string> known = state_->ticket_names.find(ticket);
    gss_name_t source = GSS_C_NO_NAME;
    GssBuffer output;
    OM_uint32 minor = 0, flags = 0;
    const OM_uint32 major = gss_accept_sec_context(
        &minor, context_.get(), state_->credentials->handle(), &input, bindings_.get(),
        known ? nullptr : &source, nullptr, output.get(), &flags, nullptr, nullptr);
    client_ = GssName(source);
    if (GSS_ERROR(major)) {
      co_return ServerStep::failure(kerberos_status(gss_accept_status(major, minor, "accept")));
    }
    if (major & GSS_S_CONTINUE_NEEDED) {
      co_return ServerStep::failure(
          {Errc::kAuthenticationFailed, "kerberos: the exchange needs more than one token"});
    }
    if ((flags & GSS_C_MUTUAL_FLAG) == 0) {
      co_return ServerStep::failure(
          {Errc::kAuthenticationFailed, "kerberos: client did not ask for mutual authentication"});
    }
    Identity id;
    if (known) {
      id.principal = std::move(*known);
    } else {
      id.principal = client_.display();
      state_->ticket_names.remember(ticket, id.principal);
    }
    id.user = id.principal;
    id.realm = security::realm_of(id.principal);
    co_return ServerStep::success(std::move(id), output.str());
  }

 private:
  std::shared_ptr<KerberosServerMechanism::State> state_;
  ChannelBindings bindings_;
  GssContext context_;
  // The client's name, released with the session: the server drops a spent
  // session once the first replies have left (ServerConnection), and freeing
  // a name costs a krb5 context (docs/PERFORMANCE.md, "Measured costs behind
  // the code") that the client need not wait for.
  GssName client_;
};

class KerberosClientSession final : public ClientAuthSession {
 public:
  KerberosClientSession(std::shared_ptr<KerberosClientMechanism::State> state,
                        const ChannelInfo& channel)
      : state_(std::move(state)), bindings_(channel),
        blocking_host_(channel.host) {
    const auto& o = state_->options;
    std::string host;
    if (!o.service_principal.empty()) {
      target_label_ = o.service_principal;
    } else {
      host = channel.scheme == Endpoint::Scheme::kUnix || channel.server_host.empty()
                 ? std::string("localhost")
                 : channel.server_host;
      target_label_ = o.service + "@" + host;
    }
    // gss_init_sec_context turns an imported name into a Kerberos name on
    // every call, twice per session (more than the rest of a session's client
    // side: docs/PERFORMANCE.md, "Measured costs behind the code"). Do it once per target and share the
    // result: GSSAPI only reads a mechanism name (copying one with
    // gss_duplicate_name costs as much as making it). A host-based name is
    // thus resolved once per process.
    std::lock_guard lock(state_->mu);
    auto& cached = state_->canonical_targets[target_label_];
    if (!cached) {
      auto imported = o.service_principal.empty() ? GssName::host_based(o.service, host)
                                                  : GssName::principal(o.service_principal);
      if (!imported.ok()) {
        target_status_ = imported.status();
        state_->canonical_targets.erase(target_label_);
        return;
      }
      auto canonical = imported->canonical();
      // If that fails, gss_init_sec_context will say what is wrong with the name.
      cached = std::make_shared<const GssName>(canonical.ok() ? std::move(*canonical)
                                                              : std::move(*imported));
    }
    target_ = cached;
  }

  asio::awaitable<ClientStep> initial() override {
    if (!target_status_.ok()) co_return ClientStep::failure(kerberos_status(target_status_));
    bool warm = false;
    {
      std::lock_guard lock(state_->mu);
      warm = state_->warm_targets.contains(target_label_);
    }
    if (warm) co_return first_message();
    // (No co_await inside ?: — GCC 12 miscompiles it.)
    MechanismHost* host = blocking_host_;
    if (host == nullptr) host = &mechanism_host_of(co_await asio::this_coro::executor);
    co_return co_await asio::co_spawn(
        host->blocking_executor(),
        [this]() -> asio::awaitable<ClientStep> { co_return first_message(); }, asio::use_awaitable);
  }

  asio::awaitable<ClientStep> challenge(std::string_view) override {
    co_return ClientStep::failure(
        {Errc::kProtocolError, "kerberos: unexpected challenge (one token each way)"});
  }

  asio::awaitable<Status> complete(std::string_view server_message) override {
    if (server_message.empty()) {
      co_return Status(Errc::kAuthenticationFailed,
                       "kerberos: server sent no AP-REP; mutual authentication failed");
    }
    gss_buffer_desc input = view(server_message);
    GssBuffer output;
    OM_uint32 minor = 0, flags = 0;
    const OM_uint32 major = gss_init_sec_context(
        &minor, cred(), context_.get(), target_->get(), const_cast<gss_OID>(gss_mech_krb5),
        kFlags, 0, bindings_.get(), &input, nullptr, output.get(), &flags, nullptr);
    if (GSS_ERROR(major)) {
      co_return kerberos_status(gss_status(major, minor, "verify server (AP-REP)"));
    }
    if (major != GSS_S_COMPLETE || (flags & GSS_C_MUTUAL_FLAG) == 0) {
      co_return Status(Errc::kAuthenticationFailed,
                       "kerberos: mutual authentication with " + target_label_ + " not completed");
    }
    std::lock_guard lock(state_->mu);
    state_->warm_targets.insert(target_label_);
    co_return Status();
  }

 private:
  static constexpr OM_uint32 kFlags = GSS_C_MUTUAL_FLAG | GSS_C_INTEG_FLAG;

  gss_cred_id_t cred() const {
    return state_->credentials ? state_->credentials->handle() : GSS_C_NO_CREDENTIAL;
  }

  ClientStep first_message() {
    GssBuffer output;
    OM_uint32 minor = 0;
    const OM_uint32 major = gss_init_sec_context(
        &minor, cred(), context_.get(), target_->get(), const_cast<gss_OID>(gss_mech_krb5),
        kFlags, 0, bindings_.get(), GSS_C_NO_BUFFER, nullptr, output.get(), nullptr,
        nullptr);
    if (GSS_ERROR(major)) {
      std::lock_guard lock(state_->mu);
      state_->warm_targets.erase(target_label_);
      return ClientStep::failure(
          kerberos_status(gss_status(major, minor, "ticket for " + target_label_)));
    }
    if ((major & GSS_S_CONTINUE_NEEDED) == 0) {
      return ClientStep::failure(
          {Errc::kAuthenticationFailed, "kerberos: mechanism completed without mutual authentication"});
    }
    return ClientStep::send(output.str(), true);
  }

  std::shared_ptr<KerberosClientMechanism::State> state_;
  Status target_status_;  // importing the target name failed
  std::shared_ptr<const GssName> target_;  // shared by the sessions of a target
  std::string target_label_;
  ChannelBindings bindings_;
  MechanismHost* blocking_host_;  // ChannelInfo::host (not owned); null: the IO context's
  GssContext context_;
};

}  // namespace

Result<std::shared_ptr<KerberosServerMechanism>> KerberosServerMechanism::create(
    const KerberosServerOptions& options) {
  std::string principal = acceptor_principal(options);
  if (principal == "*") principal.clear();  // any key in the keytab
  auto credentials = load_acceptor(options, principal, kKerberosMechanism);
  if (!credentials.ok()) return credentials.status();
  auto state = std::make_shared<State>();
  state->credentials = std::move(*credentials);
  state->principal = principal.empty() ? std::string("*") : principal;
  return std::shared_ptr<KerberosServerMechanism>(new KerberosServerMechanism(std::move(state)));
}

std::unique_ptr<ServerAuthSession> KerberosServerMechanism::start(const ChannelInfo& channel) {
  return std::make_unique<KerberosServerSession>(state_, channel);
}

const std::string& KerberosServerMechanism::principal() const noexcept { return state_->principal; }

Result<std::shared_ptr<KerberosClientMechanism>> KerberosClientMechanism::create(
    const KerberosClientOptions& options) {
  if (!options.keytab.empty() && options.principal.empty()) {
    return Status(Errc::kConfigError, "kerberos: a client keytab needs a principal");
  }
  KerberosCredentials::InitiatorOptions initiator{options.ccache, options.principal,
                                                  options.keytab};
  auto credentials = KerberosCredentials::initiator(initiator);
  if (!credentials.ok()) return kerberos_status(credentials.status());
  auto state = std::make_shared<State>();
  state->options = options;
  state->principal = (*credentials)->principal();
  // A ticket-cache client re-reads the cache on every session, so that a
  // kinit (or a renewal by another process) is picked up; a keytab client
  // keeps its handle, whose tickets GSSAPI renews from the keytab.
  if (!options.keytab.empty() || !options.ccache.empty()) {
    state->credentials = std::move(*credentials);
  }
  return std::shared_ptr<KerberosClientMechanism>(new KerberosClientMechanism(std::move(state)));
}

std::unique_ptr<ClientAuthSession> KerberosClientMechanism::start(const ChannelInfo& channel) {
  return std::make_unique<KerberosClientSession>(state_, channel);
}

const std::string& KerberosClientMechanism::principal() const noexcept { return state_->principal; }

namespace {

Status read_server_options(const MechanismOptions& o, KerberosServerOptions& k) {
  for (Status s : {o.check({"keytab", "principal", "service", "host", "replay_cache",
                            "replay_cache_dir"}),
                   o.read("keytab", k.keytab), o.read("principal", k.principal),
                   o.read("service", k.service), o.read("host", k.host),
                   o.read("replay_cache", k.replay_cache),
                   o.read("replay_cache_dir", k.replay_cache_dir)}) {
    if (!s.ok()) return s;
  }
  return {};
}

Status read_client_options(const MechanismOptions& o, KerberosClientOptions& k) {
  for (Status s : {o.check({"ccache", "principal", "keytab", "service_principal", "service"}),
                   o.read("ccache", k.ccache), o.read("principal", k.principal),
                   o.read("keytab", k.keytab), o.read("service_principal", k.service_principal),
                   o.read("service", k.service)}) {
    if (!s.ok()) return s;
  }
  return {};
}

std::vector<MechanismFlag> client_flags() {
  return {
      {"--service-principal", "service_principal",
       "P  the server principal to expect, e.g. rpc/host@REALM (default: rpc@<host of --server>)"},
      {"--principal", "principal", "P  with --keytab: log in as P"},
      {"--keytab", "keytab", "F  log in from keytab F instead of using the ticket cache"},
      {"--ccache", "ccache", "C  ticket cache (default: KRB5CCNAME)"},
  };
}

}  // namespace

void register_kerberos_family(MechanismRegistry& registry, std::string_view name,
                              KerberosServerMaker make_server, KerberosClientMaker make_client) {
  const std::string mechanism(name);
  registry.register_server(
      mechanism,
      [mechanism, make_server](const nlohmann::json& json) -> Result<std::shared_ptr<ServerMechanism>> {
        KerberosServerOptions k;
        if (Status s = read_server_options(MechanismOptions(mechanism, json), k); !s.ok()) return s;
        return make_server(k);
      },
      kKerberosTraits);
  registry.register_client(
      mechanism,
      [mechanism, make_client](const nlohmann::json& json) -> Result<std::shared_ptr<ClientMechanism>> {
        KerberosClientOptions k;
        if (Status s = read_client_options(MechanismOptions(mechanism, json), k); !s.ok()) return s;
        return make_client(k);
      },
      kKerberosTraits, client_flags());
}

void register_kerberos(MechanismRegistry& registry) {
  register_kerberos_family<KerberosServerMechanism, KerberosClientMechanism>(registry,
                                                                             kKerberosMechanism);
}

}  // namespace authrpc
