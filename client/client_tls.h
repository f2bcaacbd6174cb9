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
#include <optional>
#include <string>

#include "authrpc/client/client.h"
#include "authrpc/rpc/transport.h"

namespace authrpc {

// The encryption policy in force (ClientOptions::encryption or its default).
SecurityRequirement client_encryption_policy(const ClientOptions& options);

// kConfigError naming the conflict, or OK.
Status validate_client_policies(const ClientOptions& options);

// True if connect_stream() tries TLS for these options; false: it is a
// plain transport connect.
bool client_tries_tls(const ClientOptions& options);

asio::awaitable<Result<std::unique_ptr<ByteStream>>> connect_stream(
    asio::any_io_executor ex, const ClientOptions& options,
    std::chrono::steady_clock::time_point deadline);

// Command-line TLS options (`authrpc call`): --tls, --ca FILE, --cert FILE,
// --key FILE, --tls-min-version 1.2|1.3, --encryption POLICY,
// --authentication POLICY.
struct TlsFlags {
  bool tls = false;
  std::string ca, cert, key, min_version;
  std::optional<SecurityRequirement> encryption;
  std::optional<SecurityRequirement> authentication;

  // Consumes `arg` (and `next`, for flags with a value): how many arguments
  // were used, 0 if `arg` is not a TLS flag; *error on a bad value.
  int parse(const std::string& arg, const char* next, std::string* error);
  // Builds the TLS context and sets the policies in `options`.
  Status apply(ClientOptions& options) const;
};

}  // namespace authrpc
