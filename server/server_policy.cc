#include "authrpc/server/server_policy.h"

#include "authrpc/auth/mechanism_policy.h"
#include "authrpc/rpc/wire.h"
#include "authrpc/security/tls_context.h"

namespace authrpc {
namespace {

bool any_tls_endpoint(const ServerOptions& o) {
  for (const auto& e : o.endpoints) {
    if (e.scheme == Endpoint::Scheme::kTls) return true;
  }
  return false;
}

// The server's wording of a mechanism's conflict with its policy.
constexpr MechanismConflictMessages kMechanismConflicts = {
    "'auth.mechanisms': authentication is required but mechanism '{}' (no proof) is enabled",
    "'auth.mechanisms': authentication is disabled but mechanism '{}' is enabled (only mechanisms "
    "without a proof, such as simple, are allowed)",
    "'auth.mechanisms': mechanism '{}' needs TLS with client certificates "
    "(tls.client_certificates)",
    "'auth.mechanisms': mechanism '{}' needs TLS but encryption is disabled",
    "'auth.mechanisms': mechanism '{}' carries a bearer secret, never accepted over plaintext "
    "tcp://: use tls:// or unix: endpoints",
};

}  // namespace

SecurityRequirement server_encryption_policy(const ServerOptions& o) {
  if (o.encryption) return *o.encryption;
  return any_tls_endpoint(o) ? SecurityRequirement::kRequired : SecurityRequirement::kDisabled;
}

Status validate_server_options(const ServerOptions& o) {
  auto bad = [](std::string m) { return Status(Errc::kConfigError, std::move(m)); };
  if (o.endpoints.empty()) return bad("'listen': no endpoint to listen on");
  if (o.mechanisms.empty()) return bad("'auth.mechanisms': no authentication mechanism enabled");
  for (std::size_t i = 0; i < o.mechanisms.size(); ++i) {
    if (!o.mechanisms[i]) return bad("'auth.mechanisms': null mechanism");
    for (std::size_t j = 0; j < i; ++j) {
      if (o.mechanisms[j]->name() == o.mechanisms[i]->name()) {
        return bad("'auth.mechanisms': mechanism '" + std::string(o.mechanisms[i]->name()) + "' enabled twice");
      }
    }
  }
  if (o.max_frame_size < 4096 || o.max_frame_size > (std::size_t{1} << 30)) {
    return bad("'max_frame_size' must be between 4096 bytes and 1 GiB");
  }
  if (o.negotiation_timeout.count() <= 0) return bad("'negotiation_timeout_ms' must be positive");
  if (o.idle_timeout.count() < 0) return bad("'idle_timeout_ms' must not be negative");
  if (o.max_connections == 0) return bad("'max_connections' must be at least 1");
  if (o.blocking_threads == 0) return bad("'blocking_threads' must be at least 1");
  if (o.max_unauthenticated == 0) return bad("'max_unauthenticated' must be at least 1");
  if (o.max_negotiation_frame_size < wire::kMinNegotiationFrameSize) {
    return bad("'max_negotiation_frame_size' must be at least " +
               std::to_string(wire::kMinNegotiationFrameSize) + " bytes");
  }
  if (o.max_pending_output < o.max_frame_size) {
    return bad("'max_pending_output' must be at least max_frame_size");
  }
  if (o.max_streams_per_connection == 0) return bad("'max_streams_per_connection' must be at least 1");
  if (o.max_stream_bytes_per_connection < o.stream_window) {
    return bad("'max_stream_bytes_per_connection' must be at least stream_window");
  }
  if (o.max_buffered_bytes < o.max_frame_size) {
    return bad("'max_buffered_bytes' must be at least max_frame_size");
  }
  return validate_server_policies(o);
}

Status validate_server_policies(const ServerOptions& o) {
  auto bad = [](std::string m) { return Status(Errc::kConfigError, std::move(m)); };
  const SecurityRequirement encryption = server_encryption_policy(o);
  for (const auto& e : o.endpoints) {
    if (encryption == SecurityRequirement::kDisabled && e.scheme == Endpoint::Scheme::kTls) {
      return bad("'listen': encryption is disabled but " + e.to_string() + " is a TLS endpoint");
    }
    if (encryption == SecurityRequirement::kRequired && e.scheme != Endpoint::Scheme::kTls) {
      return bad("'listen': encryption is required but " + e.to_string() +
                 " is not a TLS endpoint (use tls://host:port)");
    }
  }
  if (encryption != SecurityRequirement::kDisabled && any_tls_endpoint(o) && !o.tls) {
    return bad("'tls': TLS endpoints need a TLS context (certificate and private key)");
  }
  const bool client_certs =
      o.tls && o.tls->options().client_certificates != security::ClientCertificates::kNone;
  bool plaintext_tcp = false;  // an endpoint that may carry a plaintext tcp:// connection
  for (const auto& e : o.endpoints) plaintext_tcp = plaintext_tcp || e.scheme == Endpoint::Scheme::kTcp;
  const bool tls = encryption != SecurityRequirement::kDisabled;
  const MechanismPolicy policy{
      .authentication = o.authentication,
      .tls = tls,
      .client_certificate = tls && client_certs,
      .plaintext_tcp = !tls && plaintext_tcp,
  };
  for (const auto& m : o.mechanisms) {
    if (!m) continue;
    if (Status s = check_mechanism_policy(m->traits(), m->name(), policy, kMechanismConflicts);
        !s.ok()) {
      return s;
    }
  }
  if (client_certs && encryption == SecurityRequirement::kDisabled) {
    return bad("'tls.client_certificates': client certificates are requested but encryption is disabled");
  }
  return {};
}

}  // namespace authrpc
