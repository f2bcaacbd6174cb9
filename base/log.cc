#include "authrpc/base/log.h"

#include <chrono>
#include <cstdint>
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

constexpr char kHex[] = "0123456789abcdef";

void append_byte_escape(std::string& out, unsigned char c) {
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 0xf];
}

// The length of the well-formed UTF-8 sequence at s[i] (2–4) and its code
// point, or 0 if there is none (overlong forms, surrogates and values above
// U+10FFFF are not well-formed).
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::uint32_t* cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xc0) == 0x80; };
  const unsigned char c = b(0);
  if (c >= 0xc2 && c <= 0xdf && cont(1)) {
    *cp = ((c & 0x1fu) << 6) | (b(1) & 0x3fu);
    return 2;
  }
  if (c >= 0xe0 && c <= 0xef && cont(1) && cont(2)) {
    *cp = ((c & 0x0fu) << 12) | ((b(1) & 0x3fu) << 6) | (b(2) & 0x3fu);
    if (*cp < 0x800 || (*cp >= 0xd800 && *cp <= 0xdfff)) return 0;
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4 && cont(1) && cont(2) && cont(3)) {
    *cp = ((c & 0x07u) << 18) | ((b(1) & 0x3fu) << 12) | ((b(2) & 0x3fu) << 6) | (b(3) & 0x3fu);
    if (*cp < 0x10000 || *cp > 0x10ffff) return 0;
    return 4;
  }
  return 0;
}

// Code points above ASCII that end a line or reorder what a reader sees.
bool escaped_code_point(std::uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string peer_text(std::string_view text, std::size_t max) {
  std::string out = escape_for_log(text.substr(0, max));
  if (text.size() > max) out += "...";
  return out;
}

std::string escape_for_log(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      if (c == '\\') out += '\\';
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    switch (c) {
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x80) {  // other C0 controls and DEL
      append_byte_escape(out, c);
      ++i;
      continue;
    }
    std::uint32_t cp = 0;
    const std::size_t n = utf8_sequence(text, i, &cp);
    if (n == 0) {
      append_byte_escape(out, c);
      ++i;
    } else if (escaped_code_point(cp)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\u{%04x}", static_cast<unsigned>(cp));
      out += buf;
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

void LogSink::operator()(LogLevel level, std::string_view message) const {
  // Filter first: a dropped debug line costs no escaping.
  if (enabled(level)) function_(level, escape_for_log(message));
}

void LogSink::set_level(LogLevel level) const noexcept {
  if (min_level_) min_level_->store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel LogSink::level() const noexcept {
  if (!min_level_) return LogLevel::kError;
  const int v = min_level_->load(std::memory_order_relaxed);
  return v > static_cast<int>(LogLevel::kError) ? LogLevel::kError : static_cast<LogLevel>(v);
}

std::string_view log_level_name(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

namespace {

// RFC 3339 UTC with milliseconds: 2026-12-02T01:02:03.456Z
std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(stamp) + "." + std::to_string(1000 + ms).substr(1) + "Z";
}

// `text` as the body of a JSON string (RFC 8259 §7): quote, backslash and
// the C0 controls escaped, DEL too (allowed by JSON, but it is a control);
// other bytes pass unchanged (a LogSink's message is valid UTF-8 after
// escape_for_log).
void append_json_string_body(std::string& out, std::string_view text) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7f) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
}

void write_line(const std::string& line) {
  // One fwrite on unbuffered stderr: lines from several threads do not interleave.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

// `sink` with its (shared) minimum level set to `min_level`.
LogSink with_level(LogSink sink, LogLevel min_level) {
  sink.set_level(min_level);
  return sink;
}

std::string json_log_line(LogLevel level, std::string_view message) {
  std::string line = "{\"time\":\"" + utc_timestamp() + "\",\"level\":\"";
  line += log_level_name(level);
  line += "\",\"message\":\"";
  append_json_string_body(line, message);
  line += "\"}\n";
  return line;
}

}  // namespace

LogSink stderr_log_sink(LogLevel min_level) {
  return with_level(LogSink([](LogLevel level, std::string_view message) {
                      write_line(utc_timestamp() + " " + level_name(level) + " " +
                                 std::string(message) + "\n");
                    }),
                    min_level);
}

LogSink json_log_sink(LogLevel min_level) {
  return with_level(LogSink([](LogLevel level, std::string_view message) {
                      write_line(json_log_line(level, message));
                    }),
                    min_level);
}

LogSink null_log_sink() {
  LogSink sink([](LogLevel, std::string_view) {});
  // Above every level: callers that ask enabled() build nothing.
  sink.set_level(static_cast<LogLevel>(static_cast<int>(LogLevel::kError) + 1));
  return sink;
}

}  // namespace authrpc
