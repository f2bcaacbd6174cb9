// Strict parsing of command-line values for the authrpc tools: numbers with
// nothing before or after them, inside a range. Called by
// tools/authrpc_cli_main.cc and tools/token_commands.cc.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace authrpc::cli {

// Milliseconds for --timeout and --connect-timeout: decimal digits only
// ("1500"), from 1 to 2^31 - 1 (about 24.8 days). nullopt for a sign,
// spaces, a suffix ("12abc", "5s"), 0 or an overflow: a deadline of zero or
// less would fail every call, and "no deadline" is said by leaving the
// option out.
std::optional<std::chrono::milliseconds> parse_milliseconds(std::string_view text);

}  // namespace authrpc::cli
