#include "authrpc/server/server_tls.h"

#include "authrpc/rpc/tls_transport.h"
#include "authrpc/security/tls_context.h"

namespace authrpc {
namespace {

bool any_tls_endpoint(const ServerOptions& o) {
  for (const auto& e : o.endpoints) {
    if (e.scheme == Endpoint::Scheme::kTls) return true;
  }
  return false;
}

Status read_policy(const nlohmann::json& config, const char* key, SecurityRequirement* out) {
  if (!config.contains(key)) return {};
  const auto& v = config[key];
  if (!v.is_string() || !parse_security_requirement(v.get<std::string>(), out)) {
    return Status(Errc::kConfigError,
                  std::string("'") + key + "' must be disabled, optional or required");
  }
  return {};
}

Status read_string(const nlohmann::json& tls, const char* key, std::string* out) {
  if (!tls.contains(key)) return {};
  if (!tls[key].is_string()) return Status(Errc::kConfigError, std::string("'tls.") + key + "' must be a string");
  *out = tls[key].get<std::string>();
  return {};
}

}  // namespace

Status apply_tls_config(const nlohmann::json& config, ServerOptions& o) {
  SecurityRequirement encryption = SecurityRequirement::kDisabled;
  if (config.contains("encryption")) {
    if (Status s = read_policy(config, "encryption", &encryption); !s.ok()) return s;
    o.encryption = encryption;
  }
  if (Status s = read_policy(config, "authentication", &o.authentication); !s.ok()) return s;
  if (!config.contains("tls")) return {};
  const auto& tls = config["tls"];
  if (!tls.is_object()) return Status(Errc::kConfigError, "'tls' must be an object");
  for (const auto& [key, _] : tls.items()) {
    if (key != "certificate" && key != "private_key" && key != "ca" && key != "min_version" &&
        key != "client_certificates" && key != "session_tickets") {
      return Status(Errc::kConfigError, "unknown key 'tls." + key + "'");
    }
  }
  security::TlsServerOptions t;
  std::string text;
  for (Status s : {read_string(tls, "certificate", &t.certificate_file),
                   read_string(tls, "private_key", &t.private_key_file),
                   read_string(tls, "ca", &t.ca_file)}) {
    if (!s.ok()) return s;
  }
  if (tls.contains("min_version")) {
    if (!tls["min_version"].is_string() ||
        !security::parse_tls_version(tls["min_version"].get<std::string>(), &t.min_version)) {
      return Status(Errc::kConfigError, "'tls.min_version' must be \"1.2\" or \"1.3\"");
    }
  }
  if (tls.contains("client_certificates")) {
    if (!tls["client_certificates"].is_string() ||
        !security::parse_client_certificates(tls["client_certificates"].get<std::string>(),
                                             &t.client_certificates)) {
      return Status(Errc::kConfigError, "'tls.client_certificates' must be none, optional or required");
    }
  }
  if (tls.contains("session_tickets")) {
    if (!tls["session_tickets"].is_boolean()) {
      return Status(Errc::kConfigError, "'tls.session_tickets' must be true or false");
    }
    t.session_tickets = tls["session_tickets"].get<bool>();
  }
  auto context = security::TlsServerContext::create(t);
  if (!context.ok()) return Status(context.code(), "'tls': " + context.status().message);
  o.tls = std::move(*context);
  return {};
}

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

Result<std::unique_ptr<Listener>> listen_endpoint(asio::io_context& io, const Endpoint& endpoint,
                                                  const ServerOptions& options) {
  if (endpoint.scheme != Endpoint::Scheme::kTls) {
    return transport_for(endpoint.scheme).listen(io, endpoint, options.listen);
  }
  return listen_tls(io, endpoint, options.listen, options.tls,
                    server_encryption_policy(options) == SecurityRequirement::kOptional);
}

}  // namespace authrpc
