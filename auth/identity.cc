#include "authrpc/auth/identity.h"

#include <algorithm>

namespace authrpc {
namespace {

// Writes `s` as a JSON string literal at `p` (room for 2 + 6 * s.size()
// bytes) and returns the end. Written out, rather than built with
// nlohmann::json or string appends, because sys.whoami runs once per
// benchmarked session.
char* write_json_string(char* p, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  *p++ = '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != '"' && c != '\\') {
      *p++ = ch;
      continue;
    }
    *p++ = '\\';
    switch (c) {
      case '"': *p++ = '"'; break;
      case '\\': *p++ = '\\'; break;
      case '\n': *p++ = 'n'; break;
      case '\r': *p++ = 'r'; break;
      case '\t': *p++ = 't'; break;
      default:
        *p++ = 'u';
        *p++ = '0';
        *p++ = '0';
        *p++ = kHex[c >> 4];
        *p++ = kHex[c & 0xf];
    }
  }
  *p++ = '"';
  return p;
}

// Writes `,"key":` (no comma for the first field) and the value.
char* write_field(char* p, bool first, std::string_view key, std::string_view value) {
  if (!first) *p++ = ',';
  *p++ = '"';
  p = std::copy(key.begin(), key.end(), p);
  *p++ = '"';
  *p++ = ':';
  return write_json_string(p, value);
}

}  // namespace

std::string Identity::to_json() const {
  const std::string_view fields[] = {mechanism, peer_address, principal,
                                     real_user ? std::string_view(*real_user) : "", realm, user};
  std::size_t bound = 128;  // braces, keys, quotes, commas, null
  for (const auto f : fields) bound += 6 * f.size();
  std::string out(bound, '\0');
  char* p = out.data();
  *p++ = '{';
  p = write_field(p, true, "mechanism", mechanism);
  p = write_field(p, false, "peer", peer_address);
  p = write_field(p, false, "principal", principal);
  if (real_user) {
    p = write_field(p, false, "real_user", *real_user);
  } else {
    constexpr std::string_view kNull = ",\"real_user\":null";
    p = std::copy(kNull.begin(), kNull.end(), p);
  }
  p = write_field(p, false, "realm", realm);
  p = write_field(p, false, "user", user);
  *p++ = '}';
  out.resize(static_cast<std::size_t>(p - out.data()));
  return out;
}

std::ostream& operator<<(std::ostream& os, const Identity& id) {
  os << id.user;
  if (!id.principal.empty() && id.principal != id.user) os << " (" << id.principal << ")";
  if (id.real_user) os << " via " << *id.real_user;
  return os << " [" << id.mechanism << " from " << id.peer_address << "]";
}

}  // namespace authrpc
