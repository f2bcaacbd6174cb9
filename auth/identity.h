// Identity: who is on the other end of an authenticated connection, as
// established by a mechanism. Services read it from their CallContext and
// never parse credentials themselves.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "authrpc/auth/mechanism_traits.h"

namespace authrpc {

struct Identity {
  std::string user;       // the authenticated name ("alice"); short name once mapped
  std::string principal;  // full name when the mechanism has one ("alice@EXAMPLE.COM")
  std::string realm;      // Kerberos realm, if any
  std::string mechanism;  // the name of the mechanism that made it
  std::string peer_address;
  std::optional<std::string> real_user;  // set when acting on behalf of another user
  // What the mechanism that made it declares (set by the server negotiation
  // from ServerMechanism::traits()): authorization and the token service
  // decide by these, never by `mechanism`.
  MechanismTraits mechanism_traits;
  // Facts a mechanism wants services to see beyond the fields above, keyed
  // "<mechanism>.<name>" (e.g. a certificate's issuer); empty for the
  // built-ins today. Not part of sys.whoami's answer.
  std::map<std::string, std::string, std::less<>> attributes;

  // {"user": ..., "principal": ..., ...}: what sys.whoami returns.
  std::string to_json() const;
};

std::ostream& operator<<(std::ostream& os, const Identity& id);

}  // namespace authrpc
