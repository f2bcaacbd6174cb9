#include "authrpc/tools/tls_flags.h"

#include "authrpc/security/tls_context.h"

namespace authrpc::cli {

Result<int> TlsFlags::parse(const std::string& arg, const char* next) {
  if (arg == "--tls") {
    tls = true;
    return 1;
  }
  if (arg != "--ca" && arg != "--cert" && arg != "--key" && arg != "--tls-min-version" &&
      arg != "--encryption" && arg != "--authentication") {
    return 0;
  }
  if (next == nullptr) return Status(Errc::kInvalidArgument, arg + " needs a value");
  const std::string v = next;
  if (arg == "--ca") ca = v;
  if (arg == "--cert") cert = v;
  if (arg == "--key") key = v;
  if (arg == "--tls-min-version") min_version = v;
  if (arg == "--encryption" || arg == "--authentication") {
    SecurityRequirement level;
    if (!parse_security_requirement(v, &level)) {
      return Status(Errc::kInvalidArgument, arg + " must be disabled, optional or required");
    }
    (arg == "--encryption" ? encryption : authentication) = level;
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
      return Status(Errc::kInvalidArgument, "--ca/--cert/--key need --tls or a tls:// server");
    }
    return {};
  }
  security::TlsClientOptions t;
  t.ca_file = ca;
  t.certificate_file = cert;
  t.private_key_file = key;
  if (!min_version.empty() && !security::parse_tls_version(min_version, &t.min_version)) {
    return Status(Errc::kInvalidArgument, "--tls-min-version must be 1.2 or 1.3");
  }
  if (t.ca_file.empty()) return Status(Errc::kInvalidArgument, "TLS needs --ca FILE (the CA bundle)");
  if (cert.empty() != key.empty()) return Status(Errc::kInvalidArgument, "--cert and --key go together");
  auto context = security::TlsClientContext::create(t);
  if (!context.ok()) return context.status();
  options.tls = std::move(*context);
  return {};
}

}  // namespace authrpc::cli
