// ServerFlags: the flags of every `authrpc` command that calls a server
// (call, describe, stats): --server, --auth, the mechanisms' own flags,
// TLS, --do-as, --timeout and --connect-timeout; then the connection they
// describe. Used by tools/authrpc_cli_main.cc and tools/proto_commands.cc.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/client/client.h"
#include "authrpc/tools/flag_parser.h"
#include "authrpc/tools/mechanism_flags.h"
#include "authrpc/tools/tls_flags.h"

namespace authrpc::cli {

class ServerFlags {
 public:
  ServerFlags();

  // Adds these flags to `parser`; their values land here.
  void add_to(FlagParser& parser);

  // Connects (blocking), or prints why not (a usage error points at
  // `help`) and gives the exit status.
  std::variant<std::unique_ptr<Client>, int> connect(const char* help);

  bool has_server() const { return !server_.empty(); }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const MechanismFlags& mechanism_flags() const { return mechanism_flags_; }

 private:
  const MechanismRegistry registry_;
  // --user, --keytab, --token-file, ...: what the mechanisms declare.
  MechanismFlags mechanism_flags_;
  TlsFlags tls_flags_;
  std::string server_, do_as_;
  std::vector<std::string> mechanisms_;
  std::chrono::milliseconds timeout_{0}, connect_timeout_{10'000};
};

}  // namespace authrpc::cli
