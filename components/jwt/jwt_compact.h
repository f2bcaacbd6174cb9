// The text of a JWT: a JWS compact serialization (RFC 7515 §7.1) split into
// its three base64url parts, its header and payload decoded into JSON
// objects, and its dates read — nothing verified. The one reading of a
// token's text in the tree: JwtVerifier (components/jwt/jwt_verifier.h) checks
// what these return, `authrpc jwt inspect` (tools/jwt_commands.h) prints it.
// Errors are INVALID_ARGUMENT naming the part and what is wrong with it, never
// quoting the token.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "authrpc/base/result.h"

namespace authrpc {

// Views into the token.
struct JwtCompactParts {
  std::string_view header;
  std::string_view payload;
  std::string_view signature;
  std::string_view signing_input;  // header "." payload: what the signature covers
};

// Splits `token` at its two dots; "not a compact JWS (...)" with the number
// of parts it has otherwise. Decodes nothing.
Result<JwtCompactParts> split_compact_jws(std::string_view token);

// How deep a header or payload may nest (objects and arrays).
inline constexpr std::size_t kMaxJwtJsonDepth = 8;

// A header or payload part as a JSON object. `what` ("header", "payload")
// starts the message: "<what> is not base64url", "... is not a JSON
// object", "... has a member twice" (at any depth: RFC 7519 §4 lets a
// parser keep either value, and two parsers that keep different ones
// disagree about the token), "... is nested too deeply".
Result<nlohmann::json> decode_jwt_object(std::string_view part, std::string_view what);

// A NumericDate (RFC 7519 §2) as the `jwt` mechanism takes one: a number of
// seconds since the epoch, integer or not, from 0 to the year 3000;
// nullopt for anything else.
std::optional<double> jwt_numeric_date(const nlohmann::json& value);

// "2026-12-01T22:00:00Z": seconds since the epoch in UTC (fractions dropped).
std::string jwt_utc(std::int64_t epoch_seconds);
std::string jwt_utc(std::chrono::system_clock::time_point t);

}  // namespace authrpc
