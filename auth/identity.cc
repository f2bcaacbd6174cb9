#include "auth/identity.h"

#include <cstdio>

namespace authrpc {
namespace {

// Appends `s` as a JSON string literal. Written out (rather than built with
// nlohmann::json) because sys.whoami runs once per benchmarked session.
void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
          out += escaped;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void append_field(std::string& out, std::string_view key, std::string_view value) {
  out += out.size() == 1 ? "\"" : ",\"";
  out += key;
  out += "\":";
  append_json_string(out, value);
}

}  // namespace

std::string Identity::to_json() const {
  std::string out = "{";
  out.reserve(128 + user.size() + principal.size() + peer_address.size());
  append_field(out, "mechanism", mechanism);
  append_field(out, "peer", peer_address);
  append_field(out, "principal", principal);
  if (real_user) {
    append_field(out, "real_user", *real_user);
  } else {
    out += ",\"real_user\":null";
  }
  append_field(out, "realm", realm);
  append_field(out, "user", user);
  out += "}";
  return out;
}

std::ostream& operator<<(std::ostream& os, const Identity& id) {
  os << id.user;
  if (!id.principal.empty() && id.principal != id.user) os << " (" << id.principal << ")";
  if (id.real_user) os << " via " << *id.real_user;
  return os << " [" << id.mechanism << " from " << id.peer_address << "]";
}

}  // namespace authrpc
