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

#include <atomic>
#include <functional>
#include <memory>
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

// A peer's string as an error message or a reply quotes it: escaped as by
// escape_for_log and cut to its first `max` bytes, "..." marking the cut,
// so that a hostile peer can neither forge a line nor make a message as
// long as its frame.
std::string peer_text(std::string_view text, std::size_t max = 64);

// What components log through: the application's function, called with the
// escaped message. An empty LogSink drops everything. Copy a LogSink to
// share it; a function that calls another LogSink escapes twice.
//
// A sink has a minimum level, shared by all its copies, so that an
// operator can change it while the server runs (SIGHUP in authrpc-server)
// and every component holding a copy sees it. Messages below it are dropped
// before they are escaped; callers that would build an expensive message
// ask enabled() first:
//   if (log.enabled(LogLevel::kDebug)) log(LogLevel::kDebug, describe(...));
// A sink made from a plain function passes every level until set_level().
class LogSink {
 public:
  using Function = std::function<void(LogLevel level, std::string_view message)>;

  LogSink() = default;
  LogSink(std::nullptr_t) {}
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, LogSink> &&
             std::is_constructible_v<Function, F>)
  LogSink(F&& f) : function_(std::forward<F>(f)), min_level_(std::make_shared<std::atomic<int>>(0)) {}

  // Escapes `message` and hands it to the function if enabled(level).
  void operator()(LogLevel level, std::string_view message) const;
  explicit operator bool() const noexcept { return static_cast<bool>(function_); }

  // True if a message at `level` would reach the function: one relaxed
  // atomic load. An empty sink is enabled for nothing.
  bool enabled(LogLevel level) const noexcept {
    return min_level_ != nullptr &&
           static_cast<int>(level) >= min_level_->load(std::memory_order_relaxed);
  }
  // Sets the minimum level of this sink and of every copy of it; a no-op on
  // an empty sink. Thread-safe.
  void set_level(LogLevel level) const noexcept;
  // The minimum level (kDebug for a sink from a plain function; kError for
  // an empty or null sink, which pass nothing).
  LogLevel level() const noexcept;

 private:
  Function function_;
  // Shared by copies; a LogLevel, or one above kError for "nothing". Null
  // in an empty sink.
  std::shared_ptr<std::atomic<int>> min_level_;
};

// Writes "<UTC time> <LEVEL> <message>" lines to stderr for level ≥ min_level.
LogSink stderr_log_sink(LogLevel min_level = LogLevel::kInfo);
// Writes one JSON object per line to stderr for level ≥ min_level, for log
// shippers ("log_format": "json", docs/CONFIG.md):
//   {"time":"2026-12-02T01:02:03.456Z","level":"info","message":"..."}
// level is debug, info, warning or error. The message is escaped for logs
// (above) and then for JSON (RFC 8259), so a reader gets the escaped text.
LogSink json_log_sink(LogLevel min_level = LogLevel::kInfo);
// The lower-case name of a level as configured and as json_log_sink writes it.
std::string_view log_level_name(LogLevel level) noexcept;
// Discards everything (enabled() is false for every level).
LogSink null_log_sink();

}  // namespace authrpc
