// Delegation tokens in minibench: fetch_token() gets the token the `token`
// rows authenticate with, over Kerberos from the server under test (as
// HADOOP-6637's benchmark did), and run_token_ops() measures issue, renew and
// cancel through the server's token service and its file store
// (--token-ops N). Called by minibench/main.cc before the session rows.
#pragma once

#include <cstddef>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/base/result.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/endpoint.h"

namespace minibench {

// The service name stamped into minibench's token: one token serves every
// transport (the client's `service` option names it).
inline constexpr const char* kBenchTokenService = "minibench";

// The mechanism a token is fetched over: the first registered one whose
// sessions may be issued tokens (auth/mechanism_traits.h); empty if none.
// Its client logs in from the bench realm (kerberos_client_options below).
std::string token_issuer(const authrpc::MechanismRegistry& registry);

// Connects to `server` (its endpoint and TLS context; mechanisms are
// replaced) with `kerberos_client_options`, calls token.get with the client
// itself as renewer, and writes the token to a credentials file at `path`.
// Returns the token mechanism's client options.
authrpc::Result<nlohmann::json> fetch_token(const authrpc::ClientOptions& server,
                                            const nlohmann::json& kerberos_client_options,
                                            const std::string& path);

// n × (token.get, token.renew, token.cancel) over one Kerberos connection,
// each timed; prints ops/s and p50/p99 per operation to `out`.
authrpc::Status run_token_ops(const authrpc::Endpoint& server,
                              const nlohmann::json& kerberos_client_options, std::size_t n,
                              std::FILE* out);

}  // namespace minibench
