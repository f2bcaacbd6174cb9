#include "authrpc/rpc/tls_stream.h"

#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <cerrno>
#include <cstdint>
#include <climits>
#include <new>
#include <string>
#include <vector>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include "authrpc/rpc/deadline_queue.h"
#include "authrpc/rpc/tls_errors.h"
#include "authrpc/security/tls_context.h"

namespace authrpc {
namespace {

using asio::redirect_error;
using asio::use_awaitable;
using Tcp = asio::ip::tcp;

constexpr char kExporterLabel[] = "EXPORTER-Channel-Binding";
constexpr std::size_t kChannelBindingSize = 32;
// A large write is encrypted into records that are sent this many bytes at a
// time: one send() instead of four (one per 16 KiB record), with a buffer
// that stays small (it is kept per connection once used).
constexpr std::size_t kGatherBytes = 64 * 1024;

// The state of authrpc's socket BIO. OpenSSL's own socket BIO writes with
// write(), which raises SIGPIPE when the peer has gone (a library must not
// change the process's signal handling), and sends every 16 KiB record with
// a syscall of its own. This one sends with MSG_NOSIGNAL and, while
// TlsStream::pump_write() encrypts a large write, gathers the records and
// sends them together (see kGatherBytes).
struct SocketBio {
  int fd = -1;
  bool gather = false;    // records are kept in `pending`, not sent
  std::string pending;    // encrypted records not sent yet
  std::size_t sent = 0;   // bytes of `pending` already sent
  std::size_t unsent() const noexcept { return pending.size() - sent; }
};

SocketBio& bio_state(BIO* bio) { return *static_cast<SocketBio*>(BIO_get_data(bio)); }

int bio_write(BIO* bio, const char* data, int size) {
  SocketBio& state = bio_state(bio);
  BIO_clear_retry_flags(bio);
  // While records are waiting, anything OpenSSL writes (an alert, a key
  // update answered inside SSL_read) queues behind them: the order on the
  // wire is the order OpenSSL wrote in. The writer that left them flushes.
  if (state.gather || state.unsent() > 0) {
    state.pending.append(data, static_cast<std::size_t>(size));
    return size;
  }
  ssize_t n;
  do {
    n = ::send(state.fd, data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

int bio_read(BIO* bio, char* data, int size) {
  const int fd = bio_state(bio).fd;
  BIO_clear_retry_flags(bio);
  ssize_t n;
  do {
    n = ::recv(fd, data, static_cast<std::size_t>(size), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(bio);
  return static_cast<int>(n);
}

long bio_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int bio_create(BIO* bio) {
  BIO_set_data(bio, new (std::nothrow) SocketBio);
  if (BIO_get_data(bio) == nullptr) return 0;
  BIO_set_init(bio, 1);
  return 1;
}

int bio_destroy(BIO* bio) {
  if (bio == nullptr) return 0;
  delete static_cast<SocketBio*>(BIO_get_data(bio));
  BIO_set_data(bio, nullptr);
  return 1;
}

const BIO_METHOD* socket_bio_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "authrpc socket");
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    BIO_meth_set_destroy(m, bio_destroy);
    return m;
  }();
  return method;
}

// Attaches `fd` (not owned) to `ssl` for reading and writing.
bool attach_socket(SSL* ssl, int fd) {
  BIO* bio = BIO_new(socket_bio_method());
  if (bio == nullptr) return false;
  bio_state(bio).fd = fd;
  SSL_set_bio(ssl, bio, bio);
  return true;
}

// TLS over a TCP socket: owns the socket and the SSL. A server's handshake
// runs inside its first reads (SSL_read in accept state); a client's is done
// before the stream is made (wrap_tls_client).
class TlsStream final : public ByteStream {
 public:
  // `ssl` is owned from now on and attached to `socket`; `context` keeps its
  // SSL_CTX alive. A client's `ssl` has finished its handshake.
  TlsStream(Tcp::socket socket, std::string peer, SSL* ssl, std::shared_ptr<const void> context)
      : socket_(std::move(socket)), executor_(socket_.get_executor()), peer_(std::move(peer)),
        ssl_(ssl), context_(std::move(context)) {
    if (SSL_is_init_finished(ssl_)) on_handshake_done();
  }

  ~TlsStream() override { SSL_free(ssl_); }

  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer,
                                         std::error_code& ec) override {
    for (;;) {
      const std::size_t n = try_read_some(buffer, ec);
      if (ec != asio::error::would_block) co_return n;
      ec.clear();
      co_await socket_.async_wait(want_write_ ? Tcp::socket::wait_write : Tcp::socket::wait_read,
                                  redirect_error(use_awaitable, ec));
      if (ec) co_return 0;
    }
  }

  std::size_t try_read_some(asio::mutable_buffer buffer, std::error_code& ec) override {
    ec.clear();
    return ssl_read(buffer, ec);
  }

  void write_all(std::span<const asio::const_buffer> buffers, WriteCompletion& done) override {
    if (!handshake_done_) {
      // Nothing can leave inside TLS before the handshake is done (a write
      // then would wait for the peer's handshake forever).
      asio::post(executor_, [&done] { done.write_done(TlsErrc::kTlsRequired); });
      return;
    }
    plan_records(buffers);
    piece_ = 0;
    write_offset_ = 0;
    pump_write(done, true);
  }

  // Only with nothing inside OpenSSL that SSL_read would return without the
  // socket: no decrypted bytes, no record (or part of one) buffered, and no
  // read that waits for the socket to become writable.
  bool can_wait_readable() const noexcept override {
    return handshake_done_ && !want_write_ && socket_.is_open() && SSL_pending(ssl_) == 0 &&
           SSL_has_pending(ssl_) == 0;
  }

  void wait_readable(std::shared_ptr<ReadReady> done) override {
    socket_.async_wait(Tcp::socket::wait_read,
                       [done = std::move(done)](std::error_code ec) { done->readable(ec); });
  }

  void cancel_read() noexcept override {
    std::error_code ignored;
    socket_.cancel(ignored);
  }

  void shutdown_send() noexcept override {
    if (!handshake_done_) return;
    ERR_clear_error();
    SSL_shutdown(ssl_);  // close_notify; best effort on a non-blocking socket
    ERR_clear_error();
  }

  void close() noexcept override {
    if (!socket_.is_open()) return;
    if (handshake_done_ && (SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) == 0) {
      ERR_clear_error();
      SSL_shutdown(ssl_);
      ERR_clear_error();
    }
    std::error_code ignored;
    socket_.close(ignored);  // close-on-exec, never duplicated: the last reference
  }

  const std::string& peer_address() const override { return peer_; }
  Endpoint::Scheme scheme() const noexcept override { return Endpoint::Scheme::kTls; }
  const asio::any_io_executor& executor() const noexcept override { return executor_; }
  const TlsInfo* tls() const noexcept override { return handshake_done_ ? &info_ : nullptr; }

 private:
  std::size_t ssl_read(asio::mutable_buffer buffer, std::error_code& ec) {
    want_write_ = false;
    if (buffer.size() == 0) return 0;
    ERR_clear_error();
    const int size = static_cast<int>(std::min<std::size_t>(buffer.size(), INT_MAX));
    const int r = SSL_read(ssl_, buffer.data(), size);
    if (r > 0) {
      if (!handshake_done_) on_handshake_done();
      return static_cast<std::size_t>(r);
    }
    switch (SSL_get_error(ssl_, r)) {
      case SSL_ERROR_WANT_READ:
        if (!handshake_done_ && SSL_is_init_finished(ssl_)) on_handshake_done();
        ec = asio::error::would_block;
        return 0;
      case SSL_ERROR_WANT_WRITE:
        want_write_ = true;
        ec = asio::error::would_block;
        return 0;
      case SSL_ERROR_ZERO_RETURN:
        ec = asio::error::eof;
        return 0;
      case SSL_ERROR_SYSCALL:
        ec = errno != 0 ? std::error_code(errno, std::system_category())
                        : std::error_code(asio::error::eof);
        ERR_clear_error();
        return 0;
      default:
        ec = tls_handshake_status(ssl_, "TLS").code;
        return 0;
    }
  }

  // Cuts the gathered bytes into the pieces handed to SSL_write: runs of
  // whole 16 KiB records that lie inside one buffer are encrypted straight
  // from it; only a record that spans buffers (a frame header and the start
  // of its payload, a payload's tail and the next header) is copied together
  // first. So a large payload is never copied, and small frames still share
  // records instead of each making a tiny one.
  void plan_records(std::span<const asio::const_buffer> buffers) {
    constexpr std::size_t kRecord = 16384;  // TLS maximum plaintext per record
    struct Planned {
      const char* data;  // null: staged, at `staged_at` in write_buffer_
      std::size_t size;
      std::size_t staged_at;
    };
    pieces_.clear();
    write_buffer_.clear();
    if (buffers.size() == 1) {  // one buffer: nothing to join
      pieces_.push_back(buffers[0]);
      return;
    }
    std::vector<Planned> planned;
    std::size_t run_start = 0;
    bool in_run = false;
    for (const auto& b : buffers) {
      const char* p = static_cast<const char*>(b.data());
      std::size_t n = b.size();
      while (n > 0) {
        if (!in_run && n >= kRecord) {
          const std::size_t whole = n - n % kRecord;
          planned.push_back({p, whole, 0});
          p += whole;
          n -= whole;
          continue;
        }
        if (!in_run) {
          in_run = true;
          run_start = write_buffer_.size();
        }
        const std::size_t take = std::min(n, kRecord - (write_buffer_.size() - run_start));
        write_buffer_.append(p, take);
        p += take;
        n -= take;
        if (write_buffer_.size() - run_start == kRecord) {
          planned.push_back({nullptr, kRecord, run_start});
          in_run = false;
        }
      }
    }
    if (in_run) planned.push_back({nullptr, write_buffer_.size() - run_start, run_start});
    for (const auto& piece : planned) {
      pieces_.push_back(asio::const_buffer(
          piece.data != nullptr ? piece.data : write_buffer_.data() + piece.staged_at, piece.size));
    }
  }

  // Encrypts the pieces into gathered records and sends them kGatherBytes
  // at a time (and what is left at the end); waits for the socket when it
  // is full. Completion is never reported from inside write_all() itself
  // (`first`).
  void pump_write(WriteCompletion& done, bool first) {
    SocketBio& bio = bio_state(SSL_get_wbio(ssl_));
    for (;;) {
      const bool more = piece_ < pieces_.size();
      if (bio.unsent() > 0 && (!more || bio.unsent() >= kGatherBytes)) {
        std::error_code ec;
        if (send_gathered(bio, ec)) continue;
        if (ec) return complete_write(done, ec, first);
        socket_.async_wait(Tcp::socket::wait_write, [this, &done](std::error_code wait_ec) {
          // On error the stream may be gone: touch only `done`.
          if (wait_ec) return done.write_done(wait_ec);
          pump_write(done, false);
        });
        return;
      }
      if (!more) break;
      const auto& piece = pieces_[piece_];
      if (write_offset_ == piece.size()) {
        ++piece_;
        write_offset_ = 0;
        continue;
      }
      ERR_clear_error();
      const int size = static_cast<int>(std::min<std::size_t>(piece.size() - write_offset_, 1 << 30));
      bio.gather = true;
      const int r = SSL_write(ssl_, static_cast<const char*>(piece.data()) + write_offset_, size);
      bio.gather = false;
      if (r > 0) {
        write_offset_ += static_cast<std::size_t>(r);
        continue;
      }
      // The BIO takes every record while gathering, so OpenSSL only stops for
      // a fatal error (or, in theory, to read: then wait and try again).
      const int err = SSL_get_error(ssl_, r);
      if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
        socket_.async_wait(err == SSL_ERROR_WANT_WRITE ? Tcp::socket::wait_write
                                                       : Tcp::socket::wait_read,
                           [this, &done](std::error_code ec) {
                             if (ec) return done.write_done(ec);
                             pump_write(done, false);
                           });
        return;
      }
      std::error_code ec = err == SSL_ERROR_SYSCALL && errno != 0
                               ? std::error_code(errno, std::system_category())
                               : tls_handshake_status(ssl_, "TLS write").code;
      ERR_clear_error();
      complete_write(done, ec, first);
      return;
    }
    complete_write(done, {}, first);
  }

  // Sends gathered records: true once all have left; false with ec clear if
  // the socket is full, with ec set on an error.
  static bool send_gathered(SocketBio& bio, std::error_code& ec) {
    while (bio.unsent() > 0) {
      const ssize_t n = ::send(bio.fd, bio.pending.data() + bio.sent, bio.unsent(),
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        bio.sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
      ec = n < 0 ? std::error_code(errno, std::system_category())
                 : std::error_code(asio::error::connection_reset);
      return false;
    }
    bio.pending.clear();
    bio.sent = 0;
    return true;
  }

  void complete_write(WriteCompletion& done, std::error_code ec, bool first) {
    write_buffer_.clear();
    if (first) {
      asio::post(executor_, [&done, ec] { done.write_done(ec); });
    } else {
      done.write_done(ec);
    }
  }

  void on_handshake_done() {
    handshake_done_ = true;
    info_.version = SSL_get_version(ssl_);
    info_.cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(ssl_));
    info_.resumed = SSL_session_reused(ssl_) == 1;
    unsigned char binding[kChannelBindingSize];
    if (SSL_export_keying_material(ssl_, binding, sizeof binding, kExporterLabel,
                                   sizeof kExporterLabel - 1, nullptr, 0, 0) == 1) {
      info_.channel_binding.assign(reinterpret_cast<const char*>(binding), sizeof binding);
    }
    X509* peer = SSL_get0_peer_certificate(ssl_);
    if (peer != nullptr && SSL_get_verify_result(ssl_) == X509_V_OK) {
      unsigned char* der = nullptr;
      const int len = i2d_X509(peer, &der);
      if (len > 0) info_.peer_certificate.assign(reinterpret_cast<const char*>(der), len);
      OPENSSL_free(der);
    }
    ERR_clear_error();
  }

  Tcp::socket socket_;
  asio::any_io_executor executor_;
  std::string peer_;
  SSL* ssl_;
  std::shared_ptr<const void> context_;  // keeps the SSL_CTX alive
  bool handshake_done_ = false;
  bool want_write_ = false;  // the last SSL_read needs the socket writable
  TlsInfo info_;
  std::vector<asio::const_buffer> pieces_;  // the current write, see plan_records()
  std::size_t piece_ = 0;
  std::size_t write_offset_ = 0;  // within pieces_[piece_]
  std::string write_buffer_;      // records copied together from several buffers
};

// The TCP socket of `tcp`, moved out and made non-blocking for OpenSSL's
// reads and writes (the BIO calls recv/send itself).
Result<Tcp::socket> take_tcp_socket(ByteStream& tcp) {
  Tcp::socket* socket = tcp.tcp_socket();
  if (socket == nullptr) return Status(Errc::kConfigError, "TLS over a stream that is not TCP");
  Tcp::socket taken(std::move(*socket));
  std::error_code ec;
  taken.non_blocking(true, ec);
  if (ec) return Status(ec, "TLS socket");
  return taken;
}

}  // namespace

Result<std::unique_ptr<ByteStream>> wrap_tls_server(
    std::unique_ptr<ByteStream> tcp, std::shared_ptr<security::TlsServerContext> context) {
  if (!context) return Status(Errc::kConfigError, "TLS server without a TLS context");
  std::string peer = tcp->peer_address();
  auto socket = take_tcp_socket(*tcp);
  if (!socket.ok()) return socket.status();
  SSL* ssl = SSL_new(context->native());
  if (ssl == nullptr || !attach_socket(ssl, socket->native_handle())) {
    SSL_free(ssl);
    security::drain_openssl_errors();
    return Status(TlsErrc::kHandshakeFailed, "TLS with " + peer + ": SSL_new");
  }
  SSL_set_accept_state(ssl);
  return std::unique_ptr<ByteStream>(
      new TlsStream(std::move(*socket), std::move(peer), ssl, std::move(context)));
}

asio::awaitable<Result<std::unique_ptr<ByteStream>>> wrap_tls_client(
    std::unique_ptr<ByteStream> tcp, const Endpoint& server,
    std::chrono::steady_clock::time_point deadline,
    std::shared_ptr<security::TlsClientContext> context) {
  if (!context) co_return Status(Errc::kConfigError, "TLS connect without a TLS context");
  std::string peer = tcp->peer_address();
  auto taken = take_tcp_socket(*tcp);
  if (!taken.ok()) co_return taken.status();
  Tcp::socket socket = std::move(*taken);
  SocketDeadline guard(socket);
  guard.start(socket.get_executor(), deadline);

  const std::string cache_key = server.host + ":" + std::to_string(server.port);
  auto made = context->new_ssl(server.host, cache_key);
  if (!made.ok()) co_return made.status();
  security::UniqueSsl owned = std::move(*made);
  SSL* ssl = owned.get();
  if (!attach_socket(ssl, socket.native_handle())) co_return Status(Errc::kInternal, "BIO_new");
  SSL_set_connect_state(ssl);
  for (;;) {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl);
    if (r == 1) break;
    const int err = SSL_get_error(ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      std::error_code ec;
      co_await socket.async_wait(err == SSL_ERROR_WANT_READ ? Tcp::socket::wait_read
                                                            : Tcp::socket::wait_write,
                                 redirect_error(use_awaitable, ec));
      if (guard.timed_out()) {
        co_return Status(Errc::kDeadlineExceeded,
                         "TLS handshake with " + server.to_string() + ": timed out");
      }
      if (ec) co_return Status(ec, "TLS handshake with " + server.to_string());
      continue;
    }
    if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN) {
      security::drain_openssl_errors();
      co_return Status(Errc::kConnectionClosed,
                       "TLS handshake with " + server.to_string() + ": connection closed by the server");
    }
    co_return tls_handshake_status(ssl, "TLS handshake with " + server.to_string());
  }
  guard.cancel();
  co_return std::unique_ptr<ByteStream>(
      new TlsStream(std::move(socket), std::move(peer), owned.release(), std::move(context)));
}

}  // namespace authrpc
