// The `kerberos-sasl` mechanism: Kerberos V5 through the standard SASL GSSAPI
// mechanism (RFC 4752) of Cyrus SASL, for peers that speak SASL. The SASL
// messages travel as they are: the client's first one in HELLO, the
// server's in AUTH_CHALLENGE, the client's answers in AUTH_RESPONSE, and
// AUTH_SUCCESS ends it (docs/PROTOCOL.md). Three round trips where the
// `kerberos` fast path (components/kerberos/kerberos.h) needs one: after the
// AP-REQ / AP-REP the mechanism negotiates a security layer, which authrpc
// always declines (max SSF 0; confidentiality is TLS's job). Mutual
// authentication is required on both sides.
//
// Options, credentials and errors are the `kerberos` mechanism's: the same
// option structs and names, acceptor and initiator credentials from
// components/kerberos/kerberos_credentials.h handed to Cyrus per connection
// (SASL_GSS_CREDS) — nothing is written to the process environment — and
// the same typed errors. One difference: SASL GSSAPI names the server by
// service and host, so a principal must have the form service/host[@REALM];
// the client checks that the ticket it gets is for exactly that principal.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "authrpc/auth/mechanism.h"
#include "authrpc/base/result.h"
#include "authrpc/components/kerberos/kerberos.h"

namespace authrpc {

inline constexpr std::string_view kKerberosSaslMechanism = "kerberos-sasl";

class MechanismRegistry;
// Registers both halves, with the `kerberos` options, flags and traits.
void register_kerberos_sasl(MechanismRegistry& registry);

// Server side. create() loads the acceptor credentials (a bad keytab fails
// here, with CONFIG_ERROR) and checks that Cyrus has its GSSAPI plugin. The
// identity is the client's full principal ("alice@EXAMPLE.COM") and realm,
// as with `kerberos` (Cyrus itself drops the realm of local principals).
class KerberosSaslServerMechanism final : public ServerMechanism {
 public:
  static Result<std::shared_ptr<KerberosSaslServerMechanism>> create(
      const KerberosServerOptions& options);
  ~KerberosSaslServerMechanism() override = default;

  std::string_view name() const noexcept override { return kKerberosSaslMechanism; }
  MechanismTraits traits() const noexcept override { return kKerberosTraits; }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) override;
  const std::string& principal() const noexcept;

  struct State;

 private:
  explicit KerberosSaslServerMechanism(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// Client side: the default ticket cache (re-read every session), a given
// cache, or a keytab login, as with `kerberos`. The first session to a
// server that needs a service ticket gets it on the host's blocking thread
// (auth/mechanism_host.h), so the IO thread never waits for the KDC; later
// sessions find it cached.
class KerberosSaslClientMechanism final : public ClientMechanism {
 public:
  static Result<std::shared_ptr<KerberosSaslClientMechanism>> create(
      const KerberosClientOptions& options);
  ~KerberosSaslClientMechanism() override = default;

  std::string_view name() const noexcept override { return kKerberosSaslMechanism; }
  MechanismTraits traits() const noexcept override { return kKerberosTraits; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override;
  // The client's own principal, e.g. "alice@EXAMPLE.COM".
  const std::string& principal() const noexcept;

  struct State;

 private:
  explicit KerberosSaslClientMechanism(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace authrpc
