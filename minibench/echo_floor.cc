#include "minibench/echo_floor.h"

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <array>
#include <cstring>

#include "authrpc/base/cycle_clock.h"
#include "authrpc/security/tls_context.h"
#include "minibench/floor_sockets.h"

namespace minibench {
namespace {

using asio::redirect_error;
using asio::use_awaitable;
using authrpc::CycleClock;
using authrpc::Endpoint;
using authrpc::Errc;
using authrpc::Result;
using authrpc::Status;
using net::Local;
using net::SslPtr;
using net::Tcp;

constexpr std::size_t kLengthSize = 4;
// Each side's read buffer: as authrpc's FrameChannel's steady one.
constexpr std::size_t kBufferSize = 16 * 1024;

std::uint32_t read_length(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         std::uint32_t{b[3]};
}

void write_length(char* p, std::uint32_t n) {
  p[0] = static_cast<char>(n >> 24);
  p[1] = static_cast<char>(n >> 16);
  p[2] = static_cast<char>(n >> 8);
  p[3] = static_cast<char>(n);
}

// Bytes in and out of one plaintext socket. try_* never wait (would_block
// when they would); read() and write_rest() wait through the event loop.
// As authrpc's socket stream: a read that came back short means the socket
// is drained, so the next read waits at once instead of trying first.
template <typename Protocol>
class PlainIo {
 public:
  explicit PlainIo(typename Protocol::socket socket) : socket_(std::move(socket)) {
    std::error_code ignored;
    socket_.native_non_blocking(true, ignored);
  }

  std::size_t try_read(char* data, std::size_t n, std::error_code& ec) {
    if (drained_) {
      ec = asio::error::would_block;
      return 0;
    }
    const std::size_t got = net::try_io(socket_, ::recv, data, n, ec);
    if (!ec && got == 0) ec = asio::error::eof;
    drained_ = ec == asio::error::would_block || (!ec && got < n);
    return got;
  }

  asio::awaitable<std::size_t> read(char* data, std::size_t n, std::error_code& ec) {
    const std::size_t got =
        co_await socket_.async_read_some(asio::buffer(data, n), redirect_error(use_awaitable, ec));
    drained_ = got < n;
    co_return got;
  }

  // Nothing is buffered above the socket.
  bool input_pending() const noexcept { return false; }

  std::size_t try_write(const char* data, std::size_t n, std::error_code& ec) {
    return net::try_io(socket_, net::send_nosignal, data, n, ec);
  }

  asio::awaitable<void> write_rest(const char* data, std::size_t n, std::error_code& ec) {
    co_await asio::async_write(socket_, asio::buffer(data, n), redirect_error(use_awaitable, ec));
  }

  void close() noexcept {
    std::error_code ignored;
    socket_.close(ignored);
  }

 private:
  typename Protocol::socket socket_;
  bool drained_ = false;
};

// The same over OpenSSL on the socket (read-ahead and partial writes on, as
// the shared SSL_CTX sets them).
class TlsIo {
 public:
  TlsIo(Tcp::socket socket, SslPtr ssl) : socket_(std::move(socket)), ssl_(std::move(ssl)) {
    std::error_code ignored;
    socket_.non_blocking(true, ignored);
    SSL_set_fd(ssl_.get(), socket_.native_handle());
  }

  // Runs the client's handshake to its end: false if it failed.
  asio::awaitable<bool> handshake() {
    co_return co_await net::drive(socket_, ssl_.get(),
                                  [this] { return SSL_do_handshake(ssl_.get()); }) > 0;
  }

  std::size_t try_read(char* data, std::size_t n, std::error_code& ec) {
    ERR_clear_error();
    return moved(SSL_read(ssl_.get(), data, static_cast<int>(n)), ec);
  }

  asio::awaitable<std::size_t> read(char* data, std::size_t n, std::error_code& ec) {
    for (;;) {
      co_await wait(ec);
      if (ec) co_return 0;
      const std::size_t got = try_read(data, n, ec);
      if (ec != asio::error::would_block) co_return got;
    }
  }

  // Records read ahead, or plaintext decrypted but not returned yet.
  bool input_pending() const noexcept { return SSL_has_pending(ssl_.get()) == 1; }

  std::size_t try_write(const char* data, std::size_t n, std::error_code& ec) {
    ERR_clear_error();
    return moved(SSL_write(ssl_.get(), data, static_cast<int>(n)), ec);
  }

  asio::awaitable<void> write_rest(const char* data, std::size_t n, std::error_code& ec) {
    std::size_t done = 0;
    while (done < n) {
      co_await wait(ec);
      if (ec) co_return;
      done += try_write(data + done, n - done, ec);
      if (ec == asio::error::would_block) ec.clear();
      if (ec) co_return;
    }
  }

  void close() noexcept {
    std::error_code ignored;
    socket_.close(ignored);
  }

 private:
  // What an SSL_read or SSL_write that returned `r` moved: r bytes, or 0
  // with `ec` set (would_block when it only needs the socket).
  std::size_t moved(int r, std::error_code& ec) {
    if (r > 0) {
      ec.clear();
      return static_cast<std::size_t>(r);
    }
    if (wants_io(r, ec)) ec = asio::error::would_block;
    return 0;
  }

  // After an SSL call returned `r` ≤ 0: true if it only needs the socket
  // (want_read_ says which way); false with `ec` set otherwise.
  bool wants_io(int r, std::error_code& ec) {
    const int err = SSL_get_error(ssl_.get(), r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      want_read_ = err == SSL_ERROR_WANT_READ;
      return true;
    }
    ERR_clear_error();
    ec = err == SSL_ERROR_ZERO_RETURN ? std::error_code(asio::error::eof)
                                      : std::error_code(asio::error::connection_reset);
    return false;
  }

  asio::awaitable<void> wait(std::error_code& ec) {
    co_await socket_.async_wait(want_read_ ? Tcp::socket::wait_read : Tcp::socket::wait_write,
                                redirect_error(use_awaitable, ec));
  }

  Tcp::socket socket_;
  SslPtr ssl_;
  bool want_read_ = true;
};

// Writes `n` bytes: at once if the socket takes them, else through the loop.
template <typename Io>
asio::awaitable<void> write_all(Io& io, const char* data, std::size_t n, std::error_code& ec) {
  const std::size_t sent = io.try_write(data, n, ec);
  if (ec == asio::error::would_block || (!ec && sent < n)) {
    ec.clear();
    co_await io.write_rest(data + sent, n - sent, ec);
  }
}

// One server connection: answers every whole message read, in one write.
template <typename Io>
asio::awaitable<void> serve_echo(Io io) {
  std::array<char, kBufferSize> in;
  std::array<char, kBufferSize> out;  // an answer is never longer than its message
  std::size_t begin = 0, end = 0, out_size = 0;
  std::error_code ec;
  for (;;) {
    if (end == in.size()) {  // a message split at the end: move it to the front
      std::memmove(in.data(), in.data() + begin, end - begin);
      end -= begin;
      begin = 0;
    }
    std::size_t n = io.try_read(in.data() + end, in.size() - end, ec);
    if (ec == asio::error::would_block) n = co_await io.read(in.data() + end, in.size() - end, ec);
    if (ec) break;
    end += n;
    bool bad = false;
    while (end - begin >= kLengthSize) {
      const std::uint32_t length = read_length(in.data() + begin);
      if (length > in.size() - kLengthSize) {
        bad = true;  // cannot be a floor client's message
        break;
      }
      if (end - begin < kLengthSize + length) break;
      const std::uint32_t answer = std::min<std::uint32_t>(length, kEchoReplySize - kLengthSize);
      write_length(out.data() + out_size, answer);
      std::memcpy(out.data() + out_size + kLengthSize, in.data() + begin + kLengthSize, answer);
      out_size += kLengthSize + answer;
      begin += kLengthSize + length;
    }
    if (bad) break;
    if (begin == end) begin = end = 0;
    if (io.input_pending()) continue;  // answer those in the same write
    if (out_size > 0) {
      co_await write_all(io, out.data(), out_size, ec);
      if (ec) break;
      out_size = 0;
    }
  }
  io.close();
}

template <typename Protocol>
class EchoFloorServer final : public net::AcceptLoop<Protocol, EchoFloorServer<Protocol>, FloorServer> {
 public:
  EchoFloorServer(typename Protocol::acceptor acceptor, Endpoint bound,
                  const std::vector<asio::any_io_executor>& executors,
                  std::shared_ptr<authrpc::security::TlsServerContext> tls)
      : net::AcceptLoop<Protocol, EchoFloorServer<Protocol>, FloorServer>(std::move(acceptor), std::move(bound)),
        tls_(std::move(tls)) {
    this->start(std::span(executors).subspan(1));  // executors[0] has the acceptor
  }
  // The acceptors close while tls_ is still there for an accept in flight.
  ~EchoFloorServer() override { this->close(); }

  asio::awaitable<void> serve(typename Protocol::socket socket) {
    if constexpr (net::kIsTcp<Protocol>) {
      if (tls_) {
        SslPtr ssl(SSL_new(tls_->native()));
        if (!ssl) return drop(std::move(socket));  // out of memory: the connection closes
        SSL_set_accept_state(ssl.get());  // the first read runs the handshake
        return serve_echo(TlsIo(std::move(socket), std::move(ssl)));
      }
    }
    return serve_echo(PlainIo<Protocol>(std::move(socket)));
  }

 private:
  static asio::awaitable<void> drop(typename Protocol::socket) { co_return; }

  std::shared_ptr<authrpc::security::TlsServerContext> tls_;
};

template <typename Io>
class EchoLoadOn final : public EchoLoad {
 public:
  explicit EchoLoadOn(Io io) : io_(std::move(io)) {
    write_length(request_.data(), kEchoRequestSize - kLengthSize);
    std::memset(request_.data() + kLengthSize, 'x', kEchoRequestSize - kLengthSize);
  }

  asio::awaitable<Status> run(std::size_t depth, Clock::time_point until,
                              std::vector<double>& us) override {
    if (depth == 0) co_return Status();
    // On the CycleClock, as authrpc's calls are timed (calls.cc).
    const auto block = until - Clock::now();
    const CycleClock::Ticks began = CycleClock::now();
    // The send times of the messages in flight, oldest first (a ring): the
    // server answers in order.
    std::vector<CycleClock::Ticks> sent(depth);
    std::size_t oldest = 0, in_flight = 0;
    std::vector<char> out(depth * kEchoRequestSize);
    std::size_t fresh = depth;  // messages queued in `out`, not yet sent
    for (std::size_t i = 0; i < depth; ++i) {
      std::memcpy(out.data() + i * kEchoRequestSize, request_.data(), kEchoRequestSize);
    }
    std::size_t begin = 0, end = 0;
    std::error_code ec;
    for (;;) {
      if (fresh > 0) {
        const CycleClock::Ticks now = CycleClock::now();
        for (std::size_t i = 0; i < fresh; ++i) sent[(oldest + in_flight + i) % depth] = now;
        in_flight += fresh;
        co_await write_all(io_, out.data(), fresh * kEchoRequestSize, ec);
        if (ec) co_return Status(ec, "echo floor: write");
        fresh = 0;
      }
      if (in_flight == 0) co_return Status();
      // Read until no answer is left buffered (TLS may hold decrypted
      // records): the messages they free leave together, in one write.
      do {
        if (end == in_.size()) {
          std::memmove(in_.data(), in_.data() + begin, end - begin);
          end -= begin;
          begin = 0;
        }
        std::size_t n = io_.try_read(in_.data() + end, in_.size() - end, ec);
        if (ec == asio::error::would_block) {
          n = co_await io_.read(in_.data() + end, in_.size() - end, ec);
        }
        if (ec == asio::error::eof) co_return Status(Errc::kConnectionClosed, "echo floor: closed");
        if (ec) co_return Status(ec, "echo floor: read");
        end += n;
        const CycleClock::Ticks now = CycleClock::now();
        const bool more = CycleClock::elapsed(began, now) < block;
        while (end - begin >= kLengthSize && in_flight > 0) {
          const std::uint32_t length = read_length(in_.data() + begin);
          if (length != kEchoReplySize - kLengthSize) {
            co_return Status(Errc::kDataLoss, "echo floor: an answer of the wrong size");
          }
          if (end - begin < kEchoReplySize) break;
          begin += kEchoReplySize;
          us.push_back(std::chrono::duration<double, std::micro>(
                           CycleClock::elapsed(sent[oldest], now))
                           .count());
          oldest = (oldest + 1) % depth;
          --in_flight;
          if (more) {
            std::memcpy(out.data() + fresh * kEchoRequestSize, request_.data(), kEchoRequestSize);
            ++fresh;
          }
        }
        if (begin == end) begin = end = 0;
      } while (io_.input_pending() && in_flight > 0);
    }
  }

 private:
  Io io_;
  std::array<char, kEchoRequestSize> request_;
  std::array<char, kBufferSize> in_;
};

}  // namespace

Result<std::unique_ptr<FloorServer>> start_echo_floor_server(
    const std::vector<asio::any_io_executor>& executors, const Endpoint& endpoint,
    std::shared_ptr<authrpc::security::TlsServerContext> tls) {
  if (executors.empty()) return Status(Errc::kInvalidArgument, "echo floor: no executor");
  if (tls && endpoint.scheme == Endpoint::Scheme::kUnix) {
    return Status(Errc::kInvalidArgument, "echo floor: TLS runs over tcp only");
  }
  return net::start_listener<EchoFloorServer, FloorServer>(executors.front(), endpoint, executors,
                                                           std::move(tls));
}

asio::awaitable<Result<std::unique_ptr<EchoLoad>>> EchoLoad::connect(
    asio::any_io_executor ex, Endpoint endpoint,
    std::shared_ptr<authrpc::security::TlsClientContext> tls) {
  if (endpoint.scheme == Endpoint::Scheme::kUnix) {
    Local::socket socket(ex);
    if (auto ec = co_await net::connect<Local>(socket, net::unix_native(endpoint))) {
      co_return Status(ec, "echo floor: connect " + endpoint.to_string());
    }
    co_return std::unique_ptr<EchoLoad>(new EchoLoadOn<PlainIo<Local>>(PlainIo<Local>(std::move(socket))));
  }
  auto native = net::tcp_native(endpoint);
  if (!native.ok()) co_return native.status();
  Tcp::socket socket(ex);
  if (auto ec = co_await net::connect<Tcp>(socket, *native)) {
    co_return Status(ec, "echo floor: connect " + endpoint.to_string());
  }
  if (!tls) {
    co_return std::unique_ptr<EchoLoad>(new EchoLoadOn<PlainIo<Tcp>>(PlainIo<Tcp>(std::move(socket))));
  }
  auto ssl = tls->new_ssl(endpoint.host, endpoint.host);
  if (!ssl.ok()) co_return ssl.status();
  SslPtr owned(ssl->release());
  SSL_set_connect_state(owned.get());
  TlsIo io(std::move(socket), std::move(owned));
  if (!co_await io.handshake()) {
    co_return Status(Errc::kUnavailable, "echo floor: TLS handshake with " + endpoint.to_string() +
                                             " failed");
  }
  co_return std::unique_ptr<EchoLoad>(new EchoLoadOn<TlsIo>(std::move(io)));
}

}  // namespace minibench
