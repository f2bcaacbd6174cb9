// Reading configuration documents (server configuration, ACL file): JSON
// with comments allowed, parsed from text or a file, with a syntax error
// reported as CONFIG_ERROR naming the origin, line and column. Called by
// server/server_config and auth/authz_policy at startup and on reload.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "authrpc/security/base/result.h"

namespace authrpc {

// Parses `text` (JSON, `//` and `/* */` comments allowed). `origin` names it
// in errors: "ORIGIN: syntax error at line L, column C: what was expected".
Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& origin);

// Reads the file at `path` and parses it as above.
Result<nlohmann::json> read_json_document(const std::string& path, const std::string& what);

}  // namespace authrpc
