// Logging seam: components report through a LogSink the application supplies.
// Messages never contain secrets (credentials, tokens, keys).
#pragma once

#include <functional>
#include <string_view>

namespace authrpc {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Writes "<UTC time> <LEVEL> <message>" lines to stderr for level ≥ min_level.
LogSink stderr_log_sink(LogLevel min_level = LogLevel::kInfo);
// Discards everything.
LogSink null_log_sink();

}  // namespace authrpc
