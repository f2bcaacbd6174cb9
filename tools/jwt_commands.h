// `authrpc jwt ...`: the command-line side of the `jwt` mechanism's access
// tokens (docs/JWT.md). `inspect` decodes a token read from a file or stdin
// and prints its header, its claims and its times, never its signature and
// without verifying anything, so that a user can see why a server refuses a
// token (its aud, iss, exp) with no IdP tooling at hand. The decoding is
// components/jwt/jwt_compact.h's, the one the server uses. Called by
// tools/authrpc_cli_main.cc.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"

namespace authrpc::cli {

// argv starts after "jwt". Exit status: tools/cli_exit.h.
int jwt_command(int argc, char** argv);

// What `authrpc jwt inspect` prints for `token` at `now`: a "not verified"
// line, the header and the claims as indented JSON (strings with control
// characters and everything outside printable ASCII escaped as \uXXXX), exp,
// nbf and iat in UTC with their distance from now, and the signature's
// length. INVALID_ARGUMENT naming what is not a JWT (not three parts, a
// part not base64url, header or payload not a JSON object).
Result<std::string> describe_jwt(std::string_view token, std::chrono::system_clock::time_point now);

}  // namespace authrpc::cli
