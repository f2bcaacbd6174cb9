// The server's side of TLS and the connection policies: checks that the
// encryption and authentication policies, the endpoints, the TLS context and
// the mechanisms fit together (Server::start refuses impossible combinations
// before binding anything), and opens each endpoint's listener.
#pragma once

#include <asio/io_context.hpp>
#include <memory>
#include <nlohmann/json.hpp>

#include "authrpc/rpc/security_requirement.h"
#include "authrpc/security/base/result.h"
#include "authrpc/rpc/transport.h"
#include "authrpc/server/server.h"

namespace authrpc {

// The encryption policy in force (ServerOptions::encryption or its default).
SecurityRequirement server_encryption_policy(const ServerOptions& options);

// kConfigError naming the conflict, or OK.
Status validate_server_policies(const ServerOptions& options);

// Reads the configuration file's "tls", "encryption" and "authentication"
// keys (docs/CONFIG.md) into `options`, building the TLS context. kConfigError
// naming the key on a bad value or unreadable file.
Status apply_tls_config(const nlohmann::json& config, ServerOptions& options);

// A listener for `endpoint`: TLS (with or without plaintext, by policy) for
// tls://, sockets otherwise.
Result<std::unique_ptr<Listener>> listen_endpoint(asio::io_context& io, const Endpoint& endpoint,
                                                  const ServerOptions& options);

}  // namespace authrpc
