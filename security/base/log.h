// Logging seam: components report through a LogSink the application supplies.
// Messages never contain secrets (credentials, tokens, keys).
//
// Log lines carry strings a peer chose (user and mechanism names, token
// services, the message of a client's ERROR frame). A LogSink escapes every
// message with escape_for_log() before the application's function sees it,
// so that no caller can forget to and no peer can end a line, forge the next
// one or send terminal escapes to whoever reads the log (docs/AUTHZ.md,
// "Logs").
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace authrpc {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// `text` with everything that could break a log line or drive a terminal
// written as an escape: C0 controls, DEL and C1 controls, U+2028/U+2029 and
// the bidirectional overrides (U+202A–U+202E, U+2066–U+2069) as \n, \r, \t,
// \xHH or \u{HHHH}; bytes that are not UTF-8 as \xHH; a backslash as \\ (so
// that an escape in the output always came from the escaping). Printable
// ASCII and other valid UTF-8 pass unchanged.
std::string escape_for_log(std::string_view text);

// What components log through: the application's function, called with the
// escaped message. An empty LogSink drops everything. Copy a LogSink to
// share it; a function that calls another LogSink escapes twice.
class LogSink {
 public:
  using Function = std::function<void(LogLevel level, std::string_view message)>;

  LogSink() = default;
  LogSink(std::nullptr_t) {}
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, LogSink> &&
             std::is_constructible_v<Function, F>)
  LogSink(F&& f) : function_(std::forward<F>(f)) {}

  void operator()(LogLevel level, std::string_view message) const;
  explicit operator bool() const noexcept { return static_cast<bool>(function_); }

 private:
  Function function_;
};

// Writes "<UTC time> <LEVEL> <message>" lines to stderr for level ≥ min_level.
LogSink stderr_log_sink(LogLevel min_level = LogLevel::kInfo);
// Discards everything.
LogSink null_log_sink();

}  // namespace authrpc
