// `authrpc token ...`: the command-line side of delegation tokens
// (docs/TOKENS.md §9, "The CLI, end to end"). fetch gets a token over a
// Kerberos-authenticated connection and stores it in a credentials file
// (mode 0600); renew and cancel call the server's token service; print
// decodes the tokens of a credentials file without ever showing a password.
// Called by tools/authrpc_cli_main.cc.
#pragma once

#include <string>

#include "authrpc/base/status.h"
#include "authrpc/security/token_errors.h"

namespace authrpc::cli {

// argv starts after "token". Exit status: tools/cli_exit.h.
int token_command(int argc, char** argv);

// A failure to read or write the credentials file at `path`, as the CLI
// reports it: an unreadable or missing file is UNAUTHENTICATED ("fetch a
// token"), not the UNAVAILABLE a store's I/O error means on a server.
Status credentials_status(const Status& status, const std::string& path);

}  // namespace authrpc::cli
