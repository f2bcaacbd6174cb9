// `authrpc token ...`: the command-line side of delegation tokens
// (docs/TOKENS.md, README "Delegation tokens"). fetch gets a token over a
// Kerberos-authenticated connection and stores it in a credentials file
// (mode 0600); renew and cancel call the server's token service; print
// decodes the tokens of a credentials file without ever showing a password.
// Called by client/authrpc_cli_main.cc.
#pragma once

namespace authrpc::cli {

// argv starts after "token". Exit status: 0 ok, 1 failure, 2 usage.
int token_command(int argc, char** argv);

}  // namespace authrpc::cli
