#include "authrpc/rpc/tls_transport.h"

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
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
#include "authrpc/rpc/messages.h"
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

// Closes the socket if the deadline passes first (connect or handshake).
class SocketDeadline final : public DeadlineQueue::Entry {
 public:
  explicit SocketDeadline(Tcp::socket& socket) : socket_(socket) {}
  ~SocketDeadline() override { cancel(); }
  void start(const asio::any_io_executor& ex, std::chrono::steady_clock::time_point deadline) {
    if (deadline == std::chrono::steady_clock::time_point::max()) return;
    DeadlineQueue::of(ex).add(*this, deadline, ex);
  }
  bool timed_out() const noexcept { return timed_out_; }

 private:
  void expired() override {
    timed_out_ = true;
    std::error_code ignored;
    socket_.close(ignored);
  }
  Tcp::socket& socket_;
  bool timed_out_ = false;
};

// A TCP stream that is TLS (or, on a server accepting both, possibly
// plaintext once the first byte has been seen). Owns the socket and the SSL.
class TlsStream final : public ByteStream {
 public:
  enum class Mode {
    kSniff,    // server: nothing read yet
    kTls,      // TLS (handshake done, or running inside reads on a server)
    kPlain,    // server, optional policy: the client spoke plaintext
    kRefused,  // server, required policy: the client spoke plaintext
  };

  // Server side.
  TlsStream(Tcp::socket socket, std::string peer,
            std::shared_ptr<security::TlsServerContext> context, bool accept_plaintext)
      : socket_(std::move(socket)), executor_(socket_.get_executor()), peer_(std::move(peer)),
        server_context_(std::move(context)), accept_plaintext_(accept_plaintext) {}

  // Client side, after a completed handshake on `ssl` (owned from now on).
  TlsStream(Tcp::socket socket, std::string peer, SSL* ssl,
            std::shared_ptr<security::TlsClientContext> context)
      : socket_(std::move(socket)), executor_(socket_.get_executor()), peer_(std::move(peer)),
        ssl_(ssl), client_context_(std::move(context)), mode_(Mode::kTls) {
    on_handshake_done();
  }

  ~TlsStream() override {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }

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
    if (mode_ == Mode::kSniff && !sniff(ec)) return 0;
    switch (mode_) {
      case Mode::kTls: return ssl_read(buffer, ec);
      case Mode::kPlain: return plain_read(buffer, ec);
      case Mode::kRefused: ec = TlsErrc::kTlsRequired; return 0;
      case Mode::kSniff: break;
    }
    ec = asio::error::would_block;
    return 0;
  }

  void write_all(std::span<const asio::const_buffer> buffers, WriteCompletion& done) override {
    if (mode_ == Mode::kPlain) {
      asio::async_write(socket_, buffers,
                        [&done](std::error_code ec, std::size_t) { done.write_done(ec); });
      return;
    }
    if (mode_ != Mode::kTls || ssl_ == nullptr || !handshake_done_) {
      // Nothing may leave in plaintext before the client has shown TLS, and
      // nothing can leave inside TLS before the handshake is done (a write
      // then would wait for the peer's handshake forever).
      asio::post(executor_, [&done] { done.write_done(TlsErrc::kTlsRequired); });
      return;
    }
    plan_records(buffers);
    piece_ = 0;
    write_offset_ = 0;
    pump_write(done, true);
  }

  void shutdown_send() noexcept override {
    if (mode_ == Mode::kTls && ssl_ != nullptr && handshake_done_) {
      ERR_clear_error();
      SSL_shutdown(ssl_);  // close_notify; best effort on a non-blocking socket
      ERR_clear_error();
      return;
    }
    if (mode_ == Mode::kPlain) {
      std::error_code ignored;
      socket_.shutdown(Tcp::socket::shutdown_send, ignored);
    }
  }

  void close() noexcept override {
    if (!socket_.is_open()) return;
    if (ssl_ != nullptr && handshake_done_ && (SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) == 0) {
      ERR_clear_error();
      SSL_shutdown(ssl_);
      ERR_clear_error();
    }
    std::error_code ignored;
    socket_.shutdown(Tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  std::string peer_address() const override { return peer_; }
  Endpoint::Scheme scheme() const noexcept override {
    return mode_ == Mode::kPlain ? Endpoint::Scheme::kTcp : Endpoint::Scheme::kTls;
  }
  const asio::any_io_executor& executor() const noexcept override { return executor_; }
  const TlsInfo* tls() const noexcept override { return handshake_done_ ? &info_ : nullptr; }

 private:
  // Server: decides TLS or plaintext from the first byte. False with ec set
  // (would_block included) if there is nothing to read yet.
  bool sniff(std::error_code& ec) {
    unsigned char first = 0;
    ssize_t n;
    do {
      n = ::recv(socket_.native_handle(), &first, 1, MSG_PEEK | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      ec = (errno == EAGAIN || errno == EWOULDBLOCK) ? asio::error::would_block
                                                     : std::error_code(errno, std::system_category());
      return false;
    }
    if (n == 0) {
      ec = asio::error::eof;
      return false;
    }
    if (first == kTlsHandshakeRecordType) {
      ssl_ = SSL_new(server_context_->native());
      if (ssl_ == nullptr || !attach_socket(ssl_, socket_.native_handle())) {
        security::drain_openssl_errors();
        ec = TlsErrc::kHandshakeFailed;
        return false;
      }
      SSL_set_accept_state(ssl_);
      mode_ = Mode::kTls;
    } else if (accept_plaintext_) {
      mode_ = Mode::kPlain;
    } else {
      refuse_plaintext();
      ec = TlsErrc::kTlsRequired;
      return false;
    }
    return true;
  }

  // The only bytes a TLS-only listener ever sends in the clear: a fixed
  // ERROR frame so that a plaintext authrpc client reports why. It echoes
  // nothing the client sent and is sent before any of it is read.
  void refuse_plaintext() {
    mode_ = Mode::kRefused;
    std::string frame;
    wire::append_error(frame, static_cast<std::uint16_t>(Errc::kFailedPrecondition),
                       "this endpoint requires TLS (connect with tls://)");
    (void)::send(socket_.native_handle(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }

  std::size_t plain_read(asio::mutable_buffer buffer, std::error_code& ec) {
    for (;;) {
      const ssize_t n = ::recv(socket_.native_handle(), buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n > 0) return static_cast<std::size_t>(n);
      if (n == 0) {
        ec = buffer.size() == 0 ? std::error_code() : asio::error::eof;
        return 0;
      }
      if (errno == EINTR) continue;
      ec = (errno == EAGAIN || errno == EWOULDBLOCK) ? asio::error::would_block
                                                     : std::error_code(errno, std::system_category());
      return 0;
    }
  }

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
  SSL* ssl_ = nullptr;
  std::shared_ptr<security::TlsServerContext> server_context_;  // keeps the SSL_CTX alive
  std::shared_ptr<security::TlsClientContext> client_context_;
  bool accept_plaintext_ = false;
  Mode mode_ = Mode::kSniff;
  bool handshake_done_ = false;
  bool want_write_ = false;  // the last SSL_read needs the socket writable
  TlsInfo info_;
  std::vector<asio::const_buffer> pieces_;  // the current write, see plan_records()
  std::size_t piece_ = 0;
  std::size_t write_offset_ = 0;  // within pieces_[piece_]
  std::string write_buffer_;      // records copied together from several buffers
};

class TlsListener final : public Listener {
 public:
  TlsListener(Tcp::acceptor acceptor, Endpoint bound,
              std::shared_ptr<security::TlsServerContext> context, bool accept_plaintext)
      : acceptor_(std::move(acceptor)), bound_(std::move(bound)), context_(std::move(context)),
        accept_plaintext_(accept_plaintext) {}
  ~TlsListener() override { close(); }

  asio::awaitable<Result<std::unique_ptr<ByteStream>>> accept() override {
    std::error_code ec;
    Tcp::endpoint peer;
    auto socket = co_await acceptor_.async_accept(peer, redirect_error(use_awaitable, ec));
    if (ec) co_return Status(ec, "accept on " + bound_.to_string());
    socket.set_option(Tcp::no_delay(true), ec);
    socket.non_blocking(true, ec);
    co_return std::unique_ptr<ByteStream>(
        new TlsStream(std::move(socket), format_tcp_peer(peer), context_, accept_plaintext_));
  }

  void close() noexcept override {
    std::error_code ignored;
    if (acceptor_.is_open()) acceptor_.close(ignored);
  }

  Endpoint local_endpoint() const override { return bound_; }

  Result<std::unique_ptr<Listener>> share_with(asio::io_context& io) override {
    const int fd = ::dup(acceptor_.native_handle());
    if (fd < 0) return Status(std::error_code(errno, std::system_category()), "dup listener");
    Tcp::acceptor acceptor(io);
    std::error_code ec;
    acceptor.assign(acceptor_.local_endpoint(ec).protocol(), fd, ec);
    if (ec) {
      ::close(fd);
      return Status(ec, "share listener");
    }
    return std::unique_ptr<Listener>(
        new TlsListener(std::move(acceptor), bound_, context_, accept_plaintext_));
  }

 private:
  Tcp::acceptor acceptor_;
  Endpoint bound_;
  std::shared_ptr<security::TlsServerContext> context_;
  bool accept_plaintext_;
};

}  // namespace

Result<std::unique_ptr<Listener>> listen_tls(asio::io_context& io, const Endpoint& endpoint,
                                             const ListenOptions& options,
                                             std::shared_ptr<security::TlsServerContext> context,
                                             bool accept_plaintext) {
  if (!context) return Status(Errc::kConfigError, "TLS endpoint " + endpoint.to_string() + " without a TLS context");
  Endpoint bound;
  auto acceptor = listen_tcp(io, endpoint, options, bound);
  if (!acceptor.ok()) return acceptor.status();
  return std::unique_ptr<Listener>(
      new TlsListener(std::move(*acceptor), bound, std::move(context), accept_plaintext));
}

asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect_tls(
    asio::any_io_executor ex, const Endpoint& endpoint,
    std::chrono::steady_clock::time_point deadline,
    std::shared_ptr<security::TlsClientContext> context) {
  if (!context) co_return Status(Errc::kConfigError, "TLS connect without a TLS context");
  Tcp::socket socket(ex);
  SocketDeadline guard(socket);
  guard.start(ex, deadline);
  std::error_code ec;
  const auto address = asio::ip::make_address(endpoint.host, ec);
  if (!ec) {
    co_await socket.async_connect(Tcp::endpoint(address, endpoint.port),
                                  redirect_error(use_awaitable, ec));
  } else {
    ec.clear();
    Tcp::resolver resolver(ex);
    auto results = co_await resolver.async_resolve(endpoint.host, std::to_string(endpoint.port),
                                                   redirect_error(use_awaitable, ec));
    if (ec) co_return Status(ec, "resolve " + endpoint.host);
    co_await asio::async_connect(socket, results, redirect_error(use_awaitable, ec));
  }
  if (guard.timed_out()) {
    co_return Status(Errc::kDeadlineExceeded, "connect " + endpoint.to_string() + ": timed out");
  }
  if (ec) co_return Status(ec, "connect " + endpoint.to_string());
  socket.set_option(Tcp::no_delay(true), ec);
  socket.non_blocking(true, ec);

  const std::string cache_key = endpoint.host + ":" + std::to_string(endpoint.port);
  auto made = context->new_ssl(endpoint.host, cache_key);
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
      co_await socket.async_wait(err == SSL_ERROR_WANT_READ ? Tcp::socket::wait_read
                                                            : Tcp::socket::wait_write,
                                 redirect_error(use_awaitable, ec));
      if (guard.timed_out()) {
        co_return Status(Errc::kDeadlineExceeded,
                         "TLS handshake with " + endpoint.to_string() + ": timed out");
      }
      if (ec) co_return Status(ec, "TLS handshake with " + endpoint.to_string());
      continue;
    }
    if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN) {
      security::drain_openssl_errors();
      co_return Status(Errc::kConnectionClosed,
                       "TLS handshake with " + endpoint.to_string() + ": connection closed by the server");
    }
    co_return tls_handshake_status(ssl, "TLS handshake with " + endpoint.to_string());
  }
  guard.cancel();
  std::string peer = endpoint.to_string();
  co_return std::unique_ptr<ByteStream>(
      new TlsStream(std::move(socket), std::move(peer), owned.release(), std::move(context)));
}

}  // namespace authrpc
