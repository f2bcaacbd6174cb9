// What the readers of the configuration's "tokens" section share: the token
// service (server/token_service.cc) and the store types it opens
// (components/zookeeper/zk_store_factory.cc). Errors name the key as
// 'tokens.<key>' in the same words whichever module found them
// (docs/CONFIG.md). Not installed.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "authrpc/base/status.h"

namespace authrpc::security {

// kConfigError "'tokens<detail>", e.g. detail ".store.root' is required".
Status tokens_config_error(std::string_view detail);

// Reads o[key], if present, as whole milliseconds in [min_ms, max_ms] (ten years by default)
// into `out`; kConfigError naming 'tokens<section>.<key>' otherwise, where
// `section` is where `o` sits below "tokens" ("" or ".store").
Status read_tokens_ms(const nlohmann::json& o, std::string_view section, const char* key,
                      std::chrono::milliseconds& out, std::int64_t min_ms,
                      std::int64_t max_ms = 3650ll * 24 * 3600 * 1000);

}  // namespace authrpc::security
