// The `x509` mechanism: the identity is the client certificate verified by the
// TLS handshake (mutual TLS), mapped to a user name by a documented rule
// (security/x509_identity.h, docs/TLS.md). Its negotiation messages are
// empty: the proof of possession of the key was the TLS handshake. Refused on
// connections without a verified client certificate.
#pragma once

#include <memory>
#include <string>

#include "authrpc/auth/mechanism.h"
#include "authrpc/security/x509_identity.h"

namespace authrpc {

inline constexpr std::string_view kX509Mechanism = "x509";
// The identity is the client certificate: TLS with a verified one.
inline constexpr MechanismTraits kX509Traits{.needs_tls = true, .needs_client_certificate = true};

class MechanismRegistry;
// Registers both halves: server options {"user_from"}; the client takes
// none (its certificate is the TLS flags').
void register_x509(MechanismRegistry& registry);

class X509ServerMechanism final : public ServerMechanism {
 public:
  explicit X509ServerMechanism(security::X509UserFrom rule = security::X509UserFrom::kCommonName)
      : rule_(rule) {}
  std::string_view name() const noexcept override { return kX509Mechanism; }
  MechanismTraits traits() const noexcept override { return kX509Traits; }
  std::unique_ptr<ServerAuthSession> start(const ChannelInfo& channel) override;

 private:
  security::X509UserFrom rule_;
};

class X509ClientMechanism final : public ClientMechanism {
 public:
  std::string_view name() const noexcept override { return kX509Mechanism; }
  MechanismTraits traits() const noexcept override { return kX509Traits; }
  std::unique_ptr<ClientAuthSession> start(const ChannelInfo& channel) override;
};

}  // namespace authrpc
