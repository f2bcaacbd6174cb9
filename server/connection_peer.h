// Internal: ConnectionPeer, who is on the other end of a server connection:
// its address, the identity it authenticated as (empty until negotiation
// succeeds), whether it came over a plaintext network (tcp:// without TLS),
// whether its credentials have expired during the session, and its spent
// auth session, kept until the first replies have left (negotiate_server()).
//
// A plain struct owned by its ServerConnection and read on the connection's
// thread (every CallContext, admit_call, the logs), and by blocking handlers'
// CallContexts, which the connection outlives.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "authrpc/auth/identity.h"
#include "authrpc/auth/server_negotiation.h"
#include "authrpc/base/status.h"

namespace authrpc {

struct ConnectionPeer {
  explicit ConnectionPeer(std::string peer_address) : address(std::move(peer_address)) {}

  std::string address;
  Identity identity;
  bool plaintext_network = false;  // CallContext::plaintext_network
  // A call came after identity.expires: the connection ends once that
  // call's refusal is written.
  bool credentials_expired = false;
  std::unique_ptr<ServerAuthSession> spent_session;

  // CREDENTIALS_EXPIRED: what a call after identity.expires is answered, and
  // what the connection then closes with.
  Status expired_credentials() const {
    return Status(Errc::kCredentialsExpired,
                  "the credentials this connection authenticated with (" + identity.mechanism +
                      ") have expired: authenticate again");
  }
};

}  // namespace authrpc
