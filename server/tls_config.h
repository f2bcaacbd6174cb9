// Reads the TLS part of the server's configuration file (docs/CONFIG.md):
// the "tls" object into a TLS context, and the "encryption" and
// "authentication" requirements. Called by server/server_config.cc.
#pragma once

#include <nlohmann/json.hpp>

#include "authrpc/base/status.h"
#include "authrpc/server/server.h"

namespace authrpc {

// Reads the configuration's "tls", "encryption" and "authentication" keys
// into `options`, building the TLS context. kConfigError naming the key on a
// bad value or an unreadable file.
Status apply_tls_config(const nlohmann::json& config, ServerOptions& options);

}  // namespace authrpc
