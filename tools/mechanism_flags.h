// MechanismFlags: the command-line flags the registered client mechanisms
// declare (MechanismFlag, auth/mechanism_registry.h), gathered while a
// command line is parsed and turned into each chosen mechanism's options,
// so that the CLI maps flags without knowing any mechanism. Used by
// `authrpc call` (tools/authrpc_cli_main.cc) and `authrpc token`
// (tools/token_commands.cc).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/tools/flag_parser.h"

namespace authrpc::cli {

class MechanismFlags {
 public:
  // `registry` must outlive this.
  explicit MechanismFlags(const MechanismRegistry& registry) : registry_(registry) {}

  // Adds every flag some registered client declares ("--keytab") to
  // `parser`; their values land here (the last one given wins).
  void add_to(FlagParser& parser);
  const std::string* given(std::string_view flag) const;

  // Mechanism `name`'s options: options[option] = value for each flag it
  // declares that was given. Credentials-file flags are left to the caller
  // (credentials_files()).
  nlohmann::json options_for(std::string_view name) const;
  // The credentials-file flags `name` declares (MechanismFlag::credentials_file).
  std::vector<MechanismFlag> credentials_files(std::string_view name) const;

  // Help lines for every declared flag, in registration order: the flag and
  // its value's name, then the mechanisms that declare it and its help,
  // wrapped to 79 columns ("  --keytab F         kerberos, kerberos-sasl:
  // log in from ..."). What `authrpc call --help` lists, so that a
  // mechanism's flags appear there without the CLI naming it.
  std::string help() const;

 private:
  const MechanismRegistry& registry_;
  std::map<std::string, std::string, std::less<>> given_;
};

}  // namespace authrpc::cli
