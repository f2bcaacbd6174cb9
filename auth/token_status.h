// Maps the delegation-token errors of security/ (TokenErrc) onto authrpc
// Status codes, with the retry advice that fits each (docs/TOKENS.md §4 has
// the table). Called by the `token` mechanism (at authentication) and by the
// token service (in token.* calls). The text is the TokenStatus's, which
// never holds a secret, prefixed with the TokenErrc name so that both ends
// can tell EXPIRED from CANCELLED from FORGED.
#pragma once

#include <string_view>

#include "security/base/status.h"
#include "security/token_errors.h"

namespace authrpc {

enum class TokenUse {
  kAuthentication,  // a token presented in HELLO
  kService,         // a token handed to token.renew / token.cancel, or a store failure there
};

// `prefix` (e.g. "token") starts the message: "token: EXPIRED: token 12 ...".
Status token_status(const security::TokenStatus& status, TokenUse use,
                    std::string_view prefix = "token");  // names: a message prefix

}  // namespace authrpc
