#include "authrpc/server/tls_config.h"

#include "authrpc/security/tls_context.h"

namespace authrpc {
namespace {

Status read_requirement(const nlohmann::json& config, const char* key, SecurityRequirement* out) {
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
    if (Status s = read_requirement(config, "encryption", &encryption); !s.ok()) return s;
    o.encryption = encryption;
  }
  if (Status s = read_requirement(config, "authentication", &o.authentication); !s.ok()) return s;
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

}  // namespace authrpc
