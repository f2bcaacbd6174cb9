#include "authrpc/tools/cli_args.h"

#include <charconv>
#include <cstdint>
#include <limits>

namespace authrpc::cli {

std::optional<std::chrono::milliseconds> parse_milliseconds(std::string_view text) {
  // from_chars accepts a leading '-': refuse it (and '+', spaces) first.
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value < 1 || value > std::numeric_limits<std::int32_t>::max()) return std::nullopt;
  return std::chrono::milliseconds(value);
}

}  // namespace authrpc::cli
