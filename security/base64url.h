// URL-safe base64 (RFC 4648 §5: '-' and '_' for '+' and '/') without '='
// padding, through OpenSSL's EVP base64 routines plus a translation. The
// string form of delegation tokens.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace authrpc::security {

std::string base64url_encode(std::string_view bytes);
// nullopt for any character outside [A-Za-z0-9_-] (padding, whitespace and
// the standard alphabet's '+' '/' included), for a length that no encoding
// produces, or when non-canonical trailing bits are set.
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace authrpc::security
