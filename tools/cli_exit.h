// The exit statuses of the command-line tools (authrpc, authrpc-server) and
// how their failures are printed, defined once so that every subcommand
// agrees (README "The binaries", docs/CLI.md). Called by
// tools/authrpc_cli_main.cc and tools/token_commands.cc; authrpc-server
// uses the same numbers for the cases it has (usage, configuration, start).
#pragma once

#include <string_view>

#include "authrpc/base/status.h"

namespace authrpc::cli {

// A script can tell what to do from the number alone; the line on stderr
// says the same in words. The classes follow retry_advice(), except that
// PERMISSION_DENIED and usage errors get numbers of their own because the
// fix differs (ask for access; fix the command line).
// docs/CLI.md ("One cause, one answer") lists which causes land where.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,      // any other failure: NOT_FOUND, INVALID_ARGUMENT, PROTOCOL_ERROR
                         // (not an authrpc server, no TLS there), INTERNAL, ...
  kExitUsage = 2,        // the command line, or a configuration or TLS file it names, is wrong
  kExitAuth = 3,         // no, unreadable, refused or expired credentials: kinit, fetch a token
  kExitUnavailable = 4,  // the server cannot be reached or is busy now: retry later
  kExitPermission = 5,   // not allowed (authenticated, or by a socket file's permissions)
};

// The exit status for a failed Status (kExitOk for an OK one).
int exit_code_for(const Status& status);

// Prints "PROGRAM: CODE: message [advice]\n" on stderr, CODE being the
// wire name even for system errors (a refused connect is UNAVAILABLE), and
// returns exit_code_for(status).
int report_failure(std::string_view program, const Status& status);

// Prints "PROGRAM: USAGE: message (see HELP)\n" on stderr; returns kExitUsage.
int report_usage(std::string_view program, std::string_view message, std::string_view help);

}  // namespace authrpc::cli
