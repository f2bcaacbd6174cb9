#include "authrpc/server/preauth_place.h"

#include <mutex>
#include <string>

namespace authrpc {

bool PreauthPlace::shed() noexcept {
  if (ending_ == Ending::kNegotiationTimeout) return false;
  ending_ = Ending::kShed;
  return true;
}

void PreauthPlace::timed_out() noexcept {
  if (ending_ == Ending::kNone) ending_ = Ending::kNegotiationTimeout;
}

Status PreauthPlace::authenticate(Server::Impl& server, const Identity& id) {
  switch (server.budget.authenticate(ticket_, id.user)) {
    case PreauthBudget::Authentication::kAccepted:
      return Status();
    case PreauthBudget::Authentication::kShed:
      // Shed while its mechanism was deciding: run() closes it silently.
      ending_ = Ending::kShed;
      return Status(Errc::kServerBusy, std::string(kShedMessage));
    case PreauthBudget::Authentication::kTooManyForUser:
      break;
  }
  ++server.connections_refused_per_user;
  if (server.metrics) server.metrics->refused_per_user();
  return Status(Errc::kServerBusy, "too many connections for user '" + id.user + "' (limit " +
                                       std::to_string(server.options.max_connections_per_user) +
                                       ")");
}

void PreauthPlace::leave(Server::Impl& server) {
  if (ticket_ == 0) return;  // refused at accept: counted nowhere
  server.budget.release(ticket_);
  if (--server.connections_active == 0) {
    { std::lock_guard lock(server.mu); }
    server.cv.notify_all();
  }
}

}  // namespace authrpc
