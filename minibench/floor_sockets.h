// Socket plumbing the floors share (floor.cc: the bare echo floors;
// gss_floor.cc: floor/gss; tls_floor.cc, echo_floor.cc): authrpc endpoints
// as Asio endpoints, listening sockets, connecting, and the socket options
// authrpc sets, so that every floor's sockets are made and connected the
// way authrpc makes and connects its own.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <cerrno>
#include <memory>
#include <type_traits>
#include <utility>
#include <poll.h>
#include <sys/socket.h>

#include "authrpc/base/result.h"
#include "authrpc/rpc/endpoint.h"

namespace minibench::net {

using Tcp = asio::ip::tcp;
using Local = asio::local::stream_protocol;

template <typename Protocol>
inline constexpr bool kIsTcp = std::is_same_v<Protocol, Tcp>;

// unix:@name is an abstract socket; unix:/path a file.
Local::endpoint unix_native(const authrpc::Endpoint& endpoint);
// Resolves a host name (once: no lookup may land inside a timing).
authrpc::Result<Tcp::endpoint> tcp_native(const authrpc::Endpoint& endpoint);
// Removes a socket file left at a unix:/path endpoint by an earlier run.
void remove_stale_socket_file(const authrpc::Endpoint& endpoint);

// The same socket option authrpc sets on both ends of a TCP connection.
template <typename Socket>
void set_no_delay(Socket& socket) {
  if constexpr (std::is_same_v<Socket, Tcp::socket>) {
    std::error_code ignored;
    socket.set_option(Tcp::no_delay(true), ignored);
  }
}

// As authrpc's client connects (rpc/socket_transport.cc, connect_socket):
// connect() on a non-blocking socket, then a zero-timeout poll() — a
// loopback TCP handshake has usually completed inside connect() — and a
// wait through the event loop only if the socket is not writable yet.
template <typename Protocol>
asio::awaitable<std::error_code> connect(typename Protocol::socket& socket,
                                         const typename Protocol::endpoint& peer) {
  std::error_code ec;
  socket.open(peer.protocol(), ec);
  if (!ec) socket.native_non_blocking(true, ec);
  if (ec) co_return ec;
  if (::connect(socket.native_handle(), peer.data(), static_cast<socklen_t>(peer.size())) == 0) {
    co_return std::error_code();
  }
  // As authrpc's: EAGAIN (a Unix listener's full queue) is a failure, not a connect in progress.
  if (errno != EINPROGRESS && errno != EINTR) co_return std::error_code(errno, std::system_category());
  pollfd ready{socket.native_handle(), POLLOUT, 0};
  if (::poll(&ready, 1, 0) != 1) {
    co_await socket.async_wait(Protocol::socket::wait_write, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return ec;
  }
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
  co_return error == 0 ? std::error_code() : std::error_code(error, std::system_category());
}

// A listening acceptor on `native`; for tcp port 0, `bound.port` becomes the
// port the kernel chose.
template <typename Protocol>
authrpc::Result<typename Protocol::acceptor> listen(const asio::any_io_executor& ex,
                                                    const typename Protocol::endpoint& native,
                                                    authrpc::Endpoint& bound) {
  std::error_code ec;
  typename Protocol::acceptor acceptor(ex);
  acceptor.open(native.protocol(), ec);
  if constexpr (kIsTcp<Protocol>) {
    if (!ec) acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
  }
  if (!ec) acceptor.bind(native, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return authrpc::Status(ec, "floor listen on " + bound.to_string());
  if constexpr (kIsTcp<Protocol>) bound.port = acceptor.local_endpoint().port();
  return acceptor;
}

// The accept loop every floor server shares: `Derived::serve(socket)`, a
// coroutine, runs each accepted connection (TCP_NODELAY set, as authrpc
// sets it). Derived calls start() once its own members are ready; Base is
// the servers' interface (FloorServer).
template <typename Protocol, typename Derived, typename Base>
class AcceptLoop : public Base {
 public:
  AcceptLoop(typename Protocol::acceptor acceptor, authrpc::Endpoint bound)
      : acceptor_(std::move(acceptor)), bound_(std::move(bound)) {}
  ~AcceptLoop() override { close(); }

  authrpc::Endpoint endpoint() const override { return bound_; }

  void close() noexcept override {
    std::error_code ignored;
    if (acceptor_.is_open()) acceptor_.close(ignored);
  }

 protected:
  void start() { asio::co_spawn(acceptor_.get_executor(), accept_loop(), asio::detached); }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      std::error_code ec;
      auto socket = co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      if (ec) continue;
      set_no_delay(socket);
      asio::co_spawn(acceptor_.get_executor(), static_cast<Derived*>(this)->serve(std::move(socket)), asio::detached);
    }
  }

  typename Protocol::acceptor acceptor_;
  authrpc::Endpoint bound_;
};

// Starts a `Server<Protocol>` (constructed from the acceptor, the bound
// endpoint and `args`) for `endpoint`'s kind of socket.
template <template <typename> class Server, typename Base, typename... Args>
authrpc::Result<std::unique_ptr<Base>> start_listener(const asio::any_io_executor& ex,
                                                      const authrpc::Endpoint& endpoint,
                                                      Args&&... args) {
  authrpc::Endpoint bound = endpoint;
  if (endpoint.scheme == authrpc::Endpoint::Scheme::kUnix) {
    remove_stale_socket_file(endpoint);
    auto acceptor = listen<Local>(ex, unix_native(endpoint), bound);
    if (!acceptor.ok()) return acceptor.status();
    return std::unique_ptr<Base>(
        new Server<Local>(std::move(*acceptor), bound, std::forward<Args>(args)...));
  }
  auto native = tcp_native(endpoint);
  if (!native.ok()) return native.status();
  auto acceptor = listen<Tcp>(ex, *native, bound);
  if (!acceptor.ok()) return acceptor.status();
  return std::unique_ptr<Base>(
      new Server<Tcp>(std::move(*acceptor), bound, std::forward<Args>(args)...));
}

}  // namespace minibench::net
