// Where the server turns an endpoint and its options into a listener: the
// socket transport's listener (rpc/transport.h), wrapped in TLS for tls://
// (rpc/tls_listener.h) — TLS-only, or TLS and plaintext when encryption is
// `optional`. Called by Server::start for each endpoint.
#pragma once

#include <asio/io_context.hpp>
#include <memory>

#include "authrpc/base/result.h"
#include "authrpc/rpc/transport.h"
#include "authrpc/server/server.h"

namespace authrpc {

Result<std::unique_ptr<Listener>> listen_endpoint(asio::io_context& io, const Endpoint& endpoint,
                                                  const ServerOptions& options);

}  // namespace authrpc
