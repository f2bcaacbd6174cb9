// A connected, ordered byte stream: what the framing layer (FrameChannel)
// reads and writes, whatever carries it — a TCP or Unix socket
// (rpc/socket_transport.cc) or TLS over TCP (rpc/tls_stream.h, a wrapper
// made over a TCP stream). Transports (rpc/transport.h) make the socket ones.
//
// Threading: a ByteStream belongs to the executor it was created on and must
// only be used from it.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/buffer.hpp>
#include <asio/error.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "authrpc/rpc/endpoint.h"
#include "authrpc/rpc/unique_fd.h"

namespace authrpc {

// Receives the outcome of ByteStream::write_all(). Implemented by the writer
// (FrameChannel); it must stay alive until write_done() has been called.
class WriteCompletion {
 public:
  virtual void write_done(std::error_code ec) = 0;

 protected:
  ~WriteCompletion() = default;
};

// Told by ByteStream::wait_readable() that its stream may be read now (or
// that the wait ended: operation_aborted once the stream is closed). The
// wait holds it by shared_ptr, so the waiter lives until it is told, and
// nothing is kept alive by a wait the event loop destroys untold.
class ReadReady {
 public:
  virtual void readable(std::error_code ec) = 0;

 protected:
  ~ReadReady() = default;
};

// What a TLS stream knows once its handshake is done (rpc/tls_stream.h).
struct TlsInfo {
  std::string version;  // "TLSv1.3"
  std::string cipher;   // "TLS_AES_128_GCM_SHA256"
  bool resumed = false;
  // RFC 9266 tls-exporter: 32 bytes exported with label
  // "EXPORTER-Channel-Binding" and no context. Not secret from the two ends,
  // unique to this TLS connection.
  std::string channel_binding;
  // DER of the peer's leaf certificate, present only if it was verified
  // against the CA bundle (a server with client certificates on, a client).
  std::string peer_certificate;
};

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Reads at least one byte; 0 with ec set at end of stream or on error.
  // Tries the stream at once and waits only if nothing has arrived.
  virtual asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer,
                                                 std::error_code& ec) = 0;
  // Reads what has already arrived, without waiting: the bytes read (> 0);
  // or 0 with ec == asio::error::would_block if nothing is there yet (then
  // use read_some); or 0 with ec set at end of stream or on error. For loops
  // that expect input to be waiting (the rest of a large message) and would
  // rather not enter a coroutine. The default never has input.
  virtual std::size_t try_read_some(asio::mutable_buffer buffer, std::error_code& ec) {
    (void)buffer;
    ec = asio::error::would_block;
    return 0;
  }
  // Starts writing every byte of `buffers` (gathered); the buffers and the
  // span must stay valid until `done.write_done()` is called, on the
  // stream's executor and never from inside this call. One write at a time.
  // (A callback rather than a coroutine: the write path runs once per batch
  // of frames and a coroutine per write cost more than the write itself.)
  virtual void write_all(std::span<const asio::const_buffer> buffers, WriteCompletion& done) = 0;
  // Writes what the stream takes of `buffer` now, without waiting: the bytes
  // written (possibly fewer than asked, 0 with ec == would_block if none);
  // or 0 with ec set on error. Never while a write_all() is in progress.
  // Lets a writer finish a batch inline (no completion to post) when the
  // stream takes it whole, as plaintext sockets mostly do. The default
  // takes nothing: use write_all().
  virtual std::size_t try_write(asio::const_buffer buffer, std::error_code& ec) {
    (void)buffer;
    ec = asio::error::would_block;
    return 0;
  }
  // True if send_file() sends without copying through user space: plaintext
  // TCP and Unix sockets (sendfile(2)). TLS cannot (no kernel TLS here).
  virtual bool can_send_file() const noexcept { return false; }
  // Starts writing `length` bytes of file `fd` from `offset`, as write_all()
  // does (same rules; `fd` must stay open until done). A file shorter than
  // the region fails with asio::error::eof. Only if can_send_file().
  virtual void send_file(int fd, std::uint64_t offset, std::size_t length, WriteCompletion& done) {
    (void)fd, (void)offset, (void)length;
    asio::post(executor(), [&done] { done.write_done(asio::error::operation_not_supported); });
  }
  // Parking an idle reader (a server's quiet connection: docs/DESIGN.md,
  // "Idle connections park"), so that it waits with no coroutine
  // and no buffer. True if a read_some() now would wait for the socket to
  // become readable, with nothing inside the stream it could return first
  // (TLS: no decrypted bytes, no buffered record, not waiting to write):
  // then wait_readable() may stand in for that read. The default: never.
  virtual bool can_wait_readable() const noexcept { return false; }
  // Waits until the socket is readable (input, end of stream or an error to
  // read), or the stream is closed (operation_aborted), then calls
  // done->readable() on the executor, never from inside this call. No data
  // is read. One wait at a time, and never while a read_some() is pending.
  virtual void wait_readable(std::shared_ptr<ReadReady> done) {
    asio::post(executor(), [done = std::move(done)] {
      done->readable(asio::error::operation_not_supported);
    });
  }
  // Ends a pending read_some() at once with operation_aborted. Asio cancels
  // every operation on the socket, so only while no write is in progress.
  virtual void cancel_read() noexcept {}

  // Sends end-of-stream to the peer; reading stays possible.
  virtual void shutdown_send() noexcept = 0;
  // Ends the stream; pending reads and writes complete with operation_aborted.
  // Idempotent.
  virtual void close() noexcept = 0;
  // "127.0.0.1:51234", "[::1]:51234" or "unix:<path>" (or "unix" if unnamed).
  // Fixed for the stream's life (a reference, not a copy: it is read on
  // every accepted connection).
  virtual const std::string& peer_address() const = 0;
  virtual Endpoint::Scheme scheme() const noexcept = 0;
  virtual const asio::any_io_executor& executor() const noexcept = 0;
  // TLS parameters once the handshake is done; null for plaintext streams.
  virtual const TlsInfo* tls() const noexcept { return nullptr; }
  // Unix sockets only (else -1 / nothing): the socket's descriptor (for
  // SO_PEERCRED and for sending descriptors, rpc/shm_link.h), and the
  // descriptors that arrived with SCM_RIGHTS on the bytes read so far, oldest
  // first. A Unix stream that expects descriptors reads with recvmsg, so none
  // are lost, once expect_descriptors() was called: a client's when it asks
  // for shared memory (ShmLink::offer), a server's when it accepts that
  // (ShmLink::answer), each before the message that lets the peer send any.
  // Until then a Unix stream reads as a TCP one does — asio's read waits on
  // the socket's registration as it is, where a wait for readability costs
  // an epoll_ctl per wait — and the kernel closes any descriptor sent to it:
  // none reaches the process.
  virtual int native_unix_handle() const noexcept { return -1; }
  virtual std::vector<UniqueFd> take_received_fds() { return {}; }
  virtual void expect_descriptors() noexcept {}

  // The TCP socket under a plaintext TCP stream (null for any other), for
  // what makes a stream over it (TLS: rpc/tls_stream.h, rpc/tls_listener.h).
  // It may wait on the socket and peek at it; once it moves the socket out,
  // this stream is spent and may only be destroyed. A hook, not a wrapper
  // around this stream, so that TLS reads and writes reach OpenSSL and the
  // socket with no call and no copy in between (docs/PERFORMANCE.md,
  // "Measured costs behind the code").
  virtual asio::ip::tcp::socket* tcp_socket() noexcept { return nullptr; }

  // True for an accepted stream that cannot be read before its peer's first
  // byte has said what it carries (a tls:// listener's: TLS or plaintext,
  // rpc/tls_listener.h). Its owner then calls open() once, before any read,
  // and uses the stream open() returns from then on (null: this one). Until
  // then nothing can be written to it, and close() ends a pending open().
  virtual bool needs_open() const noexcept { return false; }
  virtual asio::awaitable<std::unique_ptr<ByteStream>> open(std::error_code& ec) {
    ec.clear();
    co_return nullptr;
  }
};

}  // namespace authrpc
