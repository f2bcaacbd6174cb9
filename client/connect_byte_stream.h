// Where the client turns its endpoint and options into a connected byte
// stream: the socket transport's connect (rpc/transport.h), wrapped in TLS
// when the encryption policy tries it (rpc/tls_stream.h) — falling back to
// plaintext when the policy is `optional` and the server does not speak
// TLS. Called by Client::Connection::open() once the policies are checked
// (client/client_policy.h).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <chrono>
#include <memory>

#include "authrpc/base/result.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/byte_stream.h"

namespace authrpc {

// Connected by `deadline` (kDeadlineExceeded otherwise), TLS handshake
// included. `options` must outlive the returned awaitable. A failure is as
// the transport reports it; see unreachable().
asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect_byte_stream(
    asio::any_io_executor ex, const ClientOptions& options,
    std::chrono::steady_clock::time_point deadline);

// A failed connect_byte_stream() as the client reports it: "cannot reach the
// server at ADDRESS: <why, in words>". Every way of not getting through
// (nothing listens, no such socket file, a host name that does not resolve,
// no route, a reset) is UNAVAILABLE: the client cannot tell a typo from a
// server that is not up yet (a stopped server removes its socket file), and
// the words say which it is. A connect the system forbids (a socket file's
// permissions) is PERMISSION_DENIED. Failures already classified where they
// arose (a timeout, TLS) and system errors not listed here pass unchanged,
// the last with the address in their message.
Status unreachable(const Status& failure, const ClientOptions& options);

}  // namespace authrpc
