// The client's side of TLS and the connection policies: checks the client's
// encryption and authentication policies against its endpoint, TLS context
// and mechanisms (at connect, before any byte is sent), and opens the stream
// the policy asks for — TLS, plaintext, or TLS falling back to plaintext
// when the policy is `optional` and the server does not speak TLS.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <chrono>
#include <memory>

#include "client/client.h"
#include "rpc/transport.h"

namespace authrpc {

// The encryption policy in force (ClientOptions::encryption or its default).
Policy client_encryption_policy(const ClientOptions& options);

// kConfigError naming the conflict, or OK.
Status validate_client_policies(const ClientOptions& options);

asio::awaitable<Result<std::unique_ptr<Stream>>> connect_stream(
    asio::any_io_executor ex, const ClientOptions& options,
    std::chrono::steady_clock::time_point deadline);

}  // namespace authrpc
