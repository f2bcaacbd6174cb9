#include "authrpc/rpc/tls_listener.h"

#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <cerrno>
#include <string>
#include <sys/socket.h>

#include "authrpc/rpc/messages.h"
#include "authrpc/rpc/tls_errors.h"
#include "authrpc/rpc/tls_stream.h"

namespace authrpc {
namespace {

using Tcp = asio::ip::tcp;

// A connection accepted on a tls:// listener, until its first byte says
// what it carries (open()). Owns the accepted TCP stream until then; never
// reads or writes application bytes itself.
class FirstByteStream final : public ByteStream {
 public:
  FirstByteStream(std::unique_ptr<ByteStream> tcp,
                  std::shared_ptr<security::TlsServerContext> context, PlaintextClients plaintext)
      : tcp_(std::move(tcp)), peer_(tcp_->peer_address()), executor_(tcp_->executor()),
        context_(std::move(context)), plaintext_(plaintext) {}

  bool needs_open() const noexcept override { return true; }

  asio::awaitable<std::unique_ptr<ByteStream>> open(std::error_code& ec) override {
    unsigned char first = 0;
    if (co_await peek_first_byte(first, ec)) {
      if (first == kTlsHandshakeRecordType) {
        auto tls = wrap_tls_server(std::move(tcp_), std::move(context_));
        if (tls.ok()) co_return std::move(*tls);
        ec = tls.code();
      } else if (plaintext_ == PlaintextClients::kServe) {
        co_return std::move(tcp_);  // the plaintext stream as it was accepted
      } else {
        refuse_plaintext();
        ec = TlsErrc::kTlsRequired;
      }
    }
    failed_ = ec;
    co_return nullptr;
  }

  // Before open() there is nothing to read; after a failed one, its error.
  asio::awaitable<std::size_t> read_some(asio::mutable_buffer, std::error_code& ec) override {
    ec = failed_ ? failed_ : std::error_code(asio::error::operation_not_supported);
    co_return 0;
  }

  void write_all(std::span<const asio::const_buffer>, WriteCompletion& done) override {
    asio::post(executor_, [&done] { done.write_done(TlsErrc::kTlsRequired); });
  }

  void shutdown_send() noexcept override {}
  void close() noexcept override {
    if (tcp_) tcp_->close();  // ends a pending open()
  }
  const std::string& peer_address() const override { return peer_; }
  Endpoint::Scheme scheme() const noexcept override { return Endpoint::Scheme::kTls; }
  const asio::any_io_executor& executor() const noexcept override { return executor_; }

 private:
  // Waits until the client's first byte has arrived and copies it to
  // `first`, leaving it on the socket. False with `ec` set at end of stream,
  // on an error, or once close() has closed the socket.
  asio::awaitable<bool> peek_first_byte(unsigned char& first, std::error_code& ec) {
    Tcp::socket* socket = tcp_->tcp_socket();
    if (socket == nullptr) {
      ec = asio::error::operation_not_supported;
      co_return false;
    }
    for (;;) {
      ssize_t n;
      do {
        n = ::recv(socket->native_handle(), &first, 1, MSG_PEEK | MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
      if (n > 0) {
        ec.clear();
        co_return true;
      }
      if (n == 0) {
        ec = asio::error::eof;
        co_return false;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        ec = std::error_code(errno, std::system_category());
        co_return false;
      }
      co_await socket->async_wait(Tcp::socket::wait_read, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return false;
    }
  }

  // The only bytes a TLS-only listener ever sends in the clear: a fixed
  // ERROR frame so that a plaintext authrpc client reports why. It echoes
  // nothing the client sent and is sent before any of it is read.
  void refuse_plaintext() {
    std::string frame;
    wire::append_error(frame, static_cast<std::uint16_t>(Errc::kFailedPrecondition),
                       "this endpoint requires TLS (connect with tls://)");
    std::error_code ignored;
    (void)tcp_->try_write(asio::buffer(frame), ignored);
  }

  std::unique_ptr<ByteStream> tcp_;  // moved out by a successful open()
  std::string peer_;
  asio::any_io_executor executor_;
  std::shared_ptr<security::TlsServerContext> context_;
  PlaintextClients plaintext_;
  std::error_code failed_;
};

class TlsListener final : public Listener {
 public:
  TlsListener(std::unique_ptr<Listener> tcp, std::shared_ptr<security::TlsServerContext> context,
              PlaintextClients plaintext)
      : tcp_(std::move(tcp)), context_(std::move(context)), plaintext_(plaintext) {}

  asio::awaitable<Result<std::unique_ptr<ByteStream>>> accept() override {
    auto accepted = co_await tcp_->accept();
    if (!accepted.ok()) co_return accepted.status();
    co_return std::unique_ptr<ByteStream>(
        new FirstByteStream(std::move(*accepted), context_, plaintext_));
  }

  void close() noexcept override { tcp_->close(); }
  Endpoint local_endpoint() const override { return tcp_->local_endpoint(); }

  Result<std::unique_ptr<Listener>> share_with(asio::io_context& io) override {
    auto shared = tcp_->share_with(io);
    if (!shared.ok()) return shared.status();
    return std::unique_ptr<Listener>(new TlsListener(std::move(*shared), context_, plaintext_));
  }

 private:
  std::unique_ptr<Listener> tcp_;
  std::shared_ptr<security::TlsServerContext> context_;
  PlaintextClients plaintext_;
};

}  // namespace

Result<std::unique_ptr<Listener>> wrap_tls_listener(
    std::unique_ptr<Listener> tcp, std::shared_ptr<security::TlsServerContext> context,
    PlaintextClients plaintext) {
  if (!context) {
    return Status(Errc::kConfigError,
                  "TLS endpoint " + tcp->local_endpoint().to_string() + " without a TLS context");
  }
  return std::unique_ptr<Listener>(new TlsListener(std::move(tcp), std::move(context), plaintext));
}

}  // namespace authrpc
