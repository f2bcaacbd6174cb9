// Which methods (mechanisms) a sessions/calls run measures and how each's
// rows are labelled: what the registry declares of each (traits), the row
// labels (floor, targets, issued credentials), and select_methods, which
// turns --method and the realm into the run's MethodPlans. Called by
// args.cc (checks --method) and prepare.cc.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "authrpc/auth/mechanism_registry.h"
#include "authrpc/base/result.h"
#include "minibench/args.h"
#include "minibench/plan.h"
#include "minibench/realm.h"

namespace minibench {

// The rows that authenticate with a delegation token fetched first.
bool is_token_method(const authrpc::MechanismRegistry& registry, const std::string& name);
// The rows that carry a bearer secret: +tls rows only (MethodPlan::tls_only).
bool carries_bearer_secret(const authrpc::MechanismRegistry& registry, const std::string& name);
// The rows that need the bench realm (Kerberos credentials).
bool needs_realm(const authrpc::MechanismRegistry& registry, const std::string& name);
// Whether `name` has both halves registered in this build.
bool registered(const authrpc::MechanismRegistry& registry, const std::string& name);

// Row labels: the floor each method's rows are compared with, the p50
// target they are held to (docs/PERFORMANCE.md, "Sessions"), and whether minibench
// issues the method's credentials itself: which options a method takes is
// the method's own business, so minibench knows it only for the rows it
// labels. A method not listed is held to the bare floor and the session
// target.
struct RowLabel {
  const char* method;
  FloorKind floor;
  std::optional<double> target;
  // With --concurrency: sessions/s held to this fraction of the floor's.
  std::optional<double> rate_target = std::nullopt;
  // An OAuth 2.0 access token (JWT) from BenchJwtIssuer (jwt_bench.h).
  bool issued_jwt = false;
  // Client options (JSON) added to the ones minibench gives the method.
  const char* client_options = nullptr;
};

// The label of `name`'s rows; null for a method not listed.
const RowLabel* row_label(const std::string& name);

// The methods to measure and the realm the Kerberos ones need.
struct Selection {
  std::vector<MethodPlan> methods;
  std::string calls_method;
  std::unique_ptr<BenchRealm> realm;  // null: no Kerberos method
};

// Drops methods this build does not register, and the Kerberos ones when no
// realm can be had and they were not asked for by name (each with a note on
// stderr); opens the realm (setenv: before any thread starts).
authrpc::Result<Selection> select_methods(const Args& args);

}  // namespace minibench
