// The server's security policy checks: whether the encryption and
// authentication requirements (rpc/security_requirement.h), the endpoints,
// the TLS context and what each mechanism declares fit together.
// Server::start refuses impossible combinations before binding anything.
// Semantics: docs/TLS.md, "Policies".
#pragma once

#include "authrpc/base/status.h"
#include "authrpc/rpc/security_requirement.h"
#include "authrpc/server/server.h"

namespace authrpc {

// The encryption requirement in force (ServerOptions::encryption, or by
// default `required` if any endpoint is tls://, else `disabled`).
SecurityRequirement server_encryption_policy(const ServerOptions& options);

// kConfigError naming the conflict, or OK. The message starts with the
// configuration key it is about, quoted ('auth.mechanisms': ...), as the
// configuration readers' messages do.
Status validate_server_policies(const ServerOptions& options);

// Everything Server::start() checks before it binds: the limits' ranges
// and relations, then validate_server_policies(). Messages as above.
Status validate_server_options(const ServerOptions& options);

}  // namespace authrpc
