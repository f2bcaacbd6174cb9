#include "authrpc/client/client_tls.h"

#include "authrpc/rpc/tls_errors.h"
#include "authrpc/rpc/tls_transport.h"
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

asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect_stream(
    asio::any_io_executor ex, const ClientOptions& o,
    std::chrono::steady_clock::time_point deadline) {
  const SecurityRequirement encryption = client_encryption_policy(o);
  if (!client_tries_tls(o)) co_return co_await transport_for(o.endpoint.scheme).connect(ex, o.endpoint, deadline);
  auto stream = co_await connect_tls(ex, o.endpoint, deadline, o.tls);
  if (stream.ok() || encryption == SecurityRequirement::kRequired) co_return stream;
  // `optional`: a server that answers a ClientHello with something that is
  // not TLS does not speak it; ask again in plaintext (an active attacker
  // can force this, which is what `optional` accepts: docs/TLS.md).
  if (stream.status().code != TlsErrc::kNotTls && stream.status().code != Errc::kConnectionClosed) {
    co_return stream;
  }
  Endpoint plain = o.endpoint;
  plain.scheme = Endpoint::Scheme::kTcp;
  co_return co_await transport_for(Endpoint::Scheme::kTcp).connect(ex, plain, deadline);
}

int TlsFlags::parse(const std::string& arg, const char* next, std::string* error) {
  if (arg == "--tls") {
    tls = true;
    return 1;
  }
  if (arg != "--ca" && arg != "--cert" && arg != "--key" && arg != "--tls-min-version" &&
      arg != "--encryption" && arg != "--authentication") {
    return 0;
  }
  if (next == nullptr) {
    *error = arg + " needs a value";
    return 0;
  }
  const std::string v = next;
  if (arg == "--ca") ca = v;
  if (arg == "--cert") cert = v;
  if (arg == "--key") key = v;
  if (arg == "--tls-min-version") min_version = v;
  if (arg == "--encryption" || arg == "--authentication") {
    SecurityRequirement p;
    if (!parse_security_requirement(v, &p)) {
      *error = arg + " must be disabled, optional or required";
      return 0;
    }
    (arg == "--encryption" ? encryption : authentication) = p;
  }
  return 2;
}

Status TlsFlags::apply(ClientOptions& options) const {
  if (tls && options.endpoint.scheme == Endpoint::Scheme::kTcp) {
    options.endpoint.scheme = Endpoint::Scheme::kTls;
  }
  if (encryption) options.encryption = *encryption;
  if (authentication) options.authentication = *authentication;
  const bool wants_tls = options.endpoint.scheme == Endpoint::Scheme::kTls ||
                         (encryption && *encryption != SecurityRequirement::kDisabled);
  if (!wants_tls) {
    if (!ca.empty() || !cert.empty() || !key.empty()) {
      return Status(Errc::kConfigError, "--ca/--cert/--key need --tls or a tls:// server");
    }
    return {};
  }
  security::TlsClientOptions t;
  t.ca_file = ca;
  t.certificate_file = cert;
  t.private_key_file = key;
  if (!min_version.empty() && !security::parse_tls_version(min_version, &t.min_version)) {
    return Status(Errc::kConfigError, "--tls-min-version must be 1.2 or 1.3");
  }
  if (t.ca_file.empty()) return Status(Errc::kConfigError, "TLS needs --ca FILE (the CA bundle)");
  auto context = security::TlsClientContext::create(t);
  if (!context.ok()) return context.status();
  options.tls = std::move(*context);
  return {};
}

}  // namespace authrpc
