#include "authrpc/client/connect_byte_stream.h"

#include <asio/error.hpp>
#include <cerrno>

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

bool is_errno(std::error_code ec) {
  return ec.category() == std::system_category() || ec.category() == std::generic_category() ||
         ec.category() == asio::error::get_system_category();
}

}  // namespace

Status unreachable(const Status& failure, const ClientOptions& options) {
  const std::error_code ec = failure.code;
  const Endpoint& to = options.endpoint;
  const bool unix_socket = to.scheme == Endpoint::Scheme::kUnix;
  std::string where = "cannot reach the server at " + to.to_string();
  if (!options.local_address.empty()) where += " from " + options.local_address;
  auto unavailable = [&where](const std::string& why) {
    return Status(Errc::kUnavailable, where + ": " + why);
  };
  if (ec == asio::error::host_not_found || ec == asio::error::no_data) {
    return unavailable("host name " + to.host + " does not resolve");
  }
  if (ec == asio::error::host_not_found_try_again) {
    return unavailable("host name " + to.host + " does not resolve now (no answer from DNS)");
  }
  if (ec == asio::error::no_recovery || ec.category() == asio::error::get_addrinfo_category()) {
    return unavailable("cannot resolve host name " + to.host + ": " + ec.message());
  }
  if (!is_errno(ec)) return failure;  // a timeout, TLS, ...: classified where they arose
  switch (ec.value()) {
    case ECONNREFUSED:
      return unavailable(unix_socket ? "nothing listens on the socket (is the server running?)"
                                     : "connection refused (is the server running?)");
    case ENOENT:
    case ENOTDIR:
      return unavailable("no such socket file (is the server running?)");
    case EACCES:
    case EPERM:
      return {Errc::kPermissionDenied,
              where + ": permission denied" + (unix_socket ? " (by the socket file's permissions)" : "")};
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
      return unavailable("the connection was reset");
    case ENETUNREACH:
    case ENETDOWN:
      return unavailable("network unreachable");
    case EHOSTUNREACH:
      return unavailable("host unreachable");
    case ETIMEDOUT:
      return unavailable("no answer (connection timed out)");
    case EAGAIN:
      return unavailable(unix_socket ? "the server's listen queue is full (it accepts more slowly than "
                                       "clients arrive)"
                                     : "no local port free");
    default:
      return {ec, where};
  }
}

// Not a coroutine: a plaintext connect is the transport's own coroutine, one
// frame fewer per session.
asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect_byte_stream(
    asio::any_io_executor ex, const ClientOptions& options,
    std::chrono::steady_clock::time_point deadline) {
  if (client_tries_tls(options)) return connect_trying_tls(std::move(ex), options, deadline);
  return transport_for(options.endpoint.scheme)
      .connect(std::move(ex), options.endpoint, deadline, options.local_address);
}

}  // namespace authrpc
