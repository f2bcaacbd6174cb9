// Socket plumbing the floors share (floor.cc: the bare echo floors and
// floor/tls; gss_floor.cc: floor/gss; echo_floor.cc): authrpc endpoints as
// Asio endpoints, listening sockets, connecting, non-blocking I/O, OpenSSL
// on a socket, and the socket options authrpc sets, so that every floor's
// sockets are made and connected the way authrpc makes and connects its own.
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
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <span>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

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

// One non-blocking recv() or send() on `socket` (`call`: ::recv or
// send_nosignal): the bytes moved, or 0 with `ec` set (would_block when the
// socket has nothing or no room; a recv() at end of stream returns 0 with
// `ec` clear).
template <typename Socket, typename Call, typename Data>
std::size_t try_io(Socket& socket, Call call, Data* data, std::size_t n, std::error_code& ec) {
  for (;;) {
    const ssize_t r = call(socket.native_handle(), data, n, MSG_DONTWAIT);
    if (r >= 0) {
      ec.clear();
      return static_cast<std::size_t>(r);
    }
    if (errno == EINTR) continue;
    ec = (errno == EAGAIN || errno == EWOULDBLOCK) ? std::error_code(asio::error::would_block)
                                                   : std::error_code(errno, std::system_category());
    return 0;
  }
}

inline ssize_t send_nosignal(int fd, const void* data, std::size_t n, int flags) {
  return ::send(fd, data, n, flags | MSG_NOSIGNAL);
}

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

// Runs `op` (an SSL_* call on `ssl`, which reads and writes `socket`) until
// it succeeds, waiting on the socket as OpenSSL asks; its result (> 0), or
// ≤ 0 on failure.
template <typename Op>
asio::awaitable<int> drive(Tcp::socket& socket, SSL* ssl, Op op) {
  for (;;) {
    ERR_clear_error();
    const int r = op();
    if (r > 0) co_return r;
    const int err = SSL_get_error(ssl, r);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      ERR_clear_error();
      co_return r;
    }
    std::error_code ec;
    co_await socket.async_wait(err == SSL_ERROR_WANT_READ ? Tcp::socket::wait_read
                                                          : Tcp::socket::wait_write,
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return -1;
  }
}

// As authrpc's client connects (rpc/socket_transport.cc, connect_socket):
// connect() on a non-blocking socket, then a zero-timeout poll() — a
// loopback TCP handshake has usually completed inside connect() — and a
// wait through the event loop only if the socket is not writable yet; then
// TCP_NODELAY on the connected socket.
template <typename Protocol>
asio::awaitable<std::error_code> connect(typename Protocol::socket& socket,
                                         const typename Protocol::endpoint& peer) {
  std::error_code ec;
  socket.open(peer.protocol(), ec);
  if (!ec) socket.native_non_blocking(true, ec);
  if (ec) co_return ec;
  if (::connect(socket.native_handle(), peer.data(), static_cast<socklen_t>(peer.size())) != 0) {
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
    if (error != 0) co_return std::error_code(error, std::system_category());
  }
  set_no_delay(socket);
  co_return std::error_code();
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
// sets it) on the executor that accepted it. Derived calls start() once its
// own members are ready; Base is the servers' interface (FloorServer).
template <typename Protocol, typename Derived, typename Base>
class AcceptLoop : public Base {
 public:
  AcceptLoop(typename Protocol::acceptor acceptor, authrpc::Endpoint bound) : bound_(std::move(bound)) {
    acceptors_.push_back(std::move(acceptor));
  }
  ~AcceptLoop() override { close(); }

  authrpc::Endpoint endpoint() const override { return bound_; }

  void close() noexcept override {
    std::error_code ignored;
    for (auto& a : acceptors_) {
      if (a.is_open()) a.close(ignored);
    }
  }

 protected:
  // Starts accepting on the acceptor's executor and on each of `more`, each
  // through an acceptor of its own on the same listening socket (as
  // authrpc's IO threads share theirs).
  void start(std::span<const asio::any_io_executor> more = {}) {
    const int fd = acceptors_.front().native_handle();
    const auto protocol = acceptors_.front().local_endpoint().protocol();
    for (const auto& ex : more) {
      typename Protocol::acceptor shared(ex);
      std::error_code ec;
      const int copy = ::dup(fd);
      if (copy >= 0) shared.assign(protocol, copy, ec);
      if (copy < 0 || ec) {
        if (copy >= 0 && ec) ::close(copy);
        continue;
      }
      acceptors_.push_back(std::move(shared));
    }
    for (auto& a : acceptors_) asio::co_spawn(a.get_executor(), accept_loop(a), asio::detached);
  }

 private:
  asio::awaitable<void> accept_loop(typename Protocol::acceptor& acceptor) {
    for (;;) {
      std::error_code ec;
      auto socket = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) continue;
      set_no_delay(socket);
      asio::co_spawn(acceptor.get_executor(), static_cast<Derived*>(this)->serve(std::move(socket)), asio::detached);
    }
  }

  std::vector<typename Protocol::acceptor> acceptors_;  // filled before start() spawns
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
