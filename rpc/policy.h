// Connection policies, after Kudu's --rpc_encryption and --rpc_authentication:
// each side says whether it refuses, allows or insists on TLS and on real
// authentication (anything but the `simple` mechanism). Impossible
// combinations are refused when a server starts or a client connects
// (server/server.cc, client/client.cc), never at the first connection.
// Semantics and the full matrix: docs/TLS.md.
#pragma once

#include <string_view>

namespace authrpc {

enum class Policy { kDisabled, kOptional, kRequired };

std::string_view to_string(Policy p) noexcept;
// "disabled" | "optional" | "required"
bool parse_policy(std::string_view text, Policy* out) noexcept;

}  // namespace authrpc
