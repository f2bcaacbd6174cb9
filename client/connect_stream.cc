#include "authrpc/client/connect_stream.h"

#include "authrpc/client/client_policy.h"
#include "authrpc/rpc/tls_errors.h"
#include "authrpc/rpc/tls_stream.h"
#include "authrpc/rpc/transport.h"

namespace authrpc {
namespace {

// TCP to the endpoint's host and port, then TLS over it; under `optional`,
// plaintext again if the server does not speak TLS.
asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect_trying_tls(
    asio::any_io_executor ex, const ClientOptions& o,
    std::chrono::steady_clock::time_point deadline) {
  auto tcp = co_await transport_for(Endpoint::Scheme::kTcp)
                 .connect(ex, o.endpoint, deadline, o.local_address);
  if (!tcp.ok()) co_return tcp.status();
  auto stream = co_await wrap_tls_client(std::move(*tcp), o.endpoint, deadline, o.tls);
  if (stream.ok() || client_encryption_policy(o) == SecurityRequirement::kRequired) co_return stream;
  // `optional`: a server that answers a ClientHello with something that is
  // not TLS does not speak it; ask again in plaintext (an active attacker
  // can force this, which is what `optional` accepts: docs/TLS.md).
  if (stream.status().code != TlsErrc::kNotTls && stream.status().code != Errc::kConnectionClosed) {
    co_return stream;
  }
  Endpoint plain = o.endpoint;
  plain.scheme = Endpoint::Scheme::kTcp;
  co_return co_await transport_for(Endpoint::Scheme::kTcp)
      .connect(ex, plain, deadline, o.local_address);
}

}  // namespace

// Not a coroutine: a plaintext connect is the transport's own coroutine, one
// frame fewer per session.
asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect_stream(
    asio::any_io_executor ex, const ClientOptions& options,
    std::chrono::steady_clock::time_point deadline) {
  if (client_tries_tls(options)) return connect_trying_tls(std::move(ex), options, deadline);
  return transport_for(options.endpoint.scheme)
      .connect(std::move(ex), options.endpoint, deadline, options.local_address);
}

}  // namespace authrpc
