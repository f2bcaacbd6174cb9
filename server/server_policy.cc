#include "authrpc/server/server_policy.h"

#include "authrpc/security/tls_context.h"

namespace authrpc {
namespace {

bool any_tls_endpoint(const ServerOptions& o) {
  for (const auto& e : o.endpoints) {
    if (e.scheme == Endpoint::Scheme::kTls) return true;
  }
  return false;
}

}  // namespace

SecurityRequirement server_encryption_policy(const ServerOptions& o) {
  if (o.encryption) return *o.encryption;
  return any_tls_endpoint(o) ? SecurityRequirement::kRequired : SecurityRequirement::kDisabled;
}

Status validate_server_policies(const ServerOptions& o) {
  auto bad = [](std::string m) { return Status(Errc::kConfigError, std::move(m)); };
  const SecurityRequirement encryption = server_encryption_policy(o);
  for (const auto& e : o.endpoints) {
    if (encryption == SecurityRequirement::kDisabled && e.scheme == Endpoint::Scheme::kTls) {
      return bad("encryption is disabled but " + e.to_string() + " is a TLS endpoint");
    }
    if (encryption == SecurityRequirement::kRequired && e.scheme != Endpoint::Scheme::kTls) {
      return bad("encryption is required but " + e.to_string() +
                 " is not a TLS endpoint (use tls://host:port)");
    }
  }
  if (encryption != SecurityRequirement::kDisabled && any_tls_endpoint(o) && !o.tls) {
    return bad("TLS endpoints need a TLS context (certificate and private key)");
  }
  const bool client_certs =
      o.tls && o.tls->options().client_certificates != security::ClientCertificates::kNone;
  bool plaintext_tcp = false;  // an endpoint that may carry a plaintext tcp:// connection
  for (const auto& e : o.endpoints) plaintext_tcp = plaintext_tcp || e.scheme == Endpoint::Scheme::kTcp;
  // By what each mechanism declares (auth/mechanism_traits.h), never its name.
  for (const auto& m : o.mechanisms) {
    if (!m) continue;
    const MechanismTraits traits = m->traits();
    const std::string name(m->name());
    if (o.authentication == SecurityRequirement::kRequired && !traits.proves_identity) {
      return bad("authentication is required but mechanism '" + name + "' (no proof) is enabled");
    }
    if (o.authentication == SecurityRequirement::kDisabled && traits.proves_identity) {
      return bad("authentication is disabled but mechanism '" + name +
                 "' is enabled (only mechanisms without a proof, such as simple, are allowed)");
    }
    if (traits.needs_client_certificate && (encryption == SecurityRequirement::kDisabled || !client_certs)) {
      return bad("mechanism '" + name + "' needs TLS with client certificates (tls.client_certificates)");
    }
    if (traits.needs_tls && encryption == SecurityRequirement::kDisabled) {
      return bad("mechanism '" + name + "' needs TLS but encryption is disabled");
    }
    if (traits.bearer_secret && encryption == SecurityRequirement::kDisabled && plaintext_tcp) {
      return bad("mechanism '" + name +
                 "' carries a bearer secret, never accepted over plaintext tcp://: use tls:// "
                 "or unix: endpoints");
    }
  }
  if (client_certs && encryption == SecurityRequirement::kDisabled) {
    return bad("client certificates are requested but encryption is disabled");
  }
  return {};
}

}  // namespace authrpc
