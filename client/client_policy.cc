#include "authrpc/client/client_policy.h"

#include "authrpc/auth/mechanism_policy.h"
#include "authrpc/security/tls_context.h"

namespace authrpc {
namespace {

// The client's wording of a mechanism's conflict with its policy.
constexpr MechanismConflictMessages kMechanismConflicts = {
    "authentication is required but mechanism '{}' (no proof) is allowed",
    "authentication is disabled but mechanism '{}' is allowed (only mechanisms without a proof, "
    "such as simple, are)",
    "mechanism '{}' needs TLS with a client certificate",
    "mechanism '{}' needs TLS",
    "mechanism '{}' carries a bearer secret, never sent over plaintext tcp://: use tls:// or unix:",
};

}  // namespace

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
  const bool tls = encryption != SecurityRequirement::kDisabled && o.tls;
  const MechanismPolicy policy{
      .authentication = o.authentication,
      .tls = tls,
      .client_certificate = tls && o.tls->has_certificate(),
      .plaintext_tcp = encryption == SecurityRequirement::kDisabled &&
                       o.endpoint.scheme == Endpoint::Scheme::kTcp,
  };
  for (const auto& m : o.mechanisms) {
    if (!m) continue;
    if (Status s = check_mechanism_policy(m->traits(), m->name(), policy, kMechanismConflicts);
        !s.ok()) {
      return s;
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
