// Internal: CallAdmission, a connection's authorization and audit — the step
// between authentication and a handler (docs/AUTHZ.md). When negotiation
// has authenticated a client it establishes whom the connection acts for
// (principal mapping, groups, proxy users) and audits the outcome; before
// each call runs it checks the method ACLs and audits a refusal.
//
// Owned by its ServerConnection and used only on the connection's thread;
// holds the effective user's groups for the connection's life. With neither
// an authorizer nor an audit log configured it does nothing, and says so
// (active()) so that negotiation can take its hook-free fast path.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "authrpc/auth/identity.h"
#include "authrpc/base/result.h"

namespace authrpc {

class AuditLog;
class Authorizer;
class ServerMetrics;
struct ServerOptions;

class CallAdmission {
 public:
  // `options` and `peer` must outlive the admission (both are the
  // connection's server's and the connection's own).
  // `metrics` (null: off) counts refusals.
  CallAdmission(const ServerOptions& options, const std::string& peer, ServerMetrics* metrics);

  // An authorizer or an audit log is configured.
  bool active() const noexcept;
  // An authorizer is configured: establish() and check_call() have work to do.
  bool authorizes() const noexcept;

  // When negotiation has authenticated `id` (and the client asked to act as
  // `do_as`, if not empty): maps it to its local user and groups and checks
  // the proxy-user rules. A refusal is logged and audited, and returned.
  Status establish(Identity& id, std::string_view do_as);
  // Before a call runs: OK, or kPermissionDenied with the reason (audited).
  // Only if authorizes().
  Status check_call(const Identity& id, std::string_view service, std::string_view method);
  // Audits an authentication's outcome ("success", "failure"), if an audit
  // log is configured. `id` is whatever is known of the client so far.
  void audit_authentication(const Identity& id, std::string_view outcome,
                            std::string_view mechanism, std::string_view reason);

 private:
  const ServerOptions& options_;
  const std::string& peer_;
  ServerMetrics* const metrics_;
  std::vector<std::string> groups_;  // the effective user's groups, when authorization is on
};

}  // namespace authrpc
