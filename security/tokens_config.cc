#include "authrpc/security/tokens_config.h"

#include <nlohmann/json.hpp>
#include <string>

namespace authrpc::security {

Status tokens_config_error(std::string_view detail) {
  return {Errc::kConfigError, "'tokens" + std::string(detail)};
}

Status read_tokens_ms(const nlohmann::json& o, std::string_view section, const char* key,
                      std::chrono::milliseconds& out, std::int64_t min_ms, std::int64_t max_ms) {
  if (!o.contains(key)) return {};
  const auto& v = o[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() < min_ms || v.get<std::int64_t>() > max_ms) {
    return tokens_config_error(std::string(section) + "." + key +
                               "' must be an integer number of milliseconds from " +
                               std::to_string(min_ms) + " to " + std::to_string(max_ms));
  }
  out = std::chrono::milliseconds(v.get<std::int64_t>());
  return {};
}

}  // namespace authrpc::security
