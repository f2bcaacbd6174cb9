// Where the client turns its endpoint and options into a connected stream:
// the socket transport's connect (rpc/transport.h), wrapped in TLS when the
// encryption policy tries it (rpc/tls_stream.h) — falling back to
// plaintext when the policy is `optional` and the server does not speak
// TLS. Called by Client::Connection::open() once the policies are checked
// (client/client_policy.h).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <chrono>
#include <memory>

#include "authrpc/client/client.h"
#include "authrpc/rpc/byte_stream.h"
#include "authrpc/security/base/result.h"

namespace authrpc {

// Connected by `deadline` (kDeadlineExceeded otherwise), TLS handshake
// included. `options` must outlive the returned awaitable.
asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect_stream(
    asio::any_io_executor ex, const ClientOptions& options,
    std::chrono::steady_clock::time_point deadline);

}  // namespace authrpc
