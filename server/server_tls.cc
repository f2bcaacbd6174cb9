#include "server/server_tls.h"

#include "auth/simple.h"
#include "rpc/tls_transport.h"
#include "security/tls_context.h"

namespace authrpc {
namespace {

constexpr std::string_view kX509 = "x509";

bool any_tls_endpoint(const ServerOptions& o) {
  for (const auto& e : o.endpoints) {
    if (e.scheme == Endpoint::Scheme::kTls) return true;
  }
  return false;
}

}  // namespace

Policy server_encryption_policy(const ServerOptions& o) {
  if (o.encryption) return *o.encryption;
  return any_tls_endpoint(o) ? Policy::kRequired : Policy::kDisabled;
}

Status validate_server_policies(const ServerOptions& o) {
  auto bad = [](std::string m) { return Status(Errc::kConfigError, std::move(m)); };
  const Policy encryption = server_encryption_policy(o);
  for (const auto& e : o.endpoints) {
    if (encryption == Policy::kDisabled && e.scheme == Endpoint::Scheme::kTls) {
      return bad("encryption is disabled but " + e.to_string() + " is a TLS endpoint");
    }
    if (encryption == Policy::kRequired && e.scheme != Endpoint::Scheme::kTls) {
      return bad("encryption is required but " + e.to_string() +
                 " is not a TLS endpoint (use tls://host:port)");
    }
  }
  if (encryption != Policy::kDisabled && any_tls_endpoint(o) && !o.tls) {
    return bad("TLS endpoints need a TLS context (certificate and private key)");
  }
  const bool client_certs =
      o.tls && o.tls->options().client_certificates != security::ClientCertificates::kNone;
  for (const auto& m : o.mechanisms) {
    if (!m) continue;
    const bool is_simple = m->name() == kSimpleMechanism;
    if (o.authentication == Policy::kRequired && is_simple) {
      return bad("authentication is required but mechanism 'simple' (no proof) is enabled");
    }
    if (o.authentication == Policy::kDisabled && !is_simple) {
      return bad("authentication is disabled but mechanism '" + std::string(m->name()) +
                 "' is enabled (only 'simple' is allowed)");
    }
    if (m->name() == kX509 && (encryption == Policy::kDisabled || !client_certs)) {
      return bad("mechanism 'x509' needs TLS with client certificates (tls.client_certificates)");
    }
  }
  if (client_certs && encryption == Policy::kDisabled) {
    return bad("client certificates are requested but encryption is disabled");
  }
  return {};
}

Result<std::unique_ptr<Listener>> listen_endpoint(asio::io_context& io, const Endpoint& endpoint,
                                                  const ServerOptions& options) {
  if (endpoint.scheme != Endpoint::Scheme::kTls) {
    return transport_for(endpoint.scheme).listen(io, endpoint, options.listen);
  }
  return listen_tls(io, endpoint, options.listen, options.tls,
                    server_encryption_policy(options) == Policy::kOptional);
}

}  // namespace authrpc
