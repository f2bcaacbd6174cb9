// floor/tls: what a TLS session costs with no framework — connect, a bare
// TLS handshake through OpenSSL on the socket (same certificates and the same
// per-process SSL_CTX settings as authrpc's TLS, security/tls_context.h, the
// context built once and reused, no resumption), a 1-byte echo, close. Like
// the other floors it runs as coroutines on a single-threaded Asio loop.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <memory>

#include "minibench/floor.h"
#include "minibench/stats.h"
#include "authrpc/base/result.h"
#include "authrpc/rpc/endpoint.h"

namespace authrpc::security {
class TlsServerContext;
class TlsClientContext;
}  // namespace authrpc::security

namespace minibench {

// A TLS echo listener on `endpoint` (tcp://127.0.0.1:0).
authrpc::Result<std::unique_ptr<FloorServer>> start_tls_floor_server(
    const asio::any_io_executor& ex, const authrpc::Endpoint& endpoint,
    std::shared_ptr<authrpc::security::TlsServerContext> context);

// The client half: one session per call (full handshake: give it a context
// without session resumption).
class TlsFloorClient {
 public:
  TlsFloorClient(authrpc::Endpoint endpoint, std::shared_ptr<authrpc::security::TlsClientContext> context)
      : endpoint_(std::move(endpoint)), context_(std::move(context)) {}
  asio::awaitable<authrpc::Result<Clock::duration>> session(asio::any_io_executor ex);

 private:
  authrpc::Endpoint endpoint_;
  std::shared_ptr<authrpc::security::TlsClientContext> context_;
};

}  // namespace minibench
