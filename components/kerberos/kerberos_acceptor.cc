#include "authrpc/components/kerberos/kerberos_acceptor.h"

namespace authrpc {

using security::KerberosCredentials;

std::string acceptor_principal(const KerberosServerOptions& options) {
  return options.principal.empty() ? security::host_service_principal(options.service, options.host)
                                   : options.principal;
}

Result<std::unique_ptr<KerberosCredentials>> load_acceptor(
    const KerberosServerOptions& options, const std::string& principal, std::string_view mechanism) {
  auto credentials = KerberosCredentials::acceptor({.keytab = options.keytab,
                                                    .principal = principal,
                                                    .replay_cache = options.replay_cache,
                                                    .replay_cache_dir = options.replay_cache_dir});
  if (!credentials.ok()) {
    return Status(Errc::kConfigError, std::string(mechanism) + ": " + credentials.status().message);
  }
  return credentials;
}

}  // namespace authrpc
