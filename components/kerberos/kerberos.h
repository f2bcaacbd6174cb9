// The `kerberos` mechanism: Kerberos V5 through MIT GSSAPI, one GSS-API
// context token (one negotiation message) each way. The client's AP-REQ travels in HELLO (so calls can follow in the same
// flight); the server's AP-REP comes back in AUTH_SUCCESS and the client
// checks it before it accepts any response — mutual authentication is
// required. No KDC traffic once the client holds a service ticket.
//
// The standard SASL GSSAPI mechanism (for interop) is `kerberos-sasl`, in
// components/kerberos/kerberos_sasl.h.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "authrpc/auth/mechanism.h"
#include "authrpc/base/result.h"

namespace authrpc {

inline constexpr std::string_view kKerberosMechanism = "kerberos";
// Proves a principal; its sessions may be issued delegation tokens. Shared
// by `kerberos-sasl`.
inline constexpr MechanismTraits kKerberosTraits{.may_be_issued_tokens = true};

struct KerberosServerOptions {
  std::string keytab;     // empty: KRB5_KTNAME, else the system default keytab
  std::string principal;  // "rpc/host@REALM"; empty: service/host; "*": any in the keytab
  std::string service = "rpc";
  std::string host;       // empty: this machine's host name
  // The replay cache rejects a second use of the same authenticator. Turning
  // it off saves a little per session (docs/PERFORMANCE.md, "Measured costs
  // behind the code") and is safe only when every connection is bound to a TLS
  // channel.
  bool replay_cache = true;
  std::string replay_cache_dir;  // empty: KRB5RCACHEDIR or /var/tmp
};

struct KerberosClientOptions {
  std::string ccache;     // empty: KRB5CCNAME, else the default cache
  std::string principal;  // with keytab: log in as this principal
  std::string keytab;     // set: keytab login, renewed before the TGT expires
  // The server principal to expect. Empty: "<service>@<host connected to>"
  // ("localhost" for Unix sockets), as a host-based service name.
  std::string service_principal;
  std::string service = "rpc";
};

// Errors are typed: CREDENTIALS_EXPIRED (kinit / renew), UNAVAILABLE (KDC
// unreachable), AUTHENTICATION_FAILED (clock skew, replay, unknown principal,
// keytab out of date), CONFIG_ERROR (missing or unreadable keytab).
class KerberosServerMechanism final : public ServerMechanism {
 public:
  // Loads the acceptor credentials now: a bad keytab fails here, at startup.
  static Result<std::shared_ptr<KerberosServerMechanism>> create(
      const KerberosServerOptions& options);
  ~KerberosServerMechanism() override = default;

  std::string_view name() const noexcept override { return kKerberosMechanism; }
  MechanismTraits traits() const noexcept override { return kKerberosTraits; }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) override;
  const std::string& principal() const noexcept;

  struct State;

 private:
  explicit KerberosServerMechanism(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class KerberosClientMechanism final : public ClientMechanism {
 public:
  // With a keytab, logs in now; otherwise checks the ticket cache has a TGT.
  static Result<std::shared_ptr<KerberosClientMechanism>> create(
      const KerberosClientOptions& options);
  ~KerberosClientMechanism() override = default;

  std::string_view name() const noexcept override { return kKerberosMechanism; }
  MechanismTraits traits() const noexcept override { return kKerberosTraits; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override;
  // The client's own principal, e.g. "alice@EXAMPLE.COM".
  const std::string& principal() const noexcept;

  struct State;

 private:
  explicit KerberosClientMechanism(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class MechanismRegistry;
// Registers both halves of a Kerberos mechanism `name` (`kerberos` and
// `kerberos-sasl` differ only in how they are made): the options both read
// (docs/KERBEROS.md), their traits and the client flags both declare.
using KerberosServerMaker = Result<std::shared_ptr<ServerMechanism>> (*)(const KerberosServerOptions&);
using KerberosClientMaker = Result<std::shared_ptr<ClientMechanism>> (*)(const KerberosClientOptions&);
void register_kerberos_family(MechanismRegistry& registry, std::string_view name,
                              KerberosServerMaker make_server, KerberosClientMaker make_client);
// The same for the mechanisms `Server::create` and `Client::create` make.
template <typename Server, typename Client>
void register_kerberos_family(MechanismRegistry& registry, std::string_view name) {
  register_kerberos_family(
      registry, name,
      [](const KerberosServerOptions& k) -> Result<std::shared_ptr<ServerMechanism>> {
        auto mechanism = Server::create(k);
        if (!mechanism.ok()) return mechanism.status();
        return std::shared_ptr<ServerMechanism>(*mechanism);
      },
      [](const KerberosClientOptions& k) -> Result<std::shared_ptr<ClientMechanism>> {
        auto mechanism = Client::create(k);
        if (!mechanism.ok()) return mechanism.status();
        return std::shared_ptr<ClientMechanism>(*mechanism);
      });
}
// Registers both halves of `kerberos`.
void register_kerberos(MechanismRegistry& registry);

}  // namespace authrpc
