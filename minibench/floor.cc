#include "minibench/floor.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <pthread.h>
#include <array>
#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include "authrpc/security/tls_context.h"
#include "minibench/args.h"
#include "minibench/floor_sockets.h"

namespace minibench {
namespace {

using asio::redirect_error;
using asio::use_awaitable;
using authrpc::Endpoint;
using authrpc::Result;
using authrpc::Status;
using net::drive;
using net::Local;
using net::send_nosignal;
using net::SslPtr;
using net::Tcp;
using net::try_io;

template <typename Protocol>
class EchoServer final : public net::AcceptLoop<Protocol, EchoServer<Protocol>, FloorServer> {
 public:
  EchoServer(typename Protocol::acceptor acceptor, Endpoint bound)
      : net::AcceptLoop<Protocol, EchoServer<Protocol>, FloorServer>(std::move(acceptor), std::move(bound)) {
    this->start();
  }

  // As authrpc's server connection (rpc/socket_transport.cc): a read tries
  // the socket first — an accepted socket usually holds the client's bytes
  // already — and waits through the event loop only if nothing is there; a
  // reply goes out with one send() and, unless the socket is full, no trip
  // through the event loop.
  static asio::awaitable<void> serve(typename Protocol::socket socket) {
    std::array<char, 4096> buffer;
    std::error_code ec;
    socket.native_non_blocking(true, ec);
    while (!ec) {
      std::size_t n = try_io(socket, ::recv, buffer.data(), buffer.size(), ec);
      if (ec == asio::error::would_block) {
        n = co_await socket.async_read_some(asio::buffer(buffer), redirect_error(use_awaitable, ec));
      } else if (!ec && n == 0) {
        ec = asio::error::eof;
      }
      if (ec) break;
      const std::size_t sent = try_io(socket, send_nosignal, buffer.data(), n, ec);
      if (ec == asio::error::would_block || (!ec && sent < n)) {
        co_await asio::async_write(socket, asio::buffer(buffer.data() + sent, n - sent),
                                   redirect_error(use_awaitable, ec));
      }
    }
    std::error_code ignored;
    socket.close(ignored);
  }
};

template <typename Protocol>
class BarePingPong final : public PingPong {
 public:
  explicit BarePingPong(typename Protocol::socket socket) : socket_(std::move(socket)) {}

  asio::awaitable<Result<Clock::duration>> round_trip() override {
    std::error_code ec;
    char byte = 'x';
    const auto start = Clock::now();
    if (try_io(socket_, send_nosignal, &byte, 1, ec) != 1 && !ec) ec = asio::error::would_block;
    if (!ec) {
      co_await asio::async_read(socket_, asio::buffer(&byte, 1), redirect_error(use_awaitable, ec));
    }
    const auto elapsed = Clock::now() - start;
    if (ec) co_return Status(ec, "floor ping-pong");
    co_return elapsed;
  }

 private:
  typename Protocol::socket socket_;
};

template <typename Protocol>
class BareClient final : public FloorClient {
 public:
  explicit BareClient(typename Protocol::endpoint endpoint) : endpoint_(std::move(endpoint)) {}

  asio::awaitable<Result<Clock::duration>> session(asio::any_io_executor ex) override {
    std::error_code ec;
    const auto start = Clock::now();
    typename Protocol::socket socket(ex);
    ec = co_await net::connect<Protocol>(socket, endpoint_);
    if (ec) co_return Status(ec, "floor connect");
    char byte = 'x';
    // As authrpc's client: the request leaves with one send(), no trip
    // through the event loop; the reply is waited for (it cannot be there).
    if (try_io(socket, send_nosignal, &byte, 1, ec) != 1 && !ec) ec = asio::error::would_block;
    if (!ec) {
      co_await asio::async_read(socket, asio::buffer(&byte, 1), redirect_error(use_awaitable, ec));
    }
    const auto elapsed = Clock::now() - start;
    if (ec) co_return Status(ec, "floor echo");
    socket.close(ec);
    co_return elapsed;
  }

  asio::awaitable<Result<std::unique_ptr<PingPong>>> connect(asio::any_io_executor ex) override {
    std::error_code ec;
    typename Protocol::socket socket(ex);
    ec = co_await net::connect<Protocol>(socket, endpoint_);
    if (ec) co_return Status(ec, "floor connect");
    co_return std::unique_ptr<PingPong>(new BarePingPong<Protocol>(std::move(socket)));
  }

 private:
  typename Protocol::endpoint endpoint_;
};

class TlsEchoServer final : public net::AcceptLoop<Tcp, TlsEchoServer, FloorServer> {
 public:
  TlsEchoServer(Tcp::acceptor acceptor, Endpoint bound,
                std::shared_ptr<authrpc::security::TlsServerContext> context)
      : net::AcceptLoop<Tcp, TlsEchoServer, FloorServer>(std::move(acceptor), std::move(bound)),
        context_(std::move(context)) {
    start();
  }

  asio::awaitable<void> serve(Tcp::socket socket) { return echo(std::move(socket), context_); }

 private:
  // Static, with its own reference to the context: a connection may outlive the server.
  static asio::awaitable<void> echo(Tcp::socket socket,
                                    std::shared_ptr<authrpc::security::TlsServerContext> context) {
    std::error_code ignored;
    socket.non_blocking(true, ignored);
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
    socket.close(ignored);
  }

  std::shared_ptr<authrpc::security::TlsServerContext> context_;
};

}  // namespace

Result<std::unique_ptr<FloorServer>> FloorServer::start(const asio::any_io_executor& ex,
                                                        const Endpoint& endpoint) {
  return net::start_listener<EchoServer, FloorServer>(ex, endpoint);
}

Result<std::unique_ptr<FloorClient>> FloorClient::make(const Endpoint& endpoint) {
  if (endpoint.scheme == Endpoint::Scheme::kUnix) {
    return std::unique_ptr<FloorClient>(new BareClient<Local>(net::unix_native(endpoint)));
  }
  auto native = net::tcp_native(endpoint);
  if (!native.ok()) return native.status();
  return std::unique_ptr<FloorClient>(new BareClient<Tcp>(*native));
}

Result<std::unique_ptr<FloorServer>> start_tls_floor_server(
    const asio::any_io_executor& ex, const Endpoint& endpoint,
    std::shared_ptr<authrpc::security::TlsServerContext> context) {
  auto native = net::tcp_native(endpoint);
  if (!native.ok()) return native.status();
  Endpoint bound = endpoint;
  auto acceptor = net::listen<Tcp>(ex, *native, bound);
  if (!acceptor.ok()) return acceptor.status();
  return std::unique_ptr<FloorServer>(
      new TlsEchoServer(std::move(*acceptor), std::move(bound), std::move(context)));
}

asio::awaitable<Result<Clock::duration>> TlsFloorClient::session(asio::any_io_executor ex) {
  std::error_code ec;
  const Tcp::endpoint ep(asio::ip::make_address(endpoint_.host, ec), endpoint_.port);
  if (ec) co_return Status(ec, "floor/tls address");
  const auto start = Clock::now();
  Tcp::socket socket(ex);
  ec = co_await net::connect<Tcp>(socket, ep);
  if (ec) co_return Status(ec, "floor/tls connect");
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

int run_floor_server(const Args& args) {
  std::vector<Endpoint> endpoints;
  for (const auto& uri : args.floor_listen) {
    auto ep = Endpoint::parse(uri);
    if (!ep.ok()) return usage_error(ep.status().to_string());
    endpoints.push_back(*ep);
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  asio::io_context io{1};
  std::vector<std::unique_ptr<FloorServer>> servers;
  for (const auto& ep : endpoints) {
    auto server = FloorServer::start(io.get_executor(), ep);
    if (!server.ok()) {
      std::fprintf(stderr, "minibench: %s\n", server.status().to_string().c_str());
      return 1;
    }
    std::printf("%s\n", (*server)->endpoint().to_string().c_str());
    servers.push_back(std::move(*server));
  }
  std::fflush(stdout);
  auto work = asio::make_work_guard(io);
  std::thread thread([&io] { io.run(); });
  int received = 0;
  sigwait(&signals, &received);
  io.stop();
  thread.join();
  return 0;
}

}  // namespace minibench
