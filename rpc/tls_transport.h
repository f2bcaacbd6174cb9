// The TLS transport: TCP carrying TLS from the first byte (`tls://host:port`),
// through OpenSSL on the socket itself (no BIO pair, no extra copy). The
// contexts come from security/tls_context.h, one per process side, shared by
// every connection; a ByteStream made here reports its TlsInfo (version, cipher,
// resumption, RFC 9266 channel binding, verified peer certificate).
//
// Server side: the handshake runs inside the stream's first reads, so the
// server's negotiation timeout bounds it like any slow preamble. A listener
// that accepts plaintext too (encryption policy `optional`) looks at the
// first byte: a TLS handshake record (0x16) starts TLS, anything else is
// served in plaintext. A listener that requires TLS answers a plaintext
// client with one fixed ERROR frame and closes (docs/TLS.md).
//
// Client side: connect_tls() finishes the handshake (within the deadline)
// before it returns the stream.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <chrono>
#include <memory>

#include "authrpc/rpc/endpoint.h"
#include "authrpc/security/base/result.h"
#include "authrpc/rpc/transport.h"

namespace authrpc {
namespace security {
class TlsServerContext;
class TlsClientContext;
}  // namespace security

// The first byte of every TLS connection: a handshake record.
inline constexpr unsigned char kTlsHandshakeRecordType = 0x16;

// Listens on `endpoint`'s host and port (scheme tls or tcp).
Result<std::unique_ptr<Listener>> listen_tls(asio::io_context& io, const Endpoint& endpoint,
                                             const ListenOptions& options,
                                             std::shared_ptr<security::TlsServerContext> context,
                                             bool accept_plaintext);

// Connects to `endpoint`'s host and port and completes a TLS handshake,
// verifying the server's certificate against the context's CA bundle and its
// SAN against endpoint.host. Fails with a TlsErrc (rpc/tls_errors.h), a
// connect error, or kDeadlineExceeded.
asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect_tls(
    asio::any_io_executor ex, const Endpoint& endpoint,
    std::chrono::steady_clock::time_point deadline,
    std::shared_ptr<security::TlsClientContext> context);

}  // namespace authrpc
