// DelegationTokenHost: what a server's token service (server/token_service.h)
// lends the server halves of the mechanisms that authenticate with its
// delegation tokens (traits().delegation_token), through
// MechanismRegistry::provide_delegation_tokens(). The seam through which
// `token`, `token-digest`, `token-scram` or an application's own token
// mechanism reach the SecretManager without the token service naming them.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "authrpc/security/secret_manager.h"

namespace authrpc {

// The token service's rules for sessions authenticated by its tokens (the
// server's "tokens" section, docs/CONFIG.md).
struct TokenServerOptions {
  // HELLOs stamped further than this from the server's clock are refused.
  std::chrono::milliseconds max_clock_skew{std::chrono::minutes(5)};
  // Accepted client proofs remembered (TokenReplayCache), in all and per token.
  std::size_t replay_cache_capacity = 1 << 17;
  std::size_t replay_cache_per_token = 1 << 13;
  // Over plaintext tcp:// the mechanism is refused (FAILED_PRECONDITION,
  // "PLAINTEXT") unless this is set; then only the challenge exchange is
  // accepted there. Calls on such a connection are not protected either.
  bool allow_plaintext = false;
  // Session tickets on plaintext tcp://
  // (auth/mechanisms/token/token_tickets.h): at most this many outstanding (0,
  // the default: none issued, every session is challenged), each valid for
  // session_ticket_lifetime. Not behind a proxy that hides client addresses
  // (docs/TOKENS.md, "Session tickets").
  std::size_t session_tickets = 0;
  std::chrono::milliseconds session_ticket_lifetime{std::chrono::minutes(2)};
  // If not empty: tokens presented for any other service are refused
  // (AUTHENTICATION_FAILED, "WRONG_SERVICE").
  std::vector<std::string> services;
};

struct DelegationTokenHost {
  // Passwords of the tokens the service issued (thread-safe; shared).
  std::shared_ptr<const security::SecretManager> secrets;
  TokenServerOptions options;
};

}  // namespace authrpc
