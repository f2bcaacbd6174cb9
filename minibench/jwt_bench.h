// minibench's own OAuth 2.0 issuer for the bearer-JWT rows, and the cold
// verification rows. A real client reconnecting presents the same access
// token until it nears its exp, so the session row (<method>+tls/tcp, the
// method being one that kRowLabels in main.cc marks as authenticating with
// an issued JWT) uses one token for every session: the server's
// verified-token cache is warm after the first. What a token the server has
// not seen costs — a signature check and the claim checks — is measured on
// its own, in this process, per algorithm: the jwt-verify/<alg> rows.
// Used by minibench/main.cc; docs/JWT.md quotes the figures.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "authrpc/base/result.h"
#include "minibench/plan.h"
#include "minibench/report.h"

namespace minibench {

// What minibench's tokens say, and what its server accepts.
inline constexpr const char* kBenchJwtIssuer = "https://minibench.invalid";
inline constexpr const char* kBenchJwtAudience = "minibench";

// An RSA-2048 signing key (RS256), its JWKS document and one access token
// (iss and aud above, sub "minibench", exp one hour ahead) as files in a
// private temporary directory, which the destructor removes. Made in the
// parent before the server child is forked: the child reads the JWKS file
// when it creates the server half.
class BenchJwtIssuer {
 public:
  static authrpc::Result<std::unique_ptr<BenchJwtIssuer>> make();
  ~BenchJwtIssuer();
  BenchJwtIssuer(const BenchJwtIssuer&) = delete;
  BenchJwtIssuer& operator=(const BenchJwtIssuer&) = delete;

  // The server half's options: {"issuer", "audience", "jwks_file"}.
  nlohmann::json server_options() const;
  // The same with the verified-token cache off ("cache_entries": 0), for
  // the cold session row.
  nlohmann::json cold_server_options() const;
  // The client half's options: {"token_file"}.
  nlohmann::json client_options() const;

 private:
  explicit BenchJwtIssuer(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// Rows jwt-verify/RS256, jwt-verify/PS256 (RSA-2048), jwt-verify/ES256
// (P-256) and jwt-verify/EdDSA (Ed25519): plan.warmup untimed, then plan.n
// timed JwtVerifier::verify_uncached calls — signature and claims, no cache
// — of one token per algorithm against a JWKS with the four keys, in this
// process (no network), interleaved in plan.blocks blocks (on
// plan.concurrency threads at once when > 1). Transport "in-process"; no
// floor and no target: the figure itself is the result.
asio::awaitable<authrpc::Status> run_jwt_verify(asio::any_io_executor ex, const BenchPlan& plan,
                                                Report& report);

}  // namespace minibench
