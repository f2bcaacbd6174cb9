// Identity: who is on the other end of an authenticated connection, as
// established by a mechanism. Services read it from their CallContext and
// never parse credentials themselves.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

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
  // Groups the mechanism vouches for (an identity provider's groups claim,
  // say): authorization adds them to the user's groups from the server's
  // own source, so that ACLs can name them (docs/AUTHZ.md). Dropped when the
  // connection acts for another user (doAs): that user's groups are the
  // server's.
  std::vector<std::string> groups;
  // When the credentials the session was made with stop being valid (a
  // bearer token's exp). The server serves no call after it: it answers
  // CREDENTIALS_EXPIRED and closes the connection, so a session does not
  // outlive its credentials (docs/PROTOCOL.md). Unset: the session lasts as
  // long as the connection.
  std::optional<std::chrono::system_clock::time_point> expires;
  // Facts a mechanism wants services to see beyond the fields above, keyed
  // "<mechanism>.<name>" (e.g. a certificate's issuer); empty for the
  // built-ins today. Not part of sys.whoami's answer.
  std::map<std::string, std::string, std::less<>> attributes;

  // {"user": ..., "principal": ..., ...}: what sys.whoami returns.
  std::string to_json() const;
};

std::ostream& operator<<(std::ostream& os, const Identity& id);

}  // namespace authrpc
