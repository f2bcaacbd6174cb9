#include "authrpc/components/jwt/oauthbearer.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace authrpc {
namespace {

constexpr char kSep = '\x01';

Status malformed(std::string why) {
  return Status(Errc::kAuthenticationFailed, "jwt: malformed OAUTHBEARER message: " + std::move(why));
}

bool b64token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
         c == '~' || c == '+' || c == '/';
}

// RFC 7628 value: VCHAR / SP / HTAB / CR / LF.
bool value_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 0x21 && u <= 0x7e) || u == ' ' || u == '\t' || u == '\r' || u == '\n';
}

// saslname (RFC 5801): "=2C" for ',' and "=3D" for '='; any other '=' is wrong.
bool decode_saslname(std::string_view in, std::string& out) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == ',') return false;
    if (in[i] != '=') {
      out.push_back(in[i]);
      continue;
    }
    const std::string_view esc = in.substr(i + 1, 2);
    if (esc == "2C") {
      out.push_back(',');
    } else if (esc == "3D") {
      out.push_back('=');
    } else {
      return false;
    }
    i += 2;
  }
  return true;
}

}  // namespace

std::string format_oauthbearer(std::string_view token, std::string_view host,
                               std::string_view port) {
  std::string m;
  m.reserve(token.size() + host.size() + port.size() + 32);
  m += "n,,";
  m += kSep;
  if (!host.empty()) m.append("host=").append(host) += kSep;
  if (!port.empty()) m.append("port=").append(port) += kSep;
  m.append("auth=Bearer ").append(token) += kSep;
  m += kSep;
  return m;
}

Result<OAuthBearerMessage> parse_oauthbearer(std::string_view m, std::size_t max_bytes) {
  if (m.size() > max_bytes) {
    return malformed(std::to_string(m.size()) + " bytes, over the limit of " +
                     std::to_string(max_bytes));
  }
  OAuthBearerMessage out;
  // gs2-header: flag "," [authzid] ","
  if (m.size() < 3 || (m[0] != 'n' && m[0] != 'y') || m[1] != ',') {
    return malformed(m.starts_with("p=") ? "channel binding (p=) is not part of OAUTHBEARER"
                                         : "no GS2 header (n,, or y,,)");
  }
  const auto comma = m.find(',', 2);
  if (comma == std::string_view::npos) return malformed("GS2 header not terminated");
  const std::string_view authzid = m.substr(2, comma - 2);
  if (!authzid.empty()) {
    if (!authzid.starts_with("a=") || authzid.size() == 2 ||
        !decode_saslname(authzid.substr(2), out.authzid)) {
      return malformed("bad authzid in the GS2 header");
    }
  }
  std::string_view rest = m.substr(comma + 1);
  if (rest.empty() || rest[0] != kSep) return malformed("no separator after the GS2 header");
  rest.remove_prefix(1);
  bool has_auth = false;
  // RFC 7628 names three keys and lets extensions add more; a real client
  // sends a handful. The bound keeps the duplicate check (a scan of the keys
  // seen) linear in the message.
  constexpr std::size_t kMaxPairs = 16;
  std::string_view seen[kMaxPairs];
  std::size_t pairs = 0;
  for (;;) {
    if (rest.empty()) return malformed("not terminated by an empty pair");
    if (rest[0] == kSep) {
      if (rest.size() != 1) return malformed("bytes after the final separator");
      break;
    }
    const auto end = rest.find(kSep);
    if (end == std::string_view::npos) return malformed("pair not terminated");
    const std::string_view pair = rest.substr(0, end);
    rest.remove_prefix(end + 1);
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos || eq == 0) return malformed("a pair without key=value");
    const std::string_view key = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (!std::all_of(key.begin(), key.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); })) {
      return malformed("a key that is not letters");
    }
    if (pairs == kMaxPairs) return malformed("more than " + std::to_string(kMaxPairs) + " pairs");
    if (std::find(seen, seen + pairs, key) != seen + pairs) return malformed("a key twice");
    seen[pairs++] = key;
    if (!std::all_of(value.begin(), value.end(), value_char)) {
      return malformed("control bytes in a value");
    }
    if (key == "host") {
      out.host = std::string(value);
    } else if (key == "port") {
      out.port = std::string(value);
    } else if (key == "auth") {
      has_auth = true;
      // RFC 6750: the scheme is case-insensitive, then one or more spaces.
      constexpr std::string_view kScheme = "bearer";
      if (value.size() <= kScheme.size() ||
          !std::equal(kScheme.begin(), kScheme.end(), value.begin(),
                      [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); }) ||
          value[kScheme.size()] != ' ') {
        return malformed("the auth pair is not 'Bearer <token>'");
      }
      std::string_view token = value.substr(kScheme.size());
      while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
      std::string_view body = token;
      while (!body.empty() && body.back() == '=') body.remove_suffix(1);
      if (body.empty() || !std::all_of(body.begin(), body.end(), b64token_char)) {
        return malformed("the bearer token has characters outside b64token");
      }
      out.token = token;
    }
    // Other keys (RFC 7628 allows extensions) are ignored.
  }
  if (!has_auth) return malformed("no auth pair");
  return out;
}

}  // namespace authrpc
