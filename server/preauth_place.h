// Internal: PreauthPlace, a connection's place in the pre-authentication
// budget (server/preauth_budget.h) — its ticket, set by the accept loop
// before run() (none: the connection was refused and counts nowhere) — and
// the server's own reason to cut its negotiation short (Ending), recorded
// where it is decided (the budget sheds it, the sweeper times it out) and
// read by ServerConnection::run() when the step it cut short returns.
//
// Owned by its ServerConnection and used only on the connection's thread
// (set_ticket, shed, on_tick, the negotiation's admit hook, run, release).
#pragma once

#include <cstdint>
#include <string_view>

#include "authrpc/auth/identity.h"
#include "authrpc/base/status.h"
#include "authrpc/server/server_impl.h"

namespace authrpc {

class PreauthPlace {
 public:
  enum class Ending { kNone, kShed, kNegotiationTimeout };
  static constexpr std::string_view kShedMessage =
      "too many unauthenticated connections: closed to make room for a newer one";

  void set_ticket(std::uint64_t ticket) noexcept { ticket_ = ticket; }
  Ending ending() const noexcept { return ending_; }

  // The budget gave the place to a newer connection: false if the
  // negotiation has timed out already (its own ERROR is on its way).
  bool shed() noexcept;
  // The negotiation's deadline passed (a shed connection stays shed).
  void timed_out() noexcept;
  // The negotiation's last step: the connection counts as authenticated, or
  // is refused SERVER_BUSY (shed meanwhile, or its user's
  // max_connections_per_user reached).
  Status authenticate(Server::Impl& server, const Identity& id);
  // The connection has ended: it leaves the budget and the server's count
  // of active connections (unless it was refused at accept).
  void leave(Server::Impl& server);

 private:
  std::uint64_t ticket_ = 0;
  Ending ending_ = Ending::kNone;
};

}  // namespace authrpc
