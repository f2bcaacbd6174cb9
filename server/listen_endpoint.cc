#include "authrpc/server/listen_endpoint.h"

#include "authrpc/rpc/tls_listener.h"
#include "authrpc/server/server_policy.h"

namespace authrpc {

Result<std::unique_ptr<Listener>> listen_endpoint(asio::io_context& io, const Endpoint& endpoint,
                                                  const ServerOptions& options) {
  auto listener = transport_for(endpoint.scheme).listen(io, endpoint, options.listen);
  if (!listener.ok() || endpoint.scheme != Endpoint::Scheme::kTls) return listener;
  return wrap_tls_listener(std::move(*listener), options.tls,
                           server_encryption_policy(options) == SecurityRequirement::kOptional
                               ? PlaintextClients::kServe
                               : PlaintextClients::kRefuse);
}

}  // namespace authrpc
