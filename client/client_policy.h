// The client's security policy checks: whether its encryption and
// authentication requirements (rpc/security_requirement.h), its endpoint,
// its TLS context and what each allowed mechanism declares fit together.
// Checked at connect, before any byte is sent. Semantics: docs/TLS.md,
// "Policies".
#pragma once

#include "authrpc/base/status.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/security_requirement.h"

namespace authrpc {

// The encryption requirement in force (ClientOptions::encryption, or by
// default `required` for a tls:// endpoint, else `disabled`).
SecurityRequirement client_encryption_policy(const ClientOptions& options);

// kConfigError naming the conflict, or OK.
Status validate_client_policies(const ClientOptions& options);

// True if the policy has the client try TLS: `required`, or `optional` with
// a TLS context on a TCP endpoint.
bool client_tries_tls(const ClientOptions& options);

}  // namespace authrpc
