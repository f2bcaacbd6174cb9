// TlsFlags: the command-line flags of `authrpc call` and `authrpc token`
// that choose TLS and the security requirements (--tls, --ca FILE,
// --cert FILE, --key FILE, --tls-min-version 1.2|1.3, --encryption LEVEL,
// --authentication LEVEL), gathered while a command line is parsed and then
// applied to the ClientOptions. Part of the CLI program (docs/CLI.md), not
// of the client library.
#pragma once

#include <optional>
#include <string>

#include "authrpc/base/result.h"
#include "authrpc/client/client.h"
#include "authrpc/rpc/security_requirement.h"
#include "authrpc/tools/flag_parser.h"

namespace authrpc::cli {

struct TlsFlags {
  bool tls = false;
  std::string ca, cert, key, min_version;
  std::optional<SecurityRequirement> encryption;
  std::optional<SecurityRequirement> authentication;

  // Adds these flags to `parser`; their values land in this object.
  void add_to(FlagParser& parser);
  // Builds the TLS context and sets the requirements in `options`:
  // kInvalidArgument (a usage error) for flags that do not fit together,
  // the context's CONFIG_ERROR for a file it cannot read or use ("cannot
  // read CA file F: No such file or directory").
  Status apply(ClientOptions& options) const;
};

}  // namespace authrpc::cli
