#include "minibench/floor.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <array>

#include "minibench/floor_sockets.h"

namespace minibench {
namespace {

using asio::redirect_error;
using asio::use_awaitable;
using authrpc::Endpoint;
using authrpc::Result;
using authrpc::Status;
using net::Local;
using net::set_no_delay;
using net::Tcp;

template <typename Protocol>
class EchoServer final : public FloorServer {
 public:
  EchoServer(typename Protocol::acceptor acceptor, Endpoint bound)
      : acceptor_(std::move(acceptor)), bound_(std::move(bound)) {
    asio::co_spawn(acceptor_.get_executor(), accept_loop(), asio::detached);
  }
  ~EchoServer() override { close(); }

  Endpoint endpoint() const override { return bound_; }

  void close() noexcept override {
    std::error_code ignored;
    if (acceptor_.is_open()) acceptor_.close(ignored);
  }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      std::error_code ec;
      auto socket = co_await acceptor_.async_accept(redirect_error(use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      if (ec) continue;
      set_no_delay(socket);
      asio::co_spawn(acceptor_.get_executor(), echo(std::move(socket)), asio::detached);
    }
  }

  static asio::awaitable<void> echo(typename Protocol::socket socket) {
    std::array<char, 4096> buffer;
    for (;;) {
      std::error_code ec;
      const std::size_t n =
          co_await socket.async_read_some(asio::buffer(buffer), redirect_error(use_awaitable, ec));
      if (ec) break;
      co_await asio::async_write(socket, asio::buffer(buffer.data(), n),
                                 redirect_error(use_awaitable, ec));
      if (ec) break;
    }
    std::error_code ignored;
    socket.close(ignored);
  }

  typename Protocol::acceptor acceptor_;
  Endpoint bound_;
};

template <typename Protocol>
class BarePingPong final : public PingPong {
 public:
  explicit BarePingPong(typename Protocol::socket socket) : socket_(std::move(socket)) {}

  asio::awaitable<Result<Clock::duration>> round_trip() override {
    std::error_code ec;
    char byte = 'x';
    const auto start = Clock::now();
    co_await asio::async_write(socket_, asio::buffer(&byte, 1), redirect_error(use_awaitable, ec));
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
    co_await socket.async_connect(endpoint_, redirect_error(use_awaitable, ec));
    if (ec) co_return Status(ec, "floor connect");
    set_no_delay(socket);
    char byte = 'x';
    co_await asio::async_write(socket, asio::buffer(&byte, 1), redirect_error(use_awaitable, ec));
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
    co_await socket.async_connect(endpoint_, redirect_error(use_awaitable, ec));
    if (ec) co_return Status(ec, "floor connect");
    set_no_delay(socket);
    co_return std::unique_ptr<PingPong>(new BarePingPong<Protocol>(std::move(socket)));
  }

 private:
  typename Protocol::endpoint endpoint_;
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

}  // namespace minibench
