#include "authrpc/server/call_admission.h"

#include <optional>

#include "authrpc/auth/authz/authorizer.h"
#include "authrpc/server/audit_log.h"
#include "authrpc/server/server.h"
#include "authrpc/server/server_metrics.h"

namespace authrpc {

CallAdmission::CallAdmission(const ServerOptions& options, const std::string& peer,
                             ServerMetrics* metrics)
    : options_(options), peer_(peer), metrics_(metrics) {}

bool CallAdmission::active() const noexcept {
  return options_.authorizer != nullptr || options_.audit_log != nullptr;
}

bool CallAdmission::authorizes() const noexcept { return options_.authorizer != nullptr; }

Status CallAdmission::establish(Identity& id, std::string_view do_as) {
  const std::string principal = id.principal.empty() ? id.user : id.principal;
  Status s = options_.authorizer->current()->establish(id, do_as, groups_);
  if (!s.ok()) {
    if (metrics_) {
      metrics_->denied(do_as.empty() ? ServerMetrics::Denial::kPrincipalMapping
                                     : ServerMetrics::Denial::kProxy);
    }
    if (options_.log) {
      options_.log(LogLevel::kWarning,
                   "connection from " + peer_ + " (" + principal + ") refused: " + s.to_string());
    }
    if (options_.audit_log) {
      const std::string target(do_as);
      options_.audit_log->record(
          {do_as.empty() ? "authentication" : "proxy", do_as.empty() ? "failure" : "denied",
           peer_, id.mechanism, principal, do_as.empty() ? std::string_view(id.user) : target,
           do_as.empty() ? std::nullopt : std::optional<std::string_view>(principal), {}, {},
           s.to_string()});
    }
  }
  return s;
}

Status CallAdmission::check_call(const Identity& id, std::string_view service,
                                 std::string_view method) {
  Status denied =
      options_.authorizer->current()->check_call({id.user, &groups_, peer_}, service, method);
  if (!denied.ok() && metrics_) metrics_->denied(ServerMetrics::Denial::kCallAcl);
  if (!denied.ok() && options_.audit_log) {
    options_.audit_log->record({"authorization", "denied", peer_, id.mechanism,
                                id.real_user ? *id.real_user : id.principal, id.user,
                                id.real_user, service, method, denied.message});
  }
  return denied;
}

void CallAdmission::audit_authentication(const Identity& id, std::string_view outcome,
                                         std::string_view mechanism, std::string_view reason) {
  if (!options_.audit_log) return;
  options_.audit_log->record({"authentication", outcome, peer_, mechanism,
                              id.real_user ? std::string_view(*id.real_user)
                                           : std::string_view(id.principal),
                              id.user, id.real_user, {}, {}, reason});
}

}  // namespace authrpc
