#include "authrpc/components/jwt/jwt_compact.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>
#include <vector>

#include "authrpc/security/base64url.h"

namespace authrpc {
namespace {

using json = nlohmann::json;

Status malformed(std::string_view what, std::string_view why) {
  return Status(Errc::kInvalidArgument, std::string(what) + " " + std::string(why));
}

}  // namespace

Result<JwtCompactParts> split_compact_jws(std::string_view token) {
  const auto dot1 = token.find('.');
  const auto dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    const auto parts = std::count(token.begin(), token.end(), '.') + 1;
    return Status(Errc::kInvalidArgument,
                  "not a compact JWS (three base64url parts separated by dots): it has " +
                      std::to_string(parts) + (parts == 1 ? " part" : " parts"));
  }
  return JwtCompactParts{token.substr(0, dot1), token.substr(dot1 + 1, dot2 - dot1 - 1),
                         token.substr(dot2 + 1), token.substr(0, dot2)};
}

Result<json> decode_jwt_object(std::string_view part, std::string_view what) {
  auto text = security::base64url_decode(part);
  if (!text) return malformed(what, "is not base64url");
  std::vector<std::set<std::string>> keys;
  bool duplicate = false, too_deep = false;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second) {
          duplicate = true;
        }
        break;
      default:
        break;
    }
    if (depth > static_cast<int>(kMaxJwtJsonDepth)) too_deep = true;
    return true;
  };
  // The parser keeps its own stack: deep nesting cannot exhaust ours.
  json j = json::parse(*text, callback, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return malformed(what, "is not a JSON object");
  if (duplicate) return malformed(what, "has a member twice");
  if (too_deep) return malformed(what, "is nested too deeply");
  return j;
}

std::optional<double> jwt_numeric_date(const json& value) {
  if (!value.is_number()) return std::nullopt;
  const double secs = value.get<double>();
  if (!std::isfinite(secs) || secs < 0 || secs > 32503680000.0) return std::nullopt;  // year 3000
  return secs;
}

std::string jwt_utc(std::int64_t epoch_seconds) {
  const auto secs = static_cast<std::time_t>(epoch_seconds);
  std::tm tm{};
  if (gmtime_r(&secs, &tm) == nullptr) return std::to_string(epoch_seconds) + " s";
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string jwt_utc(std::chrono::system_clock::time_point t) {
  return jwt_utc(static_cast<std::int64_t>(std::chrono::system_clock::to_time_t(t)));
}

}  // namespace authrpc
