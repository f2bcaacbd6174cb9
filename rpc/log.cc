#include "rpc/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace authrpc {
namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARN";
    case LogLevel::kError: return "ERROR";
  }
  return "INFO";
}

}  // namespace

LogSink stderr_log_sink(LogLevel min_level) {
  return [min_level](LogLevel level, std::string_view message) {
    if (level < min_level) return;
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    std::string line = std::string(stamp) + "." + std::to_string(1000 + ms).substr(1) + "Z " +
                       level_name(level) + " " + std::string(message) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  };
}

LogSink null_log_sink() {
  return [](LogLevel, std::string_view) {};
}

}  // namespace authrpc
