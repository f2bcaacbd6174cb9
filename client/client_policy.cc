#include "authrpc/client/client_policy.h"

#include "authrpc/security/tls_context.h"

namespace authrpc {

SecurityRequirement client_encryption_policy(const ClientOptions& o) {
  if (o.encryption) return *o.encryption;
  return o.endpoint.scheme == Endpoint::Scheme::kTls ? SecurityRequirement::kRequired : SecurityRequirement::kDisabled;
}

Status validate_client_policies(const ClientOptions& o) {
  auto bad = [](std::string m) { return Status(Errc::kConfigError, std::move(m)); };
  const SecurityRequirement encryption = client_encryption_policy(o);
  if (encryption == SecurityRequirement::kDisabled && o.endpoint.scheme == Endpoint::Scheme::kTls) {
    return bad("encryption is disabled but " + o.endpoint.to_string() + " is a TLS endpoint");
  }
  if (encryption == SecurityRequirement::kRequired) {
    if (o.endpoint.scheme == Endpoint::Scheme::kUnix) {
      return bad("encryption is required but " + o.endpoint.to_string() + " is a Unix socket");
    }
    if (!o.tls) return bad("encryption is required but no TLS context (CA bundle) is set");
  }
  // By what each mechanism declares (auth/mechanism_traits.h), never its name.
  for (const auto& m : o.mechanisms) {
    if (!m) continue;
    const MechanismTraits traits = m->traits();
    const std::string name(m->name());
    if (o.authentication == SecurityRequirement::kRequired && !traits.proves_identity) {
      return bad("authentication is required but mechanism '" + name + "' (no proof) is allowed");
    }
    if (o.authentication == SecurityRequirement::kDisabled && traits.proves_identity) {
      return bad("authentication is disabled but mechanism '" + name +
                 "' is allowed (only mechanisms without a proof, such as simple, are)");
    }
    if (traits.needs_client_certificate &&
        (encryption == SecurityRequirement::kDisabled || !o.tls || !o.tls->has_certificate())) {
      return bad("mechanism '" + name + "' needs TLS with a client certificate");
    }
    if (traits.needs_tls && (encryption == SecurityRequirement::kDisabled || !o.tls)) {
      return bad("mechanism '" + name + "' needs TLS");
    }
    if (traits.bearer_secret && encryption == SecurityRequirement::kDisabled &&
        o.endpoint.scheme == Endpoint::Scheme::kTcp) {
      return bad("mechanism '" + name +
                 "' carries a bearer secret, never sent over plaintext tcp://: use tls:// or unix:");
    }
  }
  return {};
}

bool client_tries_tls(const ClientOptions& o) {
  const SecurityRequirement encryption = client_encryption_policy(o);
  return encryption == SecurityRequirement::kRequired ||
         (encryption == SecurityRequirement::kOptional && o.tls && o.endpoint.scheme != Endpoint::Scheme::kUnix);
}

}  // namespace authrpc
