// What both Kerberos mechanisms' servers (kerberos.cc, kerberos_sasl.cc)
// load the same way: the acceptor principal that KerberosServerOptions name
// (`principal`, else "<service>/<host>"), and the acceptor credentials for
// it ("" for any key in the keytab) from their keytab, with their replay
// cache. Internal to the kerberos component (not installed).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"
#include "authrpc/components/kerberos/kerberos.h"
#include "authrpc/components/kerberos/kerberos_credentials.h"

namespace authrpc {

std::string acceptor_principal(const KerberosServerOptions& options);
// CONFIG_ERROR "<mechanism>: ..." if the credentials cannot be loaded.
Result<std::unique_ptr<security::KerberosCredentials>> load_acceptor(
    const KerberosServerOptions& options, const std::string& principal, std::string_view mechanism);

}  // namespace authrpc
