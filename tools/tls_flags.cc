#include "authrpc/tools/tls_flags.h"

#include "authrpc/security/tls_context.h"

namespace authrpc::cli {

void TlsFlags::add_to(FlagParser& parser) {
  const auto requirement = [](std::optional<SecurityRequirement>* out) {
    return [out](std::string_view v) {
      SecurityRequirement level;
      if (!parse_security_requirement(v, &level)) {
        return Status(Errc::kInvalidArgument, "disabled, optional or required");
      }
      *out = level;
      return Status();
    };
  };
  parser.flag("--tls", &tls)
      .value("--ca", &ca)
      .value("--cert", &cert)
      .value("--key", &key)
      .value("--tls-min-version", &min_version)
      .value("--encryption", requirement(&encryption))
      .value("--authentication", requirement(&authentication));
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
