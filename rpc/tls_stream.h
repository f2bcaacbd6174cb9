// TLS as a wrapper over a TCP byte stream (as kj's TlsContext::wrapServer /
// wrapClient): the stream a tls:// endpoint carries once the TCP connection
// exists. OpenSSL works on the socket itself (taken out of the TCP stream
// through ByteStream::tcp_socket(); no BIO pair, no extra copy, no call in
// between: docs/PERFORMANCE.md, "Measured costs behind the code"). The contexts
// come from security/tls_context.h, one per process side, shared by every
// connection; a stream made here reports its TlsInfo (version, cipher,
// resumption, RFC 9266 channel binding, verified peer certificate).
//
// These serve TLS only. Telling a TLS client from a plaintext one on an
// accepted connection is the tls:// listener's job (rpc/tls_listener.h).
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <memory>

#include "authrpc/base/result.h"
#include "authrpc/rpc/byte_stream.h"
#include "authrpc/rpc/endpoint.h"

namespace authrpc {
namespace security {
class TlsServerContext;
class TlsClientContext;
}  // namespace security

// The server side of TLS over an accepted TCP stream (`tcp` is consumed).
// Returns at once: the handshake runs inside the stream's first reads, so
// that whatever bounds a slow peer's first bytes — the server's negotiation
// timeout, the pre-authentication budget — bounds the handshake too, with no
// timer of its own. Nothing can be written before the handshake is done.
// Fails (kConfigError) if `tcp` is not a TCP stream or there is no context.
Result<std::unique_ptr<ByteStream>> wrap_tls_server(
    std::unique_ptr<ByteStream> tcp, std::shared_ptr<security::TlsServerContext> context);

// The client side of TLS over a connected TCP stream (`tcp` is consumed):
// completes the handshake before it returns, verifying the server's
// certificate against the context's CA bundle and its SAN against
// `server.host` (also the SNI and, with the port, the session cache key).
// Fails with a TlsErrc (rpc/tls_errors.h), kConnectionClosed if the server
// closed during the handshake, or kDeadlineExceeded.
asio::awaitable<Result<std::unique_ptr<ByteStream>>> wrap_tls_client(
    std::unique_ptr<ByteStream> tcp, const Endpoint& server,
    std::chrono::steady_clock::time_point deadline,
    std::shared_ptr<security::TlsClientContext> context);

}  // namespace authrpc
