// Identity: who is on the other end of an authenticated connection, as
// established by a mechanism. Services read it from their CallContext and
// never parse credentials themselves.
#pragma once

#include <optional>
#include <ostream>
#include <string>

namespace authrpc {

struct Identity {
  std::string user;       // the authenticated name ("alice"); short name once mapped
  std::string principal;  // full name when the mechanism has one ("alice@EXAMPLE.COM")
  std::string realm;      // Kerberos realm, if any
  std::string mechanism;  // "simple", "kerberos", "token", ...
  std::string peer_address;
  std::optional<std::string> real_user;  // set when acting on behalf of another user

  // {"user": ..., "principal": ..., ...}: what sys.whoami returns.
  std::string to_json() const;
};

std::ostream& operator<<(std::ostream& os, const Identity& id);

}  // namespace authrpc
