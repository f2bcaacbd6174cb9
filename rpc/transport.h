// The transport seam: a Listener yields ByteStreams (rpc/byte_stream.h); a
// Transport makes both for one kind of socket. TCP and Unix sockets
// implement it (rpc/socket_transport.cc). TLS is not a transport but a
// wrapper over a TCP stream (rpc/tls_stream.h) and over a TCP listener
// (rpc/tls_listener.h), as kj's TlsContext::wrapServer and wrapPort.
//
// Threading: a Listener belongs to the executor it was created on and must
// only be used from it.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/buffer.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"
#include "authrpc/rpc/byte_stream.h"
#include "authrpc/rpc/endpoint.h"
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
  // `local_address` (TCP only; empty: the kernel's choice) is the IP address
  // the connection comes from, e.g. one of 127.0.0.0/8, so that one process
  // can open more connections to one server than a single source address
  // has ports for; the port is still the kernel's, picked at connect
  // (IP_BIND_ADDRESS_NO_PORT). Not an address: kInvalidArgument; set on a
  // Unix socket: kInvalidArgument.
  virtual asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect(
      asio::any_io_executor ex, const Endpoint& endpoint,
      std::chrono::steady_clock::time_point deadline, std::string_view local_address) = 0;
  asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect(
      asio::any_io_executor ex, const Endpoint& endpoint,
      std::chrono::steady_clock::time_point deadline) {
    return connect(std::move(ex), endpoint, deadline, {});
  }
  virtual Result<std::unique_ptr<Listener>> listen(asio::io_context& io, const Endpoint& endpoint,
                                                   const ListenOptions& options) = 0;
};

// The built-in transport for an endpoint's scheme (lives for the process):
// Unix sockets for unix:, TCP for tcp:// and tls:// — a tls:// endpoint's
// TCP stream or listener is then wrapped in TLS by whoever holds the TLS
// context (server/listen_endpoint.h, client/connect_byte_stream.h).
Transport& transport_for(Endpoint::Scheme scheme);

}  // namespace authrpc
