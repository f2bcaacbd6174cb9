// The bare floors: what a session or a call costs on a socket with no
// framework at all — no framing, no negotiation, no dispatch, no timers.
//
// Both halves run as Asio coroutines on a single-threaded io_context — the
// same event-loop machinery the authrpc server (one IO thread) and the
// benchmark's authrpc client run on — rather than as a blocking accept loop.
// The floor thereby pays the same epoll reactor and coroutine resumptions as
// authrpc does, and the ratio isolates what authrpc adds on top of "a socket
// on an Asio event loop". (A blocking loop would also save the epoll_wait per
// wake-up, which no event-driven server can; that is not a cost authrpc could
// remove.) Within that loop the floor is at least as lean as authrpc's
// socket path (rpc/socket_transport.cc): a read tries the socket before it
// waits, a write is one send() with no trip through the loop, and the
// sockets get the options authrpc sets (TCP_NODELAY); docs/PERFORMANCE.md,
// "What each floor does", lists its syscalls per session. Nothing here
// allocates per byte or arms a timer.
//
// floor/tls: what a TLS session costs with no framework — connect, a bare
// TLS handshake through OpenSSL on the socket (same certificates and the same
// per-process SSL_CTX settings as authrpc's TLS, security/tls_context.h, the
// context built once and reused, no resumption), a 1-byte echo, close.
//
// Threading: a FloorServer and everything it accepts live on the executor
// given to start(); FloorClient coroutines run on the executor they are given.
// run_floor_server() (`minibench floor-server URI...`, for a --server run's
// --floor-server) serves bare echo listeners on the given endpoints until
// SIGINT/SIGTERM; called by main.cc.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <memory>

#include "minibench/stats.h"
#include "authrpc/base/result.h"
#include "authrpc/rpc/endpoint.h"

namespace authrpc::security {
class TlsServerContext;
class TlsClientContext;
}  // namespace authrpc::security

namespace minibench {

struct Args;

// Echo listener: for each connection it reads whatever arrives and writes it
// back, until end of stream, then closes. It serves both floors: a session
// floor client sends 1 byte, reads it back and closes; a ping-pong client
// does the 1-byte exchange repeatedly on one connection.
class FloorServer {
 public:
  // Binds `endpoint` (tcp port 0: any free port; unix:@name: abstract) and
  // starts accepting on `ex`, which must be a single-threaded io_context's.
  static authrpc::Result<std::unique_ptr<FloorServer>> start(const asio::any_io_executor& ex,
                                                             const authrpc::Endpoint& endpoint);
  virtual ~FloorServer() = default;
  // The bound endpoint (the real port for tcp port 0).
  virtual authrpc::Endpoint endpoint() const = 0;
  // Stops accepting; open connections end when their peers close. Call on
  // the executor's thread, or after its io_context has stopped.
  virtual void close() noexcept = 0;
};

// A ping-pong connection to an echo server: 1 byte out, 1 byte back.
class PingPong {
 public:
  virtual ~PingPong() = default;
  // One round trip, timed from before the write to the reply.
  virtual asio::awaitable<authrpc::Result<Clock::duration>> round_trip() = 0;
};

// The client half of the floors, for one echo server's endpoint.
class FloorClient {
 public:
  // Resolves `endpoint` once, so that no name lookup lands inside a timing.
  static authrpc::Result<std::unique_ptr<FloorClient>> make(const authrpc::Endpoint& endpoint);
  virtual ~FloorClient() = default;
  // One floor session: connect + write 1 byte + read it back + close, timed
  // from before connect to the reply (the close is not timed).
  virtual asio::awaitable<authrpc::Result<Clock::duration>> session(asio::any_io_executor ex) = 0;
  virtual asio::awaitable<authrpc::Result<std::unique_ptr<PingPong>>> connect(
      asio::any_io_executor ex) = 0;
};

// A TLS echo listener on `endpoint` (tcp://127.0.0.1:0).
authrpc::Result<std::unique_ptr<FloorServer>> start_tls_floor_server(
    const asio::any_io_executor& ex, const authrpc::Endpoint& endpoint,
    std::shared_ptr<authrpc::security::TlsServerContext> context);

// The client half of floor/tls: one session per call (full handshake: give
// it a context without session resumption).
class TlsFloorClient {
 public:
  TlsFloorClient(authrpc::Endpoint endpoint, std::shared_ptr<authrpc::security::TlsClientContext> context)
      : endpoint_(std::move(endpoint)), context_(std::move(context)) {}
  asio::awaitable<authrpc::Result<Clock::duration>> session(asio::any_io_executor ex);

 private:
  authrpc::Endpoint endpoint_;
  std::shared_ptr<authrpc::security::TlsClientContext> context_;
};

int run_floor_server(const Args& args);

}  // namespace minibench
