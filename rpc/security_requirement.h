// How much a side insists on a security property of its connections:
// disabled, optional or required. Used twice per side, after Kudu's
// --rpc_encryption and --rpc_authentication: ServerOptions/ClientOptions
// `encryption` (TLS) and `authentication` (a mechanism that proves an
// identity). Impossible combinations are refused when a server starts or a
// client connects (server/server_policy.h, client/client_policy.h), never at
// the first connection. Semantics and the full matrix: docs/TLS.md.
#pragma once

#include <string_view>

namespace authrpc {

enum class SecurityRequirement { kDisabled, kOptional, kRequired };

// "disabled" | "optional" | "required": the spelling of config keys and
// command-line flags.
std::string_view to_string(SecurityRequirement r) noexcept;
// False (and *out untouched) if `text` is none of them.
bool parse_security_requirement(std::string_view text, SecurityRequirement* out) noexcept;

}  // namespace authrpc
