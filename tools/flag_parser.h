// FlagParser: the command-line parser of authrpc, authrpc-server and
// minibench. A program lists its options (a flag, an option with a value and
// what to do with the value, the positional arguments it takes), then
// parse() walks argv once and either reports --help / -h or fails with one
// usage message of a fixed set: "unknown option --x", "--x needs a value",
// "--x: <what the value must be>", "unexpected argument 'x'" (an argument
// quoted there is escaped as for a log line). The program
// prints its own help page and reports the message with report_usage()
// (tools/cli_exit.h), so every program's usage error is one line. Why a
// parser of our own: docs/CLI.md ("Parsing the command line").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/base/result.h"

namespace authrpc::cli {

class FlagParser {
 public:
  // Checks and stores an option's value; a failed Status's message says
  // what the value must be, and parse() puts "--name: " before it.
  using OnValue = std::function<Status(std::string_view)>;
  enum class Parsed { kOk, kHelp };

  // An option without a value: sets *out.
  FlagParser& flag(std::string name, bool* out);
  // An option without a value that runs `on`.
  FlagParser& flag(std::string name, std::function<void()> on);
  // An option with a value (the next argument, whatever it starts with).
  FlagParser& value(std::string name, OnValue on);
  // An option whose value is kept as given (the last one wins).
  FlagParser& value(std::string name, std::string* out);
  // Arguments that are not options, in order ("-" is one). Without this,
  // any is "unexpected argument 'x'".
  FlagParser& positional(std::vector<std::string>* out);

  // kHelp as soon as --help or -h is seen; kInvalidArgument with the usage
  // message for the first bad argument. An option given twice is applied
  // twice. The first of two registrations of one name is the one used.
  Result<Parsed> parse(int argc, char** argv) const;

 private:
  struct Option {
    std::string name;
    bool takes_value;
    std::function<Status(std::string_view)> on;
  };
  const Option* find(std::string_view name) const;

  std::vector<Option> options_;
  std::vector<std::string>* positional_ = nullptr;
};

// For a program's main: parses argv. --help prints `help` on stdout (exit
// status 0); a bad argument prints report_usage(program, prefix + message,
// see)'s line (exit status 2). nullopt: the program goes on.
std::optional<int> parse_or_exit(const FlagParser& parser, int argc, char** argv, std::string_view help,
                                 std::string_view program, std::string_view see, std::string_view prefix = {});

// For a command that takes a subcommand first (authrpc, `authrpc token`,
// `authrpc jwt`): none prints `overview` on stderr (exit status 2); help,
// --help or -h prints it on stdout (exit status 0). nullopt: argv[0] is the
// subcommand to run.
std::optional<int> overview_or_exit(int argc, char** argv, std::string_view overview);

// For --version: prints "PROGRAM VERSION (commit COMMIT)" on stdout, the
// version and commit this build is of (base/metrics.h); returns 0.
int print_version(std::string_view program);

// Value checks, for FlagParser::value. Each failed Status says what the
// value must be ("a count from 1 to 1024", "on, off or both").

// Decimal digits only, from min to max.
FlagParser::OnValue count(std::size_t* out, std::size_t min, std::size_t max);
// Decimal digits with an optional K, M or G suffix (powers of 1024), from
// min to max bytes.
FlagParser::OnValue size(std::uint64_t* out, std::uint64_t min, std::uint64_t max);
// One of `choices`, named in the message in their order.
FlagParser::OnValue one_of(std::string* out, std::initializer_list<std::string_view> choices);
// parse_milliseconds (tools/cli_args.h).
FlagParser::OnValue milliseconds(std::chrono::milliseconds* out);
// A comma-separated list of non-empty names, duplicates dropped ("a,b,c").
FlagParser::OnValue list(std::vector<std::string>* out);

}  // namespace authrpc::cli
