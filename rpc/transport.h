// The transport seam: a Listener yields ByteStreams (rpc/byte_stream.h); a
// Transport makes both for one endpoint scheme. TCP and Unix sockets
// implement it (rpc/socket_transport.cc); TLS is made over TCP
// (rpc/tls_transport.h).
//
// Threading: a Listener belongs to the executor it was created on and must
// only be used from it.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/buffer.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "authrpc/rpc/byte_stream.h"
#include "authrpc/rpc/endpoint.h"
#include "authrpc/security/base/result.h"
#include "authrpc/rpc/unique_fd.h"

namespace authrpc {

class Listener {
 public:
  virtual ~Listener() = default;
  // Waits for the next connection. Fails with operation_aborted after close().
  virtual asio::awaitable<Result<std::unique_ptr<ByteStream>>> accept() = 0;
  virtual void close() noexcept = 0;
  // The bound endpoint (with the real port when 0 was asked for).
  virtual Endpoint local_endpoint() const = 0;
  // Another listener on `io` accepting from the same socket, so that each IO
  // thread accepts its own connections without a hand-off.
  virtual Result<std::unique_ptr<Listener>> share_with(asio::io_context& io) = 0;
};

struct ListenOptions {
  int backlog = 1024;
  // Unix: remove a stale socket file (nobody accepting on it) before binding.
  bool remove_stale_unix_socket = true;
  // Unix: file mode for the socket path; 0 leaves the umask's choice.
  unsigned unix_socket_mode = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual Endpoint::Scheme scheme() const noexcept = 0;
  // Connects, failing with kDeadlineExceeded if not connected by `deadline`.
  virtual asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect(
      asio::any_io_executor ex, const Endpoint& endpoint,
      std::chrono::steady_clock::time_point deadline) = 0;
  virtual Result<std::unique_ptr<Listener>> listen(asio::io_context& io, const Endpoint& endpoint,
                                                   const ListenOptions& options) = 0;
};

// The built-in transport for an endpoint's scheme (lives for the process).
// For kTls it refuses (kConfigError): TLS needs a context, see
// rpc/tls_transport.h.
Transport& transport_for(Endpoint::Scheme scheme);

// A TCP acceptor listening on `endpoint` (host resolved if not an address;
// port 0 = any), for the tcp:// and tls:// listeners; `bound` gets the port.
Result<asio::ip::tcp::acceptor> listen_tcp(asio::io_context& io, const Endpoint& endpoint,
                                           const ListenOptions& options, Endpoint& bound);

// How an accepted tcp:// or tls:// peer is named (peer_address()):
// "a.b.c.d:port" or "[v6]:port". IPv4 is formatted by hand: inet_ntop's
// sprintf cost too much per accepted connection (docs/DESIGN.md, "Measured
// costs behind the code").
std::string format_tcp_peer(const asio::ip::tcp::endpoint& ep);

}  // namespace authrpc
