// TCP and Unix-domain socket transports (one template over the Asio protocol).
#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpc/transport.h"

namespace authrpc {
namespace {

using asio::redirect_error;
using asio::use_awaitable;
using Tcp = asio::ip::tcp;
using Local = asio::local::stream_protocol;

std::string format_tcp(const Tcp::endpoint& ep) {
  const auto addr = ep.address();
  return addr.is_v6() ? "[" + addr.to_string() + "]:" + std::to_string(ep.port())
                      : addr.to_string() + ":" + std::to_string(ep.port());
}

// Closes a connecting socket when its deadline passes. The timer is armed
// only if the connect is still pending after the current turn of the event
// loop (a Unix or loopback connect usually is not), which keeps a timer
// syscall off the session's critical path. Handlers may run after the guard
// is gone, so they check shared state before touching the socket.
class ConnectDeadline {
 public:
  template <typename Socket>
  ConnectDeadline(const asio::any_io_executor& ex, Socket& socket,
                  std::chrono::steady_clock::time_point deadline)
      : state_(std::make_shared<State>(ex)) {
    if (deadline == std::chrono::steady_clock::time_point::max()) return;
    asio::post(ex, [&socket, deadline, state = state_] {
      if (state->done) return;
      state->timer.expires_at(deadline);
      state->timer.async_wait([&socket, state](std::error_code ec) {
        if (ec || state->done) return;
        state->expired = true;
        std::error_code ignored;
        socket.close(ignored);
      });
    });
  }
  ~ConnectDeadline() {
    state_->done = true;
    state_->timer.cancel();
  }
  bool expired() const noexcept { return state_->expired; }

 private:
  struct State {
    explicit State(const asio::any_io_executor& ex) : timer(ex) {}
    asio::steady_timer timer;
    bool expired = false;
    bool done = false;
  };
  std::shared_ptr<State> state_;
};

template <typename Protocol>
class SocketStream final : public Stream {
 public:
  // `peer` is how peer_address() describes the other end; passing it in
  // saves a getpeername() per connection.
  SocketStream(typename Protocol::socket socket, std::string peer)
      : socket_(std::move(socket)), executor_(socket_.get_executor()), peer_(std::move(peer)) {}

  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer,
                                         std::error_code& ec) override {
    co_return co_await socket_.async_read_some(buffer, redirect_error(use_awaitable, ec));
  }

  void write_all(std::span<const asio::const_buffer> buffers, WriteCompletion& done) override {
    asio::async_write(socket_, buffers,
                      [&done](std::error_code ec, std::size_t) { done.write_done(ec); });
  }

  void shutdown_send() noexcept override {
    std::error_code ignored;
    socket_.shutdown(Protocol::socket::shutdown_send, ignored);
  }

  void close() noexcept override {
    std::error_code ignored;
    if (!socket_.is_open()) return;
    socket_.shutdown(Protocol::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  std::string peer_address() const override { return peer_; }

  Endpoint::Scheme scheme() const noexcept override {
    return std::is_same_v<Protocol, Tcp> ? Endpoint::Scheme::kTcp : Endpoint::Scheme::kUnix;
  }

  const asio::any_io_executor& executor() const noexcept override { return executor_; }

 private:
  typename Protocol::socket socket_;
  asio::any_io_executor executor_;
  std::string peer_;
};

// The outcome of a client connect: a Stream, or why not.
template <typename Protocol>
Result<std::unique_ptr<Stream>> connected(typename Protocol::socket socket,
                                          const ConnectDeadline& guard, std::error_code ec,
                                          const Endpoint& endpoint) {
  if (guard.expired()) {
    return Status(Errc::kDeadlineExceeded, "connect " + endpoint.to_string() + ": timed out");
  }
  if (ec) return Status(ec, "connect " + endpoint.to_string());
  if constexpr (std::is_same_v<Protocol, Tcp>) socket.set_option(Tcp::no_delay(true), ec);
  return std::unique_ptr<Stream>(new SocketStream<Protocol>(std::move(socket), endpoint.to_string()));
}

template <typename Protocol>
class SocketListener final : public Listener {
 public:
  SocketListener(typename Protocol::acceptor acceptor, Endpoint bound, bool owns_path)
      : acceptor_(std::move(acceptor)), bound_(std::move(bound)), owns_path_(owns_path) {}

  ~SocketListener() override { close(); }

  asio::awaitable<Result<std::unique_ptr<Stream>>> accept() override {
    std::error_code ec;
    typename Protocol::endpoint peer;
    auto socket = co_await acceptor_.async_accept(peer, redirect_error(use_awaitable, ec));
    if (ec) co_return Status(ec, "accept on " + bound_.to_string());
    std::string peer_name;
    if constexpr (std::is_same_v<Protocol, Tcp>) {
      socket.set_option(Tcp::no_delay(true), ec);
      peer_name = format_tcp(peer);
    } else {
      peer_name = bound_.to_string();  // Unix peers are unnamed: say where they came in
    }
    co_return std::unique_ptr<Stream>(new SocketStream<Protocol>(std::move(socket), std::move(peer_name)));
  }

  void close() noexcept override {
    std::error_code ignored;
    if (acceptor_.is_open()) acceptor_.close(ignored);
    if (owns_path_) {
      ::unlink(bound_.path.c_str());
      owns_path_ = false;
    }
  }

  Endpoint local_endpoint() const override { return bound_; }

  Result<std::unique_ptr<Listener>> share_with(asio::io_context& io) override {
    const int fd = ::dup(acceptor_.native_handle());
    if (fd < 0) return Status(std::error_code(errno, std::system_category()), "dup listener");
    typename Protocol::acceptor acceptor(io);
    std::error_code ec;
    acceptor.assign(acceptor_.local_endpoint(ec).protocol(), fd, ec);
    if (ec) {
      ::close(fd);
      return Status(ec, "share listener");
    }
    return std::unique_ptr<Listener>(new SocketListener(std::move(acceptor), bound_, false));
  }

 private:
  typename Protocol::acceptor acceptor_;
  Endpoint bound_;
  bool owns_path_;
};

class TcpTransport final : public Transport {
 public:
  Endpoint::Scheme scheme() const noexcept override { return Endpoint::Scheme::kTcp; }

  asio::awaitable<Result<std::unique_ptr<Stream>>> connect(
      asio::any_io_executor ex, const Endpoint& endpoint,
      std::chrono::steady_clock::time_point deadline) override {
    std::error_code ec;
    Tcp::socket socket(ex);
    ConnectDeadline guard(ex, socket, deadline);
    const auto address = asio::ip::make_address(endpoint.host, ec);
    if (!ec) {
      co_await socket.async_connect(Tcp::endpoint(address, endpoint.port),
                                    redirect_error(use_awaitable, ec));
    } else {
      Tcp::resolver resolver(ex);
      ec.clear();
      auto results = co_await resolver.async_resolve(
          endpoint.host, std::to_string(endpoint.port), redirect_error(use_awaitable, ec));
      if (ec) co_return Status(ec, "resolve " + endpoint.host);
      co_await asio::async_connect(socket, results, redirect_error(use_awaitable, ec));
    }
    co_return connected<Tcp>(std::move(socket), guard, ec, endpoint);
  }

  Result<std::unique_ptr<Listener>> listen(asio::io_context& io, const Endpoint& endpoint,
                                           const ListenOptions& options) override {
    std::error_code ec;
    auto address = asio::ip::make_address(endpoint.host, ec);
    if (ec) {
      Tcp::resolver resolver(io);
      auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
      if (ec || results.empty()) return Status(ec, "resolve " + endpoint.host);
      address = results.begin()->endpoint().address();
    }
    Tcp::acceptor acceptor(io);
    const Tcp::endpoint ep(address, endpoint.port);
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(options.backlog, ec);
    if (ec) return Status(ec, "listen on " + endpoint.to_string());
    Endpoint bound = endpoint;
    bound.port = acceptor.local_endpoint().port();
    return std::unique_ptr<Listener>(new SocketListener<Tcp>(std::move(acceptor), bound, false));
  }
};

class UnixTransport final : public Transport {
 public:
  Endpoint::Scheme scheme() const noexcept override { return Endpoint::Scheme::kUnix; }

  asio::awaitable<Result<std::unique_ptr<Stream>>> connect(
      asio::any_io_executor ex, const Endpoint& endpoint,
      std::chrono::steady_clock::time_point deadline) override {
    std::error_code ec;
    Local::socket socket(ex);
    ConnectDeadline guard(ex, socket, deadline);
    co_await socket.async_connect(native(endpoint), redirect_error(use_awaitable, ec));
    co_return connected<Local>(std::move(socket), guard, ec, endpoint);
  }

  Result<std::unique_ptr<Listener>> listen(asio::io_context& io, const Endpoint& endpoint,
                                           const ListenOptions& options) override {
    const bool abstract = endpoint.path.starts_with("@");
    if (!abstract && options.remove_stale_unix_socket) remove_if_stale(io, endpoint);
    std::error_code ec;
    Local::acceptor acceptor(io);
    const auto ep = native(endpoint);
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec && !abstract && options.unix_socket_mode != 0 &&
        ::chmod(endpoint.path.c_str(), options.unix_socket_mode) != 0) {
      ec = std::error_code(errno, std::system_category());
    }
    if (!ec) acceptor.listen(options.backlog, ec);
    if (ec) return Status(ec, "listen on " + endpoint.to_string());
    return std::unique_ptr<Listener>(
        new SocketListener<Local>(std::move(acceptor), endpoint, !abstract));
  }

 private:
  static Local::endpoint native(const Endpoint& endpoint) {
    if (endpoint.path.starts_with("@")) {
      return Local::endpoint(std::string(1, '\0') + endpoint.path.substr(1));
    }
    return Local::endpoint(endpoint.path);
  }

  // A socket file nobody accepts on is left over from a dead process.
  static void remove_if_stale(asio::io_context& io, const Endpoint& endpoint) {
    struct stat st {};
    if (::lstat(endpoint.path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return;
    Local::socket probe(io);
    std::error_code ec;
    probe.connect(native(endpoint), ec);
    if (ec == asio::error::connection_refused) ::unlink(endpoint.path.c_str());
  }
};

}  // namespace

Transport& transport_for(Endpoint::Scheme scheme) {
  static TcpTransport tcp;
  static UnixTransport unix_transport;
  if (scheme == Endpoint::Scheme::kUnix) return unix_transport;
  return tcp;
}

}  // namespace authrpc
