#include "authrpc/security/base/log.h"

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
  if (function_) function_(level, escape_for_log(message));
}

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
