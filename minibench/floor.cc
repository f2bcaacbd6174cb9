#include "minibench/floor.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <array>
#include <cerrno>
#include <sys/socket.h>

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

ssize_t send_nosignal(int fd, void* data, std::size_t n, int flags) {
  return ::send(fd, data, n, flags | MSG_NOSIGNAL);
}

// One non-blocking recv() or send() on `socket`: the bytes moved, or 0 with
// `ec` set (would_block when the socket has nothing or no room).
template <typename Socket, typename Call>
std::size_t try_io(Socket& socket, Call call, char* data, std::size_t n, std::error_code& ec) {
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
    set_no_delay(socket);
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
