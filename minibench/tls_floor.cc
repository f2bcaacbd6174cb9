#include "minibench/tls_floor.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "authrpc/security/tls_context.h"
#include "minibench/floor_sockets.h"

namespace minibench {
namespace {

using asio::redirect_error;
using asio::use_awaitable;
using authrpc::Endpoint;
using authrpc::Result;
using authrpc::Status;
using Tcp = asio::ip::tcp;

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

// Runs `op` (an SSL_* call) until it succeeds, waiting on the socket as
// OpenSSL asks; its result (> 0), or ≤ 0 on failure.
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
                               redirect_error(use_awaitable, ec));
    if (ec) co_return -1;
  }
}

class TlsEchoServer final : public net::AcceptLoop<Tcp, TlsEchoServer, FloorServer> {
 public:
  TlsEchoServer(Tcp::acceptor acceptor, Endpoint bound,
                std::shared_ptr<authrpc::security::TlsServerContext> context)
      : net::AcceptLoop<Tcp, TlsEchoServer, FloorServer>(std::move(acceptor), std::move(bound)),
        context_(std::move(context)) {
    start();
  }

  asio::awaitable<void> serve(Tcp::socket socket) {
    std::error_code ec;
    socket.non_blocking(true, ec);
    return echo(std::move(socket), context_);
  }

 private:
  static asio::awaitable<void> echo(Tcp::socket socket,
                                    std::shared_ptr<authrpc::security::TlsServerContext> context) {
    SslPtr ssl(SSL_new(context->native()));
    SSL_set_fd(ssl.get(), socket.native_handle());
    SSL_set_accept_state(ssl.get());
    char buffer[4096];
    for (;;) {
      const int n = co_await drive(socket, ssl.get(),
                                   [&] { return SSL_read(ssl.get(), buffer, sizeof buffer); });
      if (n <= 0) break;
      if (co_await drive(socket, ssl.get(), [&] { return SSL_write(ssl.get(), buffer, n); }) <= 0) {
        break;
      }
    }
    std::error_code ignored;
    socket.close(ignored);
  }

  std::shared_ptr<authrpc::security::TlsServerContext> context_;
};

}  // namespace

Result<std::unique_ptr<FloorServer>> start_tls_floor_server(
    const asio::any_io_executor& ex, const Endpoint& endpoint,
    std::shared_ptr<authrpc::security::TlsServerContext> context) {
  std::error_code ec;
  const Tcp::endpoint ep(asio::ip::make_address(endpoint.host, ec), endpoint.port);
  if (ec) return Status(ec, "floor/tls address " + endpoint.host);
  Tcp::acceptor acceptor(ex);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(1024, ec);
  if (ec) return Status(ec, "floor/tls listen");
  Endpoint bound = endpoint;
  bound.port = acceptor.local_endpoint().port();
  return std::unique_ptr<FloorServer>(
      new TlsEchoServer(std::move(acceptor), std::move(bound), std::move(context)));
}

asio::awaitable<Result<Clock::duration>> TlsFloorClient::session(asio::any_io_executor ex) {
  std::error_code ec;
  const Tcp::endpoint ep(asio::ip::make_address(endpoint_.host, ec), endpoint_.port);
  if (ec) co_return Status(ec, "floor/tls address");
  const auto start = Clock::now();
  Tcp::socket socket(ex);
  ec = co_await net::connect<Tcp>(socket, ep);
  if (ec) co_return Status(ec, "floor/tls connect");
  socket.set_option(Tcp::no_delay(true), ec);
  socket.non_blocking(true, ec);
  auto made = context_->new_ssl(endpoint_.host, endpoint_.host);
  if (!made.ok()) co_return made.status();
  SslPtr ssl(made->release());
  SSL_set_fd(ssl.get(), socket.native_handle());
  SSL_set_connect_state(ssl.get());
  if (co_await drive(socket, ssl.get(), [&] { return SSL_do_handshake(ssl.get()); }) <= 0) {
    co_return Status(authrpc::Errc::kUnavailable, "floor/tls handshake failed");
  }
  char byte = 'x';
  int r = co_await drive(socket, ssl.get(), [&] { return SSL_write(ssl.get(), &byte, 1); });
  if (r > 0) r = co_await drive(socket, ssl.get(), [&] { return SSL_read(ssl.get(), &byte, 1); });
  const auto elapsed = Clock::now() - start;
  if (r <= 0) co_return Status(authrpc::Errc::kUnavailable, "floor/tls echo failed");
  SSL_shutdown(ssl.get());  // close_notify, as authrpc's TLS stream sends on close
  socket.close(ec);
  co_return elapsed;
}

}  // namespace minibench
